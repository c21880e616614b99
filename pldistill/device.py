"""Where models run: the device, and whether bf16 runs natively on it."""

from __future__ import annotations

import functools
import re
from pathlib import Path

import torch


def device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


@functools.cache
def native_bf16() -> bool:
    """True where bf16 matmuls run natively: a bf16 GPU, or a CPU with AMX / AVX512-BF16."""
    if torch.cuda.is_available():
        return torch.cuda.is_bf16_supported()
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return bool(re.search(r"\b(amx_bf16|avx512_bf16)\b", flags))
