"""Tokenisation ahead of the model: a batch's inputs are tokenised in a worker thread while the model computes
the batch before, so the host-side work (tokenizer, padding, pinning for the copy to a GPU) is off the critical
path. On a GPU it would otherwise idle the device between batches: a MiniLM cross-encoder's 64 STS-B pairs take
about 6 ms to tokenise on one CPU core, more than an H100 needs to score them.

Features made ahead are those made in line (the same call on the same inputs), so results do not change. A fast
tokenizer must not be called from two threads at once (Rust's "Already borrowed"), so each model's tokenizer sits
behind a lock (``Tokens``).
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

import torch

DEPTH = 2  # batches tokenised ahead of the one the model computes
T = TypeVar("T")
R = TypeVar("R")


def pool() -> ThreadPoolExecutor:
    """One worker: tokenisation stays serial (one tokenizer), in step with the model."""
    return ThreadPoolExecutor(max_workers=1, thread_name_prefix="pldistill-tokenize")


def host(features: dict) -> dict:
    """Tensors in page-locked memory where a CUDA device will read them (the copy can then run asynchronously)."""
    if not torch.cuda.is_available():
        return features
    return {k: v.pin_memory() if torch.is_tensor(v) else v for k, v in features.items()}


class Tokens:
    """A model's tokenizer calls, under one lock (inference tokenises ahead in a worker thread: ``prefetched``).

    ``waited``: seconds the consuming thread spent on features, tokenising in line or waiting for the worker; the
    host-side time left on the critical path.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.waited = 0.0

    def locked(self, make: Callable[[], R]) -> R:
        with self.lock:
            return make()

    def now(self, make: Callable[[], R]) -> R:
        """``make()`` in line, under the lock, its time counted as waited."""
        t0 = time.perf_counter()
        out = self.locked(make)
        self.waited += time.perf_counter() - t0
        return out


def prefetched(make: Callable[[T], R], items: Iterable[T], depth: int = DEPTH,
               tokens: Tokens | None = None) -> Iterator[tuple[T, R]]:
    """Each item with ``make(item)``, made ``depth`` items ahead in a worker thread (``depth`` 0: in line).
    ``tokens``: the model's lock (``make`` runs under it) and where the consumer's waiting is counted."""
    tokens = tokens or Tokens()
    items = iter(items)
    if depth <= 0:
        for item in items:
            yield item, tokens.now(lambda item=item: make(item))
        return
    with pool() as workers:
        pending: collections.deque[tuple[T, Future]] = collections.deque()
        try:
            for item in items:
                pending.append((item, workers.submit(tokens.locked, lambda item=item: make(item))))
                if len(pending) > depth:
                    yield _ready(pending.popleft(), tokens)
            while pending:
                yield _ready(pending.popleft(), tokens)
        finally:
            for _, fut in pending:
                fut.cancel()


def _ready(entry: tuple[T, Future], tokens: Tokens) -> tuple[T, R]:
    item, fut = entry
    t0 = time.perf_counter()
    out = fut.result()
    tokens.waited += time.perf_counter() - t0
    return item, out
