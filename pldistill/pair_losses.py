"""The losses a bi- or cross-encoder learns sentence pairs by, bound to the model: each takes the model and gives
the ``BatchLoss`` the training loop calls, (text columns, target) -> scalar loss. The maths is pldistill.losses';
this module only feeds it the model's outputs. The models themselves (pldistill.models) know no loss, so what only
encodes or scores (stages augment and sample) depends on no training code."""

from __future__ import annotations

import torch

from pldistill import losses
from pldistill.batching import BatchLoss, Columns, columns
from pldistill.models import BiEncoder, CrossModel


def cosine_mse(bi: BiEncoder) -> BatchLoss:
    """Sentence-BERT's CosineSimilarityLoss on (s1, s2) columns: cos(u, v) against the target."""

    def loss(texts: Columns, target: torch.Tensor) -> torch.Tensor:
        return losses.cosine_mse(*bi.embed_columns(columns(texts, 2, "the cosine MSE loss")), target)

    return loss


def cosent(bi: BiEncoder) -> BatchLoss:
    """CoSENT on (s1, s2) columns: only the order of the targets is learned."""

    def loss(texts: Columns, target: torch.Tensor) -> torch.Tensor:
        return losses.cosent(*bi.embed_columns(columns(texts, 2, "CoSENT")), target)

    return loss


def soft_bce(cross: CrossModel) -> BatchLoss:
    """Binary cross-entropy of a cross-encoder's logit on (s1, s2) columns against soft targets in [0, 1]."""

    def loss(texts: Columns, target: torch.Tensor) -> torch.Tensor:
        return losses.soft_bce(cross.pair_logits(texts), target)

    return loss


def default(model: BiEncoder | CrossModel) -> BatchLoss:
    """The loss a model learns pairs by when none is named: a bi-encoder's cosine MSE, a cross-encoder's soft BCE;
    a model with a loss of its own (a DSE student's ``batch_loss``) keeps it."""
    if isinstance(model, CrossModel):
        return soft_bce(model)
    if isinstance(model, BiEncoder):
        return cosine_mse(model)
    return model.batch_loss
