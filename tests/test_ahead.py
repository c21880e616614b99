"""Tokenisation ahead of the model (pldistill.ahead): the same features, so the same outputs and weights, with the
tokenizer's work done in the worker thread."""

import threading

import numpy as np
import pytest
import torch

from pldistill import ahead
from pldistill.losses import pair_loss
from pldistill.models import BiEncoder, CrossModel
from pldistill.validate import parse_params
from tests.conftest import fit, make_pairs

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


def _fit(tiny_model_dir, kind, prefetch):
    torch.manual_seed(1)
    model = (BiEncoder if kind == "bi" else CrossModel).load(str(tiny_model_dir), max_length=32)
    calls = _threads_of(model)
    train = make_pairs(40)
    # 5 steps an epoch (the last one short), 2 micro-batches each, an evaluation mid-epoch, 2 epochs
    params = parse_params({"student": {"lr": 2e-3, "batch_size": 8, "epochs": 2, "evals_per_epoch": 2,
                                       "accumulate": 2}}).student
    dev = iter(range(100)).__next__  # rises: the last checkpoint is kept
    res = fit(model.module, pair_loss(model), (list(train["sentence1"]), list(train["sentence2"])),
              train["score"].to_numpy(), dev, params, torch.Generator().manual_seed(1),
              prefetch=model.prefetch if prefetch else None)
    return model, res, calls


@pytest.mark.parametrize("kind", ["bi", "cross"])
def test_training_ahead_gives_the_same_weights(tiny_model_dir, kind):
    a, res, calls = _fit(tiny_model_dir, kind, prefetch=True)
    b, _, in_line = _fit(tiny_model_dir, kind, prefetch=False)
    assert res.steps == 10
    for (name, pa), pb in zip(a.module.state_dict().items(), b.module.state_dict().values()):
        assert torch.equal(pa, pb), name
    # only each epoch's first step (2 micro-batches) tokenises in line: its batch order is drawn as it starts
    assert sum(not c.startswith(WORKER) for c in calls) == 2 * 2
    assert sum(c.startswith(WORKER) for c in calls) == 8 * 2
    assert len(in_line) == 10 * 2 and not any(c.startswith(WORKER) for c in in_line)
    assert not a.tokens.ahead  # everything made ahead was used


def test_made_ahead_but_unused_does_not_pile_up(tiny_model_dir):
    bi = BiEncoder.load(str(tiny_model_dir), max_length=32)
    with ahead.pool() as workers:
        for i in range(5):
            bi.prefetch(workers, [([f"a {i}"], [f"b {i}"]), ([f"c {i}"], [f"d {i}"])])
        assert len(bi.tokens.ahead) == 4  # the last call's 2 and the 2 before them
