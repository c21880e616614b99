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
