"""InfoNCE with in-batch negatives, and SimCSE's loss on it: the RTT ensemble's sub-models learn that a sentence and
its positive (a round-trip paraphrase, or itself under another dropout mask) belong together."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from pldistill.train.losses.base import embeddings


def info_nce(a: torch.Tensor, b: torch.Tensor, temperature: float) -> torch.Tensor:
    """a_i's positive is b_i, every other b_j a negative.

    a, b: (batch, dim); cosine similarities / temperature feed a cross-entropy over each row.
    """
    sim = F.cosine_similarity(a.float().unsqueeze(1), b.float().unsqueeze(0), dim=-1) / temperature  # (batch, batch)
    return F.cross_entropy(sim, torch.arange(len(a), device=a.device))


class SimCSELoss(torch.nn.Module):
    """A ``SentenceTransformer``'s loss on (sentence, positive) columns; labels unused. Each side is its own forward
    in train mode, so a sentence that is its own positive meets itself under two independent dropout masks
    (unsupervised SimCSE)."""

    def __init__(self, model: torch.nn.Module, temperature: float) -> None:
        super().__init__()
        self.model, self.temperature = model, temperature

    def forward(self, sentence_features: list[dict[str, torch.Tensor]], labels: torch.Tensor) -> torch.Tensor:
        anchor, positive = embeddings(self.model, sentence_features, 2, "SimCSE's InfoNCE")  # (batch, dim) each
        return info_nce(anchor, positive, self.temperature)
