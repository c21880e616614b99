"""Distilled Sentence Embedding's loss (Barkan et al., 2020): the student's head logit learns the teacher's logit,
mixed with the gold label where a pair has one."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from pldistill.models.dse import pool
from pldistill.train.losses.base import columns, each_column


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


class DSELoss(torch.nn.Module):
    """A DSE student's loss (``model`` its ``SentenceTransformer`` encoder, ``head`` its pair head over
    [u, v, u∘v, |u−v|], held here and trained with the encoder, as the library's SoftmaxLoss holds its classifier)
    on (s1, s2) columns; label rows: [teacher logit, gold label or NaN]. ``pooling``: how the encoder's hidden
    states become a sentence vector (pldistill.models.dse.pool)."""

    def __init__(self, model: torch.nn.Module, head: torch.nn.Module, pooling: str, alpha: float, task: str) -> None:
        super().__init__()
        self.model, self.head, self.pooling, self.alpha, self.task = model, head, pooling, alpha, task

    def pooled(self, features: dict[str, torch.Tensor]) -> torch.Tensor:
        """(batch, dim) sentence vectors from one column's features, through the model's forward (hidden states on
        for the call), so a DDP-wrapped model syncs the gradients."""
        config = _config(self.model)
        before, config.output_hidden_states = config.output_hidden_states, True
        try:
            out = self.model(features)
        finally:
            config.output_hidden_states = before
        ids, cls_id = features["input_ids"], _tokenizer(self.model).cls_token_id
        cls_first = cls_id is not None and bool((ids[:, 0] == cls_id).all())
        return pool(out["all_layer_embeddings"], out["attention_mask"], self.pooling, cls_first)

    def forward(self, sentence_features: list[dict[str, torch.Tensor]], labels: torch.Tensor) -> torch.Tensor:
        u, v = (x.float() for x in each_column(self.model, columns(list(sentence_features), 2, "the DSE loss"),
                                               self.pooled))
        return dse(self.head(u, v), labels[:, 0], labels[:, 1], self.alpha, self.task)


def _unwrapped(model: torch.nn.Module) -> torch.nn.Module:
    return getattr(model, "module", model)  # a DDP wrapper holds the model as .module


def _config(model: torch.nn.Module):
    return _unwrapped(model)[0].auto_model.config


def _tokenizer(model: torch.nn.Module):
    return _unwrapped(model).tokenizer
