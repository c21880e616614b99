"""The four methods, one module each, behind one interface (``pldistill.recipes.base.Recipe``).

A stage module reads its inputs, hands them to ``get(params.recipe)`` and writes what it returns; no
stage asks which recipe runs. What each recipe does at each stage:

    stage     augsbert             dse                        trans-encoder              rtt-ensemble
    teacher   members fit on gold  members fit on gold        none (a note)              contrastive sub-models
    label     teacher labels pairs + its logits on gold pairs none (labels in distill)   ensemble embeds sentences
    distill   bi on gold + silver  DSE student (head + enc.)  the cycles                 bi learns the embeddings
    evaluate  Teacher, bi student  Teacher, DSE student       last cycles' cross, bi     the ensemble, bi

This module imports nothing heavy: config takes the allowed names from ``RECIPES``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pldistill.recipes.base import Recipe

# params.recipe -> its module here (the one registry; config takes its allowed names from it). The first
# is the default.
MODULES = {"augsbert": "augsbert", "trans-encoder": "trans_encoder", "dse": "dse", "rtt-ensemble": "rtt_ensemble"}
RECIPES = tuple(MODULES)


def get(name: str) -> Recipe:
    """The recipe called ``name`` (one of ``RECIPES``): its module's ``RECIPE``."""
    if name not in MODULES:
        raise KeyError(f"unknown recipe {name!r}; expected one of {', '.join(RECIPES)}")
    # Written out so that dvc.yaml's dependency check (tests/test_dvc_yaml.py) sees every recipe module.
    from pldistill.recipes import augsbert, dse, rtt_ensemble, trans_encoder  # noqa: F401

    return importlib.import_module(f"pldistill.recipes.{MODULES[name]}").RECIPE
