"""What every stage does the same way: the command line, params loaded by the stage's own loader (validated whole
by pldistill.params.config, or the sections a data stage reads), clear errors instead of tracebacks. The top of the
import graph: nothing of ours imports it but the stages (and pldistill.warm, which names the process a stage it
runs watches).

A stage also stops cleanly: Ctrl-C (SIGINT), SIGTERM, or the process that started it (`dvc repro`) gone end
it with one line saying what was kept for `dvc repro` to resume from, and exit code 128 + the signal (130 for
Ctrl-C). While it runs it holds the workspace's stage lock, so a second stage started on the same workspace
(a new `dvc repro` while an orphaned stage still trains) is refused instead of writing the same files.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import fcntl
import inspect
import json
import os
import select
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NoReturn, Protocol

from pldistill.base import console
from pldistill.base.errors import REPORTED
from pldistill.base.io import default_root

LOCK_FILE = "stage.lock"  # under the store root: $DVC_ROOT/.pldistill-store
PARENT_POLL = 1.0  # seconds between checks that the process that started the stage is still there


_WATCHED: list[int] = []  # pldistill.warm's served stage: the waiting process dvc started, not the server


def watch_parent(pid: int) -> None:
    """Have a stage stop when process ``pid`` is gone, not when this process's parent is: pldistill.warm runs a
    stage in a fork of its server for a process that dvc started and that waits for it."""
    _WATCHED[:] = [pid]


def _gone(pid: int) -> Callable[[], bool]:
    """A check that process ``pid`` has ended (a pidfd where Linux has them: no pid reuse)."""
    try:
        fd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        def gone() -> bool:
            try:
                os.kill(pid, 0)  # signal 0: only asks whether the process is there
            except ProcessLookupError:
                return True
            except PermissionError:  # there, another user's
                pass
            return False
        return gone
    return lambda: bool(select.select([fd], [], [], 0)[0])


class StageBusy(RuntimeError):
    """Another stage holds this workspace's stage lock."""


class Stopped(KeyboardInterrupt):
    """SIGTERM, or the parent process gone: the stage stops as it does on Ctrl-C."""


USER_ERRORS = (*REPORTED, StageBusy, FileNotFoundError)


class StageKind(Protocol):
    """What run_stage asks of a stage's kind: PLAIN here, pldistill.train.stage_training.TRAINING for one that trains,
    pldistill.run.distributed.RANKS for one on several processes that trains nothing."""

    live: bool  # the stage takes --live

    def enter(self, stack: contextlib.ExitStack, live: Path | None) -> None: ...
    def is_main(self) -> bool: ...
    def leave(self) -> None: ...
    def kept(self) -> list[tuple[Path, int]]: ...


class Plain:
    """A stage that trains nothing and runs in one process; the stages that train pass
    pldistill.train.stage_training.TRAINING (checkpoints, --live, several processes) instead."""

    live = False

    def enter(self, stack: contextlib.ExitStack, live: Path | None) -> None:
        pass

    def is_main(self) -> bool:
        return True

    def leave(self) -> None:
        pass

    def kept(self) -> list[tuple[Path, int]]:
        return []


PLAIN = Plain()


@contextlib.contextmanager
def workspace_lock(root: Path, stage: str) -> Iterator[None]:
    """Hold ``root/stage.lock`` (an flock, which the kernel drops when this process ends, however it ends)
    while the block runs; raise StageBusy naming the holder if another process has it."""
    root.mkdir(parents=True, exist_ok=True)
    path = root / LOCK_FILE
    with path.open("a+") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.seek(0)
            pid, _, name = f.read().strip().partition(" ")
            raise StageBusy(
                f"stage {name or '?'} (pid {pid or '?'}) is still running in this workspace (it holds {path}): a "
                f"second would write the same checkpoints and outputs. Wait for it to end, or stop it "
                f"(kill {pid or '<pid>'}), then run again") from None
        f.seek(0)
        f.truncate()
        f.write(f"{os.getpid()} {stage}\n")
        f.flush()
        yield


@contextlib.contextmanager
def stop_cleanly() -> Iterator[threading.Event]:
    """SIGTERM raises Stopped (as SIGINT raises KeyboardInterrupt), so ``finally`` blocks run and nothing is left
    half-written; a watcher sends SIGTERM once this process's parent is gone (it is re-parented), and sets the
    event it yields, so a stage whose `dvc repro` was killed does not train on, unseen."""
    orphaned, done = threading.Event(), threading.Event()
    parent = os.getppid()
    if _WATCHED:
        parent_gone = _gone(_WATCHED[0])
    else:
        def parent_gone() -> bool:
            return os.getppid() != parent

    def terminate(signum: int, frame: object) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # one stop at a time: cleanup is not interrupted again
        raise Stopped(signum)

    def watch() -> None:
        while not done.wait(PARENT_POLL):
            if parent_gone():
                orphaned.set()
                os.kill(os.getpid(), signal.SIGTERM)
                return

    before = signal.signal(signal.SIGTERM, terminate)
    if parent > 1 or _WATCHED:  # 1: started by init or a container's entry point, which never goes away
        threading.Thread(target=watch, name="parent-watch", daemon=True).start()
    try:
        yield orphaned
    finally:
        done.set()
        signal.signal(signal.SIGTERM, before)


def _relative(path: Path) -> str:
    with contextlib.suppress(ValueError):
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    return str(path)


def stopped_line(stage: str, err: KeyboardInterrupt, orphaned: bool, saved: list[tuple[Path, int]]) -> str:
    """The one line a stopped stage prints: why it stopped, what it kept (``saved``: checkpoints), how to go on."""
    if orphaned:
        why = "stopped because the process that started it (dvc repro) is gone"
    elif isinstance(err, Stopped):
        why = "was terminated (SIGTERM)"
    else:
        why = "was interrupted (Ctrl-C)"
    if saved:
        where = ", ".join(f"{_relative(p)} (step {step})" for p, step in saved)
        kept = f"kept its training checkpoint{'s' * (len(saved) > 1)} {where}; `dvc repro` resumes from there"
    else:
        kept = "no training checkpoint was due yet and no output is half-written; `dvc repro` runs it again"
    return f"stage {stage} {why}; {kept}"


def run_stage(fn: Callable[..., dict], paths: list[str], argv: list[str] | None = None,
              kind: StageKind = PLAIN, *, load: Callable[[Path], object]) -> dict:
    """Parse ``--params`` and one ``--<path>`` option per name in ``paths`` (optional where ``fn``'s parameter
    defaults to None), run ``fn``, print its one line (pldistill.base.console; the whole report too with
    PLDISTILL_REPORTS=1). ``kind``: ``PLAIN``, or for a stage that trains pldistill.train.stage_training.TRAINING
    (checkpoints, ``--live``, several processes). ``load``: how the stage reads
    params.yaml (pldistill.params.config.load_params, the file whole; stage download: pldistill.params.data's
    load_data_sections, the sections it reads), so this module imports no section type."""
    ap = argparse.ArgumentParser(description=(fn.__doc__ or "").strip().splitlines()[0])
    ap.add_argument("--params", default="params.yaml", type=Path)
    defaults = inspect.signature(fn).parameters
    for name in paths:
        optional = name in defaults and defaults[name].default is None
        ap.add_argument(f"--{name.replace('_', '-')}", required=not optional, type=Path, dest=name)
    if kind.live:
        ap.add_argument("--live", type=Path, default=None, help="a DVCLive folder: training curves, system metrics")
    args = ap.parse_args(argv)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    console.bars_on_terminal_only()
    started = time.perf_counter()
    orphaned, sigint = threading.Event(), signal.getsignal(signal.SIGINT)
    try:
        with contextlib.ExitStack() as stack:
            orphaned = stack.enter_context(stop_cleanly())
            params = load(args.params)  # validate.load_params (whole), or the sections a data stage reads
            if os.environ.get("RANK", "0") == "0":  # several processes: rank 0 holds it for them all
                stack.enter_context(workspace_lock(default_root(), fn.__name__))
            kind.enter(stack, getattr(args, "live", None))
            report = fn(params, **{name: getattr(args, name) for name in paths})
        if kind.is_main():
            if console.reports():
                print(json.dumps(report, indent=2))
            where = next((getattr(args, k) for k in ("report", "out") if getattr(args, k, None)), None)
            print(console.line(fn.__name__, report, time.perf_counter() - started, where and _relative(where)),
                  flush=True)
    except USER_ERRORS as err:
        sys.exit(f"error: {err}")
    except KeyboardInterrupt as err:  # Ctrl-C, SIGTERM, or the parent gone (Stopped)
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C does not cut this line short
        print(stopped_line(fn.__name__, err, orphaned.is_set(), kind.kept()), file=sys.stderr, flush=True)
        code = signal.SIGTERM if isinstance(err, Stopped) else signal.SIGINT
        sys.exit(128 + code)
    finally:
        signal.signal(signal.SIGINT, sigint)
        kind.leave()
    return report


def exit_now(code: int = 0) -> NoReturn:
    """End the process the quick way once a stage has written everything: the exit handlers run, non-daemon
    threads are joined and output is flushed, as at a normal exit, but the interpreter does not then tear
    torch, transformers and sentence-transformers down object by object and module by module. That teardown
    is about 2.5 s a stage on a 2-core CPU (stage label, measured from its last line to the process's end),
    work no one waits for: every output is already whole (written by temp file and rename)."""
    atexit._run_exitfuncs()  # what a normal exit runs first (logging's flush, temp-dir finalizers, ...)
    pools = sys.modules.get("concurrent.futures.thread")
    if pools is not None:  # a library's thread pool left open (NNCF's): told to stop, as threading's own exit does
        pools._python_exit()
    for t in threading.enumerate():
        if t is not threading.main_thread() and not t.daemon:
            t.join()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):  # a closed or broken pipe: nothing left to lose
            stream.flush()
    os._exit(code)


def main(fn: Callable[..., dict], paths: list[str], kind: StageKind = PLAIN, *,
         load: Callable[[Path], object]) -> NoReturn:
    """A stage's command line (``python -m stages.<name>``): ``run_stage``, then ``exit_now``. An error still
    exits through ``sys.exit`` inside ``run_stage``, with its message and code."""
    run_stage(fn, paths, kind=kind, load=load)
    exit_now(0)
