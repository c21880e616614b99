"""A cross-encoder's loss: binary cross-entropy of its logit against soft targets in [0, 1], as in Augmented SBERT
(gold scores scaled to [0, 1]) and Trans-Encoder (a bi-encoder's similarities as targets)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from sentence_transformers.util import batch_to_device

from pldistill.train.losses.base import columns


def soft_bce(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Binary cross-entropy of sigmoid(logits) against soft targets in [0, 1]. logits, target: (batch,)."""
    return F.binary_cross_entropy_with_logits(logits.float(), target.float())


class SoftBCELoss(torch.nn.Module):
    """A ``CrossEncoder``'s loss (one output, its logit) on (s1, s2) columns, each pair read as one input; labels in
    [0, 1]. As the library's cross-encoder losses, it takes the columns' texts and tokenises the pairs itself."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, inputs: list[list[str]], labels: torch.Tensor, prompt: str | None = None,
                task: str | None = None) -> torch.Tensor:
        s1, s2 = columns(inputs, 2, "the soft BCE loss")
        features = batch_to_device(self.model.preprocess(list(zip(s1, s2)), prompt=prompt, task=task),
                                   self.model.device)
        return soft_bce(self.model(features)["scores"].view(-1), labels)
