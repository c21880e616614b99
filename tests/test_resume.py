"""Mid-run checkpoints (pldistill.train.resume, the Trainer's own): a run killed half-way resumes from its last
checkpoint and ends exactly where the uninterrupted run ends; the folder is named by the run's fingerprint, its code
taken from the import graph; plus gradient accumulation and precision checks."""

import subprocess
import sys
import textwrap

import pytest
import torch

from pldistill.base.errors import ConfigError
from pldistill.models.encoders import BiEncoder
from pldistill.params.config import parse_params
from pldistill.train import resume
from pldistill.train.losses.cosine_mse import CosineMSELoss
from pldistill.train.training import Run
from pldistill.train.wrappers import seed_optimised as fit_seeds
from tests.conftest import ROOT, make_pairs


class Killed(Exception):
    """Stands for a kill: raised from the dev score at a chosen evaluation."""


def _start(tiny_model_dir, params, kill_at_eval=None, dev_at=None):
    """fit_seeds' start(seed), seeded as the stages seed, its dev score raising ``Killed`` at the
    ``kill_at_eval``-th evaluation (1 is step 0's) of any run; ``dev_at``: step -> the dev score it reads."""
    from pldistill.base.metrics import dev_spearman
    from pldistill.base.seeding import seed_all

    train, dev = make_pairs(64), make_pairs(24, offset=100)
    ep = parse_params({"evaluate": {"bf16": False}}).evaluate
    evals = [0]

    def start(seed):
        _, gen = seed_all(seed)
        bi = BiEncoder.load(str(tiny_model_dir), max_length=32)
        score = dev_spearman(bi, dev, ep)
        run: list[Run] = []  # the run, once built (its first evaluation, step 0's, comes before)

        def dev_score():
            evals[0] += 1
            if evals[0] == kill_at_eval:
                raise Killed
            return score() if dev_at is None else dev_at[run[0].trainer.state.global_step if run else 0]

        # the dev scorer stands in for the pairs: start's own (dev_spearman) would score them itself
        loss = CosineMSELoss(bi.model)
        seed_ = int(torch.randint(2**31 - 1, (1,), generator=gen))
        run.append(Run(loss, (list(train["sentence1"]), list(train["sentence2"])), train["score"].to_numpy(),
                       dev_score, params, seed_, f"seed {seed}"))
        return bi, run[0]

    return start


def _params(**kw):
    """A short run's params; checkpoint_seconds 0: each due checkpoint is written at once (these runs take
    under a second)."""
    return parse_params({"student": {"lr": 2e-3, "batch_size": 8, "epochs": 2, "evals_per_epoch": 2,
                                     "checkpoint_seconds": 0, **kw}}).student


def _assert_same(a, res_a, b, res_b):
    assert [{k: r[k] for k in ("step", "dev")} for r in res_a.curve] == \
           [{k: r[k] for k in ("step", "dev")} for r in res_b.curve]
    assert (res_a.best_dev, res_a.best_step, res_a.steps) == (res_b.best_dev, res_b.best_step, res_b.steps)
    for (name, pa), pb in zip(a.module.state_dict().items(), b.module.state_dict().values()):
        assert torch.equal(pa, pb), name


def _step(run) -> int:
    """Where a started run stands: 0, or the step of the checkpoint it resumes from."""
    return 0 if run.resume_from is None else int(run.resume_from.name.rsplit("-", 1)[1])


@pytest.mark.parametrize(("every", "select", "resumed_at"), [(None, "dev", 8), (3, "last", 9)])
def test_a_killed_run_resumes_from_its_checkpoint_and_ends_as_the_uninterrupted_one(
        tiny_model_dir, tmp_path, capsys, every, select, resumed_at):
    params = _params(checkpoint_every=every, select=select)
    model, run = _start(tiny_model_dir, params)(7)
    whole = run.finish()  # no checkpoints: the reference

    root = tmp_path / "ckpt"
    with pytest.raises(Killed), resume.enabled(root):
        _start(tiny_model_dir, params, kill_at_eval=4)(7)[1].finish()  # evaluations at 0, 4, 8: dies at 12
    (left,) = root.iterdir()  # one run, its folder kept: the block failed
    last = resume.latest(left)
    assert last.name == f"checkpoint-{resumed_at}"  # the Trainer's checkpoint, with what selection needs beside it
    assert {p.name for p in last.iterdir()} >= {"module.safetensors", "optimizer.pt", "scheduler.pt",
                                                "trainer_state.json", "curve.json"}
    assert (last / "best.safetensors").is_file() == (select == "dev")

    with resume.enabled(root):
        again, run = _start(tiny_model_dir, params)(7)
        assert _step(run) == resumed_at
        res = run.finish()
    assert f"resumes from the checkpoint at step {resumed_at} of 16" in capsys.readouterr().err
    _assert_same(model, whole, again, res)
    assert list(root.iterdir()) == []  # the stage finished: its checkpoints are gone


def test_a_run_killed_before_its_early_stop_resumes_and_stops_where_the_uninterrupted_one_did(tiny_model_dir,
                                                                                           tmp_path):
    params = _params(epochs=3, patience=1.0)  # 8 steps an epoch, evaluations every 4
    dev_at = dict(zip(range(0, 25, 4), [10, 20, 15, 14, 13, 12, 11]))  # the best at step 4: it stops at step 16
    model, run = _start(tiny_model_dir, params, dev_at=dev_at)(7)
    whole = run.finish()
    assert (whole.steps, whole.best_step) == (16, 4) and whole.stopped.startswith("at step 16 of 24")

    root = tmp_path / "ckpt"
    with pytest.raises(Killed), resume.enabled(root):
        _start(tiny_model_dir, params, kill_at_eval=5, dev_at=dev_at)(7)[1].finish()  # dies at step 16's
    with resume.enabled(root):
        again, run = _start(tiny_model_dir, params, dev_at=dev_at)(7)
        assert _step(run) == 12 and run.stopped is None
        res = run.finish()
    _assert_same(model, whole, again, res)
    assert res.stopped == whole.stopped


@pytest.mark.parametrize(("seconds", "pause_at", "written"), [
    (0, None, [4, 8, 12, 16]),  # each dev evaluation's, and the end's
    (1e6, None, []),  # none is due before a million seconds
    (1e6, 6, [6]),  # a pause (seed optimisation) writes one whatever the time
])
def test_checkpoint_seconds_spaces_the_checkpoints_and_a_pause_always_writes_one(
        tiny_model_dir, tmp_path, monkeypatch, seconds, pause_at, written):
    params = _params(checkpoint_seconds=seconds)
    model, run = _start(tiny_model_dir, params)(7)
    whole = run.finish()  # no checkpoints: the reference
    from pldistill.train.trainer_parts import Hooks

    steps, on_save = [], Hooks.on_save
    monkeypatch.setattr(Hooks, "on_save", lambda self, args, state, control, **kw: (
        steps.append(state.global_step), on_save(self, args, state, control, **kw))[1])
    with resume.enabled(tmp_path / "ckpt"):
        again, run = _start(tiny_model_dir, params)(7)
        if pause_at:
            run.advance(pause_at)
        res = run.finish()
    assert steps == written
    if pause_at:  # the pause scored dev at step 6 too (a row more)
        res.curve = [r for r in res.curve if r["step"] != pause_at]
    _assert_same(model, whole, again, res)  # when it checkpoints never changes what it trains


def test_another_run_never_resumes_a_checkpoint_not_its_own(tiny_model_dir, tmp_path):
    root = tmp_path / "ckpt"
    with pytest.raises(Killed), resume.enabled(root):
        _start(tiny_model_dir, _params(), kill_at_eval=4)(7)[1].finish()
    with resume.enabled(root):
        assert _step(_start(tiny_model_dir, _params(lr=1e-3))(7)[1]) == 0  # other params
        assert _step(_start(tiny_model_dir, _params())(8)[1]) == 0  # another seed: other weights, batch order
        assert _step(_start(tiny_model_dir, _params(checkpoint_every=5))(7)[1]) == 8  # how often: not part of it


def test_the_code_a_run_depends_on_comes_from_the_import_graph(monkeypatch):
    """The fingerprint's code is every module the engine imports, and theirs (no list kept by hand): the batch
    order (batching), the Trainer's extensions, the losses and the models are in it; a data stage's module is not;
    an edit to any module in it changes every run's folder."""
    from pldistill.base.imports import closure, imports, modules

    mods = modules()
    code = closure(imports(mods), resume.ENGINE)
    assert {"pldistill.train.training", "pldistill.train.trainer_parts", "pldistill.base.batching",
            "pldistill.train.wrappers", "pldistill.train.losses.cosine_mse", "pldistill.models.encoders",
            "pldistill.train.resume"} <= code
    assert "pldistill.train.losses.dse" not in code  # a recipe's own loss: the engine does not import it, ...
    assert "stages.download" not in code and "pldistill.data.datasets" not in code
    before = resume.fingerprint({"x": 1})
    resume.code_digest.cache_clear()
    real = type(mods["pldistill.base.batching"]).read_bytes
    for edited in ("batching.py", "dse.py"):  # ... but the digest holds every loss's code
        monkeypatch.setattr(type(mods["pldistill.base.batching"]), "read_bytes",
                            lambda self, e=edited: real(self) + (b"# edited" if self.name == e else b""))
        try:
            assert resume.fingerprint({"x": 1}) != before, edited
        finally:
            resume.code_digest.cache_clear()


def test_seed_optimisation_killed_in_the_chosen_run_resumes_every_seed_without_retraining(tiny_model_dir, tmp_path):
    params = _params(select="last")
    ref_model, ref = fit_seeds(_start(tiny_model_dir, params), [11, 12, 13], stop=0.25)

    root = tmp_path / "ckpt"
    # 3 seeds x 2 evaluations (step 0, the stop at 4), then the chosen one's at 8 and 12: dies at 12
    with pytest.raises(Killed), resume.enabled(root):
        fit_seeds(_start(tiny_model_dir, params, kill_at_eval=9), [11, 12, 13], stop=0.25)
    assert len(list(root.iterdir())) == 3
    with resume.enabled(root):
        model, res = fit_seeds(_start(tiny_model_dir, params), [11, 12, 13], stop=0.25)
    assert [t["dev_at_stop"] for t in res.seeds["trials"]] == [t["dev_at_stop"] for t in ref.seeds["trials"]]
    assert res.seeds["chosen"] == ref.seeds["chosen"]
    _assert_same(ref_model, ref, model, res)


def test_a_checkpoint_half_written_is_not_resumed(tiny_model_dir, tmp_path):
    """The dev curve is written last beside the Trainer's files: a checkpoint without it was cut off mid-write,
    and the run resumes from the one before (or starts afresh)."""
    root = tmp_path / "ckpt"
    with pytest.raises(Killed), resume.enabled(root):
        _start(tiny_model_dir, _params(), kill_at_eval=4)(7)[1].finish()  # checkpoints at 4 and 8
    (left,) = root.iterdir()
    (left / "checkpoint-8" / "curve.json").unlink()
    with resume.enabled(root):
        assert _step(_start(tiny_model_dir, _params())(7)[1]) == 4


@pytest.mark.slow
def test_a_stage_killed_by_sigkill_resumes_in_a_new_process(tiny_model_dir, tmp_path):
    """The real thing: a process training under checkpoints is SIGKILLed once a checkpoint exists; a second
    process resumes and writes what an uninterrupted process writes."""
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(f"""
        import os, signal, sys, torch
        sys.path.insert(0, {str(ROOT)!r})
        from pldistill.train import resume
        from pldistill.train.trainer_parts import Hooks
        from safetensors.torch import save_file
        from tests.test_resume import _params, _start
        kill = sys.argv[2] == "kill"
        params = _params()
        if kill:  # SIGKILL ourselves right after the checkpoint at step 8 is written
            on_save = Hooks.on_save
            def save_then_die(self, args, state, control, **kw):
                on_save(self, args, state, control, **kw)
                if state.global_step == 8:
                    os.kill(os.getpid(), signal.SIGKILL)
            Hooks.on_save = save_then_die
        with resume.enabled(sys.argv[1] + "/ckpt"):
            model, run = _start({str(tiny_model_dir)!r}, params)(7)
            run.finish()
        save_file({{k: v.contiguous() for k, v in model.module.state_dict().items()}}, sys.argv[1] + "/" + sys.argv[2])
    """))
    env = {"OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}

    def run(how: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, str(script), str(tmp_path), how], env=env, capture_output=True,
                              text=True, timeout=300, check=False)

    killed = run("kill")
    assert killed.returncode == -9, killed.stderr[-2000:]
    resumed, whole = run("resumed"), run("whole")
    assert resumed.returncode == 0 and "resumes from the checkpoint at step 8 of 16" in resumed.stderr, resumed.stderr
    assert whole.returncode == 0 and "resumed" not in whole.stderr, whole.stderr  # the checkpoint went with success
    assert (tmp_path / "resumed").read_bytes() == (tmp_path / "whole").read_bytes()
    assert list((tmp_path / "ckpt").iterdir()) == []


def test_accumulated_micro_batches_equal_one_batch(tiny_model_dir):
    """k micro-batches of b/k rows make the update one batch of b makes (dropout off: same maths)."""
    train = make_pairs(32)
    out = []
    for accumulate in (1, 4):
        torch.manual_seed(3)
        bi = BiEncoder.load(str(tiny_model_dir), max_length=32)
        for m in bi.module.modules():
            if isinstance(m, torch.nn.Dropout):
                m.p = 0.0
        params = _params(accumulate=accumulate, epochs=1, warmup=0.0)
        run = Run(CosineMSELoss(bi.model), (list(train["sentence1"]), list(train["sentence2"])),
                  train["score"].to_numpy(), lambda: 0.0, params, 3, "t")
        run.advance(3)
        out.append((bi.module.state_dict(), [h["loss"] for h in run.trainer.state.log_history if "loss" in h]))
        run.close()
    (a, la), (b, lb) = out
    assert la == pytest.approx(lb, rel=1e-5)
    start = BiEncoder.load(str(tiny_model_dir), max_length=32).module.state_dict()
    for name in a:
        # Equal up to float rounding: the micro-batches sum their gradients in another order, and Adam divides by
        # sqrt(v), which magnifies a rounding difference where gradients are tiny. A missing accumulation differs
        # by the update itself.
        moved = (a[name] - start[name]).abs().max().item()
        assert (a[name] - b[name]).abs().max().item() <= 1e-6 + 1e-3 * moved, name
    assert any(not torch.equal(a[n], start[n]) for n in a)  # it did train


def test_a_batch_that_does_not_split_into_its_micro_batches_is_refused(tiny_model_dir):
    bi = BiEncoder.load(str(tiny_model_dir), max_length=32)
    with pytest.raises(ConfigError, match="batch_size 8 is cut into accumulate 3 micro-batches"):
        Run(CosineMSELoss(bi.model), (["a"], ["b"]), [0.5], lambda: 0.0, _params(accumulate=3), 0, "t")


@pytest.mark.skipif(torch.cuda.is_available(), reason="the CPU's refusal")
def test_fp16_on_a_cpu_is_refused_by_name(tiny_model_dir):
    bi = BiEncoder.load(str(tiny_model_dir), max_length=32)
    train = make_pairs(8)
    with pytest.raises(ConfigError, match="precision fp16 needs a CUDA GPU.*bf16 or fp32"):
        Run(CosineMSELoss(bi.model), (list(train["sentence1"]), list(train["sentence2"])),
            train["score"].to_numpy(), lambda: 0.0, _params(precision="fp16"), 0, "gold")


def test_precision_keys_are_validated_and_bf16_still_works():
    assert _params().amp == "fp32" and _params(bf16=True).amp == "bf16" and _params(bf16="auto").amp == "auto"
    assert _params(precision="fp16").amp == "fp16" and _params(bf16=True, precision="bf16").amp == "bf16"
    for bad, says in [({"precision": "fp8"}, "student.precision: expected one of auto, fp32, bf16, fp16"),
                      ({"bf16": True, "precision": "fp16"}, "bf16 true and precision fp16 disagree"),
                      ({"accumulate": 32}, "accumulate 32 splits each batch of batch_size 16"),
                      ({"checkpoint_every": -1}, "student.checkpoint_every")]:
        with pytest.raises(ConfigError, match=says.replace("(", r"\(")):
            parse_params({"student": bad})
    with pytest.raises(ConfigError, match="ensemble.sub.accumulate: InfoNCE takes its negatives"):
        parse_params({"ensemble": {"sub": {"accumulate": 2}}})
