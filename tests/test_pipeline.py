"""Slow tier: the real `dvc repro` / `dvc exp run` on a copy of the project, with the tiny model."""

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, make_project

pytestmark = pytest.mark.slow


def sh(cmd: str, cwd: Path) -> str:
    env_bin = str(Path(sys.executable).parent)
    proc = subprocess.run(cmd, shell=True, cwd=cwd, capture_output=True, text=True, check=False,
                          env={"PATH": f"{env_bin}:/usr/bin:/bin", "HOME": str(cwd), "TOKENIZERS_PARALLELISM": "false"})
    assert proc.returncode == 0, f"{cmd} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc.stdout + proc.stderr


STAGES = ("download", "augment", "gold", "sample", "teacher", "label", "distill", "evaluate")


@pytest.fixture(scope="session")
def reproduced(tmp_path_factory, tiny_model_dir) -> tuple[Path, str]:
    """A project after its first `dvc repro`, committed, and what that repro printed. Experiments write
    into a project: each test runs them on its own copy (``project``)."""
    project = make_project(tmp_path_factory.mktemp("reproduced"), tiny_model_dir)
    out = sh("dvc repro", project)
    sh("git add -A && git -c user.name=t -c user.email=t@t commit -qm run", project)
    return project, out


@pytest.fixture
def project(reproduced, tmp_path) -> Path:
    return Path(shutil.copytree(reproduced[0], tmp_path / "project", symlinks=True))


def test_repro_is_cached_and_exp_reruns_from_sample(reproduced, project):
    for stage in STAGES:
        assert f"Running stage '{stage}'" in reproduced[1]
    assert (project / "metrics/eval.json").is_file()
    assert "Running stage" not in sh("dvc repro", project)  # a copy too: DVC compares contents, not paths

    out = sh("dvc exp run -S sample.top_k=5", project)
    ran = {s for s in STAGES if f"Running stage '{s}'" in out}
    assert ran == {"sample", "label", "distill", "evaluate"}, out[-2000:]
    assert "metrics/eval.json" in sh("dvc metrics diff", project)
    assert "metrics/sample.json" in sh("dvc metrics diff --targets metrics/sample.json", project)  # a report
    # The table users read: eval.json's metrics and the params, not every stage report's keys.
    shown = sh("dvc exp show --no-pager --md", project)
    assert "top_k" in shown and "bi.test.spearman" in shown and "train_seconds" not in shown
    drop = re.search(r"^EXP_DROP \?= (.*)$", (ROOT / "Makefile").read_text(), re.M).group(1)
    header = sh(f"dvc exp show --no-pager --md --only-changed --drop '{drop}'", project).splitlines()[0]  # make exps
    assert "sample.top_k" in header and "pearson" not in header and "data/" not in header, header
    assert "gain.gold.test.low" in header and "gain.gold.dev" not in header and ".high" not in header, header
    # experiment, created, the changed metrics (bi dev and test, four speeds, the test lead over gold-only and over
    # the teacher with the low end of each interval), top_k, params.yaml
    assert header.count("|") - 1 <= 14, header


def test_kde_experiment_reuses_teacher_and_plots_the_densities(project):
    out = sh("dvc exp run -S sample.strategy=kde -S sample.kde.pool=300", project)
    ran = {s for s in STAGES if f"Running stage '{s}'" in out}
    assert ran >= {"sample", "label", "distill"} and not ran & {"download", "augment", "gold", "teacher"}, out[-2000:]
    assert '"kde"' in sh("dvc metrics show --json metrics/label.json", project)
    sh("dvc plots show -o plots-html", project)
    html = (project / "plots-html" / "index.html").read_text()
    assert "gold vs silver score density" in html and '"field": "silver"' in html


def test_trans_encoder_experiment_adds_cycles_without_redoing_them(project):
    small = "-S recipe=trans-encoder -S trans.bi.epochs=1 -S trans.bi.batch_size=16 -S trans.cross.batch_size=16"
    out = sh(f"dvc exp run {small} -S cycles=1", project)
    ran = {s for s in STAGES if f"Running stage '{s}'" in out}
    assert ran == {"teacher", "label", "distill", "evaluate"}, out[-2000:]  # teacher/label step aside
    first = json.loads((project / "metrics/distill.json").read_text())
    assert first["steps"]["reused"] == [] and len(first["steps"]["computed"]) == 5

    # exp run resets every output to dvc.lock first; the finished cycle survives in the store.
    out = sh(f"dvc exp run {small} -S cycles=2", project)
    ran = {s for s in STAGES if f"Running stage '{s}'" in out}
    assert ran == {"distill", "evaluate"}, out[-2000:]
    second = json.loads((project / "metrics/distill.json").read_text())
    assert second["steps"]["reused"] == first["steps"]["computed"]
    assert all(s.startswith("c02-") for s in second["steps"]["computed"])
    assert (project / ".pldistill-store").is_dir()  # $DVC_ROOT/.pldistill-store, git-ignored
    assert ".pldistill-store" not in sh("git status --porcelain", project)
    sh("dvc plots show -o plots-html", project)
    html = (project / "plots-html" / "index.html").read_text()
    assert "Spearman per cycle" in html and '"field": "bi_test"' in html
