"""``trainer: sentence-transformers`` (pldistill.st_trainer): the same params on sentence-transformers' trainers,
with our dev schedule and selection, the same model for the same seed, and a killed run resumed."""

import pytest
import torch
from transformers import Trainer

from pldistill import checkpoints
from pldistill.config import ConfigError
from pldistill.losses import SoftBCELoss
from pldistill.losses.dse import DSELoss
from pldistill.trainable import eval_steps
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
    with pytest.raises(ConfigError, match="batch_size 8 into accumulate 3 equal micro-batches"):
        _train(tiny_model_dir, accumulate=3)
    with pytest.raises(ConfigError, match="group_by_length true groups batches in our loop; sentence-transformers"):
        _train(tiny_model_dir, group_by_length=True)  # auto: its sampler's random batches


def _killed_at_step_5_then_rerun(tmp_path, monkeypatch, train):
    """``train()`` killed just after the Trainer's checkpoint at step 5, then run again inside the same checkpoint
    block: the folders the kill left, the steps the rerun trained, and what the rerun returned."""
    save, step = Trainer._save_checkpoint, Trainer.training_step

    def save_then_die(self, *a, **k):
        save(self, *a, **k)
        if self.state.global_step == 5:
            raise KeyboardInterrupt("killed after the checkpoint at step 5")

    with checkpoints.enabled(tmp_path):
        monkeypatch.setattr(Trainer, "_save_checkpoint", save_then_die)
        with pytest.raises(KeyboardInterrupt):
            train()
        (run,) = tmp_path.iterdir()
        left = sorted(p.relative_to(run).as_posix() for p in run.glob("checkpoint-*/*"))
        monkeypatch.setattr(Trainer, "_save_checkpoint", save)
        steps = []
        monkeypatch.setattr(Trainer, "training_step", lambda self, *a, **k: steps.append(1) or step(self, *a, **k))
        out = train()
    return left, len(steps), out


def test_a_killed_run_resumes_from_the_trainers_checkpoint(tiny_model_dir, tmp_path, monkeypatch):
    whole, res_whole, _ = _train(tiny_model_dir, select="last")
    left, steps, (resumed, res, _) = _killed_at_step_5_then_rerun(
        tmp_path, monkeypatch, lambda: _train(tiny_model_dir, select="last"))
    assert {f.split("/")[0] for f in left} == {"checkpoint-2", "checkpoint-5"}
    assert steps == 10 - 5  # it went on from step 5
    assert [r["step"] for r in res.curve] == [r["step"] for r in res_whole.curve]  # the log survived the kill
    worst = max(float((pa - pb).abs().max())
                for pa, pb in zip(whole.module.state_dict().values(), resumed.module.state_dict().values()))
    assert worst < 1e-6, worst
    assert not tmp_path.exists() or not any(tmp_path.iterdir())  # removed once the block succeeded


# a model one holds, any loss, any number of text columns (training.train with trainer sentence-transformers)

def _step(**over):
    """A training section's steps (params.yaml's embed section, as training.train reads them), small, on the
    Trainer."""
    from pldistill.params_train import StepParams
    small = {"epochs": 2, "batch_size": 8, "lr": 2e-3, "max_length": 32, "evals_per_epoch": 2,
             "trainer": "sentence-transformers"}
    embed = parse_params({}).embed.model_dump(include=set(StepParams.model_fields))  # its own keys and train's
    return StepParams(**{**embed, **small, **over})


def _fit_at(model, loss, texts, target, **step):
    from pldistill.seeding import seed_all
    from pldistill.training import train as fit_at
    p = _params_for_eval()
    _, gen = seed_all(7)
    return fit_at(model, loss, texts, target, make_pairs(24, offset=100), _step(**step), p.evaluate, gen, "test",
                  lr_by_prefix=getattr(model, "_lrs", None))


def _params_for_eval():
    return parse_params({"evaluate": {"bf16": False}})


def _sentences_to_embeddings(tiny_model_dir):
    """The embedding step's shape: one column of sentences, a target embedding a row."""
    from pldistill.models import BiEncoder
    torch.manual_seed(0)
    teacher = BiEncoder.load(str(tiny_model_dir), 32)
    pairs = make_pairs(40)
    sentences = list(pairs["sentence1"]) + list(pairs["sentence2"])
    target = teacher.encode(sentences, bf16=False)
    torch.manual_seed(1)
    student = BiEncoder.load(str(tiny_model_dir), 32, layers=(1,))

    from pldistill.losses.embedding import EmbeddingLoss
    return student, EmbeddingLoss(student, ["mse"], 0.0), (sentences,), target


def _dse_student(tiny_model_dir):
    """DSE's shape: an encoder and a head in one module, the head at its own lr."""
    import numpy as np

    from pldistill.dse import DSE
    torch.manual_seed(0)
    dse = DSE.create(str(tiny_model_dir), "mean", hidden=16, max_length=32)
    dse._lrs = {"head": 1e-2}
    pairs = make_pairs(40)
    target = np.stack([pairs["score"].to_numpy() * 8 - 4, pairs["score"].to_numpy()], axis=1).astype(np.float32)
    return dse, DSELoss(dse, 0.5, "regression"), (list(pairs["sentence1"]), list(pairs["sentence2"])), target


def _cross_side(tiny_model_dir):
    """Trans-Encoder's cross side: a cross-encoder on pairs, soft BCE."""
    from pldistill.models import CrossModel
    torch.manual_seed(0)
    cross = CrossModel.load(str(tiny_model_dir), 32)
    pairs = make_pairs(40)
    texts = (list(pairs["sentence1"]), list(pairs["sentence2"]))
    return cross, SoftBCELoss(cross), texts, pairs["score"].to_numpy()


SHAPES = {"sentences": _sentences_to_embeddings, "dse": _dse_student, "cross": _cross_side}


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_fit_at_runs_any_loss_on_the_trainer_with_our_schedule(tiny_model_dir, shape):
    model, loss, texts, target = SHAPES[shape](tiny_model_dir)
    before = {k: v.clone() for k, v in model.module.state_dict().items()}
    res = _fit_at(model, loss, texts, target, select="last")
    per_epoch = -(-len(target) // 8)
    assert res.steps == 2 * per_epoch  # 2 epochs of batch 8
    assert [r["step"] for r in res.curve] == sorted({0, *eval_steps(per_epoch, _step())})  # our loop's evaluations
    after = model.module.state_dict()
    parts = {k.split(".")[0] for k in before}  # a DSE student: encoder and head; the others: their layers
    moved = {k.split(".")[0] for k in before if not torch.equal(before[k], after[k])}
    assert moved == parts  # every part learned: the Trainer's optimizer holds the whole module, a head's too


def test_fit_at_keeps_the_best_dev_checkpoint_and_same_seed_same_model(tiny_model_dir):
    model, loss, texts, target = _dse_student(tiny_model_dir)
    res = _fit_at(model, loss, texts, target)
    assert res.best_dev == max(r["dev"] for r in res.curve)
    from pldistill.training import dev_spearman
    assert abs(dev_spearman(model, make_pairs(24, offset=100), _params_for_eval().evaluate)() - res.best_dev) < 1e-6
    again, loss2, texts2, target2 = _dse_student(tiny_model_dir)
    _fit_at(again, loss2, texts2, target2)
    for (name, pa), pb in zip(model.module.state_dict().items(), again.module.state_dict().values()):
        assert torch.equal(pa, pb), name


def test_fit_at_on_the_trainer_resumes_a_killed_run_head_and_all(tiny_model_dir, tmp_path, monkeypatch):
    whole, loss, texts, target = _dse_student(tiny_model_dir)
    _fit_at(whole, loss, texts, target, select="last")
    made = []  # each run's student: the killed one's, then the rerun's

    def train():
        made.append(_dse_student(tiny_model_dir))
        return _fit_at(*made[-1], select="last")

    left, steps, _ = _killed_at_step_5_then_rerun(tmp_path, monkeypatch, train)
    resumed = made[-1][0]
    assert "checkpoint-5/module.safetensors" in left  # the whole module: encoder and head
    assert steps == 10 - 5  # it went on from step 5
    worst = max(float((pa - pb).abs().max())
                for pa, pb in zip(whole.module.state_dict().values(), resumed.module.state_dict().values()))
    assert worst < 1e-6, worst


def test_fit_at_on_the_trainer_refuses_several_processes_by_name(tiny_model_dir, monkeypatch):
    from pldistill import distributed
    monkeypatch.setattr(distributed, "world", lambda: 2)
    with pytest.raises(ConfigError, match="runs on one process .* set this section's trainer to ours"):
        _fit_at(*_cross_side(tiny_model_dir))


@pytest.mark.parametrize("section", ["embed", "dse", "trans.cross", "trans.bi", "ensemble.sub", "ensemble.distill"])
def test_every_training_section_takes_a_trainer(section):
    top, *sub = section.split(".")
    block = {"trainer": "sentence-transformers"}
    p = parse_params({top: {sub[0]: block} if sub else block})
    got = getattr(p, top)
    assert (getattr(got, sub[0]) if sub else got).trainer == "sentence-transformers"
    with pytest.raises(Exception, match="trainer"):
        parse_params({top: {sub[0]: {"trainer": "keras"}} if sub else {"trainer": "keras"}})


def test_fit_at_on_the_trainer_refuses_rows_that_do_not_line_up(tiny_model_dir):
    model, loss, (sentences,), target = _sentences_to_embeddings(tiny_model_dir)
    with pytest.raises(ValueError, match=r"every text column needs one row per target \(80\); got columns of \[3\]"):
        _fit_at(model, loss, (sentences[:3],), target)


@pytest.mark.parametrize("trainer", ["ours", "sentence-transformers"])
def test_patience_stops_both_engines_at_the_same_evaluation(tiny_model_dir, monkeypatch, trainer):
    from pldistill import training

    scores = iter([10, 20, 15, 14, 13, 12, 11])  # at steps 0, 2, 5, 8, 10, 12, 15 (5 steps an epoch): the best at 2
    monkeypatch.setattr(training, "dev_spearman", lambda model, dev, params: lambda: next(scores))
    _, res, _ = _train(tiny_model_dir, epochs=3, patience=1.0, trainer=trainer)
    assert [r["step"] for r in res.curve] == [0, 2, 5, 8] and (res.steps, res.best_step, res.best_dev) == (8, 2, 20)
    assert res.stopped == "at step 8 of 15: dev has not passed 20.00 (step 2) for 1.20 epochs, more than patience 1"


def test_a_soup_wraps_the_trainers_runs_as_it_wraps_ours(tiny_model_dir):
    """The soup finishes every seed's run, which the Trainer can do (it cannot pause one, as seed optimisation
    would): two seeds trained to the end on the Trainer, their average kept only where dev prefers it."""
    _, res, score = _train(tiny_model_dir, seeds=2, soup=True)
    assert [t["seed"] for t in res.soup["trials"]] == [42, 43]
    assert res.best_dev == max(res.soup["soup_dev"], *(t["best_dev"] for t in res.soup["trials"]))
    assert abs(score() - res.best_dev) < 1e-6
