"""The recipe registry: ``get(params.recipe)``, what the stages teacher and distill call.

It imports every recipe module (so a stage that calls it depends on each); pldistill.params.recipes holds their
names and specs alone, for validation (tests/test_recipes.py checks the two agree).
"""

from __future__ import annotations

from pldistill.params.recipes import RECIPES
from pldistill.recipes import augsbert, dse, rtt_ensemble, trans_encoder
from pldistill.recipes.base import Recipe

REGISTRY: dict[str, Recipe] = {m.RECIPE.name: m.RECIPE for m in (augsbert, trans_encoder, dse, rtt_ensemble)}


def get(name: str) -> Recipe:
    """The recipe called ``name`` (one of ``RECIPES``)."""
    if name not in REGISTRY:
        raise KeyError(f"unknown recipe {name!r}; expected one of {', '.join(RECIPES)}")
    return REGISTRY[name]
