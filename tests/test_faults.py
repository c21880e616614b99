"""Faults (issue 16): `dvc repro` killed with SIGKILL inside a stage, then run again; two `dvc repro` at once.

Slow tier, on copies of the project with the tiny model. One uninterrupted run is the reference; each
fault case starts from a copy of it cut back to the state a first run is in just before the stage
under test, so only that stage and the ones after it run. The kill lands at a chosen moment: a test-only
``sitecustomize`` pauses the stage inside one of its atomic writes (bytes on disk, not yet renamed into
place), the moment a kill leaves the most behind. The last tests (default tier, seconds) kill a bare
writer of pldistill.base.io and check that the next write of the same path removes what it left.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Self

import pytest
import yaml

from pldistill.base.io import alive, atomic_dir, atomic_path
from tests.conftest import make_project
from tests.test_pipeline import STAGES, sh

BIN = Path(sys.executable).parent

# Loaded by every Python the test's `dvc repro` starts (PYTHONPATH); acts only in stage $FAULT_STAGE.
# There it wraps pldistill.base.io.fsync, which the atomic writers call on the temporary before renaming it:
# once the path contains $FAULT_AT it writes its pid to $FAULT_READY and waits for $FAULT_GO.
PAUSE = '''
import os
if os.environ.get("FAULT_STAGE") and os.environ.get("DVC_STAGE") == os.environ["FAULT_STAGE"]:
    import sys, time
    sys.path.insert(0, os.getcwd())  # the project's own pldistill, as `python -m stages.x` imports it
    import pldistill.base.io as io
    _fsync = io.fsync
    def fsync(path):
        _fsync(path)
        if os.environ["FAULT_AT"] in os.path.abspath(path) and not os.path.exists(os.environ["FAULT_GO"]):
            with open(os.environ["FAULT_READY"] + ".part", "w") as f:
                f.write(str(os.getpid()))
            os.replace(os.environ["FAULT_READY"] + ".part", os.environ["FAULT_READY"])
            while not os.path.exists(os.environ["FAULT_GO"]):
                time.sleep(0.05)
    io.fsync = fsync
'''


def env(project: Path, **extra: str) -> dict[str, str]:
    return {"PATH": f"{BIN}:/usr/bin:/bin", "HOME": str(project), "TOKENIZERS_PARALLELISM": "false", **extra}


@pytest.fixture(scope="module")
def reference(tmp_path_factory, tiny_model_dir) -> Path:
    """The uninterrupted `dvc repro` every fault case must end up equal to."""
    project = make_project(tmp_path_factory.mktemp("reference"), tiny_model_dir)
    sh("dvc repro", project)
    return project


def before(reference: Path, dest: Path, stage: str) -> Path:
    """A copy of ``reference`` as a first `dvc repro` leaves it when ``stage`` is about to start: that
    stage and those after it have no outputs, no dvc.lock entry and no run-cache entry."""
    shutil.copytree(reference, dest, symlinks=True)
    shutil.rmtree(dest / ".dvc" / "tmp")  # the reference's locks
    shutil.rmtree(dest / ".dvc" / "cache" / "runs", ignore_errors=True)  # DVC would restore, not rerun
    later = STAGES[STAGES.index(stage):]  # STAGES is dvc.yaml's order, a chain: these are the downstream
    spec = yaml.safe_load((dest / "dvc.yaml").read_text())["stages"]
    for name in later:
        for out in spec[name].get("outs", []) + spec[name].get("metrics", []):
            path = dest / (out if isinstance(out, str) else next(iter(out)))
            shutil.rmtree(path) if path.is_dir() else path.unlink()
    lock = yaml.safe_load((dest / "dvc.lock").read_text())
    lock["stages"] = {k: v for k, v in lock["stages"].items() if k not in later}
    (dest / "dvc.lock").write_text(yaml.safe_dump(lock, sort_keys=False))
    return dest


class Paused:
    """`dvc repro` in its own process group, paused in ``stage`` inside its atomic write of ``at``."""

    def __init__(self, project: Path, stage: str, at: str):
        faults = project.parent / f"{project.name}-faults"
        faults.mkdir()
        (faults / "sitecustomize.py").write_text(PAUSE)
        self.ready, self.go, self.log = faults / "ready", faults / "go", faults / "repro.log"
        extra = {"PYTHONPATH": str(faults), "FAULT_STAGE": stage, "FAULT_AT": at,
                 "FAULT_READY": str(self.ready), "FAULT_GO": str(self.go)}
        with self.log.open("w") as log:  # a file, not a pipe: nobody reads it while we wait
            self.proc = subprocess.Popen([str(BIN / "dvc"), "repro"], cwd=project, env=env(project, **extra),
                                         stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        if self.proc.poll() is None:  # a failed assertion: leave no paused DVC behind
            self.kill()

    def output(self) -> str:
        return self.log.read_text()

    def wait_paused(self, timeout: float = 400) -> int:
        """The pid of the paused stage process."""
        deadline = time.monotonic() + timeout
        while not self.ready.exists():
            assert self.proc.poll() is None, f"dvc repro ended before the pause:\n{self.output()[-3000:]}"
            assert time.monotonic() < deadline, f"no pause within {timeout} s:\n{self.output()[-3000:]}"
            time.sleep(0.1)
        return int(self.ready.read_text())

    def kill(self) -> None:
        """SIGKILL the whole group: DVC, its shell and the stage, as `kill -9 -<pgid>` would."""
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    def resume(self, timeout: float = 400) -> int:
        self.go.touch()
        return self.proc.wait(timeout)


def leftovers(project: Path) -> list[str]:
    """Temporaries of the atomic writers (``.<name>.<pid>.<random>.tmp``, ``.<name>.old``) and of the
    step store, anywhere under data/, models/, metrics/ and .pldistill-store/."""
    found = []
    for top in ("data", "models", "metrics", ".pldistill-store"):
        for p in (project / top).rglob(".*"):
            if p.name.endswith((".tmp", ".old")):
                found.append(p.relative_to(project).as_posix())
    return sorted(found)


def _scores(report: object) -> object:
    """An eval.json without what is measured by the clock (``speed``, ``speed_low``, ``speed_high``: other in every
    run) or chosen by it (``export.chosen``: the fastest export that passes)."""
    if isinstance(report, dict):
        return {k: _scores(v) for k, v in report.items() if not k.startswith("speed") and k != "chosen"}
    return report


def artifacts(project: Path) -> dict[str, str]:
    """sha256 of every file under data/ and models/ but models/serve (Parquet, model.safetensors, configs, cards) and
    of metrics/eval.json's scores. The pipeline is deterministic on CPU for one seed, so equal runs are equal here."""
    # models/serve: the export the clock chose, and a card with its measured speed (stage evaluate)
    files = [f for top in ("data", "models") for f in (project / top).rglob("*")
             if f.is_file() and not f.relative_to(project).as_posix().startswith("models/serve/")]
    out = {f.relative_to(project).as_posix(): hashlib.sha256(f.read_bytes()).hexdigest() for f in sorted(files)}
    scores = _scores(json.loads((project / "metrics" / "eval.json").read_text()))
    out["metrics/eval.json"] = hashlib.sha256(json.dumps(scores, sort_keys=True).encode()).hexdigest()
    return out


def git_status(project: Path) -> str:
    """What `git status` lists: a temporary left anywhere outside the git-ignored outputs shows up."""
    return sh("git status --porcelain --untracked-files=all", project)


# stage, the write the kill lands in, and the temporary it leaves (outside DVC's outputs, unless noted)
KILLS = [
    ("teacher", "/models/.teacher.", "models/.teacher."),  # the model directory, written whole
    ("label", "/data/silver/.silver.parquet.", "data/silver/.silver.parquet."),  # inside the output:
    # DVC removes data/silver before the rerun
    ("distill", "/models/.cross.", "models/.cross."),  # models/bi already in place, data/pseudo not yet
]


@pytest.mark.slow
@pytest.mark.parametrize(("stage", "at", "left"), KILLS, ids=[k[0] for k in KILLS])
def test_kill_9_inside_a_stage_then_repro_finishes_clean_and_equal(reference, tmp_path, stage, at, left):
    project = before(reference, tmp_path / "project", stage)
    with Paused(project, stage, at) as run:
        run.wait_paused()
        run.kill()
    assert f"Running stage '{stage}'" in run.output()
    # What the kill left: a temporary, and DVC's lock entries naming the dead DVC.
    assert [p for p in leftovers(project) if p.startswith(left)], leftovers(project)
    assert f'"pid": {run.proc.pid}' in (project / ".dvc/tmp/rwlock").read_text()

    out = sh("dvc repro", project)
    (tmp_path / "rerun.log").write_text(out)
    ran = [s for s in STAGES if f"Running stage '{s}'" in out]
    assert ran == list(STAGES[STAGES.index(stage):]), out[-3000:]
    # DVC drops the dead DVC's entries where they are in its way, with a warning; the user does nothing.
    assert f"with (Pid {run.proc.pid}), in RWLock-file" in out and "had been killed. Auto removed it" in out
    # What stays: the dead DVC's read entries on files no stage writes (code, params.yaml). They block
    # nothing, and a writer of such a path would drop them the same way.
    lock = json.loads((project / ".dvc/tmp/rwlock").read_text())
    readers = {i["pid"] for infos in lock.get("read", {}).values() for i in infos}
    assert not lock.get("write") and readers <= {run.proc.pid}, lock
    assert leftovers(project) == []
    a, b = set(git_status(project).splitlines()), set(git_status(reference).splitlines())
    assert a == b, (sorted(a - b), sorted(b - a))
    assert artifacts(project) == artifacts(reference)


@pytest.mark.slow
def test_kill_9_of_the_stage_alone_dvc_says_so_and_repro_finishes_clean(reference, tmp_path):
    """As the OOM killer does it: the stage's process dies (its shell prints "Killed" and exits 137), DVC
    lives on, reports the failure, exits 255 and releases its locks."""
    project = before(reference, tmp_path / "project", "evaluate")
    with Paused(project, "evaluate", "/metrics/.eval.json.") as run:
        os.kill(run.wait_paused(), signal.SIGKILL)
        assert run.proc.wait(timeout=120) == 255
    said = run.output()
    (tmp_path / "killed.log").write_text(said)
    assert "ERROR: failed to reproduce 'evaluate': failed to run: python -m stages.evaluate" in said, said[-3000:]
    assert [p for p in leftovers(project) if p.startswith("metrics/.eval.json.")], leftovers(project)

    out = sh("dvc repro", project)
    (tmp_path / "rerun.log").write_text(out)
    assert [s for s in STAGES if f"Running stage '{s}'" in out] == ["evaluate"], out[-3000:]
    assert "RWLock" not in out  # DVC released its locks itself
    assert leftovers(project) == []
    assert git_status(project) == git_status(reference)
    assert artifacts(project) == artifacts(reference)


@pytest.mark.slow
def test_a_second_repro_is_refused_while_the_first_runs_and_the_first_finishes(reference, tmp_path):
    project = before(reference, tmp_path / "project", "evaluate")
    with Paused(project, "evaluate", "/metrics/.eval.json.") as first:
        first.wait_paused()  # inside evaluate's command: DVC holds its rwlock on the stage's deps and outs
        second = subprocess.run([str(BIN / "dvc"), "repro"], cwd=project, env=env(project), capture_output=True,
                                text=True, check=False)
        said = second.stdout + second.stderr
        (tmp_path / "second.log").write_text(said)
        # Refused at the first stage whose outputs the first run's stage reads (augment writes data/clean).
        # DVC names a path of that stage (here metrics/augment.json, not the overlapping data/clean) and
        # lists the blocker once per overlapping path.
        assert second.returncode == 255, said
        assert "ERROR: failed to reproduce 'augment': " in said and "is busy, it is being blocked by:" in said, said
        assert f"(PID {first.proc.pid}): {BIN / 'dvc'} repro" in said and "Running stage" not in said, said

        assert first.resume() == 0, first.output()[-3000:]
    assert "Running stage 'evaluate'" in first.output()
    assert leftovers(project) == []
    assert artifacts(project) == artifacts(reference)
    assert "Running stage" not in sh("dvc repro", project)  # what the first ran is recorded in dvc.lock


@pytest.mark.slow
def test_a_second_repro_is_refused_while_the_first_holds_the_repo_lock(reference, tmp_path):
    """Between stage commands DVC holds the repository lock (.dvc/tmp/lock, zc.lockfile: an fcntl lock the
    kernel drops when its process dies, so a killed DVC never leaves it held). Held here with DVC's own
    lock library, as a DVC busy hashing or committing holds it."""
    import zc.lockfile

    project = before(reference, tmp_path / "project", "evaluate")
    (project / ".dvc" / "tmp").mkdir()
    lock = zc.lockfile.LockFile(str(project / ".dvc" / "tmp" / "lock"))
    try:
        second = subprocess.run([str(BIN / "dvc"), "repro"], cwd=project, env=env(project),
                                capture_output=True, text=True, check=False)
    finally:
        lock.close()
    said = second.stdout + second.stderr
    (tmp_path / "second.log").write_text(said)
    assert second.returncode == 255 and said.startswith("ERROR: Unable to acquire lock. Most likely another DVC"), said
    assert "Running stage 'evaluate'" in sh("dvc repro", project)


@pytest.mark.slow
def test_a_stale_lock_entry_whose_pid_is_alive_again_says_what_to_remove(reference, tmp_path):
    """A killed DVC's entries are dropped on the next run because its pid is gone; if the pid was reused
    by another process meanwhile, DVC cannot tell and refuses, naming the file to remove."""
    project = before(reference, tmp_path / "project", "evaluate")
    (project / ".dvc" / "tmp").mkdir()
    stranger = subprocess.Popen(["sleep", "600"])  # a live process holding the dead DVC's pid
    try:
        entry = {"pid": stranger.pid, "cmd": "dvc repro"}
        (project / ".dvc/tmp/rwlock").write_text(json.dumps({"write": {str(project / "metrics/eval.json"): entry}}))
        refused = subprocess.run([str(BIN / "dvc"), "repro"], cwd=project, env=env(project),
                                 capture_output=True, text=True, check=False)
    finally:
        stranger.kill()
        stranger.wait()
    said = refused.stdout + refused.stderr
    (tmp_path / "refused.log").write_text(said)
    assert refused.returncode == 255 and "ERROR: failed to reproduce 'evaluate': " in said, said
    assert f"(PID {stranger.pid}): dvc repro" in said, said
    assert f"you can manually remove '{project}/.dvc/tmp/rwlock' and try again" in said, said
    assert "Running stage 'evaluate'" in sh("dvc repro", project)  # the pid is gone now: auto-removed


def _die_inside(writer: str, target: Path) -> None:
    """A Python process killed with SIGKILL inside ``writer``'s block, after writing its bytes."""
    code = (f"import os, signal; from pldistill.base.io import {writer}\n"
            f"with {writer}({str(target)!r}) as tmp:\n"
            + ("    tmp.write_text('half')\n" if writer == "atomic_path" else "    (tmp / 'f').write_text('half')\n")
            + "    os.kill(os.getpid(), signal.SIGKILL)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert proc.returncode == -signal.SIGKILL, proc.stderr


@pytest.mark.parametrize("writer", [atomic_path, atomic_dir], ids=["atomic_path", "atomic_dir"])
def test_the_next_write_removes_what_a_killed_writer_left(tmp_path, writer):
    target = tmp_path / "out"
    _die_inside(writer.__name__, target)
    assert not target.exists() and len(list(tmp_path.glob(".out.*.tmp"))) == 1  # a temporary, never `out`
    live = tmp_path / f".out.{os.getpid()}.live.tmp"  # another writer, still running: left alone
    live.write_text("")
    with writer(target) as tmp:
        (tmp if writer is atomic_path else tmp / "f").write_text("whole")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["out", live.name])


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads process states from /proc")
def test_a_killed_process_not_yet_reaped_counts_as_dead():
    """A killed stage's process often stays a zombie (its parent, DVC, died too, and a container's init
    may never reap it): its temporaries must still be swept."""
    proc = subprocess.Popen(["sleep", "60"])
    proc.kill()
    stat = Path(f"/proc/{proc.pid}/stat")
    while stat.exists() and stat.read_text().rsplit(")", 1)[1].split()[0] != "Z":
        time.sleep(0.01)
    assert not alive(proc.pid) and alive(os.getpid())
    proc.wait()
