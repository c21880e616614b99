"""Where models run: the device, and whether bf16 runs natively on it, and pays."""

from __future__ import annotations

import contextlib
import functools
import json
import platform
import re
import time
from collections.abc import Iterator
from pathlib import Path

import torch

from pldistill.base.console import detail
from pldistill.base.io import atomic_path, default_root

BF16_MARGIN = 1.2  # bf16 "auto" is on on a CPU only where a bf16 matmul runs at least this much faster than fp32's
BF16_PROBE = (1024, 384, 1536)  # (rows, in, out) of the probe's matmul: a MiniLM feed-forward layer on 1024 tokens


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


def bf16_speedup(rounds: int = 5, calls: int = 4) -> float:
    """fp32's time over bf16 autocast's for the probe's matmul on this CPU (best of ``rounds``, interleaved)."""
    rows, width, out = BF16_PROBE
    # (rows, width) and (out, width), values in [-1, 1]: a matmul's time does not depend on them, so no randomness
    x = torch.linspace(-1, 1, rows * width).reshape(rows, width)
    w = torch.linspace(1, -1, out * width).reshape(out, width)

    def timed(bf16: bool) -> float:
        with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            t0 = time.perf_counter()
            for _ in range(calls):
                torch.nn.functional.linear(x, w)  # (rows, out); under autocast the weight is cast each call, as
            return time.perf_counter() - t0      # in a model's forward
    timed(False), timed(True)  # warm-up: the first calls pay for allocations and kernel selection
    best = {False: float("inf"), True: float("inf")}
    for _ in range(rounds):
        for bf16 in best:
            best[bf16] = min(best[bf16], timed(bf16))
    return best[False] / best[True]


@functools.cache
def bf16_auto() -> bool:
    """What bf16 "auto" means here: a GPU's bf16 support; on a CPU, native bf16 units *and* a bf16 matmul measured
    ``BF16_MARGIN`` times faster than fp32's. The flags alone mislead: on an Intel Xeon with avx512_bf16 (no AMX)
    torch 2.13's bf16 matmul ran at about half fp32's speed, and encoding at 0.62x (docs/benchmarks.md).

    The decision is kept in the project's store (pldistill.base.io.default_root), one for each CPU, torch and thread
    count, so every stage of every run on this machine decides alike: a timing near the margin cannot flip from one
    run to the next and change the artifacts, and a run at another thread count (a test's one thread) decides for
    itself without overwriting the others'."""
    if torch.cuda.is_available():
        return torch.cuda.is_bf16_supported()
    if not native_bf16():
        return False
    key = {"cpu": cpu_flags(), "torch": torch.__version__, "threads": torch.get_num_threads()}
    file = default_root() / "bf16-auto.json"
    try:
        kept = json.loads(file.read_text())
    except (OSError, ValueError):
        kept = {}
    decisions = [d for d in kept.get("decisions", [kept]) if isinstance(d, dict) and isinstance(d.get("on"), bool)]
    for d in decisions:
        if d.get("key") == key:
            return d["on"]
    speedup = bf16_speedup()
    on = speedup >= BF16_MARGIN
    detail(f"bf16 auto: {'on' if on else 'off'}: a bf16 matmul runs at {speedup:.2f}x fp32's speed on this CPU "
           f"(on at >= {BF16_MARGIN}x); kept in {file}")
    try:
        with atomic_path(file) as tmp:
            tmp.write_text(json.dumps({"decisions": [*decisions, {"key": key, "on": on, "speedup": round(speedup, 3)}]},
                                      indent=2) + "\n")
    except OSError as err:  # a read-only store: decide again next time, and say so
        print(f"bf16 auto: could not keep the decision in {file} ({err})", flush=True)
    return on


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


def bf16_on(bf16: bool | str) -> bool:
    """Whether a bf16 switch turns autocast on here ("auto": ``bf16_auto``; emulated bf16 is 2.8x slower than fp32
    on an AVX512 CPU)."""
    return bf16_auto() if bf16 == "auto" else bool(bf16)


@contextlib.contextmanager
def autocast(bf16: bool | str) -> Iterator[None]:
    """bf16 autocast, on as ``bf16_on`` resolves the switch."""
    with torch.autocast(device_type=device(), dtype=torch.bfloat16, enabled=bf16_on(bf16)):
        yield
