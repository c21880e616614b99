"""A stage's side of pldistill.warm: ``hand_over`` sends the stage's command, directory, environment and
standard streams to the warm interpreter's server, forwards Ctrl-C and SIGTERM to the copy that runs it, and
exits with its code; the messages both sides exchange (a length, then JSON; the streams as SCM_RIGHTS).
The ``stages`` package calls it as it is imported, so it imports nothing but the standard library."""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import select
import signal
import socket
import struct
import sys

PR_SET_PDEATHSIG = 1  # prctl(2): the signal this process gets when its parent dies
SOCKET_ENV = "PLDISTILL_WARM"  # the server's socket, in the environment of the command the server runs beside
HEADER = struct.Struct("!Q")  # the length of the JSON that follows
# Stages that import neither torch nor transformers at the top: until the server has imported them (it then
# writes ``ready_path``), such a stage runs in its own process at once instead of waiting for those imports.
# On a 2-core Xeon stage download took 1.5 s on its own, 4.6 s waiting for the server (benchmarks/make_run_time.py).
LIGHT = ("stages.check", "stages.download", "stages.augment", "stages.sample")


def ready_path(socket_path: str) -> str:
    """The file the server writes beside its socket once its imports are done."""
    return socket_path + ".ready"


def entry(argv: list[str]) -> list[str] | None:
    """``[module, *args]`` when ``argv`` (sys.orig_argv) is ``python -m <a stage or pldistill.run.launch> ...``."""
    if len(argv) >= 3 and argv[1] == "-m" and (argv[2].startswith("stages.") or argv[2] == "pldistill.run.launch"):
        return argv[2:]
    return None


def send(conn: socket.socket, message: dict, fds: list[int] | None = None) -> None:
    """``message`` as its JSON's length then the JSON; ``fds`` (open files) go with the length."""
    data = json.dumps(message).encode()
    if fds:
        socket.send_fds(conn, [HEADER.pack(len(data))], fds)
    else:
        conn.sendall(HEADER.pack(len(data)))
    conn.sendall(data)


def _exactly(conn: socket.socket, size: int) -> bytes:
    chunks, got = [], 0
    while got < size:
        chunk = conn.recv(min(size - got, 1 << 20))
        if not chunk:
            raise EOFError("the other end closed the connection")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def receive(conn: socket.socket, maxfds: int = 0) -> tuple[dict, list[int]]:
    """The next message ``send`` sent, and up to ``maxfds`` files that came with it; EOFError if none came."""
    if maxfds:
        head, fds, _, _ = socket.recv_fds(conn, HEADER.size, maxfds)
        head += _exactly(conn, HEADER.size - len(head)) if head else b""
        if not head:
            raise EOFError("the other end closed the connection")
    else:
        head, fds = _exactly(conn, HEADER.size), []
    (size,) = HEADER.unpack(head)
    return json.loads(_exactly(conn, size)), list(fds)


def hand_over() -> None:
    """In a stage's process started under ``python -m pldistill.warm``: have the server run this command, and
    exit with its code. Returns (the stage runs here) when there is no server, the command is not a stage's
    ``python -m``, or the server declines it. Called by the ``stages`` package as it is imported."""
    path = os.environ.get(SOCKET_ENV)
    command = entry(list(getattr(sys, "orig_argv", [])))
    if not path or command is None:
        return
    if command[0] in LIGHT and not os.path.exists(ready_path(path)):
        return  # the server is still importing what this stage does not need
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(path)
        send(conn, {"argv": command, "orig_argv": sys.orig_argv, "cwd": os.getcwd(), "env": dict(os.environ),
                    "path": sys.path, "executable": sys.executable, "pid": os.getpid()}, [0, 1, 2])
        reply, _ = receive(conn)
    except (OSError, EOFError, ValueError):  # no server (any more): nothing was started, run here
        conn.close()
        return
    if "declined" in reply:
        conn.close()
        print(f"warm interpreter: {reply['declined']}; the stage starts its own", file=sys.stderr, flush=True)
        return
    child = int(reply["pid"])

    def forward(signum: int, frame: object) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, signum)

    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, forward)
    parent = os.getppid()
    try:
        while not select.select([conn], [], [], 1.0)[0]:
            if os.getppid() != parent:  # dvc gone: so is this process, and the stage, watching it, stops
                os._exit(1)
        code = int(receive(conn)[0]["exit"])
    except (OSError, EOFError, ValueError):
        print("warm interpreter: the server ended while the stage ran; its exit code is unknown",
              file=sys.stderr, flush=True)
        code = 1
    os._exit(code)


def die_with_parent() -> None:
    """On Linux, have the kernel send this process SIGTERM when its parent dies, however it ends: torchrun under
    pldistill.run.launch (then it stops its workers instead of training on, orphaned), the warm server under
    ``python -m pldistill.warm``."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
