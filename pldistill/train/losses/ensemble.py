"""The RTT ensemble's student loss (the paper's Eq. 3): (1 - w) MAE + w InfoNCE to the ensemble's embeddings."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from pldistill.train.losses.base import embeddings
from pldistill.train.losses.info_nce import info_nce


def embedding_mae(student: torch.Tensor, teacher: torch.Tensor) -> torch.Tensor:
    """Mean over the batch of ||teacher_i - student_i||: the paper's MAE between embeddings (Eq. 4; a per-sentence
    distance, so its scale does not shrink with the embedding width)."""
    return (teacher.float() - student.float()).norm(dim=-1).mean()


def embedding_distill(student: torch.Tensor, teacher: torch.Tensor, infonce_weight: float,
                      temperature: float) -> torch.Tensor:
    """student: (batch, dim) embeddings, normalised here first, so that a student without a Normalize module
    learns the teacher's direction instead of spending the MAE on shrinking its norm; teacher: (batch, dim),
    unit length."""
    s = F.normalize(student.float(), dim=-1)
    return (1 - infonce_weight) * embedding_mae(s, teacher) + infonce_weight * info_nce(s, teacher, temperature)


class EnsembleDistillLoss(torch.nn.Module):
    """A ``SentenceTransformer``'s loss on a (sentence,) column; label rows: the ensemble teacher's embeddings."""

    def __init__(self, model: torch.nn.Module, infonce_weight: float, temperature: float) -> None:
        super().__init__()
        self.model, self.infonce_weight, self.temperature = model, infonce_weight, temperature

    def forward(self, sentence_features: list[dict[str, torch.Tensor]], labels: torch.Tensor) -> torch.Tensor:
        (emb,) = embeddings(self.model, sentence_features, 1, "the ensemble student's loss")  # sentences, not pairs
        return embedding_distill(emb, labels, self.infonce_weight, self.temperature)
