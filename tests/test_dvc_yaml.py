"""dvc.yaml must list, for every stage, the modules its code runs and no other: otherwise DVC skips a stage
whose behaviour changed and serves stale artifacts, or reruns one that nothing touched. The lists are generated
(scripts/stage_deps.py --write); these tests fail when the code and dvc.yaml drift apart."""

import functools
import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from scripts import stage_deps

ROOT = Path(__file__).resolve().parents[1]
STAGES = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
LAUNCHER = stage_deps.LAUNCHER  # `python -m pldistill.run.launch stages.<name> ...`: the stage module follows it


@functools.cache
def compared() -> dict[str, tuple[list[str], list[str]]]:
    return stage_deps.compare(ROOT)  # (every module parsed: once for all the stages)


@pytest.mark.parametrize("name", list(STAGES))
def test_stage_depends_on_exactly_the_code_it_runs(name):
    missing, extra = compared()[name]
    assert not missing, f"{name}: add to deps {missing} (python scripts/stage_deps.py --write)"
    assert not extra, f"{name}: drop from deps {extra}, never run (python scripts/stage_deps.py --write)"


def test_every_stage_runs_config_and_its_packages():
    for name, files in stage_deps.needed(ROOT).items():
        # download loads only the sections it reads (params_data.DataSections); check has validated the file whole
        config = "pldistill/params/data.py" if name == "download" else "pldistill/params/config.py"
        shared = "pldistill/params/data.py" if name == "download" else "pldistill/params/sections.py"
        assert {config, shared, "pldistill/__init__.py", "stages/__init__.py"} <= set(files), name


def test_download_runs_after_check_and_not_the_training_sections():
    """An edit to the training sections' types (params_train.py), to the sampling, inference and evaluation sections'
    (params_base.py) or to the whole config leaves download cached; stage check, which validates params.yaml whole,
    runs before it (download depends on its report)."""
    deps = STAGES["download"]["deps"]
    assert "metrics/check.json" in deps and STAGES["check"]["outs"][0] == {"metrics/check.json": {"cache": False}}
    assert not {"pldistill/params/train.py", "pldistill/params/sections.py", "pldistill/params/config.py"} & set(deps)


@pytest.mark.parametrize("stage", ["check", "download", "augment", "sample"])
def test_an_edit_to_the_training_code_leaves_the_data_stages_cached(stage):
    """DVC reruns a stage when a file in its deps changes: the data stages must not list the training code, so
    an edit to the engine or its extensions leaves them cached (`dvc status` shows only the training stages). Stage cut
    trains (static.finetune: a static start's transformer learns the gold pairs first), so it lists it."""
    training = {"pldistill/train/training.py", "pldistill/train/trainer_parts.py", "pldistill/train/resume.py",
                "pldistill/teach/teachers.py", "pldistill/students/embedding.py", "pldistill/models/dse.py",
                "pldistill/train/wrappers.py",
                *(f"pldistill/train/losses/{f.name}" for f in (ROOT / "pldistill/train/losses").glob("*.py"))}
    assert not training & set(STAGES[stage]["deps"]), sorted(training & set(STAGES[stage]["deps"]))


# the training side: the engine and its extensions, the losses, and the recipes' training (their params and specs
# are plain data)
TRAINING = {*(f.relative_to(ROOT).as_posix() for f in (ROOT / "pldistill/train").rglob("*.py")),
            "pldistill/students/token_weights.py",
            *(f"pldistill/recipes/{f.name}" for f in (ROOT / "pldistill/recipes").glob("*.py")
              if f.name != "__init__.py")}


@pytest.mark.parametrize("stage", ["label", "export", "evaluate"])
def test_the_scoring_stages_import_no_training_code(stage):
    """Stages that only load models and score (label, export, evaluate) reach their recipe through its spec
    (pldistill.teach.scoring, pldistill.teach.labelling.label), never through a recipe's code: an edit to training
    leaves them cached. Evaluate, which loads every kind of student and teacher, stays within 50 modules (76 before)."""
    deps = {d for d in STAGES[stage]["deps"] if d.endswith(".py")}
    assert not TRAINING & deps, sorted(TRAINING & deps)
    assert len(deps) <= 50, len(deps)


def _runs_code(path: str) -> bool:
    """Whether a module runs anything: every module but a package's __init__.py that is a docstring alone."""
    import ast

    body = ast.parse((ROOT / path).read_text()).body
    return not path.endswith("__init__.py") or any(not isinstance(node, ast.Expr) for node in body)


def test_the_data_stages_depend_on_few_modules():
    """check and download read params and tables: configuration, the reader and the stage plumbing, no model
    (before issue 35: 29 and 30 files, 5,556 and 5,670 lines). check validates every recipe's section and rules, so
    it depends on the recipes' params and specs (pldistill/params/recipes.py): plain data, no recipe code."""
    code = {name: [d for d in STAGES[name]["deps"] if d.endswith(".py")] for name in ("check", "download")}
    # not counted: the defaults generated from params.yaml (data), and a package's __init__.py holding a docstring
    # alone (it runs nothing)
    modules = {name: [f for f in files if not f.startswith("pldistill/params/defaults") and _runs_code(f)]
               for name, files in code.items()}
    lines = {name: sum(len((ROOT / f).read_text().splitlines()) for f in files) for name, files in modules.items()}
    # download: 12 modules (reading, rows, cleaning, public_sets, datasets, schemas, io, params_data, names, errors,
    # runtime, handover, environment), two __init__.py and the stage. handover (~110 lines, the standard library
    # alone) hands a stage to `make run`'s warm interpreter, runtime watches the process it came from (~35 lines
    # more), environment checks the Python first (~60 lines, from stages/__init__.py, so the library never imports
    # the stages); console (~190 lines: the one line a stage prints, details on request, bars on a terminal)
    assert len(modules["check"]) <= 22 and len(modules["download"]) <= 17, modules
    # code only: a default added to params.yaml lengthens the generated defaults, not what these stages run
    assert lines["check"] < 2420 and lines["download"] < 2670, lines  # (< 1950, < 2270 before the warm interpreter;
    # < 2115, < 2360 before the export section and a library's open thread pool; < 2170 before static.model and
    # static.dims took lists of candidates; < 2190, < 2370 before the one line a stage, issue 77; download < 2620
    # before an old params file's retired key got its hint, issue 76; < 2625 before an old module path got its hint,
    # pldistill/__init__.py, issue 78)
    assert not any(f.endswith(("encoders.py", "accel.py", "semantic.py")) for f in code["download"]), code


def test_lazy_relative_and_typing_imports_count(tmp_path):
    for rel, code in {
        "pldistill/__init__.py": "",
        "pldistill/a.py": "def f():\n    from pldistill import b  # lazy\n",
        "pldistill/b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .sub import c\n",
        "pldistill/sub/__init__.py": "",
        "pldistill/sub/c.py": "import pldistill.sub\n",
        "stages/__init__.py": "",
    }.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(code)
    graph = stage_deps.imports(stage_deps.modules(tmp_path))
    assert graph["pldistill.a"] == {"pldistill", "pldistill.b"}
    assert graph["pldistill.b"] == {"pldistill.sub", "pldistill.sub.c"}
    assert stage_deps.closure(graph, "pldistill.a") == {"pldistill", "pldistill.a", "pldistill.b", "pldistill.sub",
                                                        "pldistill.sub.c"}


def test_rewrite_replaces_code_deps_and_keeps_the_rest():
    text = (ROOT / "dvc.yaml").read_text()
    assert stage_deps.rewrite(text, stage_deps.needed(ROOT)) == text  # dvc.yaml is what --write writes
    changed = stage_deps.rewrite(text, {"download": ["stages/download.py"]})
    deps = yaml.safe_load(changed)["stages"]["download"]["deps"]
    assert [d for d in deps if stage_deps.is_code(d)] == ["stages/download.py"]
    assert [d for d in deps if not stage_deps.is_code(d)] == [
        d for d in STAGES["download"]["deps"] if not stage_deps.is_code(d)]
    assert changed.count("\n#") == text.count("\n#")  # comments stay


def test_each_stage_tracks_the_recipe_keys_their_specs_say_it_reads(monkeypatch):
    """A recipe's own section reaches dvc.yaml from its spec's ``reads`` (scripts/stage_deps.py --write), so a new
    recipe needs no edit here; tests/test_params_tracking.py checks the specs against what the stages read."""
    assert not {name: pair for name, pair in stage_deps.compare_params(ROOT).items() if any(pair)}, (
        "python scripts/stage_deps.py --write")
    text = (ROOT / "dvc.yaml").read_text()
    wanted = stage_deps.recipe_params(comments=True)
    assert stage_deps.rewrite(text, {n: wanted.get(n, []) for n in STAGES}, "params", stage_deps.is_recipe_key) == text
    gone = stage_deps.rewrite(text, {"distill": []}, "params", stage_deps.is_recipe_key)
    kept = yaml.safe_load(gone)["stages"]["distill"]["params"]
    assert kept == [k for k in STAGES["distill"]["params"] if not stage_deps.is_recipe_key(k)]
    typo = {"distil": ["rounds"]}  # a spec's reads naming a stage dvc.yaml lacks
    monkeypatch.setattr(stage_deps, "recipe_params", lambda comments=False: typo)
    assert stage_deps.compare_params(ROOT)["distil (no such stage in dvc.yaml)"] == (["rounds"], [])


def _git_files() -> set[str]:
    done = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=False)
    if done.returncode != 0:
        pytest.skip("not a git checkout")
    return set(done.stdout.decode().split("\0"))


def test_dvc_lock_matches_the_committed_files():
    # dvc.lock records what the last run read and wrote; a file git tracks must still hold the bytes it
    # recorded (a code change reruns the stage: run `dvc repro` (make run) and commit dvc.lock with it)
    lock = yaml.safe_load((ROOT / "dvc.lock").read_text())["stages"]
    assert set(lock) == set(STAGES), "dvc.lock's stages are not dvc.yaml's: run `dvc repro`"
    tracked, stale = _git_files(), []
    for name, stage in lock.items():
        listed = [d if isinstance(d, str) else next(iter(d)) for d in STAGES[name].get("deps", [])]
        assert sorted(d["path"] for d in stage.get("deps", [])) == sorted(listed), (
            f"dvc.lock's {name} deps are not dvc.yaml's: run `dvc repro`")
        for entry in [*stage.get("deps", []), *stage.get("outs", [])]:  # a folder (md5 ….dir) is DVC's to check
            path = entry["path"]
            if path in tracked and hashlib.md5((ROOT / path).read_bytes()).hexdigest() != entry["md5"]:
                stale.append(f"{name}: {path}")
    assert not stale, f"dvc.lock records other bytes for {stale}: run `dvc repro` (make run) and commit dvc.lock"


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


def test_dvc_reruns_a_stage_when_a_section_gains_a_key_it_inherited(tmp_path):
    """`dvc exp run -S ++student.bf16=true` adds a key params.yaml lacked (student inherits it from train). DVC
    tracks no key params.yaml lacks, so a stage sees that override only by tracking the section whole, as every
    stage that trains does (tests/test_params_tracking.py checks it). This is DVC's side of it, on a scratch project."""
    dvc = [str(Path(sys.executable).parent / "dvc"), "--cd", str(tmp_path)]
    (tmp_path / "params.yaml").write_text("train:\n  bf16: false\nstudent:\n  lr: 1.0e-4\n")
    (tmp_path / "dvc.yaml").write_text(
        "stages:\n  gold:\n    cmd: echo trained > out.txt\n    params: [train, student]\n    outs: [out.txt]\n")
    for cmd in (["init", "--no-scm", "-q"], ["repro", "-q"]):
        subprocess.run(dvc + cmd, check=True, capture_output=True)

    def status() -> dict:
        done = subprocess.run([*dvc, "status", "--json"], check=True, capture_output=True, text=True)
        return json.loads(done.stdout)

    assert status() == {}
    (tmp_path / "params.yaml").write_text("train:\n  bf16: false\nstudent:\n  lr: 1.0e-4\n  bf16: true\n")
    assert status() == {"gold": [{"changed deps": {"params.yaml": {"student": "modified"}}}]}


def test_dvc_status_after_a_training_edit_reruns_no_data_stage(tmp_path):
    """The test issues 35 and 66 ask for, through DVC itself: in a copy of the project (its tracked files), append a
    line to the training engine, the Trainer's extensions, the entry points and losses, and `dvc status` finds no
    code of check, download, augment or sample changed, while it does find stage gold's. (The copy has no DVC cache
    and no outputs: those show as "deleted" / "not in cache" and are not what this checks.)"""
    import shutil

    for f in _git_files():
        if f and (ROOT / f).is_file():
            (tmp_path / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / f, tmp_path / f)
    dvc = [str(Path(sys.executable).parent / "dvc"), "--cd", str(tmp_path)]
    (tmp_path / ".dvc/config.local").write_text("[core]\n    no_scm = true\n")  # as `dvc config --local` (2 s)
    stages = ["check", "download", "augment", "sample", "gold"]

    def changed_code() -> dict[str, set[str]]:
        done = subprocess.run([*dvc, "status", "--json", *stages], check=True, capture_output=True, text=True)
        status = json.loads(done.stdout)
        return {stage: {path for entry in status.get(stage, []) if "changed deps" in entry
                        for path in entry["changed deps"] if path.endswith(".py")} for stage in stages}

    before = changed_code()  # (code edited since the last `dvc repro`, if any: not this test's edit)
    edited = {"pldistill/train/training.py", "pldistill/train/trainer_parts.py", "pldistill/train/resume.py",
              "pldistill/train/losses/base.py", "pldistill/train/losses/cosine_mse.py", "pldistill/train/wrappers.py"}
    for f in edited:
        with (tmp_path / f).open("a") as out:
            out.write("# an edit\n")
    new = {stage: paths - before[stage] for stage, paths in changed_code().items()}
    assert new.pop("gold") == edited  # the edit is seen where the code runs
    assert not any(new.values()), new
