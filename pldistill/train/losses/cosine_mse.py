"""Sentence-BERT's CosineSimilarityLoss: a bi-encoder learns a pair's score as the cosine of its embeddings."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from pldistill.train.losses.base import PairEmbeddingLoss


def cosine_mse(u: torch.Tensor, v: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Mean squared error between cos(u_i, v_i) and ``target``.

    u, v: (batch, dim) embeddings; target: (batch,) similarities on the cosine's scale.
    """
    return F.mse_loss(F.cosine_similarity(u.float(), v.float(), dim=-1), target.float())


class CosineMSELoss(PairEmbeddingLoss):
    """A ``SentenceTransformer``'s loss on (s1, s2) columns; labels: the pairs' scores on the cosine's scale."""

    name = "the cosine MSE loss"
    maths = staticmethod(cosine_mse)
