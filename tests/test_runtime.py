"""How a stage ends when it is stopped (issue 26): Ctrl-C, SIGTERM or its `dvc repro` gone end it with one line
saying what was kept and exit code 128 + the signal; a second stage on the same workspace is refused while the
first holds the lock; a Python without the project's packages is told to activate the environment.

Each case runs a real process: a stand-in stage (``STAGE``) through pldistill.run.runtime.run_stage, which writes a
checkpoint when asked and waits to be stopped."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT

STAGE = f'''
import os, signal, sys, time
sys.path.insert(0, {str(ROOT)!r})
from pldistill.train import resume
from pldistill.run.runtime import run_stage
from pldistill.train.stage_training import TRAINING
from pldistill.params.config import load_params

# Ctrl-C as for a command typed at a terminal: run as a background job (make test &), the tests and this child
# inherit SIGINT ignored from the shell, and Python then raises no KeyboardInterrupt
signal.signal(signal.SIGINT, signal.default_int_handler)

def train(params, out):
    """A stand-in for a training stage."""
    if os.environ.get("WITH_CHECKPOINT"):
        path = resume.folder("ab12cd34") / "checkpoint-40"
        path.mkdir(parents=True)
        (path / "curve.json").write_text("[]")
    out.write_text(str(os.getpid()))
    time.sleep(120)
    return {{}}

run_stage(train, ["out"], kind=TRAINING, load=load_params)
'''


def stage(tmp: Path, name: str = "ready", **env: str) -> tuple[subprocess.Popen, Path]:
    """Start the stand-in stage in ``tmp`` (its own store, params.yaml); return it and its ready file."""
    (tmp / "stage.py").write_text(STAGE)
    (tmp / "params.yaml").write_text("seed: 1\n")
    ready = tmp / name
    proc = subprocess.Popen([sys.executable, "stage.py", "--out", name], cwd=tmp, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PLDISTILL_STORE": str(tmp / "store"), **env})
    return proc, ready


def wait_for(path: Path, proc: subprocess.Popen | None = None, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists() or not path.stat().st_size:  # the stage writes it with write_text: created, then filled
        assert proc is None or proc.poll() is None, proc.stderr.read() if proc else ""
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


def stopped(proc: subprocess.Popen, sig: int) -> tuple[int, str]:
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    return proc.returncode, err


def test_ctrl_c_says_which_checkpoint_was_kept_and_exits_130(tmp_path):
    proc, ready = stage(tmp_path, WITH_CHECKPOINT="1")
    wait_for(ready, proc)
    code, err = stopped(proc, signal.SIGINT)
    assert code == 130, err
    assert err.splitlines() == ["stage train was interrupted (Ctrl-C); kept its training checkpoint "
                                "store/checkpoints/ab12cd34 (step 40); `dvc repro` resumes from there"], err
    assert (tmp_path / "store/checkpoints/ab12cd34/checkpoint-40").is_dir()  # kept, not cleaned up as on success


def test_sigterm_before_any_checkpoint_says_nothing_is_half_written(tmp_path):
    proc, ready = stage(tmp_path)
    wait_for(ready, proc)
    code, err = stopped(proc, signal.SIGTERM)
    assert code == 128 + signal.SIGTERM, err
    assert err.splitlines() == ["stage train was terminated (SIGTERM); no training checkpoint was due yet and no "
                                "output is half-written; `dvc repro` runs it again"], err


def test_a_second_stage_on_the_workspace_is_refused_until_the_first_ends(tmp_path):
    first, ready = stage(tmp_path)
    wait_for(ready, first)
    second, _ = stage(tmp_path, "second")
    _, err = second.communicate(timeout=60)
    assert second.returncode == 1 and "Traceback" not in err, err
    assert err.strip() == (f"error: stage train (pid {first.pid}) is still running in this workspace (it holds "
                           f"{tmp_path / 'store/stage.lock'}): a second would write the same checkpoints and "
                           f"outputs. Wait for it to end, or stop it (kill {first.pid}), then run again")
    first.kill()  # as the OOM killer would: no cleanup runs, and still the kernel drops the lock
    first.wait()
    with (tmp_path / "store/stage.lock").open("a") as f:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)  # raises BlockingIOError if it were still held


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX process parents")
def test_a_stage_whose_parent_is_killed_stops(tmp_path):
    (tmp_path / "stage.py").write_text(STAGE)
    (tmp_path / "params.yaml").write_text("seed: 1\n")
    log = tmp_path / "stage.err"
    # The parent (as dvc is): starts the stage and waits; killed with SIGKILL, it can tell the stage nothing.
    parent = subprocess.Popen(
        [sys.executable, "-c", "import subprocess, sys; "
         f"subprocess.run([sys.executable, 'stage.py', '--out', 'ready'], stderr=open({str(log)!r}, 'w'))"],
        cwd=tmp_path, env={**os.environ, "PLDISTILL_STORE": str(tmp_path / "store")})
    wait_for(tmp_path / "ready", parent)
    child = int((tmp_path / "ready").read_text())
    parent.kill()
    parent.wait()
    deadline = time.monotonic() + 30
    while Path(f"/proc/{child}").exists() and "Z" not in Path(f"/proc/{child}/stat").read_text().split(")")[1][:3]:
        assert time.monotonic() < deadline, "the stage kept running after its parent died"
        time.sleep(0.1)
    said = log.read_text().splitlines()
    assert said == ["stage train stopped because the process that started it (dvc repro) is gone; no training "
                    "checkpoint was due yet and no output is half-written; `dvc repro` runs it again"], said


def test_a_python_without_the_packages_is_told_to_activate_the_environment(tmp_path):
    # -S: no site-packages, as the system's python has none of ours
    done = subprocess.run([sys.executable, "-S", "-m", "stages.check", "--report", str(tmp_path / "c.json")],
                          cwd=ROOT, capture_output=True, text=True, check=False)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.splitlines() == [
        f"error: {sys.executable} lacks the project's packages (numpy, pandas, pyarrow, pydantic, yaml, torch, "
        f"transformers, sentence_transformers); the stages run with the `python` first on PATH: activate the "
        f"project's environment (. .venv/bin/activate) and run again, or run `make run`, which uses it"]
    launched = subprocess.run([sys.executable, "-S", "-m", "pldistill.run.launch", "stages.gold"], cwd=ROOT,
                              capture_output=True, text=True, check=False)
    assert launched.returncode == 1 and launched.stderr == done.stderr, launched.stderr


def test_ctrl_c_while_a_stage_is_still_importing_is_one_line_and_130():
    done = subprocess.run([sys.executable, "-c", "import stages; raise KeyboardInterrupt"], cwd=ROOT,
                          capture_output=True, text=True, check=False)
    assert done.returncode == 130, done.stderr
    assert done.stderr.splitlines() == [
        "stage interrupted (Ctrl-C) while starting: nothing was written; `dvc repro` runs it again"]


QUICK = f'''
import atexit, sys, threading, time
sys.path.insert(0, {str(ROOT)!r})
from pathlib import Path
from pldistill.base.errors import DataError
from pldistill.run.runtime import main
from pldistill.params.config import load_params

def stage(params, out):
    """A stand-in stage that leaves work for the exit: an exit handler, a thread still writing."""
    atexit.register(lambda: Path("atexit").write_text("ran"))
    def late():
        time.sleep(0.5)
        Path("thread").write_text("done")
    threading.Thread(target=late).start()
    out.write_text("whole")
    if out.name == "bad":
        raise DataError("a user error, told in one line")
    return {{"lines": ["x" * 80] * 2000}}  # a long report, into a pipe

main(stage, ["out"], load=load_params)
'''


def test_a_stage_ends_quickly_yet_runs_its_exit_handlers_joins_its_threads_and_prints_its_whole_report(tmp_path):
    (tmp_path / "stage.py").write_text(QUICK)
    (tmp_path / "params.yaml").write_text("seed: 1\n")
    run = {"cwd": tmp_path, "capture_output": True, "text": True,
           "env": {**{k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"},  # stdout buffered, as piped
                   "PLDISTILL_STORE": str(tmp_path / "store"), "PLDISTILL_REPORTS": "1"}}
    done = subprocess.run([sys.executable, "stage.py", "--out", "ok"], check=False, **run)
    assert done.returncode == 0, done.stderr
    report, end = json.JSONDecoder().raw_decode(done.stdout)
    assert len(report["lines"]) == 2000  # flushed whole before the process ended
    assert done.stdout[end:].strip().startswith("stage: done; report in ok (")  # then its one line
    quiet = subprocess.run([sys.executable, "stage.py", "--out", "ok"], check=False,
                           **{**run, "env": {**run["env"], "PLDISTILL_REPORTS": "0"}})
    assert quiet.stdout.splitlines() == [quiet.stdout.strip()] and quiet.stdout.startswith("stage: done")  # one line
    assert (tmp_path / "atexit").read_text() == "ran" and (tmp_path / "thread").read_text() == "done"
    failed = subprocess.run([sys.executable, "stage.py", "--out", "bad"], check=False, **run)
    assert (failed.returncode, failed.stderr.strip()) == (1, "error: a user error, told in one line")
