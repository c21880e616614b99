"""Stage cut: with student.layers auto, every cut of student.keep layers is scored untrained on dev and the best
kept; the stages that build the student use it (pldistill.students.cut.resolve)."""

import json

import pandas as pd
import pytest

from pldistill.base.errors import ConfigError
from pldistill.models.encoders import BiEncoder
from pldistill.params.config import parse_params
from pldistill.students import cut as cutting
from tests.conftest import ROOT, run_chain


def test_cuts_are_every_choice_of_keep_layers_and_too_many_is_an_error():
    assert cutting.cuts(6, 2, "m")[:3] == [(0, 1), (0, 2), (0, 3)] and len(cutting.cuts(6, 2, "m")) == 15
    with pytest.raises(ConfigError, match="student.keep 7: m has only 6 transformer layers"):
        cutting.cuts(6, 7, "m")
    with pytest.raises(ConfigError, match="924 cuts to score, more than 256; name the layers"):
        cutting.cuts(12, 6, "m")


def test_auto_keeps_the_cut_that_scores_best_untrained_on_dev_and_the_student_is_built_from_it(chains, tmp_path):
    chain = chains("augsbert")  # the tiny model: 2 layers
    params = parse_params({**chain.params.model_dump(mode="json"), "student": {
        **chain.params.student.model_dump(mode="json"), "layers": "auto", "keep": 1}})
    root = chain.copy_to(tmp_path / "c")
    report = run_chain(params, root, ("cut",))
    choice = json.loads((root / "models/cut/cut.json").read_text())
    assert choice["chosen_by"] == "dev" and choice["keep"] == 1 and choice["of"] == 2
    assert [r["layers"] for r in choice["ranking"]] in ([[0], [1]], [[1], [0]])
    assert choice["ranking"][0]["dev"] >= choice["ranking"][1]["dev"] and choice["layers"] == choice["ranking"][0][
        "layers"] and report["layers"] == choice["layers"] and report["cuts"] == 2
    dev = pd.read_parquet(root / "data/clean/dev.parquet")
    for row in choice["ranking"]:  # each score is the cut's own, loaded afresh
        alone = BiEncoder.load(params.student.model, params.student.max_length, layers=row["layers"])
        assert cutting.dev_spearman(alone, dev, 64) == row["dev"]

    run_chain(params, root, ("gold", "evaluate"))
    gold = BiEncoder.load(str(root / "models/gold"))
    assert cutting.depth(gold) == 1  # the gold-only baseline is the chosen cut trained on gold
    assert cutting.resolve(params, root / "models/cut").student.layers == tuple(choice["layers"])


def test_layers_given_are_recorded_and_auto_without_the_stage_is_a_clear_error(chains, tmp_path):
    chain = chains("augsbert")  # layers null
    root = chain.copy_to(tmp_path / "c")
    run_chain(chain.params, root, ("cut",))
    assert json.loads((root / "models/cut/cut.json").read_text()) == {"layers": None, "chosen_by": "student.layers"}
    auto = parse_params({"student": {"layers": "auto"}})
    with pytest.raises(ConfigError, match="needs stage cut's folder"):
        cutting.resolve(auto, None)
    with pytest.raises(ConfigError, match="cut.json: student.layers is auto, but stage cut's choice cannot be read"):
        cutting.resolve(auto, tmp_path / "nowhere")
    with pytest.raises(ConfigError, match="teacher.layers"):
        parse_params({"teacher": {"layers": "auto"}})  # auto is the student's alone


def test_static_finetune_trains_as_train_says_at_the_teacher_s_tracked_keys():
    """static.finetune's section is built whole from train, the teacher's keys stage cut tracks, and its own
    choices: no key listed by hand that a new TrainParams key could miss (it would be refused, not dropped)."""
    import yaml

    from stages.cut import FROM_TEACHER, finetune_params

    tracked = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]["cut"]["params"]
    assert {f"teacher.{k}" for k in FROM_TEACHER} == {k for k in tracked if k.startswith("teacher.")}
    p = parse_params({"train": {"weight_decay": 0.05}, "teacher": {"lr": 3e-5, "batch_size": 8},
                      "static": {"finetune": 2}})
    tp = finetune_params(p, "bundled:all-MiniLM-L6-v2")
    assert (tp.lr, tp.batch_size, tp.weight_decay, tp.epochs, tp.loss) == (3e-5, 8, 0.05, 2, "cosine")
    assert tp.model_dump(include=set(p.train.model_dump())) == p.train.model_dump()
