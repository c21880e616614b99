"""Tokenisation ahead of the model in inference (pldistill.models.ahead): the same features, so the same outputs, with
the tokenizer's work done in the worker thread. (In training, the Trainer's data loader tokenises.)"""

import threading

import numpy as np
import pytest
import torch

from pldistill.models import ahead
from pldistill.models.encoders import BiEncoder, CrossModel
from tests.conftest import make_pairs

WORKER = "pldistill-tokenize"


def test_prefetched_keeps_order_and_depth():
    running = []  # items whose make had started when each item was handed out

    def make(i):
        running.append(i)
        return i * i

    out = []
    for item, value in ahead.prefetched(make, range(6), depth=2):
        out.append((item, value))
        assert max(running) <= min(item + 2, 5)  # never more than 2 items ahead of the one handed out
    assert out == [(i, i * i) for i in range(6)]
    assert list(ahead.prefetched(make, range(3), depth=0)) == [(0, 0), (1, 1), (2, 4)]


def test_prefetched_raises_the_worker_error_where_it_is_used():
    def make(i):
        if i == 2:
            raise ValueError("bad row 2")
        return i

    seen = []
    with pytest.raises(ValueError, match="bad row 2"):
        for item, _ in ahead.prefetched(make, range(5), depth=2):
            seen.append(item)
    assert seen == [0, 1]


def _threads_of(model):
    """Record the thread of each call of the model's tokenizer (its preprocess)."""
    calls, inner = [], model.model.preprocess

    def preprocess(*a, **k):
        calls.append(threading.current_thread().name)
        return inner(*a, **k)

    model.model.preprocess = preprocess
    return calls


@pytest.mark.parametrize("kind", ["bi", "cross"])
def test_inference_ahead_gives_the_in_line_outputs(tiny_model_dir, kind):
    torch.manual_seed(0)
    model = (BiEncoder if kind == "bi" else CrossModel).load(str(tiny_model_dir), max_length=32)
    pairs = make_pairs(70)
    s1, s2 = list(pairs["sentence1"]), list(pairs["sentence2"])
    calls = _threads_of(model)
    ahead_out = model.score(s1, s2, batch_size=8, bf16=False)
    assert calls and all(c.startswith(WORKER) for c in calls)  # no tokenising on the critical path
    model.prefetch_depth = 0
    calls.clear()
    in_line = model.score(s1, s2, batch_size=8, bf16=False)
    assert calls and not any(c.startswith(WORKER) for c in calls)
    np.testing.assert_array_equal(ahead_out, in_line)
