"""Evaluation metrics; each returns a flat dict of numbers x100, the primary one first."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy.stats import pearsonr, spearmanr

from pldistill.bm25 import tokenize


def correlation(pred: Sequence[float], gold: Sequence[float]) -> dict[str, float]:
    """Spearman (primary) and Pearson correlation x100; 0 when the predictions are constant."""
    pred, gold = np.asarray(pred, dtype=np.float64), np.asarray(gold, dtype=np.float64)
    if len(pred) < 2 or np.ptp(pred) == 0 or np.ptp(gold) == 0:
        return {"spearman": 0.0, "pearson": 0.0}
    return {
        "spearman": round(float(spearmanr(pred, gold).statistic) * 100, 2),
        "pearson": round(float(pearsonr(pred, gold).statistic) * 100, 2),
    }


def jaccard(s1: Sequence[str], s2: Sequence[str]) -> np.ndarray:
    """Word-overlap baseline: |A ∩ B| / |A ∪ B| of each pair's lower-cased word sets."""
    out = np.zeros(len(s1))
    for i, (a, b) in enumerate(zip(s1, s2)):
        ta, tb = set(tokenize(a)), set(tokenize(b))
        out[i] = len(ta & tb) / len(ta | tb) if ta | tb else 0.0
    return out
