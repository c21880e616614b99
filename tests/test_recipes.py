"""The recipe registry, and stages that never branch on the recipe (pldistill.recipes)."""

import re
from pathlib import Path

import pytest

from pldistill.base.errors import ConfigError
from pldistill.params.config import parse_params
from pldistill.params.names import RECIPES
from pldistill.recipes import registry
from pldistill.recipes.base import Recipe

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("name", RECIPES)
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
    """A stage asks the registry for the recipe's training (teacher, distill) or its spec for a kind (label,
    evaluate, embed: pldistill.params.recipes); it never compares the recipe's name."""
    code = (ROOT / "stages" / stage).read_text()
    uses = [line for line in code.splitlines() if re.search(r"\.recipe\b", line)]
    asked = ("registry.get(params.recipe)", "SPECS[params.recipe]", "{params.recipe}")
    assert all(any(a in u for a in asked) for u in uses), uses
    names = "|".join(re.escape(r) for r in RECIPES)
    assert not re.search(rf"\.recipe\s*(==|!=|in\s)|\b(if|elif)\b[^\n]*\"({names})\"", code)
    assert "dse_head" not in code and "HEAD_DIR" not in code  # no sniffing a model folder for its recipe


def test_the_names_validation_reads_are_the_registry_s():
    # pldistill.recipes holds the names alone (validation imports no recipe); the registry imports each recipe
    assert tuple(registry.REGISTRY) == RECIPES


def test_the_names_params_are_checked_against_are_every_registry_s():
    """pldistill.params.names holds them at the bottom of the import graph (checking params imports no registry); each
    registry must hold exactly those."""
    from pldistill.base import bundled
    from pldistill.data import datasets, rtt
    from pldistill.pairs import sampling
    from pldistill.params import names

    assert tuple(sampling.REGISTRY) == names.STRATEGIES
    assert tuple(bundled.BUNDLED) == names.BUNDLED_MODELS
    assert tuple(datasets.LOADERS) == names.DATASETS
    assert ("none", *rtt.BACKENDS) == names.RTT_BACKENDS
    with pytest.raises(ValueError, match="pldistill.params.names.STRATEGIES"):
        sampling.register("mine")



def test_each_recipe_owns_its_params_and_rules_and_config_names_none():
    """Every recipe has a spec beside its section (pldistill/params/recipes.py): what it allows of the other sections
    and its own rules. pldistill.params.config checks a run against it and names no recipe in its code."""
    from pldistill.params.recipes import SPECS

    assert set(SPECS) == set(RECIPES)
    code = (ROOT / "pldistill" / "params" / "config.py").read_text().split("class Params", 1)[1]
    named = [r for r in RECIPES if f'"{r}"' in code.replace('recipe: str = "augsbert"', "")]
    assert not named, f"config.py names recipes {named}: put the rule in the recipe's spec"
    # a spec's answer, and a rule of the recipe's own, reach the user through config's validation
    with pytest.raises(ConfigError, match="recipe dse labels once and trains once.*recipe augsbert, where the student"):
        parse_params({"recipe": "dse", "cycles": 2})
    with pytest.raises(ConfigError, match="augment.rtt.backend is none"):
        parse_params({"recipe": "rtt-ensemble", "ensemble": {"positives": "rtt"},
                      "augment": {"rtt": {"backend": "none"}}})

def test_checking_params_imports_no_registry_and_no_model_code():
    """A data stage's command checks params and reports errors without the training code (issue 35)."""
    import subprocess
    import sys

    code = ("import sys, pldistill.run.runtime, pldistill.params.config; "
            "print(sorted(m for m in sys.modules if m.startswith('pldistill')))")
    loaded = subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, capture_output=True, text=True).stdout
    for heavy in ("pldistill.models.encoders", "pldistill.pairs.sampling", "pldistill.data.rtt",
                  "pldistill.pairs.semantic", "pldistill.base.bundled", "pldistill.base.store",
                  "pldistill.recipes.registry", "pldistill.recipes.base"):
        assert f"'{heavy}'" not in loaded, loaded
    # no recipe's code: what each recipe allows of the params is plain data in the params package
    assert not re.findall(r"'pldistill\.recipes\b", loaded), loaded
    assert "'pldistill.params.recipes'" in loaded, loaded
