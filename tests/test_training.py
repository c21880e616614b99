import itertools

import numpy as np
import torch

from pldistill.config import parse_params
from pldistill.metrics import correlation, jaccard
from pldistill.models import BiEncoder
from pldistill.training import dev_spearman, fit, fit_at
from tests.conftest import make_pairs


def _train(tiny_model_dir, seed, dev_fn=None):
    torch.manual_seed(seed)
    bi = BiEncoder.load(str(tiny_model_dir), max_length=32)
    train, dev = make_pairs(64), make_pairs(24, offset=100)
    params = parse_params({"student": {"lr": 2e-3, "batch_size": 8, "epochs": 2, "evals_per_epoch": 2}}).student

    score = dev_spearman(bi, dev, parse_params({"evaluate": {"bf16": False}}).evaluate)
    res = fit(bi.module, bi.cosine_mse_loss, list(train["sentence1"]), list(train["sentence2"]),
              train["score"].to_numpy(), dev_fn or score, params, torch.Generator().manual_seed(seed))
    return bi, res, score


def test_fit_learns_and_keeps_the_best_dev_checkpoint(tiny_model_dir):
    bi, res, score = _train(tiny_model_dir, seed=3)
    assert [r["step"] for r in res.curve] == [0, 4, 8, 12, 16]  # 8 steps an epoch, 2 evals an epoch
    assert res.best_dev == max(r["dev"] for r in res.curve)
    assert res.best_dev > res.curve[0]["dev"] + 20  # a learnable toy task: dev rises well above the start
    assert abs(score() - res.best_dev) < 1e-6  # the module was left at the selected checkpoint


def test_fit_is_deterministic_for_a_seed(tiny_model_dir):
    # A dev score that rises at every evaluation, so the last (fully trained) checkpoint is selected.
    a, res_a, _ = _train(tiny_model_dir, seed=5, dev_fn=itertools.count().__next__)
    b, _, _ = _train(tiny_model_dir, seed=5, dev_fn=itertools.count().__next__)
    c, _, _ = _train(tiny_model_dir, seed=6, dev_fn=itertools.count().__next__)
    assert res_a.best_step == res_a.steps > 0
    for (name, pa), pb in zip(a.module.state_dict().items(), b.module.state_dict().values()):
        assert torch.equal(pa, pb), name
    assert any(not torch.equal(pa, pc) for pa, pc in zip(a.module.state_dict().values(), c.module.state_dict().values()))


def test_select_last_keeps_the_end_even_when_dev_falls(tiny_model_dir):
    falling = itertools.count(100, -1).__next__  # every evaluation scores lower than the one before
    kept, res, _ = _train(tiny_model_dir, seed=5, dev_fn=falling)
    assert res.best_step == 0  # dev selection keeps the start
    torch.manual_seed(5)
    bi = BiEncoder.load(str(tiny_model_dir), max_length=32)
    train, dev = make_pairs(64), make_pairs(24, offset=100)
    params = parse_params({"student": {"lr": 2e-3, "batch_size": 8, "epochs": 2, "evals_per_epoch": 2,
                                       "select": "last"}}).student
    res = fit(bi.module, bi.cosine_mse_loss, list(train["sentence1"]), list(train["sentence2"]),
              train["score"].to_numpy(), itertools.count(100, -1).__next__, params, torch.Generator().manual_seed(5))
    assert res.best_step == res.steps == 16 and res.best_dev == 96  # the fifth and last evaluation
    assert any(not torch.equal(a, b) for a, b in zip(kept.module.state_dict().values(), bi.module.state_dict().values()))


def test_fit_at_trains_short_and_scores_dev_at_full_length(tiny_model_dir, monkeypatch):
    bi = BiEncoder.load(str(tiny_model_dir), max_length=64)
    train, dev = make_pairs(16), make_pairs(8, offset=100)
    seen = {"train": set(), "dev": set()}
    score = bi.score

    def spy_score(*args, **kwargs):
        seen["dev"].add(bi.max_length)
        return score(*args, **kwargs)

    def loss(s1, s2, y):
        seen["train"].add(bi.max_length)
        return bi.cosine_mse_loss(s1, s2, y)

    monkeypatch.setattr(bi, "score", spy_score)
    p = parse_params({"student": {"batch_size": 8, "max_length": 16}, "evaluate": {"bf16": False}})
    fit_at(bi, loss, list(train["sentence1"]), list(train["sentence2"]), train["score"].to_numpy(), dev,
           p.student, p.evaluate, torch.Generator().manual_seed(0), desc="t")
    assert seen == {"train": {16}, "dev": {64}} and bi.max_length == 64  # and restored afterwards


def test_metrics():
    assert correlation([1, 2, 3], [2, 4, 9]) == {"spearman": 100.0, "pearson": 97.07}
    assert correlation([1, 1, 1], [1, 2, 3]) == {"spearman": 0.0, "pearson": 0.0}
    np.testing.assert_allclose(jaccard(["a b c", "x"], ["b c d", ""]), [0.5, 0.0])


def test_optimizer_gives_named_submodules_their_own_learning_rate():
    from pldistill.config import StepParams
    from pldistill.training import _optimizer

    module = torch.nn.ModuleDict({"encoder": torch.nn.Linear(3, 3), "head": torch.nn.Linear(3, 1)})
    opt = _optimizer(module, StepParams(lr=1e-5, weight_decay=0.01), {"head": 1e-3})
    by_param = {id(p): (g["lr"], g["weight_decay"]) for g in opt.param_groups for p in g["params"]}
    assert by_param[id(module["encoder"].weight)] == (1e-5, 0.01)
    assert by_param[id(module["encoder"].bias)] == (1e-5, 0.0)  # no decay on biases
    assert by_param[id(module["head"].weight)] == (1e-3, 0.01)
    assert by_param[id(module["head"].bias)] == (1e-3, 0.0)
