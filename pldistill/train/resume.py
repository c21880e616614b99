"""Where a training run keeps its Trainer checkpoints, so a run killed half-way resumes from its last one.

A run's folder is named by its fingerprint: its params, the bytes of its rows, its starting weights, its seed, its
dev score at step 0, the number of processes, and the code a training runs, taken from the import graph
(pldistill.base.imports: every module ``pldistill.train.training`` imports, and theirs), so a rerun of the same run
finds it, and a run that other code would train never does. The folder holds the Trainer's own ``checkpoint-<step>``
directories (pldistill.train.training). Folders are kept only inside ``enabled(root)`` (stages' command lines: under
``$DVC_ROOT/.pldistill-store/checkpoints``), which removes those its runs used once the block succeeds, i.e. when
the stage finishes; outside it (library calls, tests), a run checkpoints in a temporary folder of its own.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import torch

from pldistill.base.imports import ROOT, closure, imports, modules
from pldistill.run import distributed

# what runs a training (the engine, seed optimisation, the soup): its import closure
ENGINE = "pldistill.train.wrappers"
LOSSES = "pldistill.train.losses"  # and every loss's
SCHEDULE = {"checkpoint_every", "checkpoint_seconds"}  # when a run checkpoints, not what: outside its fingerprint
_CHECKPOINT = re.compile(r"checkpoint-(\d+)$")
CURVE = "curve.json"  # in a checkpoint: the dev curve, written last, so its presence marks a checkpoint complete

_root: Path | None = None
_used: set[Path] = set()


@contextlib.contextmanager
def enabled(root: Path | str) -> Iterator[None]:
    """Training runs inside the block keep their checkpoints under ``root`` and resume from them; on success, the
    folders they used are removed (a stage's results are its outputs, not its checkpoints)."""
    global _root  # noqa: PLW0603 -- module state on purpose: set for the block, restored after it
    before, _root = _root, Path(root)
    try:
        yield
        # several processes: rank 0 removes them, once it has written the stage's outputs (the others finish first)
        for path in sorted(_used) if distributed.is_main() else ():
            shutil.rmtree(path, ignore_errors=True)
        _used.clear()
    finally:
        _root = before


def folder(key: str) -> Path | None:
    """Where the run with fingerprint ``key`` keeps its checkpoints (None: outside ``enabled``)."""
    if _root is None:
        return None
    path = _root / key
    _used.add(path)
    return path


def latest(path: Path) -> Path | None:
    """The newest complete ``checkpoint-<step>`` in ``path`` (``CURVE`` written last), or None."""
    done = [(int(m.group(1)), d) for d in path.glob("checkpoint-*")
            if (m := _CHECKPOINT.search(d.name)) and (d / CURVE).is_file()]
    return max(done)[1] if done else None


def kept() -> list[tuple[Path, int]]:
    """The checkpoints the runs inside ``enabled`` have written so far, with the step each holds: what a stage
    stopped half-way leaves for its rerun to resume from."""
    found = [(path, int(_CHECKPOINT.search(last.name).group(1))) for path in sorted(_used)
             if path.is_dir() and (last := latest(path)) is not None]
    return found


@functools.cache
def code_digest() -> str:
    """sha256 of the code a training runs: every module in the import closure of ``ENGINE`` and of each loss
    (``LOSSES``' modules: a recipe's own loss is not imported by the engine), by name and bytes."""
    mods = modules(ROOT)
    graph = imports(mods)
    code = set().union(*(closure(graph, m) for m in mods if m == ENGINE or m.startswith(LOSSES)))
    h = hashlib.sha256()
    for name in sorted(code):
        h.update(name.encode() + b"\0" + mods[name].read_bytes() + b"\1")
    return h.hexdigest()


def fingerprint(parts: dict) -> str:
    """sha256 over ``parts`` (JSON-able values, tensors, state dicts) and the training code (``code_digest``): what
    a run depends on."""
    h = hashlib.sha256(code_digest().encode())
    for key in sorted(parts):
        h.update(key.encode() + b"\0")
        _update(h, parts[key])
    return h.hexdigest()[:32]


def _update(h: hashlib._Hash, value: object) -> None:
    if isinstance(value, torch.Tensor):
        t = value.detach().cpu().contiguous()
        h.update(f"{t.dtype}{tuple(t.shape)}".encode())
        h.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    elif isinstance(value, dict) and any(isinstance(v, torch.Tensor) for v in value.values()):
        for k in value:  # a state_dict: its order is the module's, stable for one architecture
            h.update(str(k).encode() + b"\0")
            _update(h, value[k])
    else:
        h.update(json.dumps(value, sort_keys=True, default=str).encode())
    h.update(b"\1")
