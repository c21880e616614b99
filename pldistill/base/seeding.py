"""Randomness from one seed: torch's global RNG (weight init, dropout) seeded, explicit generators for the rest."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import torch


def numpy_rng(seed: int) -> np.random.Generator:
    """The explicit numpy generator of ``seed``: what a stage that draws with numpy alone needs (stage sample's
    random and BM25 draws), without importing torch (about 3 s of a data stage's 4 on a 2-core CPU)."""
    return np.random.default_rng(seed)


def seed_all(seed: int) -> tuple[np.random.Generator, torch.Generator]:
    """Seed torch's global RNG (weight init, dropout) and return explicit generators for the rest."""
    import torch  # here: numpy_rng's callers never load it

    torch.manual_seed(seed)
    return numpy_rng(seed), torch.Generator().manual_seed(seed)
