"""Speed measured where quality is: each model scores the same pairs as a reference model (the student's start,
whole, in torch fp32), in many short turns: the pairs are cut into chunks, and round after round every model scores
each chunk in turn (the order of the models rotated from round to round), so a change of load on the machine hits
all of them alike.

A competing process only ever adds time, so each model's time for a chunk is its fastest over the rounds, and its
speed is the reference's total of those over the model's: 2.0 is twice as fast. Its interval (``speed_low``,
``speed_high``) is the 2.5th and 97.5th percentiles of the same figure over the chunks resampled with replacement
(the same draw for every model: a paired bootstrap): how far it moves with the pairs timed.

Scoring a pair is what every model here does (a bi-encoder encodes both sentences and takes the cosine, a
cross-encoder reads the pair), so one figure serves students, baselines, teachers and exports of any kind.

Models that do the same arithmetic (``cost_key``: the same modules, weight shapes and length cap, as a student and
its gold-only baseline cut alike, or a teacher that is the reference model fine-tuned) are timed once: the others
take that model's figures (1.0 for the reference's twins), so no two of them differ by the clock's noise alone."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Hashable, Iterator, Sequence
from typing import Protocol

import numpy as np


class Scorer(Protocol):
    def score(self, s1: Sequence[str], s2: Sequence[str], batch_size: int, bf16: bool | str,
              progress: bool = False) -> object: ...


def _seconds(model: Scorer, s1: Sequence[str], s2: Sequence[str], batch_size: int, bf16: bool | str,
             at_least: float = 0.0) -> tuple[float, int]:
    """Seconds a pass over the pairs takes, and the passes timed: passes repeat until ``at_least`` seconds have
    gone (one pass at least), so a model that takes milliseconds a pass is not timed by the clock's noise."""
    passes, t0 = 0, time.perf_counter()
    while True:
        model.score(s1, s2, batch_size, bf16)
        passes += 1
        elapsed = time.perf_counter() - t0
        if elapsed >= at_least:
            return elapsed / passes, passes


def cost_key(model: Scorer, batch_size: int) -> Hashable | None:
    """What a model's time to score pairs depends on, where the model can tell (its ``cost_key()``), with the batch
    size it is timed at; None: time it."""
    key = getattr(model, "cost_key", None)
    mine = key() if key is not None else None
    return None if mine is None else (mine, batch_size)


def twins(models: dict[str, Scorer], sizes: dict[str, int]) -> dict[str, str]:
    """Each model whose cost key an earlier model of ``models`` has -> that earlier model (timed in its place)."""
    first: dict[Hashable, str] = {}
    out = {}
    for name, model in models.items():
        key = cost_key(model, sizes[name])
        if key is not None and key in first:
            out[name] = first[key]
        elif key is not None:
            first[key] = name
    return out


@contextlib.contextmanager
def threads(n: int | None) -> Iterator[None]:
    """The threads a model is timed with: ``n`` (torch's intra-op threads, and those of an ONNX Runtime or OpenVINO
    session made inside the block: pldistill.models.accel reads torch's), or None: every core, as torch starts. The
    tokenizers library tokenises a batch over every core unless ``n`` is 1. Our stages turn its threads off
    (TOKENIZERS_PARALLELISM=false, pldistill.run.runtime) only to keep forked workers quiet; a user's process has them
    on (STS-B, 1,024 sentences a batch, 2 cores: a static model 25.7k pairs a second with them, 16.0k without).

    One thread a model is what holds on a shared machine: with a CPU-bound process beside it on 2 cores, every model
    still has a core of its own, where threads spread over both cores wait on the one that was descheduled, and
    torch waits longer than ONNX Runtime or OpenVINO (the STS-B student's ratios rose by 29-65% so)."""
    import torch

    before_env, before_threads = os.environ.get("TOKENIZERS_PARALLELISM"), torch.get_num_threads()
    os.environ["TOKENIZERS_PARALLELISM"] = "false" if n == 1 else "true"
    if n is not None:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before_threads)
        if before_env is None:
            os.environ.pop("TOKENIZERS_PARALLELISM", None)
        else:
            os.environ["TOKENIZERS_PARALLELISM"] = before_env


CHUNK = 64  # pairs a turn: long enough for a batch, short enough that load changes between turns, not within one
RESAMPLES = 1000  # bootstrap draws of the rounds for a speed's interval


def _chunks(n: int, chunk: int) -> list[slice]:
    return [slice(i, min(i + chunk, n)) for i in range(0, n, chunk)] or [slice(0, 0)]


def ratios(reference: Scorer, models: dict[str, Scorer], s1: Sequence[str], s2: Sequence[str], batch_size: int,
           bf16: bool | str, rounds: int, min_seconds: float = 0.0,
           batch_sizes: dict[str, int] | None = None, chunk: int = CHUNK, seed: int = 0,
           n_threads: int | None = None) -> dict[str, dict]:
    """Per model: ``speed`` (the reference's summed fastest chunk times over the model's), ``speed_low`` and
    ``speed_high`` (its 95% interval over the chunks, resampled with ``seed``), the passes a turn timed (as many as
    ``min_seconds`` takes, one at least), the batch size, and pairs and sentences per second. Each model scores in
    batches of ``batch_size``, or of its own in ``batch_sizes`` (by name: a static model's, as its users encode),
    with ``n_threads`` threads (``threads``). A model with an earlier one's cost key (``twins``; the reference is
    first) is not timed: it takes that model's figures, 1.0 for the reference's, and says so (``timed_as``)."""
    everyone = {"reference": reference, **models}
    size = {name: (batch_sizes or {}).get(name, batch_size) for name in everyone}
    twin = twins(everyone, size)
    timed = list(name for name in everyone if name not in twin)
    parts = _chunks(len(s1), chunk)
    seconds = {name: np.zeros((rounds, len(parts))) for name in timed}  # (rounds, chunks): a pass's seconds
    passes: dict[str, int] = {}
    with threads(n_threads):
        for name in timed:  # warm-up: allocator, kernels, a backend's first-call choice
            m = everyone[name]
            _seconds(m, s1[parts[0]][: size[name]], s2[parts[0]][: size[name]], size[name], bf16)
        for r in range(rounds):
            order = timed[r % len(timed):] + timed[: r % len(timed)]  # who goes first rotates
            for c, part in enumerate(parts):
                for name in order:
                    took, n = _seconds(everyone[name], s1[part], s2[part], size[name], bf16, min_seconds)
                    seconds[name][r, c] = took
                    passes[name] = max(passes.get(name, 0), n)
    draws = np.random.default_rng(seed).integers(0, len(parts), size=(RESAMPLES, len(parts)))

    def total(name: str, draw: np.ndarray | None = None) -> np.ndarray | float:
        fastest = seconds[name].min(axis=0)  # (chunks,): each chunk's fastest turn
        return fastest.sum() if draw is None else fastest[draw].sum(axis=-1)  # draw: (resamples, chunks)

    ref, ref_boot = total("reference"), total("reference", draws)
    sentences = sum(len(set(s1[part]) | set(s2[part])) for part in parts)  # each turn encodes its distinct ones
    out = {}
    for name in models:
        timed_as = twin.get(name, name)
        mine, boot = total(timed_as), ref_boot / total(timed_as, draws)
        out[name] = {"speed": round(float(ref / mine), 2), "speed_low": round(float(np.percentile(boot, 2.5)), 2),
                     "speed_high": round(float(np.percentile(boot, 97.5)), 2), "passes": passes[timed_as],
                     "turns": rounds * len(parts), "batch_size": size[name], "reference_batch_size": size["reference"],
                     "pairs_per_s": round(len(s1) / mine, 1), "reference_pairs_per_s": round(len(s1) / ref, 1),
                     "sentences_per_s": round(sentences / mine, 1),  # a bi-encoder's throughput at its batch size
                     **({"timed_as": twin[name]} if name in twin else {})}
    return out


class Encoder(Protocol):
    def encode(self, texts: Sequence[str], batch_size: int = 64, bf16: bool | str = "auto",
               progress: bool = False) -> object: ...


def latency(models: dict[str, Encoder], sentences: Sequence[str], bf16: bool | str) -> dict[str, dict]:
    """Each model encoding one sentence at a time (batch 1: a request's latency), in turns: per model the median and
    90th percentile milliseconds, and sentences per second at batch 1 (1 / the median)."""
    took: dict[str, list[float]] = {name: [] for name in models}
    with threads(None):
        for m in models.values():
            m.encode(list(sentences[:1]), 1, bf16)  # warm-up
        for text in sentences:
            for name, m in models.items():
                t0 = time.perf_counter()
                m.encode([text], 1, bf16)
                took[name].append(time.perf_counter() - t0)
    out = {}
    for name, t in took.items():
        p50, p90 = (float(np.percentile(t, q)) for q in (50, 90))
        out[name] = {"ms_p50": round(1000 * p50, 3), "ms_p90": round(1000 * p90, 3),
                     "sentences_per_s_batch1": round(1 / p50, 1) if p50 > 0 else None, "sentences": len(t)}
    return out
