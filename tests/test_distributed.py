"""Several processes (params `processes`, pldistill.run.distributed): two CPU processes on gloo, started with
torchrun as a subprocess, against one process in this one. Labelling gives the one-process silver file;
data-parallel training gives the one-process model (dropout off: then the runs differ only in the order
floats are summed); only rank 0 writes."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from safetensors.torch import load_file

import stages.gold as gold_stage
from pldistill.base import console, schemas
from pldistill.base.errors import ConfigError
from pldistill.params.config import Params, parse_params
from pldistill.run import distributed
from pldistill.run.launch import command
from tests import distributed_fit
from tests.conftest import ROOT, make_pairs, tiny
from tests.test_label_stream import _inputs, _label, teacher_dir  # noqa: F401  (teacher_dir: a fixture)


def _with(params: Params, **changes) -> Params:
    return parse_params({**params.model_dump(mode="json"), **changes})


def _params_file(params: Params, path: Path) -> Path:
    path.write_text(yaml.safe_dump(params.model_dump(mode="json"), sort_keys=False))
    return path


def _run(args: list[str]) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}  # this checkout's pldistill
    done = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


@pytest.mark.slow
def test_label_on_two_processes_writes_the_one_process_silver_file(tiny_params, teacher_dir, tmp_path):  # noqa: F811
    clean, pairs, _ = _inputs(tmp_path, 151)  # odd: the ranks' slices differ in size
    one, one_report = _label(tiny_params, tmp_path / "one", clean, pairs, teacher_dir)
    out = tmp_path / "two"
    done = _run([sys.executable, "-m", "pldistill.run.launch", "stages.label",
                 "--params", str(_params_file(_with(tiny_params, processes=2), tmp_path / "two.yaml")),
                 "--clean", str(clean), "--pairs", str(pairs), "--teacher", str(teacher_dir),
                 "--silver-dir", str(out / "silver"), "--report", str(out / "label.json"),
                 "--density", str(out / "density.csv")])
    two = schemas.read(out / "silver" / schemas.SILVER_FILE, schemas.PSEUDO)
    for col in ("sentence1", "sentence2", "strategy", "labeller", "cycle"):  # the same rows, in the same order
        assert list(two[col]) == list(one[col]), col
    np.testing.assert_allclose(two["score"], one["score"], atol=1e-5)
    np.testing.assert_allclose(two["logit"], one["logit"], atol=1e-4)
    two_report = json.loads((out / "label.json").read_text())
    assert two_report["candidates"] == one_report["candidates"] == 151
    assert two_report["histogram"] == one_report["histogram"]
    assert two_report["silver_score_mean"] == pytest.approx(one_report["silver_score_mean"], abs=1e-4)
    said = [line for line in done.stdout.splitlines() if line.startswith("label: ")]
    assert len(said) == 1 and said[0].startswith(f"label: {console.label(two_report)} (")  # once: by rank 0
    assert [p.name for p in (out / "silver").iterdir()] == [schemas.SILVER_FILE]  # no scratch left behind


@pytest.fixture(scope="module")
def dropless_model_dir(tiny_model_dir, tmp_path_factory) -> Path:
    """The tiny BERT with dropout off: a training run is then a function of its batches alone."""
    out = tmp_path_factory.mktemp("dropless") / "model"
    shutil.copytree(tiny_model_dir, out)
    config = json.loads((out / "config.json").read_text())
    config.update(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    (out / "config.json").write_text(json.dumps(config))
    return out


@pytest.mark.slow
def test_training_on_two_processes_gives_the_one_process_model(dropless_model_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("PLDISTILL_STORE", str(tmp_path / "store"))  # mid-run checkpoints go there
    params = tiny(dropless_model_dir)
    params = _with(params, student={**params.student.model_dump(mode="json"), "epochs": 2,
                                    "checkpoint_seconds": 0})  # a checkpoint at each due step, however short the run
    clean = tmp_path / "clean"
    schemas.write(clean / "train.parquet", make_pairs(48), schemas.PAIRS)  # batches of 8: 4 a rank
    schemas.write(clean / "dev.parquet", make_pairs(24, offset=500), schemas.PAIRS)
    one = gold_stage.gold(params, clean, tmp_path / "one/gold", tmp_path / "one/gold.json", tmp_path / "one/curve.csv")

    logs = tmp_path / "writes"
    logs.mkdir()
    _run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2",
          "-m", "tests.record_writes", str(logs), "stages.gold",
          "--params", str(_params_file(_with(params, processes=2), tmp_path / "two.yaml")), "--clean", str(clean),
          "--out", str(tmp_path / "two/gold"), "--report", str(tmp_path / "two/gold.json"),
          "--curve", str(tmp_path / "two/curve.csv")])
    two = json.loads((tmp_path / "two/gold.json").read_text())

    assert two["steps"] == one["steps"] == 12 and two["best_step"] == one["best_step"]
    assert two["best_dev"] == pytest.approx(one["best_dev"], abs=0.05)  # Spearman x100
    w1, w2 = (load_file(tmp_path / run / "gold/model.safetensors") for run in ("one", "two"))
    assert w1.keys() == w2.keys()
    worst = max(float((w1[k] - w2[k]).abs().max()) for k in w1)
    assert worst < 1e-4, worst
    moved = max(float((w1[k] - load_file(dropless_model_dir / "model.safetensors")[k]).abs().max())
                for k in w1 if k in load_file(dropless_model_dir / "model.safetensors"))
    assert moved > 100 * worst  # training moved the weights far more than the two runs differ
    writes = (logs / "writes-0.txt").read_text().split()
    store = str(tmp_path / "store")
    assert [w for w in writes if not w.startswith(store)] == [  # the report's wall times: a file of their own
        str(tmp_path / "two" / f) for f in ("gold", "curve.csv", "gold.json", "machine/gold.json")]
    assert not any((tmp_path / "store" / "checkpoints").iterdir())  # the stage succeeded: its checkpoints went
    assert not (logs / "writes-1.txt").exists()  # rank 1 trained and wrote nothing


def test_fit_on_two_processes_is_the_one_process_fit_and_rank_0_scores_dev(dropless_model_dir, tmp_path):
    _run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2",
          "-m", "tests.distributed_fit", str(tmp_path), "--model", str(dropless_model_dir)])
    ranks = [json.loads((tmp_path / f"rank-{r}.json").read_text()) for r in (0, 1)]
    weights, one = distributed_fit.fit_tiny(dropless_model_dir)
    for r, seen in enumerate(ranks):  # each rank took half of every batch; the averaged gradients are the batch's
        got = load_file(tmp_path / f"rank-{r}.safetensors")
        worst = max(float((got[k] - weights[k]).abs().max()) for k in weights)
        assert worst < 1e-4, worst  # the order floats are summed in, no more
        np.testing.assert_allclose(np.array(seen["curve"], float), np.array(one["curve"], float), atol=0.05)
        assert seen["best_step"] == one["best_step"] and seen["steps"] == one["steps"] == 12
    assert [r["dev_computed"] for r in ranks] == [one["dev_computed"], 0]  # rank 0 scored dev, rank 1 received it
    assert ranks[0]["sharded"] == {"row": [0, 1, 2, 3, 4], "rank": [0, 0, 1, 1, 1]}  # in order, from both ranks
    assert ranks[1]["sharded"] is None
    # the teacher's embeddings: the store's three chunks shared out (rank 0: chunks 0 and 2), the whole matrix on both
    want = [[len(t), t.count("e"), 1.0] for t in ["one", "three", "seven sentences", "eleven", "twelve more"]]
    assert [r["embedded"]["chunks"] for r in ranks] == [2, 1]
    assert all(r["embedded"]["matrix"] == want for r in ranks)


@pytest.mark.slow  # the default tier covers its parts: a SIGKILLed run resumes (test_resume) and two processes
# train as one does (test_fit_on_two_processes_is_the_one_process_fit_and_rank_0_scores_dev)
def test_two_processes_killed_mid_run_resume_from_their_checkpoint(tiny_model_dir, tmp_path):
    """Each rank draws its own dropout masks; killed right after the checkpoint at step 6 of 12, the rerun
    resumes every rank there (each with its own RNG, the Trainer's rng_state_<rank>) and ends where the
    uninterrupted run ends."""
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2",
                "-m", "tests.distributed_fit"]
    model = ["--model", str(tiny_model_dir)]
    _run([*torchrun, str(tmp_path / "whole"), *model, "--checkpoints", str(tmp_path / "store-whole")])
    store = tmp_path / "store"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    killed = subprocess.run([*torchrun, str(tmp_path / "killed"), *model, "--checkpoints", str(store), "--stop", "6"],
                            cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert killed.returncode != 0 and not (tmp_path / "killed").exists()
    (ckpt,) = store.iterdir()  # one run's folder, written by rank 0, with each rank's RNG
    assert {f.name for f in (ckpt / "checkpoint-6").iterdir()} >= {"rng_state_0.pth", "rng_state_1.pth"}
    _run([*torchrun, str(tmp_path / "resumed"), *model, "--checkpoints", str(store)])
    whole, resumed = ([json.loads((tmp_path / run / f"rank-{r}.json").read_text()) for r in (0, 1)]
                      for run in ("whole", "resumed"))
    assert [s["resumed_at"] for s in whole] == [0, 0] and [s["resumed_at"] for s in resumed] == [6, 6]
    for r, (w, s) in enumerate(zip(whole, resumed)):
        assert s["curve"] == w["curve"]
        a, b = (load_file(tmp_path / run / f"rank-{r}.safetensors") for run in ("whole", "resumed"))
        assert all(torch.equal(a[k], b[k]) for k in a)  # bit for bit
    assert not any(store.iterdir())  # the finished run removed its checkpoint


def test_launch_runs_one_process_here_and_more_under_torchrun(tmp_path):
    assert command("stages.label", ["--pairs", "p"], 1)[1:] == ["-m", "stages.label", "--pairs", "p"]
    assert command("stages.label", ["--pairs", "p"], 2)[1:] == [
        "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2", "-m", "stages.label", "--pairs", "p"]


def test_a_stage_started_without_the_launcher_says_how_to_start_it(tiny_params, monkeypatch):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    with pytest.raises(ConfigError, match=r"processes: params.yaml asks for 2 process\(es\), but this run was "
                                          r"started with 1; run the stage through the launcher"):
        distributed.join(_with(tiny_params, processes=2).processes)


def test_processes_is_at_least_one_and_refused_for_recipes_that_cannot_shard():
    with pytest.raises(ConfigError, match="processes: Input should be greater than or equal to 1"):
        parse_params({"processes": 0})
    with pytest.raises(ConfigError, match="processes: 2 processes run recipes augsbert and dse only; found recipe "
                                          "rtt-ensemble"):
        parse_params({"processes": 2, "recipe": "rtt-ensemble"})

