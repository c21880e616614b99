"""A cross-encoder's loss: binary cross-entropy of its logit against soft targets in [0, 1], as in Augmented SBERT
(gold scores scaled to [0, 1]) and Trans-Encoder (a bi-encoder's similarities as targets)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from pldistill.batching import Columns
from pldistill.losses.base import Loss


def soft_bce(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Binary cross-entropy of sigmoid(logits) against soft targets in [0, 1]. logits, target: (batch,)."""
    return F.binary_cross_entropy_with_logits(logits.float(), target.float())


class SoftBCELoss(Loss):
    """(s1, s2) columns, each pair read as one input; labels in [0, 1]."""

    name = "the soft BCE loss"
    prefetch = True

    def forward(self, texts: Columns, labels: torch.Tensor) -> torch.Tensor:
        return soft_bce(self.model.pair_logits(self.texts(texts)), labels)
