"""No import cycle among pldistill and stages: configuration is plain data at the bottom of the graph, the
registries and recipes sit above it and the stages on top. Every import counts, those inside functions and
under TYPE_CHECKING too: a lazy import still ties two modules together (scripts/stage_deps.py reads the graph)."""

from pathlib import Path

from scripts import stage_deps

ROOT = Path(__file__).resolve().parents[1]
GRAPH = stage_deps.imports(stage_deps.modules(ROOT))
REGISTRIES = ("pldistill.recipes.registry", "pldistill.datasets", "pldistill.sampling", "pldistill.rtt")


def test_no_import_cycle():
    cycles = stage_deps.cycles(GRAPH)
    assert not cycles, "import cycles (python scripts/stage_deps.py --cycles): " + "; ".join(map(" -> ".join, cycles))


def test_config_runs_no_registry_and_nothing_above_it():
    below = stage_deps.closure(GRAPH, "pldistill.config")
    assert not below & {*REGISTRIES, "pldistill.recipes.base", "pldistill.models", "pldistill.validate"}, below
    # names.py: the bundled models' names, plain data at the bottom (pldistill.bundled, which loads them, is not run);
    # of the recipes package, each recipe's params module and spec (its section, what it allows), no recipe's code
    specs = {"pldistill.recipes", "pldistill.recipes.spec", "pldistill.recipes.specs"} | {
        f"pldistill.recipes.{p.stem}" for p in (ROOT / "pldistill" / "recipes").glob("*_params.py")}
    # defaults and defaults_data: params.yaml's values, generated, plain data
    assert below <= {"pldistill", "pldistill.config", "pldistill.params_base", "pldistill.params_data",
                     "pldistill.params_train", "pldistill.defaults", "pldistill.defaults_data",
                     "pldistill.names", "pldistill.errors", *specs}, below


def test_only_the_stages_run_the_stage_command_line():
    users = {m for m, deps in GRAPH.items() if "pldistill.runtime" in deps}
    assert all(m.startswith("stages.") for m in users), users


def test_the_cycle_finder_finds_one():
    assert stage_deps.cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
