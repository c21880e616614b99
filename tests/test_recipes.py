"""The recipe registry, and stages that never branch on the recipe (pldistill.recipes)."""

import re
from pathlib import Path

import pytest

from pldistill import recipes
from pldistill.config import ConfigError
from pldistill.recipes import registry
from pldistill.recipes.base import Recipe
from pldistill.validate import parse_params

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("name", recipes.RECIPES)
def test_every_registered_name_gets_its_own_recipe(name):
    recipe = registry.get(name)
    assert isinstance(recipe, Recipe) and recipe.name == name
    assert type(recipe).distill is not Recipe.distill  # each method trains its own student


def test_config_takes_its_recipe_names_from_the_registry():
    assert parse_params({"recipe": "dse"}).recipe == "dse"
    with pytest.raises(ConfigError, match="augsbert, trans-encoder, dse, rtt-ensemble"):
        parse_params({"recipe": "augsbret"})
    with pytest.raises(KeyError, match="expected one of augsbert"):
        registry.get("augsbret")


@pytest.mark.parametrize("stage", sorted(p.name for p in (ROOT / "stages").glob("*.py") if p.name != "__init__.py"))
def test_stage_modules_do_not_branch_on_the_recipe(stage):
    code = (ROOT / "stages" / stage).read_text()
    uses = [line for line in code.splitlines() if re.search(r"\.recipe\b", line)]
    assert all("registry.get(params.recipe)" in u for u in uses), uses
    assert "dse_head" not in code and "HEAD_DIR" not in code  # no sniffing a model folder for its recipe


def test_the_names_validation_reads_are_the_registry_s():
    # pldistill.recipes holds the names alone (validation imports no recipe); the registry imports each recipe
    assert tuple(registry.REGISTRY) == recipes.RECIPES


def test_the_names_params_are_checked_against_are_every_registry_s():
    """pldistill.names holds them at the bottom of the import graph (checking params imports no registry); each
    registry must hold exactly those."""
    from pldistill import bundled, datasets, names, rtt, sampling

    assert tuple(sampling.REGISTRY) == names.STRATEGIES
    assert tuple(bundled.BUNDLED) == names.BUNDLED_MODELS
    assert tuple(datasets.LOADERS) == names.DATASETS
    assert ("none", *rtt.BACKENDS) == names.RTT_BACKENDS
    with pytest.raises(ValueError, match="pldistill.names.STRATEGIES"):
        sampling.register("mine")


def test_checking_params_imports_no_registry_and_no_model_code():
    """A data stage's command checks params and reports errors without the training code (issue 35)."""
    import subprocess
    import sys

    code = ("import sys, pldistill.runtime, pldistill.validate; "
            "print(sorted(m for m in sys.modules if m.startswith('pldistill')))")
    loaded = subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, capture_output=True, text=True).stdout
    for heavy in ("pldistill.models", "pldistill.sampling", "pldistill.rtt", "pldistill.loop", "pldistill.semantic",
                  "pldistill.bundled", "pldistill.store", "pldistill.recipes"):
        assert f"'{heavy}'" not in loaded, loaded
