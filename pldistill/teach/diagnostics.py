"""Label-distribution diagnostics (the paper's Figure 4) and KDE selection of silver pairs.

Densities are Gaussian KDEs (scipy, Scott's bandwidth) evaluated on a grid: evenly over [0, 1], plus
evenly over each sample's own range, so a sample squeezed into a sliver of [0, 1] (a barely trained
teacher) is still resolved. KL(gold||silver) integrates p log(p / q) over that grid (trapezoid rule, both
densities renormalised on it); it is 0 when the silver scores are distributed like the gold ones and
grows as silver piles up where gold has little mass (the random-sampling failure mode).
"""

from __future__ import annotations

import numpy as np
from scipy.integrate import trapezoid
from scipy.stats import gaussian_kde

from pldistill.base.errors import SelectionError

_FLOOR = 1e-12  # density floor so log(p / q) stays finite where the silver density underflows
KL_POINTS = 1001  # per-range grid points for KL(gold||silver)


def density(scores: np.ndarray, grid: np.ndarray) -> np.ndarray | None:
    """Gaussian-KDE density of ``scores`` on ``grid``; None when there is nothing to smooth
    (fewer than 2 scores, or all equal)."""
    scores = np.asarray(scores, dtype=np.float64)
    if len(scores) < 2 or np.ptp(scores) == 0:
        return None
    return gaussian_kde(scores)(grid)


def grid_for(points: int, *samples: np.ndarray) -> np.ndarray:
    """``points`` even points over [0, 1] and over each sample's [min, max], merged and sorted."""
    parts = [np.linspace(0.0, 1.0, points)]
    parts += [np.linspace(np.min(x), np.max(x), points) for x in samples if len(x)]
    return np.unique(np.concatenate(parts))


def kl_divergence(p: np.ndarray, q: np.ndarray, grid: np.ndarray) -> float:
    """KL(p||q) in nats of two densities evaluated on ``grid``, each renormalised to integrate to one."""
    p = np.maximum(p, _FLOOR)
    q = np.maximum(q, _FLOOR)
    p, q = p / trapezoid(p, grid), q / trapezoid(q, grid)
    return float(trapezoid(p * np.log(p / q), grid))


def js_divergence(p: np.ndarray, q: np.ndarray, grid: np.ndarray) -> float:
    """Jensen-Shannon divergence (nats, at most ln 2): symmetric and finite where one density has no
    mass, so it still ranks strategies when KL(gold||silver) is dominated by gold's uncovered tails."""
    p = np.maximum(p, 0) / trapezoid(np.maximum(p, 0), grid)
    q = np.maximum(q, 0) / trapezoid(np.maximum(q, 0), grid)
    m = (p + q) / 2
    return 0.5 * kl_divergence(p, m, grid) + 0.5 * kl_divergence(q, m, grid)


def histogram(scores: np.ndarray, bins: int = 10) -> list[int]:
    """Counts of ``scores`` in ``bins`` equal bins over [0, 1] (the last bin includes 1.0)."""
    counts, _ = np.histogram(np.asarray(scores, dtype=np.float64), bins=bins, range=(0.0, 1.0))
    return counts.tolist()


def report(gold: np.ndarray, silver: np.ndarray, points: int = 101) -> tuple[dict, list[list[float]]]:
    """Silver-set size, histograms, KL(gold||silver) and the density rows (score, gold, silver) for a plot."""
    gold, silver = np.asarray(gold, dtype=np.float64), np.asarray(silver, dtype=np.float64)
    fine = grid_for(KL_POINTS, gold, silver)
    fg, fs = density(gold, fine), density(silver, fine)
    kl = None if fg is None or fs is None else round(kl_divergence(fg, fs, fine), 4)
    js = None if fg is None or fs is None else round(js_divergence(fg, fs, fine), 4)
    grid = np.linspace(0.0, 1.0, points)  # the plotted curves
    fg, fs = density(gold, grid), density(silver, grid)
    summary = {
        "silver_pairs": len(silver),
        "silver_score_mean": round(float(np.mean(silver)), 4) if len(silver) else None,
        "gold_score_mean": round(float(np.mean(gold)), 4) if len(gold) else None,
        "kl_gold_silver": kl,
        "js_gold_silver": js,
        "histogram": {"bins": [round(x, 1) for x in np.linspace(0, 1, 11).tolist()],
                      "gold": histogram(gold), "silver": histogram(silver)},
    }
    zeros = np.zeros_like(grid)
    rows = [[round(float(s), 3), round(float(g), 5), round(float(v), 5)]
            for s, g, v in zip(grid, zeros if fg is None else fg, zeros if fs is None else fs)]
    return summary, rows


def keep_probability(gold: np.ndarray, silver: np.ndarray, points: int = 1001) -> np.ndarray:
    """Q(s) for each silver score: 1 where F_gold(s) >= F_silver(s), else F_gold(s) / F_silver(s).

    Both densities are evaluated on ``grid_for(points, ...)`` and interpolated, so the cost is
    O((gold + silver) x points) rather than O(silver^2).
    """
    silver = np.asarray(silver, dtype=np.float64)
    grid = grid_for(points, np.asarray(gold, dtype=np.float64), silver)
    fg, fs = density(gold, grid), density(silver, grid)
    for name, f, x in (("gold training", fg, gold), ("teacher's pool", fs, silver)):
        if f is None:
            raise SelectionError(
                f"kde: the {name} scores cannot be smoothed ({len(x)} score(s), "
                f"{len(np.unique(x))} distinct; need at least 2 distinct). For the pool: raise sample.kde.pool "
                f"or train the teacher longer (teacher.epochs); or pick another sample.strategy"
            )
    q = np.minimum(1.0, np.maximum(fg, 0.0) / np.maximum(fs, _FLOOR))
    return np.interp(silver, grid, q)


def kde_select(gold: np.ndarray, silver: np.ndarray, task: str, rng: np.random.Generator,
               points: int = 1001) -> np.ndarray:
    """Boolean mask of the silver pairs KDE sampling keeps.

    regression: keep each pair with probability Q(s) (see ``keep_probability``).
    classification (used once classification tasks are enabled): keep every positive (score >= 0.5) and
    as many randomly chosen negatives as make the positive:negative ratio equal the gold one.
    """
    silver = np.asarray(silver, dtype=np.float64)
    if task == "regression":
        return rng.random(len(silver)) < keep_probability(gold, silver, points)
    pos = silver >= 0.5
    gold_pos = int(np.sum(np.asarray(gold) >= 0.5))
    gold_neg = len(gold) - gold_pos
    if gold_pos == 0:
        raise SelectionError("kde for classification needs at least one positive gold pair (score >= 0.5); "
                             "found none in the training split")
    n_neg = min(round(pos.sum() * gold_neg / gold_pos), int((~pos).sum()))
    keep = pos.copy()
    keep[rng.choice(np.flatnonzero(~pos), size=n_neg, replace=False)] = True
    return keep
