"""Several processes on torch.distributed: the group, the share of work each rank takes, and what rank 0 gathers.

``processes`` in params.yaml says how many; ``pldistill.run.launch`` starts a stage under torchrun when it is
more than one, and the stage joins the group (``join``) before any work. Every helper here is a no-op in a
single process, so one code path serves both and one process runs exactly as before.

- Training is data-parallel, by sentence-transformers' Trainer (DDP through accelerate, in the group joined
  here): every rank holds the whole model and takes its share of the batches; the dev score is computed on
  rank 0 and sent to the others (``on_main``), so every rank keeps the same checkpoint. Rank 0 alone writes.
- Labelling is sharded: each rank labels its slice of every chunk and rank 0 gathers the slices, in
  order, into the chunk it writes (``shard_apply``).

Backend: nccl where each rank has a GPU of its own, gloo on CPU.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import timedelta
from typing import TypeVar

import pandas as pd
import torch
import torch.distributed as dist

from pldistill.base.errors import ConfigError

T = TypeVar("T")

# A rank waits this long for the others at a collective (labelling a chunk, a dev evaluation on rank 0)
# before the run fails; torch's default (10 min for nccl) is short for a big chunk on a slow CPU.
TIMEOUT = timedelta(hours=2)


def world() -> int:
    """How many processes run this stage (1 without a process group)."""
    return dist.get_world_size() if dist.is_initialized() else 1


def rank() -> int:
    return dist.get_rank() if dist.is_initialized() else 0


def is_main() -> bool:
    """Rank 0: the process that scores dev, gathers, and writes every output."""
    return rank() == 0


def join(processes: int) -> None:
    """Check that this run has as many processes as params.yaml's ``processes`` says and, for more than one,
    join their group (once per process). Raises ConfigError when the launch and the params disagree."""
    launched = int(os.environ.get("WORLD_SIZE", "1"))
    if launched != processes:
        raise ConfigError(
            f"processes: params.yaml asks for {processes} process(es), but this run was started with {launched}; "
            f"run the stage through the launcher, `python -m pldistill.run.launch stages.<name> ...` (dvc.yaml does), "
            f"or set processes to {launched}")
    if processes == 1 or dist.is_initialized():
        return
    if torch.cuda.is_available():
        if torch.cuda.device_count() < processes:
            raise ConfigError(f"processes: {processes} processes need a GPU each; found {torch.cuda.device_count()}"
                              f" (set processes to at most {torch.cuda.device_count()})")
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))  # "cuda" means this rank's GPU from here on
        dist.init_process_group("nccl", timeout=TIMEOUT)
    else:
        dist.init_process_group("gloo", timeout=TIMEOUT)


def leave() -> None:
    """Leave the process group, if this process joined one."""
    if dist.is_initialized():
        dist.destroy_process_group()


def _bounds(n: int) -> tuple[int, int]:
    """This rank's contiguous part of ``n`` items (ranks in order; sizes differ by at most one)."""
    w, r = world(), rank()
    return r * n // w, (r + 1) * n // w


def on_main(fn: Callable[[], T]) -> T:
    """``fn()`` computed on rank 0 alone and sent to every rank (a picklable value)."""
    if world() == 1:
        return fn()
    box = [fn() if is_main() else None]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def everywhere(flag: bool) -> bool:
    """Whether ``flag`` holds on every rank (every rank gets the same answer)."""
    if world() == 1:
        return flag
    flags: list = [None] * world()
    dist.all_gather_object(flags, bool(flag))
    return all(flags)


def shard_apply(fn: Callable[[pd.DataFrame], pd.DataFrame], frame: pd.DataFrame) -> pd.DataFrame | None:
    """``fn`` of ``frame``, computed slice by slice: each rank takes its contiguous slice of the rows, and
    rank 0 receives every slice's result and returns them concatenated in row order; the other ranks return
    None. ``fn`` works row by row (a slice's result does not depend on the other rows), and every rank
    calls this with the same frame."""
    if world() == 1:
        return fn(frame)
    lo, hi = _bounds(len(frame))
    mine = fn(frame.iloc[lo:hi]) if hi > lo else None  # fewer rows than ranks: some get none
    parts: list | None = [None] * world() if is_main() else None
    dist.gather_object(mine, parts, dst=0)
    if not is_main():
        return None
    parts = [p for p in parts if p is not None]
    return pd.concat(parts) if parts else fn(frame)  # no rows at all: as one process would




class Ranks:
    """The stage kind (pldistill.run.runtime's ``StageKind``) of a stage that runs on several processes and trains
    nothing (stage label): rank 0 reports, every rank leaves the group at the end; no checkpoints, no curves."""

    live = False  # no --live folder

    def enter(self, stack: object, live: object) -> None:
        return None

    def is_main(self) -> bool:
        return is_main()

    def leave(self) -> None:
        leave()

    def kept(self) -> list:
        return []


RANKS = Ranks()
