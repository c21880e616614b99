"""Run a stage module with pldistill.base.io's writers noting, per rank, each path they write: the 2-process tests
start it under torchrun to check that only rank 0 writes.

    python -m torch.distributed.run ... -m tests.record_writes <log dir> stages.<name> <the stage's options>

Each rank appends the paths it writes to ``<log dir>/writes-<rank>.txt``. The writers are wrapped before any
other pldistill module is imported, so every ``from pldistill.base.io import atomic_dir`` gets the wrapped one.
"""

from __future__ import annotations

import contextlib
import os
import runpy
import sys
from pathlib import Path

import pldistill.base.io as io

LOG = Path(sys.argv[1]) / f"writes-{os.environ.get('RANK', '0')}.txt"


def _recorded(writer):
    @contextlib.contextmanager
    def wrapper(path, *args, **kwargs):
        with LOG.open("a") as f:
            f.write(f"{path}\n")
        with writer(path, *args, **kwargs) as tmp:
            yield tmp

    return wrapper


for name in ("atomic_path", "atomic_dir", "scratch"):
    setattr(io, name, _recorded(getattr(io, name)))

if __name__ == "__main__":
    module = sys.argv[2]
    sys.argv = [module, *sys.argv[3:]]
    runpy.run_module(module, run_name="__main__", alter_sys=True)
