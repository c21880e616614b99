"""No import cycle among pldistill and stages: configuration is plain data at the bottom of the graph, the
registries and recipes sit above it and the stages on top. Every import counts, those inside functions and
under TYPE_CHECKING too: a lazy import still ties two modules together (scripts/stage_deps.py reads the graph)."""

from pathlib import Path

from scripts import stage_deps

ROOT = Path(__file__).resolve().parents[1]
GRAPH = stage_deps.imports(stage_deps.modules(ROOT))
REGISTRIES = ("pldistill.recipes.registry", "pldistill.data.datasets", "pldistill.pairs.sampling", "pldistill.data.rtt")


def test_no_import_cycle():
    cycles = stage_deps.cycles(GRAPH)
    assert not cycles, "import cycles (python scripts/stage_deps.py --cycles): " + "; ".join(map(" -> ".join, cycles))


def test_config_runs_no_registry_and_nothing_above_it():
    below = stage_deps.closure(GRAPH, "pldistill.params.config")
    assert not below & {*REGISTRIES, "pldistill.recipes.base", "pldistill.models.encoders"}, below
    # the params package alone (the registries' names, plain data; each recipe's section and spec, no recipe's code;
    # defaults and defaults_data: params.yaml's values, generated) and the errors
    params = {m for m in GRAPH if m.startswith("pldistill.params")}
    assert below <= {"pldistill", "pldistill.base", "pldistill.base.errors", *params}, below


def test_only_the_stages_run_the_stage_command_line():
    users = {m for m, deps in GRAPH.items() if "pldistill.run.runtime" in deps}
    # pldistill.warm too, a command line of its own: it tells a stage it serves which process to watch
    assert all(m.startswith("stages.") for m in users - {"pldistill.warm"}), users


def test_the_cycle_finder_finds_one():
    assert stage_deps.cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def _run(code: str) -> str:
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True).stdout


def test_a_data_stage_loads_no_torch_where_no_gpu_shows_itself(tmp_path):
    """Params' batch_size auto asks torch for a GPU only where a GPU's device node exists: on a machine without
    one, stages check, download, augment and sample run without torch (about 3 s of each one's 4 on 2 cores)."""
    node = tmp_path / "nvidia0"
    node.touch()
    probe = ("import sys; import pldistill.params.sections as pb; pb.GPU_NODES = ({nodes!r},); "
             "from pldistill.params.config import parse_params; p = parse_params({{}}); "
             "import stages.check, stages.download, stages.augment, stages.sample; "
             "print(p.label.batch_size, 'torch' in sys.modules)")
    assert _run(probe.format(nodes=str(tmp_path / "none*"))).split() == ["64", "False"]
    batch, loaded = _run(probe.format(nodes=str(tmp_path / "nvidia*"))).split()  # a node: torch answers
    import torch

    assert loaded == "True" and int(batch) == (512 if torch.cuda.is_available() else 64)


# The package's layout (docs/layout.md): each subpackage, bottom up, and the ones it may import. The three commands
# at the top (score, verdict, warm) and the stages may import anything.
MAY_IMPORT = {
    "base": set(),
    "params": {"base"},
    "run": {"base", "params"},
    "models": {"base", "params"},
    "data": {"base", "params"},
    "pairs": {"base", "params"},
    "teach": {"base", "params", "run", "models", "data"},
    "train": {"base", "params", "run", "models"},
    "ship": {"base", "params", "models"},
    "students": {"base", "params", "run", "models", "data", "pairs", "teach", "train"},
    "recipes": {"base", "params", "run", "models", "data", "pairs", "teach", "train", "students"},
}


def _package(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if parts[0] == "pldistill" and len(parts) > 2 else None


def test_each_subpackage_imports_only_those_below_it():
    """docs/layout.md's table, checked: no import runs up the layout (teach never imports train, so stages label and
    evaluate import no training code), and every module of pldistill but the commands sits in a subpackage."""
    up = []
    for module, deps in GRAPH.items():
        pkg = _package(module)
        if pkg is None:
            continue
        assert pkg in MAY_IMPORT, f"{module}: a subpackage docs/layout.md does not name"
        up += [f"{module} -> {d}" for d in deps if _package(d) not in (None, pkg, *MAY_IMPORT[pkg])]
    assert not up, up
    loose = {m for m in GRAPH if m.count(".") == 1 and m.startswith("pldistill.")
             and not (ROOT / "pldistill" / m.split(".")[1]).is_dir()}
    assert loose <= {"pldistill.score", "pldistill.verdict", "pldistill.warm"}, loose


def test_an_old_module_path_names_its_new_one():
    """A module that moved into a subpackage (issue 78) fails to import with its new path named; an unknown name
    fails as Python's own error does."""
    import pytest

    with pytest.raises(ModuleNotFoundError, match=r"pldistill.teachers.*moved to pldistill.teach.teachers"):
        from pldistill import teachers  # noqa: F401
    with pytest.raises(ModuleNotFoundError, match=r"moved to pldistill.params.config"):
        import pldistill.validate
    with pytest.raises(ModuleNotFoundError, match=r"^No module named 'pldistill.nothing'$"):
        import pldistill.nothing
    import pldistill

    for old, pkg in pldistill.MOVED.items():  # each names a module that is there
        where = ROOT / "pldistill" / pkg / old
        assert where.with_suffix(".py").is_file() or where.is_dir(), where
    with pytest.raises(ImportError, match=r"RECIPES moved to pldistill.params.recipes.RECIPES"):
        from pldistill.params.names import RECIPES  # noqa: F401  (a name that moved out of a module)
    with pytest.raises(AttributeError):
        from pldistill.params import names

        names.NOTHING  # noqa: B018
