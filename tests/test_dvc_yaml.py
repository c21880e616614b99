"""dvc.yaml must list, for every stage, the modules its code runs: otherwise DVC skips a stage whose
behaviour changed and serves stale artifacts."""

import ast
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
STAGES = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
# Plumbing every stage uses that never changes an artifact's values (paths, typed params, atomic
# writes, the CLI); listing them everywhere would re-run the whole pipeline on a docstring edit.
PLUMBING = {"pldistill/config.py", "pldistill/io.py", "pldistill/runtime.py", "pldistill/schemas.py",
            "pldistill/__init__.py", "pldistill/launch.py",
            "pldistill/tracking.py"}  # tracking: DVCLive logs, never an artifact
LAUNCHER = "pldistill.launch"  # `python -m pldistill.launch stages.<name> ...`: the stage module follows it
# Imports that do not reach a stage's results: metrics.py uses bm25's tokenizer only for the Jaccard
# baseline, which only `evaluate` computes (and evaluate lists bm25.py itself).
NOT_REACHING = {("pldistill/metrics.py", "pldistill/bm25.py"),
                # Trainable.fit imports training when called; every stage that trains imports training itself
                ("pldistill/models.py", "pldistill/training.py")}


def _typing_only(tree: ast.AST) -> set[ast.AST]:
    """Nodes under ``if TYPE_CHECKING:``: imports for annotations, never run."""
    skip: set[ast.AST] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for child in node.body:
                skip.update(ast.walk(child))
    return skip


def local_imports(path: Path) -> set[str]:
    """Files of pldistill/ and stages/ that ``path`` imports, directly or through each other."""
    seen: set[str] = set()
    todo = [path]
    while todo:
        current = todo.pop()
        tree = ast.parse(current.read_text())
        skip = _typing_only(tree)
        for node in ast.walk(tree):
            if node in skip:
                continue
            names = []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            for name in names:
                rel = name.replace(".", "/") + ".py"
                if (ROOT / name.replace(".", "/") / "__init__.py").is_file():  # a package: its __init__
                    rel = name.replace(".", "/") + "/__init__.py"
                src = current.relative_to(ROOT).as_posix()
                if (name.split(".")[0] in ("pldistill", "stages") and (ROOT / rel).is_file() and rel not in seen
                        and (src, rel) not in NOT_REACHING):
                    seen.add(rel)
                    if rel not in PLUMBING:  # plumbing's own imports (error classes) are not stage code
                        todo.append(ROOT / rel)
    return seen


@pytest.mark.parametrize("name", list(STAGES))
def test_stage_lists_the_code_it_runs(name):
    stage = STAGES[name]
    words = stage["cmd"].split("python -m ")[1].split()
    module = words[1] if words[0] == LAUNCHER else words[0]
    entry = module.replace(".", "/") + ".py"
    deps = set(stage["deps"])
    needed = ({entry} | local_imports(ROOT / entry)) - PLUMBING - {"stages/__init__.py"}
    missing = {f for f in needed if f not in deps and not any(f.startswith(d.rstrip("/") + "/") for d in deps)}
    assert not missing, f"{name}: add to deps {sorted(missing)}"  # a folder in deps covers the files under it


def test_stages_that_read_processes_start_through_the_launcher():
    # `processes` > 1 needs torchrun; a stage tracking it but started plainly would fail its launch check
    for name, stage in STAGES.items():
        launched = stage["cmd"].startswith(f"python -m {LAUNCHER} ")
        assert launched == ("processes" in stage.get("params", [])), name


def test_eval_json_is_the_one_metric_and_every_plot_file_is_an_output():
    # One metrics file keeps `dvc exp show` to eval.json's numbers and the params (it had ~240 columns
    # when every stage report was a metric); the reports stay uncached outputs in git.
    metrics = [next(iter(m)) if isinstance(m, dict) else m for s in STAGES.values() for m in s.get("metrics", [])]
    assert metrics == ["metrics/eval.json"]
    outs = {next(iter(o)) if isinstance(o, dict) else o for s in STAGES.values() for o in s.get("outs", [])}
    assert {f"metrics/{name}.json" for name in STAGES if name != "evaluate"} <= outs
    plots = yaml.safe_load((ROOT / "dvc.yaml").read_text())["plots"]
    files = {f for p in plots for spec in p.values() for f in spec["y"]}
    # a file of a plot is an output, or inside one (DVCLive's folders: metrics/live/<stage>)
    assert files and all(any(f == o or f.startswith(o + "/") for o in outs) for f in files), files - outs
    assert not any("plots" in s for s in STAGES.values())  # drawn once, by the declarations above
