"""CoSENT (Su, 2022; sentence-transformers' CoSENTLoss): a bi-encoder learns only the order of the pairs' scores."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from pldistill.train.losses.base import PairEmbeddingLoss


def cosent(u: torch.Tensor, v: torch.Tensor, target: torch.Tensor, scale: float = 20.0) -> torch.Tensor:
    """For every two pairs i, j of the batch with target_i > target_j, a penalty that grows as cos_j passes cos_i:
    log(1 + sum exp(scale (cos_j - cos_i))). Only the order of the targets is read, as Spearman reads only ranks.

    u, v: (batch, dim) embeddings; target: (batch,) similarities, on any scale.
    """
    cos = F.cosine_similarity(u.float(), v.float(), dim=-1) * scale  # (batch,)
    t = target.float()
    ordered = t[:, None] > t[None, :]  # (batch, batch): pair i should score above pair j
    diff = (cos[None, :] - cos[:, None])[ordered]  # cos_j - cos_i over those (i, j)
    return torch.logsumexp(torch.cat([diff.new_zeros(1), diff]), dim=0)


class CoSENTLoss(PairEmbeddingLoss):
    """A ``SentenceTransformer``'s loss on (s1, s2) columns; labels: the pairs' scores, on any scale."""

    name = "CoSENT"
    maths = staticmethod(cosent)
