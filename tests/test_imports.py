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
    below = stage_deps.closure(GRAPH, "pldistill.params.config")
    assert not below & {*REGISTRIES, "pldistill.recipes.base", "pldistill.models"}, below
    # the params package alone (the registries' names, plain data; each recipe's section and spec, no recipe's code;
    # defaults and defaults_data: params.yaml's values, generated) and the errors
    assert below <= {"pldistill", "pldistill.params", "pldistill.params.config", "pldistill.params.sections",
                     "pldistill.params.data", "pldistill.params.train", "pldistill.params.recipes",
                     "pldistill.params.defaults", "pldistill.params.defaults_data", "pldistill.params.names",
                     "pldistill.errors"}, below


def test_only_the_stages_run_the_stage_command_line():
    users = {m for m, deps in GRAPH.items() if "pldistill.runtime" in deps}
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
