"""Where models run: the device, and whether bf16 runs natively on it."""

from __future__ import annotations

import functools
import platform
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


def cpu_flags() -> str:
    """The CPU's model and the flags that decide matmul speed (AVX2 / AVX-512 / AMX / VNNI)."""
    try:
        info = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.processor()
    name = re.search(r"model name\s*:\s*(.*)", info)
    flags = set(re.search(r"flags\s*:\s*(.*)", info).group(1).split()) if "flags" in info else set()
    keep = sorted(f for f in flags if re.match(r"(avx|amx|fma|f16c|sse4)", f))
    return f"{name.group(1) if name else '?'}; {' '.join(keep)}"


def peak_rss_mb() -> float | None:
    """This process's peak resident memory in MiB (Linux's VmHWM, which starts afresh at exec; ``ru_maxrss``
    would carry a forking parent's size); None where /proc is not there to ask."""
    try:
        lines = Path("/proc/self/status").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        if line.startswith("VmHWM:"):
            return round(int(line.split()[1]) / 1024, 1)  # kB
    return None
