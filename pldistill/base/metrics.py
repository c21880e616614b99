"""Evaluation metrics; each returns a flat dict of numbers x100, the primary one first."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from scipy.stats import pearsonr, rankdata, spearmanr
from sklearn.metrics import auc, roc_auc_score, roc_curve

from pldistill.base.cleaning import tokenize


def correlation(pred: Sequence[float], gold: Sequence[float]) -> dict[str, float]:
    """Spearman (primary) and Pearson correlation x100; 0 when the predictions are constant."""
    pred, gold = np.asarray(pred, dtype=np.float64), np.asarray(gold, dtype=np.float64)
    if len(pred) < 2 or np.ptp(pred) == 0 or np.ptp(gold) == 0:
        return {"spearman": 0.0, "pearson": 0.0}
    return {
        "spearman": round(float(spearmanr(pred, gold).statistic) * 100, 2),
        "pearson": round(float(pearsonr(pred, gold).statistic) * 100, 2),
    }


def partial_auc(pred: Sequence[float], gold: Sequence[int], max_fpr: float = 0.05) -> float:
    """Area under the ROC curve from false-positive rate 0 to ``max_fpr``, divided by ``max_fpr``: 1 for
    a perfect ranking, ``max_fpr / 2`` for chance (AUC(0.05) of the duplicate-question domain-adaptation
    literature; sklearn's ``max_fpr`` gives McClish's rescaling instead, where chance is 0.5)."""
    fpr, tpr, _ = roc_curve(np.asarray(gold), np.asarray(pred, dtype=np.float64))
    stop = np.searchsorted(fpr, max_fpr, side="right")  # points with fpr <= max_fpr, then one interpolated
    x = np.append(fpr[:stop], max_fpr)
    y = np.append(tpr[:stop], np.interp(max_fpr, fpr, tpr))
    return float(auc(x, y) / max_fpr)


def best_threshold(pred: Sequence[float], gold: Sequence[int]) -> float:
    """The score threshold (predict 1 when score >= t) with the highest F1 of the positive label; chosen
    on dev and applied to test, as Augmented SBERT does. Ties go to the higher threshold."""
    pred, gold = np.asarray(pred, dtype=np.float64), np.asarray(gold).astype(bool)
    order = np.argsort(-pred, kind="stable")
    p, g = pred[order], gold[order]
    tp = np.cumsum(g)  # predicting the top i+1 scores positive
    f1 = 2 * tp / (np.arange(1, len(p) + 1) + g.sum())
    last = np.r_[p[1:] != p[:-1], True]  # a threshold takes every pair that ties with it
    f1 = np.where(last, f1, -1.0)
    return float(p[int(np.argmax(f1))]) if len(p) else 0.5


def classification(pred: Sequence[float], gold: Sequence[float], threshold: float) -> dict[str, float]:
    """AUC (primary), AUC(0.05), and F1 (positive label) and accuracy at ``threshold``, all x100."""
    pred, gold = np.asarray(pred, dtype=np.float64), np.asarray(gold).astype(int)
    hard = pred >= threshold
    tp = int((hard & (gold == 1)).sum())
    f1 = 2 * tp / (hard.sum() + (gold == 1).sum()) if hard.sum() + (gold == 1).sum() else 0.0
    both = 0 < gold.sum() < len(gold)  # AUC needs both labels present
    return {
        "auc": round(float(roc_auc_score(gold, pred)) * 100, 2) if both else 0.0,
        "auc@0.05": round(partial_auc(pred, gold, 0.05) * 100, 2) if both else 0.0,
        "f1": round(float(f1) * 100, 2),
        "accuracy": round(float((hard == (gold == 1)).mean()) * 100, 2),
    }


def jaccard(s1: Sequence[str], s2: Sequence[str]) -> np.ndarray:
    """Word-overlap baseline: |A ∩ B| / |A ∪ B| of each pair's lower-cased word sets."""
    out = np.zeros(len(s1))
    for i, (a, b) in enumerate(zip(s1, s2)):
        ta, tb = set(tokenize(a)), set(tokenize(b))
        out[i] = len(ta & tb) / len(ta | tb) if ta | tb else 0.0
    return out


def shuffled_words(sentences: Sequence[str], rng: np.random.Generator) -> list[str]:
    """Each sentence with its whitespace-separated words in a random order: the bag of words kept, the order lost."""
    out = []
    for text in sentences:
        words = text.split()
        out.append(" ".join(words[i] for i in rng.permutation(len(words))))
    return out


def order_free(score: Callable[[list[str], list[str]], np.ndarray], s1: Sequence[str], s2: Sequence[str],
               shuffles: int, rng: np.random.Generator) -> np.ndarray:
    """A model's scores with word order taken away: the mean of its scores of ``shuffles`` pairs made by shuffling
    the words of both sentences (``shuffled_words``). A mean of token vectors (a static student) cannot tell a
    sentence from its shuffles; the model's drop is what word order is worth to it (an estimate: shuffled
    sentences are unlike those it learned, so a static student can pass this score)."""
    total = np.zeros(len(s1))
    for _ in range(shuffles):
        total += np.asarray(score(shuffled_words(s1, rng), shuffled_words(s2, rng)), float)
    return total / shuffles


def _spearman_rows(pred: np.ndarray, gold: np.ndarray) -> np.ndarray:
    """Spearman x100 of each row of ``pred`` against the same row of ``gold`` ((rows, pairs) each; ties averaged, as
    scipy's; 0 for a constant row, as ``correlation``)."""
    rp, rg = rankdata(pred, axis=1), rankdata(gold, axis=1)
    rp, rg = rp - rp.mean(axis=1, keepdims=True), rg - rg.mean(axis=1, keepdims=True)
    den = np.sqrt((rp**2).sum(axis=1) * (rg**2).sum(axis=1))
    return 100 * np.divide((rp * rg).sum(axis=1), den, out=np.zeros(len(den)), where=den > 0)


def _auc_rows(pred: np.ndarray, gold: np.ndarray) -> np.ndarray:
    """ROC AUC x100 of each row (the Mann-Whitney statistic on ranks, ties averaged, as sklearn's); 0 for a row with
    one label, as ``classification``."""
    ranks, pos = rankdata(pred, axis=1), gold > 0.5
    n1 = pos.sum(axis=1)
    n0 = pos.shape[1] - n1
    u = (ranks * pos).sum(axis=1) - n1 * (n1 + 1) / 2
    return 100 * np.divide(u, n1 * n0, out=np.zeros(len(u)), where=(n1 > 0) & (n0 > 0))


PRIMARY = {"regression": ("spearman", _spearman_rows), "classification": ("auc", _auc_rows)}


def paired_gain(a: Sequence[float], b: Sequence[float], gold: Sequence[float], task: str, rounds: int,
                rng: np.random.Generator, chunk: int = 100) -> dict[str, float]:
    """How far model ``a`` leads model ``b`` on the same pairs, in the task's primary metric x100, and its 95% interval:
    the 2.5th and 97.5th percentiles of the lead over ``rounds`` resamples of the pairs, with replacement, both models
    scored on each (a paired bootstrap: what the two share, the pairs' difficulty, cancels, so the interval is far
    narrower than either score's own). ``low`` above 0: ``a`` is ahead beyond the sampling noise of these pairs.
    Resamples are scored ``chunk`` at a time, vectorised: (chunk, pairs) arrays, so memory stays flat."""
    a, b, gold = (np.asarray(x, dtype=np.float64) for x in (a, b, gold))  # (pairs,)
    name, metric = PRIMARY[task]
    leads = []
    for start in range(0, rounds, chunk):
        idx = rng.integers(0, len(gold), size=(min(chunk, rounds - start), len(gold)))  # (chunk, pairs): resamples
        leads.append(metric(a[idx], gold[idx]) - metric(b[idx], gold[idx]))
    low, high = np.percentile(np.concatenate(leads), [2.5, 97.5])
    lead = float(metric(a[None], gold[None])[0] - metric(b[None], gold[None])[0])  # all the pairs, once
    return {name: round(lead, 2), "low": round(float(low), 2), "high": round(float(high), 2)}


def dev_spearman(model, dev, params) -> Callable[[], float]:
    """A checkpoint-selection score: the model's (anything with ``score(s1, s2, batch_size, bf16)``) Spearman x100
    on the dev pairs (a frame of sentence1, sentence2, score); ``params``: section evaluate (batch_size, bf16)."""

    def score() -> float:
        pred = model.score(dev["sentence1"], dev["sentence2"], params.batch_size, params.bf16)
        return correlation(pred, dev["score"])["spearman"]

    return score


def split_scores(model, splits: dict, params) -> dict:
    """{split: {"spearman", "pearson"}} of the model's scores against each split's gold scores."""
    return {name: correlation(model.score(df["sentence1"], df["sentence2"], params.batch_size, params.bf16),
                              df["score"]) for name, df in splits.items()}
