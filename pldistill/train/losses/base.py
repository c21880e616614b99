"""What the losses share, on sentence-transformers' contract exactly: a loss is an ``nn.Module`` holding the model it
trains as ``self.model`` (a ``SentenceTransformer``, or a ``CrossEncoder``), called by the library's trainers as
``loss(sentence_features, labels)``: a bi-encoder's loss gets one dict of tokenised features per text column (the
collator's), a cross-encoder's the columns' texts (``inputs``), as the library's own cross-encoder losses do. So a
sentence-transformers user can hand any of them to a ``SentenceTransformerTrainer`` or ``CrossEncoderTrainer`` with
no pldistill code around it; the trainer puts its wrapped (DDP) model in ``self.model``. Each loss's maths is a pure
function of tensors in the loss's own file, testable without a model."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

import torch


def columns(found: Sequence, n: int, loss: str) -> Sequence:
    """``found`` (a batch's columns) if it has the ``n`` columns ``loss`` learns from; else a ValueError with both."""
    if len(found) != n:
        raise ValueError(f"{loss} learns from {n} text column{'s' if n > 1 else ''} a row (besides the label); "
                         f"got {len(found)}")
    return found


def joined(model: torch.nn.Module, features: Sequence[dict]) -> dict | None:
    """Several columns' tokenised features as one batch, the columns' rows one after the other, each padded on the
    right to the longest: one forward instead of one a column (1.2x the pair-training steps/s of a forward a column
    on 2 CPU cores, results#training-engine). Padding is masked, so a row's embedding is its own either way. None
    where the columns cannot be stacked: other keys than (rows, tokens) tensors and values the columns share (the
    collator's ``modality``), or a tokenizer that pads on the left."""
    tokenizer = getattr(getattr(model, "module", model), "tokenizer", None)  # a DDP wrapper holds it as .module
    first = features[0]
    tensors = [k for k, v in first.items() if torch.is_tensor(v)]
    if (len(features) < 2 or getattr(tokenizer, "padding_side", "right") != "right" or "input_ids" not in tensors
            or any(set(f) != set(first) for f in features)
            or any(f[k] != first[k] for f in features for k in first if k not in tensors)
            or any(f[k].dim() != 2 or f[k].shape != f["input_ids"].shape for f in features for k in tensors)):
        return None
    width = max(f["input_ids"].shape[1] for f in features)
    pad = {"input_ids": getattr(tokenizer, "pad_token_id", None) or 0}
    return {**first, **{k: torch.cat([torch.nn.functional.pad(f[k], (0, width - f[k].shape[1]), value=pad.get(k, 0))
                                      for f in features]) for k in tensors}}


def each_column(model: torch.nn.Module, features: Sequence[dict], forward: Callable[[dict], torch.Tensor]
                ) -> list[torch.Tensor]:
    """``forward`` ((rows, dim) from one batch of features) for each column: one call on the ``joined`` columns
    where they stack, else one a column."""
    batch = joined(model, features)
    if batch is None:
        return [forward(f) for f in features]
    return list(forward(batch).split([len(f["input_ids"]) for f in features]))


def embeddings(model: torch.nn.Module, sentence_features: Iterable[dict[str, torch.Tensor]], n: int,
               loss: str) -> list[torch.Tensor]:
    """Each column's sentence embeddings, (batch, dim) apiece, by ``model``'s forward."""
    return each_column(model, columns(list(sentence_features), n, loss), lambda f: model(f)["sentence_embedding"])


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
