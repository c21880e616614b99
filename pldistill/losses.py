"""Loss maths as pure functions of tensors (testable with random tensors, no model needed)."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def cosine_mse(u: torch.Tensor, v: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Mean squared error between cos(u_i, v_i) and ``target`` (Sentence-BERT's CosineSimilarityLoss).

    u, v: (batch, dim) embeddings; target: (batch,) similarities on the cosine's scale.
    """
    return F.mse_loss(F.cosine_similarity(u.float(), v.float(), dim=-1), target.float())


def soft_bce(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Binary cross-entropy of sigmoid(logits) against soft targets in [0, 1].

    The cross-encoder loss of Augmented SBERT (gold scores scaled to [0, 1]) and of Trans-Encoder
    (bi-encoder similarities as targets). logits, target: (batch,).
    """
    return F.binary_cross_entropy_with_logits(logits.float(), target.float())
