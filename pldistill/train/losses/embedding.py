"""The embedding step's loss (stage embed): the student learns the source model's embeddings of plain sentences,
coordinate by coordinate (``mse``) and/or as the in-batch cosine matrix (``sim``)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from pldistill.train.losses.base import embeddings


def cosine_matrix_mse(student: torch.Tensor, teacher: torch.Tensor) -> torch.Tensor:
    """Mean squared difference between the in-batch cosine matrices of the student's and the teacher's
    embeddings: the student learns which sentences the teacher puts close, in its own space (no
    projection when the widths differ). student: (batch, d_s); teacher: (batch, d_t)."""
    s = F.normalize(student.float(), dim=-1)
    t = F.normalize(teacher.float(), dim=-1)
    return F.mse_loss(s @ s.T, t @ t.T)  # (batch, batch) each


class EmbeddingLoss(torch.nn.Module):
    """A ``SentenceTransformer``'s loss on a (sentence,) column; label rows: the source model's embeddings, unit
    length. ``terms``: embed.loss split on "+" (mse, sim); ``sim_weight``: the weight of the cosine-matrix term."""

    def __init__(self, model: torch.nn.Module, terms: list[str], sim_weight: float) -> None:
        super().__init__()
        self.model, self.terms, self.sim_weight = model, terms, sim_weight

    def forward(self, sentence_features: list[dict[str, torch.Tensor]], labels: torch.Tensor) -> torch.Tensor:
        (emb,) = embeddings(self.model, sentence_features, 1, "the embedding step's loss")  # sentences, not pairs
        # (batch, student dim), unit length like the targets: a student without a Normalize module learns the
        # teacher's directions instead of spending the loss on its norm
        emb = F.normalize(emb.float(), dim=-1)
        loss = F.mse_loss(emb, labels.float()) if "mse" in self.terms else emb.new_zeros(())
        if "sim" in self.terms:
            loss = loss + self.sim_weight * cosine_matrix_mse(emb, labels)
        return loss
