"""Distilled Sentence Embedding's loss (Barkan et al., 2020): the student's head logit learns the teacher's logit,
mixed with the gold label where a pair has one."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from pldistill.batching import Columns
from pldistill.losses.base import Loss


def dse(student: torch.Tensor, teacher: torch.Tensor, gold: torch.Tensor, alpha: float, task: str) -> torch.Tensor:
    """The paper's Eq. 2, per pair then averaged.

    Pairs with a gold label: alpha * (S - T)^2 + (1 - alpha) * l(S, gold); pairs without (gold NaN, the
    teacher's silver pairs): (S - T)^2 alone. S, T: the student's and teacher's logits, (batch,).
    l: BCE on the logit for classification; for regression the squared error of S to logit(gold), gold
    clipped to [0.01, 0.99]. Our teachers learn sigmoid(T) ~ gold, so logit(gold) is the scale T lives
    on, and both terms weigh alike (the paper's regression teacher shares the gold scale directly).
    """
    s, t = student.float(), teacher.float()
    distil = (s - t) ** 2
    has_gold = ~torch.isnan(gold)
    g = torch.nan_to_num(gold.float())
    if task == "classification":
        lbl = F.binary_cross_entropy_with_logits(s, g, reduction="none")
    else:
        lbl = (s - torch.logit(g.clamp(0.01, 0.99))) ** 2
    return torch.where(has_gold, alpha * distil + (1 - alpha) * lbl, distil).mean()


class DSELoss(Loss):
    """(s1, s2) columns; label rows: [teacher logit, gold label or NaN]. ``model``: a DSE student (pldistill.dse),
    whose module holds the encoder and the head."""

    name = "the DSE loss"

    def __init__(self, model: object, alpha: float, task: str) -> None:
        super().__init__(model)
        self.alpha, self.task = alpha, task

    def forward(self, texts: Columns, labels: torch.Tensor) -> torch.Tensor:
        s1, s2 = self.texts(texts)
        return dse(self.model._logits(s1, s2), labels[:, 0], labels[:, 1], self.alpha, self.task)
