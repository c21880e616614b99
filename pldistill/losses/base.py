"""What the losses share, on sentence-transformers' contract exactly: a loss is an ``nn.Module`` holding the model it
trains as ``self.model`` (a ``SentenceTransformer``, or a ``CrossEncoder``), called by the library's trainers as
``loss(sentence_features, labels)``: a bi-encoder's loss gets one dict of tokenised features per text column (the
collator's), a cross-encoder's the columns' texts (``inputs``), as the library's own cross-encoder losses do. So a
sentence-transformers user can hand any of them to a ``SentenceTransformerTrainer`` or ``CrossEncoderTrainer`` with
no pldistill code around it; the trainer puts its wrapped (DDP) model in ``self.model``. Each loss's maths is a pure
function of tensors in the loss's own file, testable without a model."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import torch


def columns(found: Sequence, n: int, loss: str) -> Sequence:
    """``found`` (a batch's columns) if it has the ``n`` columns ``loss`` learns from; else a ValueError with both."""
    if len(found) != n:
        raise ValueError(f"{loss} learns from {n} text column{'s' if n > 1 else ''} a row (besides the label); "
                         f"got {len(found)}")
    return found


def embeddings(model: torch.nn.Module, sentence_features: Iterable[dict[str, torch.Tensor]], n: int,
               loss: str) -> list[torch.Tensor]:
    """Each column's sentence embeddings, (batch, dim) apiece, by ``model``'s forward."""
    return [model(features)["sentence_embedding"] for features in columns(list(sentence_features), n, loss)]


class PairEmbeddingLoss(torch.nn.Module):
    """A ``SentenceTransformer``'s loss on (s1, s2) columns: ``maths(u, v, labels)`` of the two columns' embeddings
    (u, v: (batch, dim)); a subclass names its ``maths`` and its ``name`` (for errors)."""

    name = "a pair loss"

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    @staticmethod
    def maths(u: torch.Tensor, v: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:  # pragma: no cover
        raise NotImplementedError

    def forward(self, sentence_features: list[dict[str, torch.Tensor]], labels: torch.Tensor) -> torch.Tensor:
        return self.maths(*embeddings(self.model, sentence_features, 2, self.name), labels)
