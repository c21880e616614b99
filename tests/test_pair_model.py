"""Every teacher and student is a PairModel (score / save / the class's load), and the ones that learn share
``fit``: a recipe composes them instead of special-casing each."""

import json

import numpy as np
import pytest
import torch

from pldistill.base.metrics import dev_spearman
from pldistill.models.dse import DSE
from pldistill.models.encoders import BiEncoder, CrossModel, PairModel
from pldistill.params.config import parse_params
from pldistill.teach.ensemble import MEMBERS_FILE, Ensemble
from pldistill.teach.teachers import Calibration, Member, Teacher
from pldistill.train.losses.dse import DSELoss
from pldistill.train.losses.pair import pair_loss
from tests.conftest import fit, make_pairs

S1 = ["a cat sits on the mat", "the stock fell sharply", "a man plays the guitar"]
S2 = ["a cat is on a mat", "markets rose today", "someone plays guitar"]


def _models(tiny_model_dir, tmp_path):
    torch.manual_seed(0)
    bi = BiEncoder.load(str(tiny_model_dir), max_length=32)
    cross = CrossModel.load(str(tiny_model_dir), max_length=32)
    dse = DSE.create(str(tiny_model_dir), "mean", 16, max_length=32)
    teacher = Teacher([Member("member-00", "cross", "tiny", True, cross, Calibration()),
                       Member("member-01", "bi", "tiny", True, bi, Calibration())])
    (tmp_path / "ens").mkdir()
    bi.save(tmp_path / "ens" / "m0")
    (tmp_path / "ens" / MEMBERS_FILE).write_text(json.dumps({"members": [{"name": "m0", "best_dev": 50.0}]}))
    ensemble = Ensemble.load(tmp_path / "ens", "mean", 1.0, 32)
    return {
        "bi": (bi, lambda p: BiEncoder.load(str(p), 32)),
        "cross": (cross, lambda p: CrossModel.load(str(p), 32)),
        "dse": (dse, DSE.load),
        "teacher": (teacher, lambda p: Teacher.load(p, 32)),
        "ensemble": (ensemble, lambda p: Ensemble.load(p, "mean", 1.0, 32)),
    }


def test_every_teacher_and_student_scores_saves_and_loads_back_the_same(tiny_model_dir, tmp_path):
    for name, (model, load) in _models(tiny_model_dir, tmp_path).items():
        assert isinstance(model, PairModel), name
        before = model.score(S1, S2, batch_size=2, bf16=False)
        assert before.shape == (3,) and np.isfinite(before).all(), name
        model.save(tmp_path / f"saved-{name}", card=f"# {name}\n")
        assert (tmp_path / f"saved-{name}" / "README.md").read_text() == f"# {name}\n", name
        after = load(tmp_path / f"saved-{name}").score(S1, S2, batch_size=2, bf16=False)
        np.testing.assert_allclose(after, before, atol=1e-5, err_msg=name)


def test_the_models_that_learn_share_the_trainer(tiny_model_dir, tmp_path):
    models = _models(tiny_model_dir, tmp_path)
    train, dev = make_pairs(32), make_pairs(16, offset=100)
    params = parse_params({"student": {"lr": 2e-3, "batch_size": 8, "epochs": 1, "evals_per_epoch": 1}}).student
    ep = parse_params({"evaluate": {"bf16": False}}).evaluate
    for name in ("bi", "cross"):
        model = models[name][0]
        res = fit(model.module, pair_loss(model), (list(train["sentence1"]), list(train["sentence2"])),
                  train["score"].to_numpy(), dev_spearman(model, dev, ep), params, torch.Generator().manual_seed(0),
                  desc=name)
        assert res.steps == 4 and [r["step"] for r in res.curve] == [0, 4], name
    dse = models["dse"][0]
    with pytest.raises(TypeError, match="DSELoss"):  # its loss needs alpha and the task
        pair_loss(dse)
    target = np.stack([np.zeros(32), train["score"].to_numpy()], axis=1)  # [teacher logit, gold]
    loss = DSELoss(dse.st, dse.head, dse.pooling, 0.5, "regression")
    res = fit(dse.module, loss, (list(train["sentence1"]), list(train["sentence2"])), target, lambda: 0.0, params,
              torch.Generator().manual_seed(0))
    assert res.steps == 4
