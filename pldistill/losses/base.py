"""The one loss contract, sentence-transformers' (``sentence_transformers.losses``): a loss is an ``nn.Module`` that
holds the model it trains and is called on a batch and its labels, ``loss(inputs, labels) -> scalar``; both
engines (our loop, pldistill.loop; sentence-transformers' trainers, pldistill.st_trainer) run the same modules.

One difference, kept on purpose: a batch's inputs are its text columns (pldistill.batching's ``Columns``), not
features the collator tokenised. The model tokenises them in the loss, so our loop's workers can tokenise the next
step's batch ahead (``prefetch``) with the very features the loss then reads. Each loss's maths is a pure
function of tensors in the loss's own file, testable without a model."""

from __future__ import annotations

import torch

from pldistill.batching import Columns


class Loss(torch.nn.Module):
    """A loss bound to ``model`` (a BiEncoder, CrossModel or DSE student: an object with a ``module``, the torch
    module that trains). ``module`` is registered here, so the Trainer's optimizer, which takes a loss's
    parameters, trains all of it (a DSE head's too). ``columns``: how many text columns a row of its data has;
    ``prefetch``: whether it reads what the model's own ``prefetch`` tokenises ahead (a pair loss: the model's
    inputs for a batch of pairs), so our loop may tokenise the next batch while this one computes."""

    name = "a loss"
    columns = 2
    prefetch = False

    def __init__(self, model: object) -> None:
        super().__init__()
        self.model = model  # a plain attribute: the wrapper that embeds or scores
        self.module = model.module  # registered: what trains

    def texts(self, texts: Columns) -> Columns:
        """``texts`` if it has the columns this loss learns from; otherwise a ValueError naming both counts."""
        if len(texts) != self.columns:
            raise ValueError(f"{self.name} learns from {self.columns} text column{'s' if self.columns > 1 else ''} "
                             f"a row, got {len(texts)}")
        return texts

    def forward(self, texts: Columns, labels: torch.Tensor) -> torch.Tensor:  # pragma: no cover - abstract
        raise NotImplementedError
