"""Speed measured where quality is: each model scores the same pairs as a reference model (the student's start,
whole), in turns, round after round, so a change of load on the machine hits all of them alike. A model's speed is
the median over rounds of (the reference's seconds / the model's seconds) in that round: 2.0 is twice as fast.

Scoring a pair is what every model here does (a bi-encoder encodes both sentences and takes the cosine, a
cross-encoder reads the pair), so one figure serves students, baselines and teachers of any kind.

Models that do the same arithmetic (``cost_key``: the same modules, weight shapes and length cap, as a student and
its gold-only baseline cut alike, or a teacher that is the reference model fine-tuned) are timed once: the others
take that model's ratio (1.0 for the reference's twins), so no two of them differ by the clock's noise alone."""

from __future__ import annotations

import contextlib
import os
import statistics
import time
from collections.abc import Hashable, Iterator, Sequence
from typing import Protocol


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
def users_tokenizer_threads() -> Iterator[None]:
    """The tokenizers library's own default while timing: it tokenises a batch over every core. Our stages turn
    that off (TOKENIZERS_PARALLELISM=false, pldistill.runtime) only to keep forked workers quiet; a user's process
    has it on, and for a static model tokenising is most of the time (STS-B, 1,024 sentences a batch, 2 cores:
    25.7k pairs a second with it, 16.0k without; the whole MiniLM 321 and 323)."""
    before = os.environ.get("TOKENIZERS_PARALLELISM")
    os.environ["TOKENIZERS_PARALLELISM"] = "true"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("TOKENIZERS_PARALLELISM", None)
        else:
            os.environ["TOKENIZERS_PARALLELISM"] = before


def ratios(reference: Scorer, models: dict[str, Scorer], s1: Sequence[str], s2: Sequence[str], batch_size: int,
           bf16: bool | str, rounds: int, min_seconds: float = 0.0,
           batch_sizes: dict[str, int] | None = None) -> dict[str, dict]:
    """Per model: ``speed`` (the median per-round ratio to ``reference``), the ratio of each round, the passes
    over the pairs each round timed (as many as ``min_seconds`` takes, one at least), the batch size, and the pairs
    per second of the model and of the reference (medians). Each model scores in batches of ``batch_size``, or of
    its own in ``batch_sizes`` (by name: a static model's, as its users encode). A model with an earlier one's
    cost key (``twins``; the reference is first) is not timed: it takes that model's rounds, 1.0 for the reference's,
    and says so (``timed_as``)."""
    everyone = {"reference": reference, **models}
    size = {name: (batch_sizes or {}).get(name, batch_size) for name in everyone}
    twin = twins(everyone, size)
    timed = {name: m for name, m in everyone.items() if name not in twin}
    seconds: dict[str, list[float]] = {name: [] for name in timed}
    passes: dict[str, int] = {}
    with users_tokenizer_threads():
        for name, m in timed.items():  # warm-up: allocator, kernels, a backend's first-call choice
            _seconds(m, s1[: size[name]], s2[: size[name]], size[name], bf16)
        for _ in range(rounds):
            for name, m in timed.items():
                took, n = _seconds(m, s1, s2, size[name], bf16, min_seconds)
                seconds[name].append(took)
                passes[name] = max(passes.get(name, 0), n)
    ref = seconds["reference"]
    out = {}
    for name in models:
        timed_as = twin.get(name, name)
        mine = seconds[timed_as]
        per_round = [r / s for r, s in zip(ref, mine)]
        out[name] = {"speed": round(statistics.median(per_round), 2),
                     "per_round": [round(x, 2) for x in per_round], "passes": passes[timed_as],
                     "batch_size": size[name], "reference_batch_size": size["reference"],
                     "pairs_per_s": round(len(s1) / statistics.median(mine), 1),
                     "reference_pairs_per_s": round(len(s1) / statistics.median(ref), 1),
                     **({"timed_as": twin[name]} if name in twin else {})}
    return out
