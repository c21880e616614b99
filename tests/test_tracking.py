"""DVCLive logging (pldistill.train.tracking): each step's loss, dev at each evaluation, runs laid end to end,
and nothing DVC would read as a metric or a pipeline."""

import csv

import pytest
import torch

from pldistill.models.encoders import BiEncoder
from pldistill.params.config import parse_params
from pldistill.train import tracking
from pldistill.train.losses.cosine_mse import CosineMSELoss
from tests.conftest import fit, make_pairs


def _rows(path):
    with open(path) as f:
        return list(csv.DictReader(f, delimiter="\t"))


def test_training_runs_log_loss_and_dev_per_step_end_to_end(tiny_model_dir, tmp_path):
    live = tmp_path / "metrics/live/gold"
    train = make_pairs(32)
    params = parse_params({"student": {"batch_size": 8, "epochs": 1, "evals_per_epoch": 2}}).student
    with tracking.logging_to(live):
        for seed in (1, 2):  # two runs in one stage: 4 steps each
            torch.manual_seed(seed)
            bi = BiEncoder.load(str(tiny_model_dir), max_length=32)
            res = fit(bi.module, CosineMSELoss(bi.model), (list(train["sentence1"]), list(train["sentence2"])),
                      train["score"].to_numpy(), lambda: 50.0, params, torch.Generator().manual_seed(seed))
    metrics = live / "plots/metrics"
    loss = _rows(metrics / "train/loss.tsv")
    assert [int(r["step"]) for r in loss] == [1, 2, 3, 4, 6, 7, 8, 9]  # the second run starts at 5
    assert res.steps == 4
    assert [int(r["step"]) for r in _rows(metrics / "eval/dev_spearman.tsv")] == [0, 2, 4, 5, 7, 9]
    assert len(_rows(metrics / "train/learning_rate.tsv")) == 8
    assert not list(tmp_path.rglob("dvc.yaml")) and not list(live.glob("report.*"))  # dvc.yaml declares the plots
    assert not (metrics / "system").exists()  # the machine's CPU / RAM use: only with PLDISTILL_SYSTEM_METRICS=1
    assert tracking._live is None  # closed with its block


def test_no_log_is_open_outside_a_stage_command():
    assert tracking.run_log(10) is None


def test_a_resumed_run_logs_what_the_uninterrupted_run_logs(tiny_model_dir, tmp_path):
    from pldistill.train import resume
    from tests.test_resume import Killed, _params, _start

    params = _params()
    root = tmp_path / "ckpt"

    def run(name: str, ckpt, kill_at_eval=None) -> dict:
        with tracking.logging_to(tmp_path / name), resume.enabled(ckpt):
            _start(tiny_model_dir, params, kill_at_eval)(7)[1].finish()
        metrics = tmp_path / name / "plots/metrics"
        return {f: [{k: v for k, v in r.items() if k != "timestamp"} for r in _rows(metrics / f)]
                for f in ("train/loss.tsv", "train/learning_rate.tsv", "eval/dev_spearman.tsv")}

    logged = {"whole": run("whole", tmp_path / "none")}
    with pytest.raises(Killed):  # dies at the third evaluation (step 8 of 16): the checkpoint of step 4 stays
        run("killed", root, kill_at_eval=3)
    logged["resumed"] = run("resumed", root)
    assert len(logged["whole"]["train/learning_rate.tsv"]) == 16
    assert logged["resumed"] == logged["whole"]  # the steps before the kill replayed from the checkpoint
