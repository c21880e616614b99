"""Sentence-BERT's CosineSimilarityLoss: a bi-encoder learns a pair's score as the cosine of its embeddings."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from pldistill.losses.base import embeddings


def cosine_mse(u: torch.Tensor, v: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Mean squared error between cos(u_i, v_i) and ``target``.

    u, v: (batch, dim) embeddings; target: (batch,) similarities on the cosine's scale.
    """
    return F.mse_loss(F.cosine_similarity(u.float(), v.float(), dim=-1), target.float())


class CosineMSELoss(torch.nn.Module):
    """A ``SentenceTransformer``'s loss on (s1, s2) columns; labels: the pairs' scores on the cosine's scale."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, sentence_features: list[dict[str, torch.Tensor]], labels: torch.Tensor) -> torch.Tensor:
        return cosine_mse(*embeddings(self.model, sentence_features, 2, "the cosine MSE loss"), labels)
