"""One warm interpreter for the stages of a pipeline run: ``python -m pldistill.warm dvc repro [options]``
(what ``make run`` runs). Each stage otherwise starts a new Python that imports torch, transformers and
sentence-transformers again: 6 to 8 s a stage on a 2-core CPU, seven times in a run of the default pipeline.

Here a server imports them once, beside ``dvc repro``. Each stage's process (``python -m stages.<name>`` or
``python -m pldistill.run.launch stages.<name>``, as dvc.yaml says) hands its command, working directory,
environment and standard streams to the server as soon as the ``stages`` package is imported
(``hand_over``), and waits; the server forks a copy of itself that runs the command as that process would
have, and sends back its exit code, which the waiting process exits with. Everything else is as without
it: the same commands, outputs and lock; Ctrl-C and SIGTERM reach the stage (the waiting process forwards
them); a stage whose waiting process is gone stops as one whose ``dvc repro`` is gone (pldistill.run.runtime).
A light stage (check, download, augment, sample: no torch at the top; handover.LIGHT) that starts while the
server is still importing runs in its own process at once instead of waiting.

The server declines, and the stage runs in its own process as usual, when the command is not ``python -m``
of a stage, another Python runs it, or its environment differs from the server's in anything but the keys
a shell or DVC set (an environment variable read at import, e.g. ``HF_HUB_OFFLINE``, must be the same). The
copy re-imports the project's own modules (pldistill, stages) from the stage's directory: only third-party
modules come warm. A stage's own subprocesses (torchrun with ``processes`` > 1) start as usual.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pldistill.run.handover import SOCKET_ENV, die_with_parent, entry, ready_path, receive, send

PRELOAD = ("torch", "transformers", "sentence_transformers", "pandas", "pyarrow.parquet", "scipy.stats",
           "pydantic", "yaml", "dvclive")
OURS = ("pldistill", "stages")  # the project's packages: a served stage imports them anew, from its directory
# Keys a shell or DVC sets per command (bash drops the prompts of an activated venv: PS1 is for interactive shells);
# any other difference from the server's environment declines the stage.
VOLATILE = ("_", "PWD", "OLDPWD", "SHLVL", "PS1", "PS2", "PS3", "PS4", "PROMPT_COMMAND", "COLUMNS", "LINES")
VOLATILE_PREFIXES = ("DVC_",)


# -- the server's side -----------------------------------------------------------------------------------


def differences(ours: dict[str, str], theirs: dict[str, str]) -> list[str]:
    """The environment keys that differ between the server's and a stage's, but for those a shell or DVC set."""
    keys = set(ours) | set(theirs)
    return sorted(k for k in keys if ours.get(k) != theirs.get(k)
                  and k not in VOLATILE and k != SOCKET_ENV and not k.startswith(VOLATILE_PREFIXES))


def decline_reason(request: dict, env: dict[str, str]) -> str | None:
    """Why the server cannot run ``request`` as the stage's own process would, or None."""
    if request.get("executable") != sys.executable:
        return f"the stage runs {request.get('executable')}, the server {sys.executable}"
    if entry(["python", "-m", *request.get("argv", [])[:1]]) is None:
        return f"not a stage's command: {request.get('argv')}"
    diff = differences(env, request.get("env", {}))
    if diff:
        return f"its environment differs from the server's in {', '.join(diff[:5])}"
    return None


def _watch_client(pid: int) -> None:
    """Have pldistill.run.runtime watch ``pid`` (the stage's own process, waiting) as the stage's parent."""
    from pldistill.run import runtime
    runtime.watch_parent(pid)


def _become(request: dict, fds: list[int], added: dict[str, str]) -> None:
    """In the forked copy: take on the stage's streams, directory, environment and command, run it, exit."""
    code = 1
    try:
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        sys.stdin = open(0, closefd=False)  # noqa: SIM115 -- the process's own streams, never closed
        sys.stdout = open(1, "w", buffering=1 if os.isatty(1) else -1, closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", buffering=1, errors="backslashreplace", closefd=False)  # noqa: SIM115
        sys.__stdin__, sys.__stdout__, sys.__stderr__ = sys.stdin, sys.stdout, sys.stderr
        for signum, handler in ((signal.SIGINT, signal.default_int_handler), (signal.SIGTERM, signal.SIG_DFL),
                                (signal.SIGHUP, signal.SIG_DFL)):
            signal.signal(signum, handler)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update({k: v for k, v in request["env"].items() if k != SOCKET_ENV})
        for key, value in added.items():
            os.environ.setdefault(key, value)
        sys.path[:] = request["path"]
        for name in [n for n in sys.modules if n.split(".")[0] in OURS]:
            del sys.modules[name]
        importlib.invalidate_caches()
        _watch_client(int(request["pid"]))
        module, *args = request["argv"]
        sys.argv, sys.orig_argv = [module, *args], request["orig_argv"]
        import runpy
        runpy.run_module(module, run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as err:
        code = _exit_code(err)
    except BaseException as err:  # as an uncaught exception ends a process: the hook, then 1 (130 for Ctrl-C)
        sys.excepthook(*sys.exc_info())
        code = 128 + signal.SIGINT if isinstance(err, KeyboardInterrupt) else 1
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(code)


def _exit_code(err: SystemExit) -> int:
    if err.code is None:
        return 0
    if isinstance(err.code, int):
        return err.code
    print(err.code, file=sys.stderr)
    return 1


def _status_code(status: int) -> int:
    """A waited-for child's status as a shell reports it: its exit code, or 128 + the signal that ended it."""
    return os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status)


def serve(path: Path, preload: tuple[str, ...] = PRELOAD) -> None:
    """Import ``preload``, say so (``ready_path``), then run the stages that connect to ``path``, one at a time,
    each in a fork of this process. Ends when its parent (``python -m pldistill.warm``) ends or sends SIGTERM."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(8)  # stages that connect while the imports run wait for them
    env = dict(os.environ)
    for name in preload:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    # what the imports set in the environment (torch: KMP_INIT_AT_FORK, ...), as they would in the stage's process
    added = {k: v for k, v in os.environ.items() if k not in env}
    Path(ready_path(str(path))).touch()  # light stages (handover.LIGHT) come here from now on
    while True:
        conn, _ = listener.accept()
        with conn:
            try:
                request, fds = receive(conn, maxfds=3)
            except (OSError, EOFError, ValueError):
                continue
            reason = decline_reason(request, env) if len(fds) == 3 else "no standard streams came"
            if reason:
                for fd in fds:
                    os.close(fd)
                with contextlib.suppress(OSError):
                    send(conn, {"declined": reason})
                continue
            for stream in (sys.stdout, sys.stderr):
                stream.flush()
            pid = os.fork()
            if pid == 0:
                listener.close()
                conn.close()
                _become(request, fds, added)
            for fd in fds:
                os.close(fd)
            with contextlib.suppress(OSError):
                send(conn, {"pid": pid})
            _, status = os.waitpid(pid, 0)
            with contextlib.suppress(OSError):
                send(conn, {"exit": _status_code(status)})


def run(command: list[str], preload: tuple[str, ...] = PRELOAD) -> int:
    """Start the server, run ``command`` with SOCKET_ENV naming it, stop the server; ``command``'s exit code."""
    folder = Path(tempfile.mkdtemp(prefix="pldistill-warm-"))
    path = folder / "socket"
    server = subprocess.Popen([sys.executable, "-m", "pldistill.warm", "--serve", str(path),
                               "--preload", ",".join(preload)],
                              start_new_session=True)  # Ctrl-C reaches the stage through its own process
    try:
        deadline = time.monotonic() + 10
        while not path.exists() and server.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        env = dict(os.environ)
        if path.exists():
            env[SOCKET_ENV] = str(path)
        else:
            print("warm interpreter: the server did not start; every stage starts its own", file=sys.stderr)
        try:
            proc = subprocess.Popen(command, env=env)
        except FileNotFoundError:
            sys.exit(f"error: no command {command[0]!r} on PATH")
        # Ctrl-C reaches the command itself (the terminal's process group): this process waits for it to stop, as
        # it chooses, instead of killing it; SIGTERM and SIGHUP are passed on
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        for signum in (signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, lambda signum, frame: proc.send_signal(signum))
        code = proc.wait()
        return 128 - code if code < 0 else code  # a command ended by a signal: 128 + the signal, as a shell says
    finally:
        server.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            server.wait(timeout=5)
        shutil.rmtree(folder, ignore_errors=True)



def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0] if __doc__ else None)
    ap.add_argument("--serve", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--preload", default=",".join(PRELOAD),
                    help="the modules the server imports once, comma-separated (default: %(default)s)")
    ap.add_argument("command", nargs=argparse.REMAINDER, help="the command to run, e.g. dvc repro")
    args = ap.parse_args(argv)
    if args.serve:
        die_with_parent()
        serve(args.serve, tuple(filter(None, args.preload.split(","))))
        return
    if not args.command:
        ap.error("give the command to run, e.g. python -m pldistill.warm dvc repro")
    sys.exit(run(args.command, tuple(filter(None, args.preload.split(",")))))


if __name__ == "__main__":
    main()
