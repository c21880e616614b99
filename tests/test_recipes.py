"""The recipe registry, and stages that never branch on the recipe (pldistill.recipes)."""

import os
import re
import shutil
from pathlib import Path

import pytest
import yaml

from pldistill.base.errors import ConfigError
from pldistill.params.config import parse_params
from pldistill.params.recipes import RECIPES
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

def test_a_spec_params_cannot_hold_is_named_at_import(monkeypatch):
    """A recipe's section is a Params field by its spec's name: a name another section has, a spec with no model for
    its section, or reads naming a key the section lacks, is refused naming the recipe (pldistill.params.config)."""
    import dataclasses

    from pldistill.params import config
    from pldistill.params.recipes import SPECS

    dse = SPECS["dse"]
    for change, says in ((dict(section="student"), "section 'student' is another section"),
                         (dict(section="rounds"), "section 'rounds' is another section"),
                         (dict(params=None), "names section 'dse' but no params model"),
                         (dict(reads={"distill": ("alhpa",)}), r"reads name \['alhpa'\], which section dse lacks"),
                         (dict(section=None, params=None), "reads keys .* but names no section")):
        monkeypatch.setitem(SPECS, "dse", dataclasses.replace(dse, **change))
        with pytest.raises(TypeError, match=f"recipe dse: .*{says}"):
            config._check_specs()
    monkeypatch.undo()
    config._check_specs()  # today's specs


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


# The toy recipe the next test adds, in the four places a recipe takes (docs/layout.md, "Where to add"): Augmented
# SBERT whose student trains toy.epochs epochs, with a section of its own that stage distill reads.
TOY_MODULE = '''"""recipe toy: Augmented SBERT whose student trains toy.epochs epochs."""

from pldistill.params.config import Params
from pldistill.recipes.augsbert import AugSBERT
from pldistill.recipes.base import DistillDirs


class Toy(AugSBERT):
    name = "toy"

    def distill(self, params: Params, dirs: DistillDirs) -> dict:
        student = params.student.model_copy(update={"epochs": params.toy.epochs})
        return super().distill(params.model_copy(update={"student": student}), dirs)


RECIPE = Toy()
'''
TOY_SECTION = '''

# -- toy (section toy) ------------------------------------------------------------------------------------------------
class ToyParams(_Section):
    """recipe toy: Augmented SBERT whose student trains toy.epochs epochs."""

    params_yaml = DEFAULTS["toy"]
    epochs: int = Field(ge=1)


TOY_SPEC = RecipeSpec("toy", "toy", ToyParams, {"distill": ()}, student_loss=True, embed_start=True)


SPECS: dict[str, RecipeSpec] = {s.name: s for s in ('''
TOY_RUN = '''
import json, sys
from pathlib import Path
import pldistill
from pldistill.base.errors import ConfigError
from pldistill.params.config import parse_params
from pldistill.recipes import registry
from tests.conftest import CHAINS, run_chain

assert Path(pldistill.__file__).is_relative_to(Path.cwd()), pldistill.__file__  # the copy's code, toy and all
raw, chain = json.loads(Path(sys.argv[1]).read_text()), Path(sys.argv[2])
# no early stop: the steps tell whose epochs the student trained
params = parse_params({**raw, "recipe": "toy", "student": {**raw["student"], "patience": None}})
errors = []
for bad in ({**raw, "recipe": "tyo"}, {**raw, "toy": {"epoch": 2}}):
    try:
        parse_params(bad)
    except ConfigError as err:
        errors.append(str(err))
result = run_chain(params, chain, ("distill", "evaluate"))
print(json.dumps({"epochs": params.toy.epochs, "recipe": registry.get("toy").name, "errors": errors,
                  "chain": "toy" in CHAINS,
                  "distill": json.loads((chain / "metrics/distill.json").read_text()), "eval": result}))
'''


def _toy_project(dest: Path) -> dict[str, str]:
    """A copy of the project's code with the toy recipe added in four places; path -> what was done there."""
    for part in ("pldistill", "stages", "scripts", "tests", "docs"):
        shutil.copytree(ROOT / part, dest / part, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for part in ("params.yaml", "dvc.yaml"):
        shutil.copy(ROOT / part, dest / part)
    places = {
        "pldistill/recipes/toy.py": "new: the Recipe subclass and RECIPE",
        "pldistill/params/recipes.py": "its section and spec, listed in SPECS",
        "pldistill/recipes/registry.py": "its module in the registry",
        "params.yaml": "its section's defaults",
    }
    (dest / "pldistill/recipes/toy.py").write_text(TOY_MODULE)
    specs = dest / "pldistill/params/recipes.py"
    text = specs.read_text().replace("\n\nSPECS: dict[str, RecipeSpec] = {s.name: s for s in (", TOY_SECTION, 1)
    specs.write_text(text.replace("ENSEMBLE_SPEC)}", "ENSEMBLE_SPEC, TOY_SPEC)}", 1))
    reg = dest / "pldistill/recipes/registry.py"
    text = reg.read_text().replace("rtt_ensemble, trans_encoder\n", "rtt_ensemble, toy, trans_encoder\n", 1)
    reg.write_text(text.replace("dse, rtt_ensemble)}", "dse, rtt_ensemble, toy)}", 1))
    params = dest / "params.yaml"
    params.write_text(params.read_text() + "\ntoy:                          # recipe toy (stage distill)\n"
                      "  epochs: 2                   # the student's epochs\n")
    return places


def test_a_toy_recipe_in_four_places(chains, tmp_path):
    """A recipe takes four places; the rest follows from them: its name (RECIPES), its Params field, its defaults
    (params_doc), dvc.yaml's deps and params keys for it (stage_deps --write). The toy trains a student in stage
    distill and stage evaluate scores it, with no other edit."""
    import json
    import subprocess
    import sys

    project = tmp_path / "project"
    places = _toy_project(project)
    for script in ("params_doc.py", "stage_deps.py"):
        subprocess.run([sys.executable, f"scripts/{script}", *(["--write"] if script == "stage_deps.py" else [])],
                       cwd=project, check=True, capture_output=True)
    changed = {p.relative_to(project).as_posix() for p in project.rglob("*") if p.is_file()
               and "__pycache__" not in p.parts and (not (ROOT / p.relative_to(project)).is_file()
                                                     or (ROOT / p.relative_to(project)).read_bytes() != p.read_bytes())}
    derived = {"pldistill/params/defaults.py", "docs/parameters.md", "dvc.yaml"}
    assert changed - derived == set(places), sorted(changed)
    stages = yaml.safe_load((project / "dvc.yaml").read_text())["stages"]
    assert "toy" in stages["distill"]["params"] and "pldistill/recipes/toy.py" in stages["distill"]["deps"]
    assert all("toy" not in stage.get("params", []) for name, stage in stages.items() if name != "distill")
    assert "`toy.epochs`" in (project / "docs/parameters.md").read_text()

    augsbert = chains("augsbert")
    chain = augsbert.copy_to(tmp_path / "chain")
    raw = tmp_path / "params.json"
    raw.write_text(json.dumps(augsbert.params.model_dump(mode="json")))
    env = {**os.environ, "PLDISTILL_STORE": str(tmp_path / "store"), "PYTHONPATH": str(project)}
    done = subprocess.run([sys.executable, "-c", TOY_RUN, str(raw), str(chain)], check=False, cwd=project,
                          env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["recipe"] == "toy" and out["epochs"] == 2 and out["chain"]  # the tests run it in a chain of its own
    assert "expected one of augsbert, trans-encoder, dse, rtt-ensemble, toy; found 'tyo'" in out["errors"][0]
    assert "toy.epoch: unknown key (did you mean toy.epochs?)" in out["errors"][1]
    before = json.loads((augsbert.root / "metrics/distill.json").read_text())
    assert augsbert.params.student.epochs == 1 and out["distill"]["recipe"] == "toy"
    assert "stopped_early" not in before and "stopped_early" not in out["distill"]
    assert out["distill"]["steps"] == 2 * before["steps"]  # the toy's own code ran: toy.epochs, not student.epochs
    assert out["eval"]["bi"]["test"]["spearman"] is not None  # stage evaluate scored its student, as augsbert's
