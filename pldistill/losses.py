"""Loss maths as pure functions of tensors (testable with random tensors, no model needed)."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def cosine_mse(u: torch.Tensor, v: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Mean squared error between cos(u_i, v_i) and ``target`` (Sentence-BERT's CosineSimilarityLoss).

    u, v: (batch, dim) embeddings; target: (batch,) similarities on the cosine's scale.
    """
    return F.mse_loss(F.cosine_similarity(u.float(), v.float(), dim=-1), target.float())


def cosent(u: torch.Tensor, v: torch.Tensor, target: torch.Tensor, scale: float = 20.0) -> torch.Tensor:
    """CoSENT (Su, 2022; sentence-transformers' CoSENTLoss): for every two pairs i, j of the batch with
    target_i > target_j, a penalty that grows as cos_j passes cos_i: log(1 + sum exp(scale (cos_j - cos_i))).
    Only the order of the targets is read, as Spearman reads only ranks.

    u, v: (batch, dim) embeddings; target: (batch,) similarities, on any scale.
    """
    cos = F.cosine_similarity(u.float(), v.float(), dim=-1) * scale  # (batch,)
    t = target.float()
    ordered = t[:, None] > t[None, :]  # (batch, batch): pair i should score above pair j
    diff = (cos[None, :] - cos[:, None])[ordered]  # cos_j - cos_i over those (i, j)
    return torch.logsumexp(torch.cat([diff.new_zeros(1), diff]), dim=0)


def soft_bce(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Binary cross-entropy of sigmoid(logits) against soft targets in [0, 1].

    The cross-encoder loss of Augmented SBERT (gold scores scaled to [0, 1]) and of Trans-Encoder
    (bi-encoder similarities as targets). logits, target: (batch,).
    """
    return F.binary_cross_entropy_with_logits(logits.float(), target.float())


def dse(student: torch.Tensor, teacher: torch.Tensor, gold: torch.Tensor, alpha: float, task: str) -> torch.Tensor:
    """Distilled Sentence Embedding loss (Barkan et al., Eq. 2), per pair then averaged.

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


def info_nce(a: torch.Tensor, b: torch.Tensor, temperature: float) -> torch.Tensor:
    """InfoNCE with in-batch negatives (SimCSE): a_i's positive is b_i, every other b_j a negative.

    a, b: (batch, dim); cosine similarities / temperature feed a cross-entropy over each row.
    """
    sim = F.cosine_similarity(a.float().unsqueeze(1), b.float().unsqueeze(0), dim=-1) / temperature  # (batch, batch)
    return F.cross_entropy(sim, torch.arange(len(a), device=a.device))


def embedding_mae(student: torch.Tensor, teacher: torch.Tensor) -> torch.Tensor:
    """Mean over the batch of ||teacher_i - student_i||: the RTT-ensemble paper's MAE between embeddings
    (Eq. 4; a per-sentence distance, so its scale does not shrink with the embedding width)."""
    return (teacher.float() - student.float()).norm(dim=-1).mean()


def cosine_matrix_mse(student: torch.Tensor, teacher: torch.Tensor) -> torch.Tensor:
    """Mean squared difference between the in-batch cosine matrices of the student's and the teacher's
    embeddings: the student learns which sentences the teacher puts close, in its own space (no
    projection when the widths differ). student: (batch, d_s); teacher: (batch, d_t)."""
    s = F.normalize(student.float(), dim=-1)
    t = F.normalize(teacher.float(), dim=-1)
    return F.mse_loss(s @ s.T, t @ t.T)  # (batch, batch) each


def embedding_distill(student: torch.Tensor, teacher: torch.Tensor, infonce_weight: float,
                      temperature: float) -> torch.Tensor:
    """The RTT-ensemble student's loss (the paper's Eq. 3): (1 - w) MAE + w InfoNCE to the teacher's embeddings.

    student: (batch, dim) embeddings, normalised here first, so that a student without a Normalize module
    learns the teacher's direction instead of spending the MAE on shrinking its norm; teacher: (batch, dim),
    unit length.
    """
    s = F.normalize(student.float(), dim=-1)
    return (1 - infonce_weight) * embedding_mae(s, teacher) + infonce_weight * info_nce(s, teacher, temperature)
