"""A store of finished steps for multi-cycle recipes, kept outside DVC's outputs so a rerun can resume.

`dvc exp run` resets every stage output to dvc.lock before it runs, and DVC's run-cache only restores
whole identical runs, so finished cycles cannot live inside an output. They live here instead, one
directory per step, named by a key that chains everything the step depends on: a fingerprint of the
upstream data, params (all but `cycles`) and code, the step's name, and the key of the step before
it. A changed input changes every later key, so a stale entry is never found, let alone reused.

An entry is built in a temporary directory; ``MANIFEST.json`` (each file's sha256 and size, plus the
step's metadata) is written last, then the directory is renamed into place. ``get`` re-hashes every
file: an entry with a missing, extra or altered file is moved aside as ``corrupt-*`` and reported as
absent, so the step is recomputed.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from pldistill.base.io import alive, default_root, fsync, sha256_file
from pldistill.base.seeding import seed_all

MANIFEST = "MANIFEST.json"


def digest(obj: object) -> str:
    """sha256 of ``obj`` as canonical JSON (sorted keys, no whitespace): equal inputs, equal digests."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def portable(path: Path | str) -> str:
    """A file's name in a key: relative to the working directory (the project a stage runs in) where it lies under
    it, so a copy of the project -- `dvc exp run --temp`, the queue's workspaces, a moved clone -- finds the steps
    its original stored; anywhere else, as given. A model spec that is no path (a hub id, ``bundled:<name>``) keeps
    its own text."""
    try:
        return Path(path).resolve().relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return str(path)


def fingerprint(files: list[Path | str], params: dict, extra: dict | None = None) -> str:
    """What a run's steps depend on: the bytes of ``files`` (data, code; each named by ``portable``), ``params`` and
    ``extra``."""
    named = {portable(f): sha256_file(f) for f in files}
    return digest({"files": dict(sorted(named.items())), "params": params, "extra": extra or {}})


def step_key(base: str, step: str, parent: str | None) -> str:
    """The key of ``step``: its run's fingerprint, its name and the key of the step it builds on."""
    return digest({"base": base, "step": step, "parent": parent})


def _files(directory: Path) -> dict[str, dict]:
    return {f.relative_to(directory).as_posix(): {"sha256": sha256_file(f), "bytes": f.stat().st_size}
            for f in sorted(directory.rglob("*")) if f.is_file() and f.name != MANIFEST}


class Store:
    def __init__(self, root: Path | str | None = None):
        self.root = Path(root) if root is not None else default_root()
        self.corrupt: list[str] = []  # keys found corrupt (and moved aside) by this instance

    def path(self, key: str) -> Path:
        return self.root / key

    def get(self, key: str) -> Path | None:
        """The verified entry for ``key``, or None when there is none or it is corrupt."""
        entry = self.path(key)
        if not entry.exists():
            return None  # absent (a crash before the rename leaves only a temp dir, never this)
        try:
            recorded = json.loads((entry / MANIFEST).read_text())["files"]
            ok = _files(entry) == recorded
        except (OSError, ValueError, KeyError, TypeError):
            ok = False  # no readable manifest: never whole (a partial copy, a deleted file)
        if ok:
            return entry
        self.corrupt.append(key)
        with contextlib.suppress(OSError):
            os.replace(entry, self.root / f"corrupt-{key}-{time.time_ns()}")
        return None

    def files(self, key: str) -> dict[str, dict]:
        """{relative path: {"sha256", "bytes"}} of a verified entry, from its manifest."""
        return json.loads((self.path(key) / MANIFEST).read_text())["files"]

    def content(self, key: str) -> str:
        """A digest of the entry's files: what a step built on it actually read."""
        return digest(self.files(key))

    def sweep(self) -> list[str]:
        """Remove temporary directories whose writer died (a killed step); return their names.

        A temp dir is named ``.<key>.<pid>.<random>.tmp``; one whose pid is not running on this host is
        an orphan (a zombie counts as dead). Another live writer's directory is left alone.
        """
        removed = []
        for tmp in self.root.glob(".*.tmp") if self.root.is_dir() else []:
            parts = tmp.name.split(".")
            pid = int(parts[2]) if len(parts) > 3 and parts[2].isdigit() else None
            if pid is not None and not alive(pid):
                shutil.rmtree(tmp, ignore_errors=True)
                removed.append(tmp.name)
        return removed

    def meta(self, key: str) -> dict:
        """The metadata ``put`` recorded with the entry (call after ``get`` found it)."""
        return json.loads((self.path(key) / MANIFEST).read_text())["meta"]

    @contextlib.contextmanager
    def put(self, key: str, meta: dict | None = None) -> Iterator[Path]:
        """Yield an empty directory to fill; on success it becomes the entry for ``key``.

        If another process stored ``key`` meanwhile, its entry is kept and this one discarded: both
        were computed from the same inputs.
        """
        self.root.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{key[:16]}.{os.getpid()}.", suffix=".tmp", dir=self.root))
        try:
            yield tmp
            manifest = {"key": key, "files": _files(tmp), "meta": meta or {}}
            for f in tmp.rglob("*"):
                if f.is_file():
                    fsync(f)
            (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")  # last: marks the entry whole
            fsync(tmp / MANIFEST)
            try:
                os.rename(tmp, self.path(key))
            except OSError:
                if self.get(key) is None:  # what was there was corrupt and is now moved aside
                    os.rename(tmp, self.path(key))
        finally:
            shutil.rmtree(tmp, ignore_errors=True)



@dataclass(frozen=True)
class Entry:
    """A step ``Steps.run`` reused or computed."""

    name: str
    key: str
    path: Path
    meta: dict
    computed: bool
    seconds: float


class Steps:
    """The steps of one run, stored one after another (Trans-Encoder's cycles, augsbert's).

    A step's key chains the run's fingerprint ``base``, the step's name, and the key *and* stored bytes of
    the step before it: a parent recomputed with a different result (another machine, a corrupt entry
    redone) makes every later step stale. A stored step is reused; a computed one is read back from the
    store before the next step uses it, so a resumed run and an uninterrupted one go through the same bytes.
    Each computed step seeds itself from (``seed``, its name), not from a running stream.
    """

    def __init__(self, store: Store, base: str, seed: int, log: Callable[[str], None]):
        self.store, self.base, self.seed, self.log = store, base, seed, log
        self.last: Entry | None = None

    def run(self, name: str, compute: Callable[[Path, dict], None], salt: str = "") -> Entry:
        """Reuse the stored step ``name`` or compute it into the store; either way, read it back.
        ``salt``: what else the keys of steps after the first depend on."""
        prev = self.last
        parent = prev and f"{prev.key}:{self.store.content(prev.key)}" + (f":{salt}" if salt else "")
        key = step_key(self.base, name, parent)
        t0 = time.perf_counter()
        entry = self.store.get(key)
        computed = entry is None
        if computed:
            seed_all(int(digest({"seed": self.seed, "step": name})[:8], 16))  # e.g. a new head's init
            meta: dict = {"step": name}
            with self.store.put(key, meta) as tmp:
                self.log(f"{name}: computing")
                compute(tmp, meta)
            entry = self.store.get(key)
            if entry is None:
                raise RuntimeError(f"{self.store.path(key)}: step {name} did not verify right after it was written")
        else:
            self.log(f"{name}: reused ({entry})")
        self.last = Entry(name, key, entry, self.store.meta(key), computed, time.perf_counter() - t0)
        return self.last
