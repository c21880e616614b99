"""pldistill.warm: the stages of one run served by a warm interpreter, as their own processes would run them.

The end-to-end tests run a project of their own (a ``stages`` package whose module reports what it sees) under
``python -m pldistill.warm``, with ``wave`` as the only preloaded module: a stage served by the server finds it
imported, one that runs in its own process does not."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pldistill.run import runtime
from pldistill.run.handover import LIGHT
from pldistill.warm import decline_reason, differences
from tests.conftest import ROOT

PROBE = '''
import json, os, sys, time
if sys.argv[1:2] == ["orphan"]:
    from pldistill.run.runtime import stop_cleanly
    try:
        with stop_cleanly() as orphaned:
            print("sleeping", flush=True)
            time.sleep(60)
    except KeyboardInterrupt:
        print("stopped, orphaned:", orphaned.is_set(), flush=True)
        sys.exit(143)
if sys.argv[1:2] == ["sleep"]:
    print("sleeping", flush=True)
    time.sleep(60)
line = sys.stdin.readline().strip()
print(json.dumps({"preloaded": "wave" in sys.modules, "argv": sys.argv[1:], "cwd": os.getcwd(), "stdin": line,
                  "foo": os.environ.get("FOO"), "socket": "PLDISTILL_WARM" in os.environ,
                  "orig": sys.orig_argv[1:3]}))
sys.exit(int(sys.argv[1]))
'''


@pytest.fixture
def project(tmp_path: Path) -> Path:
    pkg = tmp_path / "stages"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("from pldistill.run.handover import hand_over\nhand_over()\n")
    (pkg / "probe.py").write_text(PROBE)
    return tmp_path


def warm(project: Path, *command: str, preload: str = "wave", **kwargs) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("PLDISTILL_WARM", None)
    return subprocess.Popen([sys.executable, "-m", "pldistill.warm", "--preload", preload, *command], cwd=project,
                            env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, **kwargs)


def test_a_stage_is_served_with_its_arguments_streams_directory_and_exit_code(project):
    proc = warm(project, sys.executable, "-m", "stages.probe", "7", "--x")
    out, err = proc.communicate("hello\n", timeout=60)
    seen = json.loads(out)
    assert proc.returncode == 7, err
    assert seen == {"preloaded": True, "argv": ["7", "--x"], "cwd": str(project), "stdin": "hello", "foo": None,
                    "socket": False, "orig": ["-m", "stages.probe"]}  # the socket's variable is not passed on
    assert "warm interpreter" not in err


def test_a_light_stage_runs_on_its_own_until_the_server_has_imported(project):
    """stages.check (handover.LIGHT) while the server still imports (a module that takes 6 s): in its own
    process, at once; once the server says it is ready, served like any stage."""
    (project / "slow_import.py").write_text("import time\ntime.sleep(6)\n")
    (project / "stages" / "check.py").write_text(PROBE)
    run_check = f"{sys.executable} -m stages.check 0"
    wait = 'while [ ! -e "$PLDISTILL_WARM.ready" ]; do sleep 0.1; done'
    start = time.monotonic()
    proc = warm(project, "sh", "-c", f"{run_check} && {wait} && {run_check}", preload="wave,slow_import")
    proc.stdin.close()  # each probe reads a line: an empty one
    before = json.loads(proc.stdout.readline())
    assert time.monotonic() - start < 5  # not after the server's 6 s of imports
    after = json.loads(proc.stdout.readline())
    proc.wait(timeout=90)
    err = proc.stderr.read()
    assert proc.returncode == 0, err
    assert (before["preloaded"], after["preloaded"]) == (False, True)
    assert "warm interpreter" not in err


def test_the_light_stages_import_no_torch():
    """What handover.LIGHT rests on: those stages run without the server's imports, so they need none of them."""
    code = f"import sys; import {', '.join(LIGHT)}; print(sorted({{'torch', 'transformers'}} & set(sys.modules)))"
    env = {k: v for k, v in os.environ.items() if k != "PLDISTILL_WARM"}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_a_stage_whose_environment_differs_starts_its_own_and_says_why(project):
    proc = warm(project, "env", "FOO=1", sys.executable, "-m", "stages.probe", "0")
    out, err = proc.communicate("x\n", timeout=60)
    assert proc.returncode == 0, err
    assert json.loads(out)["preloaded"] is False and json.loads(out)["foo"] == "1"
    assert "its environment differs from the server's in FOO; the stage starts its own" in err


def _children(pid: int) -> list[int]:
    """``pid``'s child processes but the server (its command line has --serve)."""
    path = Path(f"/proc/{pid}/task/{pid}/children")
    kids = [int(p) for p in path.read_text().split()] if path.exists() else []
    return [k for k in kids if b"--serve" not in Path(f"/proc/{k}/cmdline").read_bytes()]


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="finds the waiting process through /proc")
def test_sigterm_to_the_stages_own_process_reaches_the_served_stage(project):
    proc = warm(project, sys.executable, "-m", "stages.probe", "sleep")
    assert proc.stdout.readline().strip() == "sleeping"
    (waiting,) = _children(proc.pid)  # the process `python -m pldistill.warm` started: the stage's own
    os.kill(waiting, signal.SIGTERM)
    start = time.monotonic()
    assert proc.wait(timeout=30) == 128 + signal.SIGTERM
    assert time.monotonic() - start < 20  # not the probe's 60 s sleep


def test_ctrl_c_stops_the_served_stage_and_the_run_with_130(project):
    """A terminal's Ctrl-C is SIGINT to its foreground process group: the wrapper, the command and the stage's
    own process; not the server's copy (a session of its own), which gets it from the stage's own process."""
    proc = warm(project, sys.executable, "-m", "stages.probe", "sleep", start_new_session=True)
    assert proc.stdout.readline().strip() == "sleeping"
    os.killpg(proc.pid, signal.SIGINT)
    assert proc.wait(timeout=30) == 128 + signal.SIGINT
    assert "KeyboardInterrupt" in proc.stderr.read()  # raised in the stage, as in a process of its own


def test_sigterm_to_the_wrapper_is_passed_on_to_its_command(project):
    proc = warm(project, sys.executable, "-c", "import time; print('up', flush=True); time.sleep(60)")
    assert proc.stdout.readline().strip() == "up"
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 128 + signal.SIGTERM


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="finds the waiting process through /proc")
def test_a_served_stage_whose_own_process_is_killed_stops_as_an_orphan(project):
    # the command goes on (sleeps) after the stage, so the server stays: the stage must see its own process go
    proc = warm(project, "sh", "-c", f"{sys.executable} -m stages.probe orphan; sleep 20")
    assert proc.stdout.readline().strip() == "sleeping"
    shell = _children(proc.pid)[0]
    (waiting,) = _children(shell)
    os.kill(waiting, signal.SIGKILL)  # no signal reaches the stage: its watch of the waiting process tells it
    start = time.monotonic()
    assert proc.stdout.readline().strip() == "stopped, orphaned: True"
    assert time.monotonic() - start < 10  # a poll of PARENT_POLL seconds, not the command's end
    os.kill(shell, signal.SIGKILL)
    assert proc.wait(timeout=30) == 128 + signal.SIGKILL


def test_the_server_declines_other_pythons_commands_and_environments():
    env = {"PATH": "/bin", "HOME": "/root"}
    ok = {"executable": sys.executable, "argv": ["stages.cut", "--clean", "x"], "env": dict(env)}
    assert decline_reason(ok, env) is None
    assert "the stage runs /usr/bin/python9" in decline_reason({**ok, "executable": "/usr/bin/python9"}, env)
    assert "not a stage's command" in decline_reason({**ok, "argv": ["json.tool"]}, env)
    assert decline_reason({**ok, "argv": ["pldistill.run.launch", "stages.gold"]}, env) is None
    theirs = {**env, "HF_HUB_OFFLINE": "1", "DVC_ROOT": "/p", "PWD": "/p", "SHLVL": "2", "PLDISTILL_WARM": "/s"}
    assert differences(env, theirs) == ["HF_HUB_OFFLINE"]  # DVC's, the shell's and the socket's keys do not count
    assert differences({**env, "PS1": "(.venv) $ "}, env) == []  # bash drops an activated venv's prompt
    assert "differs from the server's in HF_HUB_OFFLINE" in decline_reason({**ok, "env": theirs}, env)


def test_a_served_stage_watches_the_waiting_process_not_the_server():
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        gone = runtime._gone(sleeper.pid)
        assert gone() is False
        sleeper.kill()
        sleeper.wait()
        assert gone() is True
    finally:
        sleeper.kill()
