"""Atomic writes: every file the pipeline produces is written whole or not at all.

Each writer puts its bytes into a temporary sibling and renames it into place; a crash leaves either
the old file or none, never half of one. A temporary is named ``.<name>.<pid>.<random>.tmp``: a writer
killed outright (SIGKILL, the OOM killer: no ``finally`` runs) leaves it behind, and the next write of
the same name removes it once that pid is no longer running.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from pldistill.base.errors import WriteError


def default_root() -> Path:
    """Where the pipeline keeps what lives beside DVC's outputs (pldistill.base.store's finished steps, mid-run
    checkpoints, the workspace's stage lock): ``$PLDISTILL_STORE``, else ``$DVC_ROOT/.pldistill-store`` (DVC sets
    DVC_ROOT to the project root, also for `--temp` and queued experiments), else ``.pldistill-store`` in the
    working directory."""
    if os.environ.get("PLDISTILL_STORE"):
        return Path(os.environ["PLDISTILL_STORE"])
    return Path(os.environ.get("DVC_ROOT", ".")) / ".pldistill-store"


# What a full or read-only disk looks like: an errno, or only a message (pyarrow's and safetensors' errors).
DISK_ERRNOS = {errno.ENOSPC: "No space left on device", errno.EDQUOT: "Disk quota exceeded",
               errno.EROFS: "Read-only file system", errno.EFBIG: "File too large"}


@contextlib.contextmanager
def _disk_errors(path: Path) -> Iterator[None]:
    """Turn a full or read-only disk met while writing ``path`` into a WriteError that says so and what to do."""
    try:
        yield
    except WriteError:
        raise
    except Exception as err:
        code = getattr(err, "errno", None)
        if code not in DISK_ERRNOS:  # pyarrow and safetensors say it in words only
            code = next((c for c, words in DISK_ERRNOS.items() if words in str(err)), None)
        if code is None:
            raise
        fix = "make it writable" if code == errno.EROFS else f"free space there (df -h {path.parent})"
        failed = WriteError(f"{path}: could not write it: {DISK_ERRNOS[code]}. Nothing was put in its place (an "
                            f"earlier version, if any, is untouched); {fix} and run again")
        failed.errno = code
        raise failed from None


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def alive(pid: int) -> bool:
    """Whether process ``pid`` is running on this host. A zombie (killed, not yet reaped: the usual state
    of a killed stage's process in a container whose init does not reap) is not."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's live process
    try:  # /proc/<pid>/stat: "pid (comm) state ..."; comm may hold spaces and parentheses
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True  # no /proc (macOS): kill(pid, 0) is all we know


def _temp_prefix(path: Path) -> str:
    return f".{path.name}.{os.getpid()}."


def sweep(path: Path) -> list[str]:
    """Remove the temporaries of ``path`` whose writer is dead; return their names. Another live
    writer's temporary is left alone."""
    own = re.compile(re.escape(f".{path.name}.") + r"(\d+)\.[^.]+\.tmp")  # mkstemp's random part has no dot
    removed = []
    for tmp in path.parent.iterdir() if path.parent.is_dir() else []:
        m = own.fullmatch(tmp.name)
        if m and not alive(int(m.group(1))):
            if tmp.is_dir() and not tmp.is_symlink():
                shutil.rmtree(tmp, ignore_errors=True)
            else:
                tmp.unlink(missing_ok=True)
            removed.append(tmp.name)
    return removed


@contextlib.contextmanager
def atomic_path(path: Path | str) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it onto ``path`` if the block succeeds."""
    path = Path(path)
    with _disk_errors(path):
        path.parent.mkdir(parents=True, exist_ok=True)
        sweep(path)
        fd, tmp = tempfile.mkstemp(prefix=_temp_prefix(path), suffix=".tmp", dir=path.parent)
        os.close(fd)
    tmp_path = Path(tmp)
    try:
        with _disk_errors(path):
            yield tmp_path
            os.chmod(tmp_path, 0o666 & ~_umask())  # mkstemp makes 0600; artifacts are ordinary files
            fsync(tmp_path)  # the bytes are on disk before the name points at them
            os.replace(tmp_path, path)
            fsync(path.parent)
    finally:
        tmp_path.unlink(missing_ok=True)


@contextlib.contextmanager
def scratch(path: Path | str) -> Iterator[Path]:
    """A temporary file beside ``path`` for a stage's own use, removed when the block ends; one left by a
    killed stage is swept by the next write of ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    sweep(path)
    fd, tmp = tempfile.mkstemp(prefix=_temp_prefix(path), suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        yield Path(tmp)
    finally:
        Path(tmp).unlink(missing_ok=True)


@contextlib.contextmanager
def atomic_dir(path: Path | str) -> Iterator[Path]:
    """Yield an empty temporary directory; it replaces ``path`` (a directory) once the block succeeds.

    Two renames (old out of the way, new in), so a crash between them leaves ``path`` missing and the
    previous version at ``.<name>.old`` — never a half-written directory at ``path``.
    """
    path = Path(path)
    with _disk_errors(path):
        path.parent.mkdir(parents=True, exist_ok=True)
        sweep(path)
        tmp = Path(tempfile.mkdtemp(prefix=_temp_prefix(path), suffix=".tmp", dir=path.parent))
    old = path.with_name(f".{path.name}.old")
    try:
        with _disk_errors(path):
            yield tmp
        os.chmod(tmp, 0o777 & ~_umask())
        for f in tmp.rglob("*"):
            if f.is_file():
                fsync(f)
        shutil.rmtree(old, ignore_errors=True)
        if path.exists():
            os.replace(path, old)
        os.replace(tmp, path)
        shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


SKIPPED_NOTE = "SKIPPED.txt"
MODEL_CARD = "README.md"


def write_card(directory: Path | str, card: str | None) -> None:
    """A model card (pldistill.base.cards) into a model directory still being built inside its atomic_dir."""
    if card is not None:
        (Path(directory) / MODEL_CARD).write_text(card, encoding="utf-8")


def write_note_dir(path: Path | str, reason: str) -> None:
    """A stage output a recipe has nothing for (e.g. no teacher model): a directory holding only a note."""
    with atomic_dir(path) as tmp:
        (tmp / SKIPPED_NOTE).write_text(reason + "\n")


def write_json(path: Path | str, obj: object) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(obj, indent=2, sort_keys=False) + "\n")


# A stage report's numbers measured of the machine that ran it (wall times, throughput): they change with every
# run and every host, so they are kept out of the report (in git, hashed in dvc.lock) in a file of their own.
MACHINE_DIR = "machine"  # metrics/machine/<stage>.json beside metrics/<stage>.json: git-ignored, not a DVC output


def of_the_machine(key: str) -> bool:
    return key.endswith(("seconds", "_per_s", "_mb")) or key == "speedup"


def split_report(report: object) -> tuple[object, object]:
    """(the report without the keys ``of_the_machine``, those keys alone, where they sat; None if none)."""
    if isinstance(report, dict):
        kept, machine = {}, {}
        for k, v in report.items():
            if of_the_machine(k):
                machine[k] = v
                continue
            kept[k], measured = split_report(v)
            if measured:
                machine[k] = measured
        return kept, machine or None
    if isinstance(report, list):
        parts = [split_report(v) for v in report]
        measured = [m or {} for _, m in parts]
        return [k for k, _ in parts], measured if any(measured) else None
    return report, None


def machine_path(report: Path | str) -> Path:
    return Path(report).parent / MACHINE_DIR / Path(report).name


def write_report(path: Path | str, report: dict) -> None:
    """A stage's report: what it made to ``path``; what it measured of this machine to ``machine_path(path)``."""
    kept, measured = split_report(report)
    write_json(path, kept)
    if measured:
        write_json(machine_path(path), measured)
    else:
        machine_path(path).unlink(missing_ok=True)


# Rows per Parquet row group: a reader streaming a large artifact (stage label) holds one group at a time.
ROW_GROUP = 65_536


def write_parquet(path: Path | str, table: pa.Table) -> None:
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp, compression="zstd", row_group_size=ROW_GROUP)


def write_csv_rows(path: Path | str, header: list[str], rows: list[list]) -> None:
    """A small CSV for `dvc plots` (no quoting needed: numbers and simple names only)."""
    with atomic_path(path) as tmp:
        lines = [",".join(header)] + [",".join(str(v) for v in r) for r in rows]
        tmp.write_text("\n".join(lines) + "\n")


def sha256_file(path: Path | str, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()
