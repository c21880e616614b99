"""Mid-run training checkpoints: a run killed half-way resumes from its last checkpoint, as if never stopped.

A checkpoint is one directory per training run, named by the run's fingerprint (its params, the bytes
of its training pairs, its starting weights and RNG states, its dev score at step 0 and the training
code), so a rerun of the same run finds it and a changed run never does. It holds:

- ``model.safetensors``: the weights now; ``best.safetensors``: the best-on-dev weights (select dev);
- ``optimizer.safetensors``: the optimizer's tensors (AdamW's moments and step counts);
- ``rng.safetensors``: torch's global RNG (dropout; CUDA's too) and the batch-order generator;
- ``state.json``: everything else (step, curve, each step's loss and learning rate, scheduler and loss-scaler
  state, the optimizer's param groups, the current epoch's batch order).

Tensors go through safetensors and the rest through JSON: nothing is unpickled, so a checkpoint
directory someone else wrote cannot run code. Each checkpoint replaces the previous one atomically
(``io.atomic_dir``). Checkpoints are on only inside ``enabled(root)`` (stages' command lines: under
``$DVC_ROOT/.pldistill-store/checkpoints``), which removes the checkpoints it used once its block
succeeds, i.e. when the stage finishes.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from pldistill import distributed
from pldistill.io import atomic_dir

FORMAT = 2  # bumped when the layout changes: an older checkpoint is then ignored, never misread
STATE = "state.json"
SCHEDULE = {"checkpoint_every", "checkpoint_seconds"}  # when a run checkpoints, not what: outside its fingerprint
# The modules whose code decides what a training step does: a checkpoint made by other code is not resumed.
CODE = ("loop.py", "training.py", "checkpoints.py", "models.py", "dse.py", "device.py", "st_trainer.py",
        *sorted(f"losses/{f.name}" for f in (Path(__file__).parent / "losses").glob("*.py")))

_root: Path | None = None
_used: set[Path] = set()


@contextlib.contextmanager
def enabled(root: Path | str) -> Iterator[None]:
    """Training runs inside the block write checkpoints under ``root`` and resume from them; on success,
    the checkpoints they used are removed (a stage's results are its outputs, not its checkpoints)."""
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


def active() -> bool:
    return _root is not None


def kept() -> list[tuple[Path, int]]:
    """The checkpoints the runs inside ``enabled`` have written so far, with the step each holds: what a
    stage stopped half-way leaves for its rerun to resume from."""
    found = []
    for path in sorted(_used):
        try:
            found.append((path, int(json.loads((path / STATE).read_text())["step"])))
        except (OSError, ValueError, KeyError):  # none written yet, or one being replaced
            continue
    return found



def fingerprint(parts: dict) -> str:
    """sha256 over ``parts`` (JSON-able values and tensors) plus the training code: what a run depends on."""
    h = hashlib.sha256()
    here = Path(__file__).parent
    for name in CODE:
        h.update(name.encode() + b"\0" + (here / name).read_bytes())
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


def path_for(key: str) -> Path | None:
    """Where the run with fingerprint ``key`` keeps its checkpoint (None: checkpoints are off)."""
    if _root is None:
        return None
    path = _root / key
    _used.add(path)
    return path


def tensors(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    # safetensors refuses tensors sharing memory (tied weights); a copy each is what loading restores anyway
    return {k: v.detach().cpu().contiguous().clone() for k, v in state.items()}


def split_optimizer(state: dict) -> tuple[dict[str, torch.Tensor], dict]:
    """An optimizer's state_dict as (tensors by ``<param>.<name>``, the JSON-able rest)."""
    tensors, plain = {}, {}
    for pid, entry in state["state"].items():
        for name, v in entry.items():
            if isinstance(v, torch.Tensor):
                tensors[f"{pid}.{name}"] = v
            else:
                plain.setdefault(str(pid), {})[name] = v
    return tensors, {"plain": plain, "param_groups": state["param_groups"]}


def join_optimizer(tensors: dict[str, torch.Tensor], rest: dict) -> dict:
    """The inverse of ``split_optimizer``."""
    state: dict[int, dict] = {}
    for key, v in tensors.items():
        pid, name = key.split(".", 1)
        state.setdefault(int(pid), {})[name] = v
    for pid, entry in rest["plain"].items():
        state.setdefault(int(pid), {}).update(entry)
    groups = [{k: tuple(v) if k == "betas" else v for k, v in g.items()} for g in rest["param_groups"]]
    return {"state": state, "param_groups": groups}


def save(path: Path, model: dict[str, torch.Tensor], optimizer: dict, rng: dict[str, torch.Tensor], state: dict,
         best: dict[str, torch.Tensor] | None, best_unchanged: bool) -> None:
    """Write a checkpoint directory at ``path``, replacing the one there at once (temp dir, then rename).
    ``best_unchanged``: the best weights are those of the checkpoint being replaced; linked, not rewritten."""
    opt_tensors, opt_rest = split_optimizer(optimizer)
    with atomic_dir(path) as tmp:
        save_file(tensors(model), str(tmp / "model.safetensors"))
        save_file(tensors(opt_tensors), str(tmp / "optimizer.safetensors"))
        save_file(tensors(rng), str(tmp / "rng.safetensors"))
        if best is not None:
            old = path / "best.safetensors"
            if best_unchanged and old.is_file():
                os.link(old, tmp / "best.safetensors")  # the rename below keeps the inode alive
            else:
                save_file(tensors(best), str(tmp / "best.safetensors"))
        body = {"format": FORMAT, **state, "optimizer": opt_rest}
        (tmp / STATE).write_text(json.dumps(body))


def load(path: Path, key: str) -> dict | None:
    """The checkpoint at ``path`` as {"state", "model", "optimizer", "rng", "best"}, or None when there is
    none, or it is of another format or run (a warning says so; the run starts from step 0)."""
    if not (path / STATE).is_file():
        return None
    try:
        state = json.loads((path / STATE).read_text())
        if state.get("format") != FORMAT or state.get("fingerprint") != key:
            raise ValueError(f"format {state.get('format')} / fingerprint {state.get('fingerprint')}, "
                             f"expected {FORMAT} / {key}")
        opt_rest = state.pop("optimizer")
        best = path / "best.safetensors"
        return {"state": state, "model": load_file(str(path / "model.safetensors")),
                "optimizer": join_optimizer(load_file(str(path / "optimizer.safetensors")), opt_rest),
                "rng": load_file(str(path / "rng.safetensors")),
                "best": load_file(str(best)) if best.is_file() else None}
    except (OSError, ValueError, KeyError, SafetensorError) as err:
        print(f"warning: checkpoint {path} is unreadable ({err}); training starts from step 0", file=sys.stderr)
        return None
