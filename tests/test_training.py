import itertools

import numpy as np
import pytest
import torch

from pldistill.base.metrics import correlation, dev_spearman, jaccard
from pldistill.models.encoders import BiEncoder
from pldistill.params.config import parse_params
from pldistill.train.losses.cosent import cosent
from pldistill.train.losses.cosine_mse import CosineMSELoss, cosine_mse
from pldistill.train.losses.pair import pair_loss
from pldistill.train.training import train as fit_at
from tests.conftest import fit, make_pairs


def _train(tiny_model_dir, seed, dev_fn=None):
    torch.manual_seed(seed)
    bi = BiEncoder.load(str(tiny_model_dir), max_length=32)
    train, dev = make_pairs(64), make_pairs(24, offset=100)
    params = parse_params({"student": {"lr": 2e-3, "batch_size": 8, "epochs": 2, "evals_per_epoch": 2}}).student

    score = dev_spearman(bi, dev, parse_params({"evaluate": {"bf16": False}}).evaluate)
    res = fit(bi.module, CosineMSELoss(bi.model), (list(train["sentence1"]), list(train["sentence2"])),
              train["score"].to_numpy(), dev_fn or score, params, torch.Generator().manual_seed(seed))
    return bi, res, score


def test_fit_learns_and_keeps_the_best_dev_checkpoint(tiny_model_dir):
    _, res, score = _train(tiny_model_dir, seed=3)
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
    assert any(not torch.equal(pa, pc)
               for pa, pc in zip(a.module.state_dict().values(), c.module.state_dict().values()))


def test_select_last_keeps_the_end_even_when_dev_falls(tiny_model_dir):
    falling = itertools.count(100, -1).__next__  # every evaluation scores lower than the one before
    kept, res, _ = _train(tiny_model_dir, seed=5, dev_fn=falling)
    assert res.best_step == 0  # dev selection keeps the start
    torch.manual_seed(5)
    bi = BiEncoder.load(str(tiny_model_dir), max_length=32)
    train = make_pairs(64)
    params = parse_params({"student": {"lr": 2e-3, "batch_size": 8, "epochs": 2, "evals_per_epoch": 2,
                                       "select": "last"}}).student
    res = fit(bi.module, CosineMSELoss(bi.model), (list(train["sentence1"]), list(train["sentence2"])),
              train["score"].to_numpy(), itertools.count(100, -1).__next__, params, torch.Generator().manual_seed(5))
    assert res.best_step == res.steps == 16 and res.best_dev == 96  # the fifth and last evaluation
    assert any(not torch.equal(a, b)
               for a, b in zip(kept.module.state_dict().values(), bi.module.state_dict().values()))


def test_fit_at_trains_short_and_scores_dev_at_full_length(tiny_model_dir, monkeypatch):
    bi = BiEncoder.load(str(tiny_model_dir), max_length=64)
    train, dev = make_pairs(16), make_pairs(8, offset=100)
    seen = {"train": set(), "dev": set()}
    score = bi.score

    def spy_score(*args, **kwargs):
        seen["dev"].add(bi.max_length)
        return score(*args, **kwargs)

    class Spy(CosineMSELoss):
        def forward(self, features, y):
            seen["train"].add(bi.max_length)
            return super().forward(features, y)

    loss = Spy(bi.model)

    monkeypatch.setattr(bi, "score", spy_score)
    p = parse_params({"student": {"batch_size": 8, "max_length": 16}, "evaluate": {"bf16": False}})
    fit_at(bi, loss, (list(train["sentence1"]), list(train["sentence2"])), train["score"].to_numpy(), dev,
           p.student, p.evaluate, torch.Generator().manual_seed(0), desc="t")
    assert seen == {"train": {16}, "dev": {64}} and bi.max_length == 64  # and restored afterwards


def test_sentences_train_as_one_column_each_row_once(tiny_model_dir):
    """Sentence-level data (the embedding step, the RTT ensemble's student): one text column, not the sentences
    twice."""
    bi = BiEncoder.load(str(tiny_model_dir), max_length=32)
    sentences = list(make_pairs(16)["sentence1"])
    target = torch.nn.functional.normalize(torch.randn(16, bi.dim), dim=-1).numpy()
    seen: list[tuple[int, object]] = []

    class Sentences(torch.nn.Module):  # on sentence-transformers' contract: one dict of features a column
        def __init__(self, model):
            super().__init__()
            self.model = model

        def forward(self, features, y):
            seen.append(tuple(len(f["input_ids"]) for f in features))
            return ((self.model(features[0])["sentence_embedding"] - y) ** 2).mean()

    loss = Sentences(bi.model)

    p = parse_params({"student": {"batch_size": 8, "epochs": 1}, "evaluate": {"bf16": False}})
    fit_at(bi, loss, (sentences,), target, make_pairs(8, offset=100), p.student, p.evaluate,
           torch.Generator().manual_seed(0), desc="sentences")
    assert seen == [(8,), (8,)]



def test_a_loss_reads_as_many_text_columns_as_the_data_have(tiny_model_dir):
    """Triplets (anchor, positive, negative) train like pairs: each batch hands the loss its rows of every column,
    tokenised, aligned with their labels (here each row's index)."""
    bi = BiEncoder.load(str(tiny_model_dir), max_length=32)
    rows = make_pairs(16)
    texts = (list(rows["sentence1"]), list(rows["sentence2"]), [f"unrelated {i}" for i in range(16)])
    seen: list[tuple] = []
    tok = bi.model.tokenizer

    class Triplet(torch.nn.Module):  # a margin loss: the anchor nearer its positive than its negative
        def __init__(self, model):
            super().__init__()
            self.model = model

        def forward(self, features, y):
            cols = [tok.batch_decode(f["input_ids"], skip_special_tokens=True) for f in features]
            seen.extend(zip(y.tolist(), *cols))
            a, pos, neg = (self.model(f)["sentence_embedding"] for f in features)  # (batch, dim) each
            cos = torch.nn.functional.cosine_similarity
            return torch.relu(cos(a, neg) - cos(a, pos) + 0.5).mean()

    p = parse_params({"student": {"batch_size": 8, "epochs": 1}, "evaluate": {"bf16": False}})
    fit_at(bi, Triplet(bi.model), texts, np.arange(16, dtype=np.float32), make_pairs(8, offset=100), p.student,
           p.evaluate, torch.Generator().manual_seed(0), desc="triplets")
    assert sorted(seen) == [(float(i), *(tok.decode(tok(c[i])["input_ids"], skip_special_tokens=True) for c in texts))
                            for i in range(16)]  # every row once, its three texts together


def test_columns_of_unequal_length_or_the_wrong_count_are_refused(tiny_model_dir):
    from pldistill.train.training import Run

    bi = BiEncoder.load(str(tiny_model_dir), max_length=32)
    p = parse_params({"student": {"batch_size": 4, "epochs": 1}})
    with pytest.raises(ValueError, match=r"one row per target \(3\); got columns of \[3, 2\]"):
        fit(bi.module, CosineMSELoss(bi.model), (["a", "b", "c"], ["d", "e"]), np.zeros(3), lambda: 0.0, p.student,
            torch.Generator())
    with pytest.raises(TypeError, match="texts is a tuple of text columns"):  # one column given bare
        Run(CosineMSELoss(bi.model), ["a", "b"], np.zeros(2), lambda: 0.0, p.student, 0, "t")
    with pytest.raises(ValueError, match=r"the cosine MSE loss learns from 2 text columns a row \(besides the label\); "
                                         "got 1"):
        CosineMSELoss(bi.model)([bi.model.preprocess(["a", "b"])], torch.zeros(2))


def test_metrics():
    assert correlation([1, 2, 3], [2, 4, 9]) == {"spearman": 100.0, "pearson": 97.07}
    assert correlation([1, 1, 1], [1, 2, 3]) == {"spearman": 0.0, "pearson": 0.0}
    np.testing.assert_allclose(jaccard(["a b c", "x"], ["b c d", ""]), [0.5, 0.0])


def test_a_loss_s_own_module_trains_at_its_own_learning_rate(tiny_model_dir):
    """A head the loss holds (DSE's) is trained with the model, at ``lr_by_prefix``'s rate (the Trainer's
    learning_rate_mapping); biases and LayerNorm weights are not decayed."""
    from pldistill.train.training import Run

    bi = BiEncoder.load(str(tiny_model_dir), max_length=32)

    class WithHead(CosineMSELoss):
        def __init__(self, model):
            super().__init__(model)
            self.head = torch.nn.Linear(3, 1)

    loss = WithHead(bi.model)
    params = parse_params({"student": {"lr": 1e-5, "weight_decay": 0.01, "batch_size": 4, "epochs": 1}}).student
    run = Run(loss, (["a b", "c d"], ["e f", "g h"]), np.zeros(2), lambda: 0.0, params, 0, "t", {"head": 1e-3})
    opt = run.trainer.create_optimizer()
    by_param = {id(p): (g["lr"], g["weight_decay"]) for g in opt.param_groups for p in g["params"]}
    layer = bi.model[0].auto_model.encoder.layer[0].attention.self.query
    assert by_param[id(layer.weight)] == (1e-5, 0.01)
    assert by_param[id(layer.bias)] == (1e-5, 0.0)  # no decay on biases
    assert by_param[id(loss.head.weight)] == (1e-3, 0.01)
    assert by_param[id(loss.head.bias)] == (1e-3, 0.0)
    run.close()


def _seeded_start(tiny_model_dir, params, calls):
    """fit_seeds' start(seed): everything seeded from ``seed``; a real dev score on held-out pairs."""
    from pldistill.base.seeding import seed_all
    from pldistill.train.training import start as started

    train, dev = make_pairs(64), make_pairs(24, offset=100)
    ep = parse_params({"evaluate": {"bf16": False}}).evaluate

    def start(seed):
        calls.append(seed)
        _, gen = seed_all(seed)
        bi = BiEncoder.load(str(tiny_model_dir), max_length=32)
        return bi, started(bi, CosineMSELoss(bi.model), (list(train["sentence1"]), list(train["sentence2"])),
                           train["score"].to_numpy(), dev, params, ep, gen, f"seed {seed}")

    return start


def test_seed_optimisation_finishes_the_best_seed_at_the_stop_as_if_it_ran_alone(tiny_model_dir):
    from pldistill.train.wrappers import seed_optimised as fit_seeds

    params = parse_params({"student": {"lr": 2e-3, "batch_size": 8, "epochs": 2, "evals_per_epoch": 2,
                                       "select": "last"}}).student
    calls = []
    start = _seeded_start(tiny_model_dir, params, calls)
    chosen_model, res = fit_seeds(start, [11, 12, 13], stop=0.25)
    so = res.seeds
    assert calls == [11, 12, 13] and so["seeds"] == 3 and so["stop"] == 0.25
    assert [t["stop_step"] for t in so["trials"]] == [4, 4, 4]  # 25% of 16 steps
    devs = [t["dev_at_stop"] for t in so["trials"]]
    assert len(set(devs)) == 3  # the seeds really differ
    assert so["chosen"] == [11, 12, 13][devs.index(max(devs))]
    assert res.steps == 16 and res.curve[-1]["step"] == 16  # the chosen one ran to the end
    assert res.summary()["seed_optimisation"] == so

    # The same seed trained alone, never paused: the same weights, bit for bit, although other seeds
    # drew dropout masks from torch's global RNG while it was paused.
    alone, run = start(so["chosen"])
    run.finish()
    for (name, a), b in zip(chosen_model.module.state_dict().items(), alone.module.state_dict().values()):
        assert torch.equal(a, b), name


def test_one_seed_is_a_plain_run(tiny_model_dir):
    from pldistill.train.wrappers import seed_optimised as fit_seeds

    params = parse_params({"student": {"lr": 2e-3, "batch_size": 8, "epochs": 1, "evals_per_epoch": 2}}).student
    calls = []
    _, res = fit_seeds(_seeded_start(tiny_model_dir, params, calls), [5], stop=0.2)
    assert calls == [5] and res.seeds is None and "seed_optimisation" not in res.summary()
    assert [r["step"] for r in res.curve] == [0, 4, 8]  # no extra evaluation at a stop point


def test_seeds_and_stop_are_validated():
    from pldistill.base.errors import ConfigError
    from pldistill.train.wrappers import seeds_of

    p = parse_params({"student": {"seeds": 5}, "seed": 40})
    assert seeds_of(p.student, p.seed) == [40, 41, 42, 43, 44] and p.student.seed_stop == 0.2
    for bad in ({"seeds": 0}, {"seed_stop": 1.0}, {"seed_stop": 0}):
        try:
            parse_params({"teacher": bad})
        except ConfigError as err:
            assert f"teacher.{next(iter(bad))}" in str(err)
        else:
            raise AssertionError(f"accepted {bad}")


def test_the_fused_optimizer_is_opt_in_and_lands_where_the_default_does(tiny_model_dir):
    import pytest

    from pldistill.base.errors import ConfigError

    runs = {}
    for opt in ("adamw", "adamw-fused"):
        torch.manual_seed(3)
        bi = BiEncoder.load(str(tiny_model_dir), max_length=32)
        train = make_pairs(32)
        params = parse_params({"student": {"lr": 2e-3, "batch_size": 8, "epochs": 1, "evals_per_epoch": 1,
                                           "optimizer": opt}}).student
        fit(bi.module, CosineMSELoss(bi.model), (list(train["sentence1"]), list(train["sentence2"])),
            train["score"].to_numpy(), itertools.count().__next__, params, torch.Generator().manual_seed(3))
        runs[opt] = bi.module.state_dict()
    moved = [(a - b).abs().max().item() for a, b in zip(runs["adamw"].values(), runs["adamw-fused"].values())]
    assert 0 < max(moved) < 1e-4  # another kernel: not bit for bit, but the same training
    with pytest.raises(ConfigError, match="optimizer"):
        parse_params({"student": {"optimizer": "sgd"}})


def test_student_loss_cosent_is_what_a_bi_encoder_learns_pairs_by(tiny_model_dir):
    bi = BiEncoder.load(str(tiny_model_dir), max_length=32)
    pairs = make_pairs(8)
    texts, y = (list(pairs["sentence1"]), list(pairs["sentence2"])), torch.tensor(pairs["score"].to_numpy())
    features = [bi.model.preprocess(column) for column in texts]  # what the Trainer's collator hands a loss
    with torch.no_grad():
        u, v = (bi.model(f)["sentence_embedding"] for f in features)
        got = {name: pair_loss(bi, name)(features, y) for name in ("cosine", "cosent")}
    assert torch.isclose(got["cosent"], cosent(u, v, y))
    assert torch.isclose(got["cosine"], cosine_mse(u, v, y))
    with pytest.raises(ValueError, match="CoSENT learns from 2 text columns a row"):
        pair_loss(bi, "cosent")(features[:1], y)


def test_a_pair_loss_is_refused_where_nothing_would_learn_it():
    from pldistill.base.errors import ConfigError

    assert parse_params({"student": {"loss": "cosent"}}).student.loss == "cosent"  # augsbert: student and baseline
    with pytest.raises(ConfigError, match="student.loss cosent: recipe dse's student learns its own section's loss"):
        parse_params({"recipe": "dse", "student": {"loss": "cosent"}})
    with pytest.raises(ConfigError, match="a cross-encoder .* learns soft binary cross-entropy"):
        parse_params({"teacher": {"kind": "cross", "finetune": True, "loss": "cosent", "candidates": []}})
    with pytest.raises(ConfigError, match="loss"):
        parse_params({"student": {"loss": "cosine-mse"}})


def _fit_scored(tiny_model_dir, dev_scores, **student):
    """3 epochs of 8 steps, dev scored every 4 steps (``dev_scores`` in turn): the run and its model."""
    torch.manual_seed(5)
    bi = BiEncoder.load(str(tiny_model_dir), max_length=32)
    train = make_pairs(64)
    params = parse_params({"student": {"lr": 2e-3, "batch_size": 8, "epochs": 3, "evals_per_epoch": 2,
                                       **student}}).student
    res = fit(bi.module, CosineMSELoss(bi.model), (list(train["sentence1"]), list(train["sentence2"])),
              train["score"].to_numpy(), iter(dev_scores).__next__, params, torch.Generator().manual_seed(5))
    return bi, res


def test_patience_stops_once_the_best_dev_score_is_more_than_that_many_epochs_old(tiny_model_dir, capsys):
    peak_then_fall = [10, 20, 15, 14, 13, 12, 11]  # at steps 0, 4, 8, ..., 24: the best at step 4
    stopped, res = _fit_scored(tiny_model_dir, peak_then_fall, patience=1.0)
    assert [r["step"] for r in res.curve] == [0, 4, 8, 12, 16]  # at 16 the best is 12 steps (1.5 epochs) old
    assert (res.best_step, res.best_dev, res.steps) == (4, 20, 16)
    assert res.stopped == "at step 16 of 24: dev has not passed 20.00 (step 4) for 1.50 epochs, more than patience 1"
    assert res.summary()["stopped_early"] == res.stopped
    assert f"train: stopped early {res.stopped}" in capsys.readouterr().err
    # without patience the same run goes on to its last step: the steps before the stop were the same steps
    whole, full = _fit_scored(tiny_model_dir, peak_then_fall, patience=None)
    assert full.steps == 24 and full.stopped is None and "stopped_early" not in full.summary()
    assert full.curve[:5] == res.curve  # losses included
    for (name, a), b in zip(stopped.module.state_dict().items(), whole.module.state_dict().values()):
        assert torch.equal(a, b), name  # both keep step 4's weights
    # one epoch without a better score is within patience 1: a new best at step 16 carries the run on
    _, res = _fit_scored(tiny_model_dir, [10, 20, 15, 14, 21, 12, 11], patience=1.0)
    assert (res.steps, res.best_step, res.stopped) == (24, 16, None)
    _, res = _fit_scored(tiny_model_dir, peak_then_fall, patience=1.0, select="last")  # no best to wait for
    assert (res.steps, res.stopped) == (24, None)
