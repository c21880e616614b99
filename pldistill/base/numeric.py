"""The few numeric maps every model shares (numpy, float64 in, same shape out)."""

from __future__ import annotations

import numpy as np

LOGIT_EPS = 0.01  # a probability's logit is taken at most this close to 0 or 1: |logit| <= 4.6


def sigmoid(x: np.ndarray) -> np.ndarray:
    """A cross-encoder's logit as a score in [0, 1]."""
    return 1 / (1 + np.exp(-np.asarray(x, np.float64)))


def logit(p: np.ndarray) -> np.ndarray:
    """The inverse of ``sigmoid``, with ``p`` clipped to [LOGIT_EPS, 1 - LOGIT_EPS] (a calibrated score of
    0 or 1 would give an infinite target)."""
    p = np.clip(np.asarray(p, np.float64), LOGIT_EPS, 1 - LOGIT_EPS)
    return np.log(p / (1 - p))


def l2_normalise(x: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (an all-zero row stays zero)."""
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)


def principal_directions(x: np.ndarray, dim: int) -> np.ndarray:
    """(dim, width) float64: the top ``dim`` principal directions of the rows of ``x`` (centred to find them), each
    direction's sign fixed so its entries sum to >= 0: the same input gives the same bytes."""
    centred = x.astype(np.float64) - x.mean(axis=0)
    _, _, vt = np.linalg.svd(centred, full_matrices=False)
    signs = np.sign(vt[:dim].sum(axis=1, keepdims=True))
    return vt[:dim] * np.where(signs == 0, 1, signs)
