"""Randomness from one seed: torch's global RNG (weight init, dropout) seeded, explicit generators for the rest."""

from __future__ import annotations

import numpy as np
import torch


def seed_all(seed: int) -> tuple[np.random.Generator, torch.Generator]:
    """Seed torch's global RNG (weight init, dropout) and return explicit generators for the rest."""
    torch.manual_seed(seed)
    return np.random.default_rng(seed), torch.Generator().manual_seed(seed)
