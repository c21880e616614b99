"""Stage check (issue 26): params.yaml is validated whole by the real `dvc repro` / `dvc exp run` whenever it
changes, while every other stage is cached, and a rerun of check reruns nothing else.

The slow test runs DVC on a small project: dvc.yaml's own check stage, and one cheap stage that tracks `seed`
as the pipeline's stages track their keys (each `python -m stages.check` imports what config's registries
import: about 10 s here). The others check the stage's command and its declaration in seconds."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from pldistill.params.config import load_params
from pldistill.run.runtime import run_stage
from stages.check import check
from tests.conftest import ROOT

BIN = Path(sys.executable).parent
SEEDED = {"cmd": "python -c \"import yaml; print(yaml.safe_load(open('params.yaml'))['seed'])\" > seeded.txt",
          "params": ["seed"], "outs": ["seeded.txt"]}


def dvc(project: Path, *args: str) -> tuple[int, str]:
    done = subprocess.run([str(BIN / "dvc"), *args], cwd=project, capture_output=True, text=True, check=False,
                          env={"PATH": f"{BIN}:/usr/bin:/bin", "HOME": str(project)})
    return done.returncode, done.stdout + done.stderr


def ran(out: str) -> list[str]:
    return [s for s in ("check", "seeded") if f"Running stage '{s}'" in out]


def test_check_comes_first_depends_on_the_whole_file_and_tracks_no_key():
    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    assert next(iter(stages)) == "check"
    deps = stages["check"]["deps"]
    # the whole params.yaml, and the code it runs (its import closure, which tests/test_dvc_yaml.py checks)
    assert "params.yaml" in deps and "stages/check.py" in deps and "params" not in stages["check"]
    assert all(d == "params.yaml" or d.endswith(".py") for d in deps), deps
    # its only output is its report, the same bytes whenever params are valid: download depends on it (so check runs
    # first, download loading only its own sections), and a rerun of check reruns nothing else
    assert stages["check"]["outs"] == [{"metrics/check.json": {"cache": False}}]
    assert [n for n, s in stages.items() if "metrics/check.json" in s.get("deps", [])] == ["download"]
    assert json.loads((ROOT / "metrics/check.json").read_text()) == {"params": "valid"}


def test_check_names_the_bad_key_and_the_closest_valid_one(tmp_path, monkeypatch):
    monkeypatch.setenv("PLDISTILL_STORE", str(tmp_path / "store"))  # run_stage's lock and checkpoints
    params = tmp_path / "params.yaml"
    params.write_text((ROOT / "params.yaml").read_text() + "sample:\n  topk: 5\n")  # a second `sample` too
    with pytest.raises(SystemExit, match=r"key 'sample' is given twice"):
        run_stage(check, ["report"], ["--params", str(params), "--report", str(tmp_path / "check.json")],
                  load=load_params)
    params.write_text((ROOT / "params.yaml").read_text().replace("  lr: 1.0e-4", "  lrr: 1.0e-4"))
    with pytest.raises(SystemExit, match=r"- student\.lrr: unknown key \(did you mean student\.lr\?\)"):
        run_stage(check, ["report"], ["--params", str(params), "--report", str(tmp_path / "check.json")],
                  load=load_params)
    assert not (tmp_path / "check.json").exists()
    params.write_text((ROOT / "params.yaml").read_text())
    run_stage(check, ["report"], ["--params", str(params), "--report", str(tmp_path / "check.json")],
                  load=load_params)
    assert json.loads((tmp_path / "check.json").read_text()) == {"params": "valid"}


@pytest.mark.slow
def test_a_misspelt_key_stops_repro_and_exp_run_while_every_other_stage_is_cached(tmp_path):
    project = tmp_path
    for part in ("stages", "pldistill"):
        shutil.copytree(ROOT / part, project / part, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "params.yaml", project)
    check = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]["check"]
    (project / "dvc.yaml").write_text(yaml.safe_dump({"stages": {"check": check, "seeded": SEEDED}}))
    subprocess.run("git init -q && git config user.name t && git config user.email t@t", shell=True, cwd=project,
                   check=True)
    assert dvc(project, "init", "-q")[0] == 0
    code, out = dvc(project, "repro")
    assert code == 0 and ran(out) == ["check", "seeded"], out
    subprocess.run("git add -A && git commit -qm run", shell=True, cwd=project, check=True)

    params = project / "params.yaml"
    shipped = params.read_text()
    params.write_text(shipped + "studnet:\n  lr: 1.0e-4\n")
    code, out = dvc(project, "repro")
    assert code != 0 and ran(out) == ["check"], out  # a failed check is never recorded: it runs until fixed
    assert "- studnet: unknown key (did you mean student?); allowed here: seed" in out, out
    assert "ERROR: failed to reproduce 'check'" in out and "Traceback" not in out, out

    params.write_text(shipped)
    code, out = dvc(project, "repro")
    assert code == 0 and ran(out) == ["check"], out  # check reruns alone: seeded's key did not change
    assert dvc(project, "repro")[1].count("Running stage") == 0

    code, out = dvc(project, "exp", "run", "-S", "+student.lrr=0.1")  # DVC itself refuses -S student.lrr=0.1
    assert code != 0 and ran(out) == ["check"], out
    assert "- student.lrr: unknown key (did you mean student.lr?)" in out, out
