"""What identifies a stored step beside its data and params (pldistill.base.store): a model's files and the environment
it ran in. Stage embed's stored start and the cycles' steps name their entries with these."""

from __future__ import annotations

from importlib.metadata import version
from pathlib import Path

import torch

from pldistill.base.bundled import resolve
from pldistill.base.device import bf16_auto
from pldistill.base.io import sha256_file
from pldistill.base.store import digest


def weights_digest(spec: str) -> str:
    """What identifies a model in a stored step's key: the hashes of every file of a local (or bundled) directory;
    for a hub id only its name (the hub may change a model behind a name; pin one by downloading it)."""
    path = Path(resolve(spec))
    if not path.is_dir():
        return f"hub:{spec}"
    return digest({f.relative_to(path).as_posix(): sha256_file(f) for f in sorted(path.rglob("*")) if f.is_file()})


def environment(packages: tuple[str, ...] = ()) -> dict:
    """What else a stored step depends on: library versions (``packages`` beyond the usual), device, bf16's
    decision (pldistill.base.device.bf16_auto)."""
    names = ("torch", "transformers", "sentence-transformers", "tokenizers", "numpy", *packages)
    return {"versions": {p: version(p) for p in names},
            "device": torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu",
            "bf16": bf16_auto()}
