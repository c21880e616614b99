"""``trainer: sentence-transformers`` (pldistill.st_trainer): the same params on sentence-transformers' trainers,
with our dev schedule and selection, the same model for the same seed, and a killed run resumed."""

import pytest
import torch
from transformers import Trainer

from pldistill import checkpoints
from pldistill.config import ConfigError
from pldistill.training import dev_spearman, train_model
from pldistill.validate import parse_params
from tests.conftest import make_pairs


def _params(model_dir, **student):
    return parse_params({"student": {"model": str(model_dir), "layers": None, "max_length": 32, "lr": 2e-3,
                                     "batch_size": 8, "epochs": 2, "evals_per_epoch": 2,
                                     "trainer": "sentence-transformers", **student}, "evaluate": {"bf16": False}})


def _train(model_dir, kind="bi", **student):
    p = _params(model_dir, **student)
    train, dev = make_pairs(40), make_pairs(24, offset=100)
    model, res = train_model(p.student, p.evaluate, list(train["sentence1"]), list(train["sentence2"]),
                             list(train["score"]), dev, p.seed, "test", kind=kind)
    return model, res, dev_spearman(model, dev, p.evaluate)


@pytest.mark.parametrize("kind, loss", [("bi", "cosine"), ("cross", "cosine"), ("bi", "cosent")])
def test_trains_on_our_schedule_and_keeps_the_best_dev_checkpoint(tiny_model_dir, kind, loss):
    _, res, score = _train(tiny_model_dir, kind, loss=loss)
    assert res.steps == 10 and [r["step"] for r in res.curve] == [0, 2, 5, 8, 10]  # our loop's evaluations
    assert res.best_dev == max(r["dev"] for r in res.curve)
    assert abs(score() - res.best_dev) < 1e-6  # the model was left at the selected checkpoint
    if kind == "bi":
        assert res.best_dev > res.curve[0]["dev"] + 20  # a learnable toy task: dev rises well above the start


def test_same_seed_same_model(tiny_model_dir):
    a, _, _ = _train(tiny_model_dir, select="last")
    b, _, _ = _train(tiny_model_dir, select="last")
    for (name, pa), pb in zip(a.module.state_dict().items(), b.module.state_dict().values()):
        assert torch.equal(pa, pb), name


def test_what_it_cannot_do_is_refused_by_name(tiny_model_dir):
    with pytest.raises(ConfigError, match="seed optimisation .* set trainer: ours"):
        _train(tiny_model_dir, seeds=2)
    with pytest.raises(ConfigError, match="batch_size 8 into accumulate 3 x processes 1 equal micro-batches"):
        _train(tiny_model_dir, accumulate=3)


def test_a_killed_run_resumes_from_the_trainers_checkpoint(tiny_model_dir, tmp_path, monkeypatch):
    whole, res_whole, _ = _train(tiny_model_dir, select="last")
    save = Trainer._save_checkpoint

    def save_then_die(self, *a, **k):
        save(self, *a, **k)
        if self.state.global_step == 5:
            raise KeyboardInterrupt("killed after the checkpoint at step 5")

    with checkpoints.enabled(tmp_path):
        monkeypatch.setattr(Trainer, "_save_checkpoint", save_then_die)
        with pytest.raises(KeyboardInterrupt):
            _train(tiny_model_dir, select="last")
        (run,) = tmp_path.iterdir()
        assert sorted(p.name for p in run.glob("checkpoint-*")) == ["checkpoint-2", "checkpoint-5"]
        monkeypatch.setattr(Trainer, "_save_checkpoint", save)
        steps, step = [], Trainer.training_step
        monkeypatch.setattr(Trainer, "training_step", lambda self, *a, **k: steps.append(1) or step(self, *a, **k))
        resumed, res, _ = _train(tiny_model_dir, select="last")
    assert len(steps) == 10 - 5  # it went on from step 5
    assert [r["step"] for r in res.curve] == [r["step"] for r in res_whole.curve]  # the log survived the kill
    worst = max(float((pa - pb).abs().max())
                for pa, pb in zip(whole.module.state_dict().values(), resumed.module.state_dict().values()))
    assert worst < 1e-6, worst
    assert not tmp_path.exists() or not any(tmp_path.iterdir())  # removed once the block succeeded
