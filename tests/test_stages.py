"""The whole chain, stage function by stage function, on the tiny model and a slice of the demo data.

The chains are built once per session (conftest ``chains``): a test that only reads one shares it; a test
that runs a stage again copies it first, or starts its own."""

import json

import numpy as np
import pandas as pd
import pytest
from sentence_transformers import CrossEncoder, SentenceTransformer

from pldistill.base import schemas
from pldistill.params.config import parse_params
from stages.evaluate import evaluate
from tests.conftest import STAGES, adaptation_target, run_chain


@pytest.fixture
def small(tiny_params):
    return tiny_params.model_copy(update={"data": tiny_params.data.model_copy(update={"max_train": 60})})


def test_evaluate_scores_times_and_serves_the_exports(chains):
    chain = chains("augsbert")
    result, root = chain.result, chain.root
    block = result["export"]["onnx-int8"]
    assert set(block) == {"dev", "test", "speed", "speed_low", "speed_high", "bytes", "drift", "gate"}
    assert block["speed_low"] <= block["speed"] <= block["speed_high"] and block["bytes"] > 0
    assert result["bi"]["speed_low"] <= result["bi"]["speed"] <= result["bi"]["speed_high"]
    assert result["export"]["chosen"] in ("onnx-int8", "torch") and result["export"]["failed"] == {}
    card = (root / "models/serve/README.md").read_text()
    assert f"# The served student ({result['export']['chosen']})" in card
    served = pd.read_csv(root / "metrics/speed/exports.csv").to_dict("records")
    assert served == [{"speed": block["speed"], "test": block["test"]["spearman"], "format": "onnx-int8"}]
    machine = json.loads((root / "metrics/machine/eval.json").read_text())
    assert set(machine["latency"]) == {"batch_size", "threads", "reference", "student", "export/onnx-int8"}
    assert machine["bytes"]["export/onnx-int8"] == block["bytes"] and machine["speed"]["cpu"]


def test_a_student_that_cannot_be_exported_is_served_as_it_is(chains):
    result = chains("dse").result  # its head scores pairs: an encoder export alone would not
    assert "onnx-int8" in result["export"]["failed"] and result["export"]["chosen"] == "torch"


def test_chain_writes_every_artifact_users_rely_on(chains):
    chain = chains("augsbert")
    result, root = chain.result, chain.root
    assert set(result["baseline"]) == {"start", "gold", "jaccard"}
    for block in (result["bi"], result["cross"], *result["baseline"].values()):
        assert {"dev", "test"} <= set(block) and set(block["test"]) == {"spearman", "pearson"}
    # each model scored the test pairs in turns with the student's whole start: a ratio each (not word overlap)
    timed = {"student": result["bi"], "teacher": result["cross"], "start": result["baseline"]["start"],
             "gold-only": result["baseline"]["gold"]}
    assert all(b["speed"] > 0 for b in timed.values()) and "speed" not in result["baseline"]["jaccard"]
    for name, b in timed.items():  # a point per model for `dvc plots`: the same figures as eval.json
        assert pd.read_csv(root / f"metrics/speed/{name}.csv").to_dict("records") == [
            {"speed": b["speed"], "test": b["test"]["spearman"]}]
    auc = chains("classification")  # the primary metric, whatever the task
    assert pd.read_csv(auc.root / "metrics/speed/student.csv")["test"].tolist() == [auc.result["bi"]["test"]["auc"]]
    machine = json.loads((root / "metrics/machine/eval.json").read_text())["speed"]
    assert machine["reference"] == f"{chain.params.student.model} whole, torch fp32"
    assert machine["rounds"] == chain.params.evaluate.speed_rounds == 1  # the tests' (params.yaml: 3)
    assert all(machine[name]["turns"] >= 1 for name in timed)
    # the tests' student is the whole tiny model, as its start and gold-only baseline: timed once, as the reference
    assert {n: machine[n].get("timed_as") for n in timed} == {
        "student": "reference", "start": "reference", "gold-only": "reference", "teacher": None}
    assert result["bi"]["speed"] == result["baseline"]["gold"]["speed"] == 1.0
    assert json.loads((root / "metrics/eval.json").read_text()) == result
    assert result["overlap"] == {"dev_in_train": 0, "test_in_train": 0}  # the demo's split keeps groups apart
    # the student's lead over gold-only and the teacher, with its paired-bootstrap interval, on each split
    for name, model in (("gold", result["baseline"]["gold"]), ("teacher", result["cross"])):
        for split in ("dev", "test"):
            gain = result["gain"][name][split]
            assert gain["spearman"] == pytest.approx(result["bi"][split]["spearman"] - model[split]["spearman"],
                                                     abs=0.011)
            assert gain["low"] <= gain["spearman"] <= gain["high"]

    pseudo = schemas.read(root / "data/pseudo/cycle-01.parquet", schemas.PSEUDO)
    cands = schemas.read(root / "data/pairs/candidates.parquet", schemas.CANDIDATES)
    assert len(pseudo) == len(cands) > 0
    assert pseudo["score"].between(0, 1).all() and (pseudo["cycle"] == 1).all()
    assert pseudo["labeller"].str.fullmatch(r"cross:.+@[0-9a-f]{12}").all()  # spec @ fine-tuned weights' hash
    report = json.loads((root / "metrics/distill.json").read_text())
    assert report["silver_pairs"] == len(pseudo) and report["gold_pairs"] == 60
    diag = json.loads((root / "metrics/label.json").read_text())
    assert diag["silver_pairs"] == len(pseudo) and diag["kl_gold_silver"] >= 0
    assert sum(diag["histogram"]["silver"]) == len(pseudo) and sum(diag["histogram"]["gold"]) == 60
    density = pd.read_csv(root / "metrics/score-density.csv")
    assert list(density.columns) == ["score", "gold", "silver"] and len(density) == 101

    SentenceTransformer(str(root / "models/bi"), device="cpu").encode(["loads with plain ST"])
    CrossEncoder(str(root / "models/cross"), device="cpu").predict([("a", "b")])
    card = (root / "models/bi/README.md").read_text()
    assert card.startswith("---\nlibrary_name: sentence-transformers\n") and "# Augmented-SBERT student" in card
    assert f"| silver pairs | {len(pseudo)} |" in card
    assert f"| dev Spearman x100 (selection) | {report['best_dev']} |" in card
    assert "# Gold-only bi-encoder" in (root / "models/gold/README.md").read_text()
    assert "# Teacher cross-encoder" in (root / "models/cross/README.md").read_text()  # the teacher's copy
    curve = pd.read_csv(root / "metrics/student-dev.csv")
    assert list(curve.columns) == ["step", "epoch", "dev_spearman"] and curve["step"].iloc[0] == 0


def unspeeded(result: dict) -> dict:
    """eval.json without its speed ratios (timed, so never the same twice)."""
    timed = ("speed", "speed_low", "speed_high", "chosen")  # (which export is served: the fastest, as timed)
    return {k: unspeeded(v) for k, v in result.items() if k not in timed} if isinstance(result, dict) else result


def test_same_seed_gives_same_artifacts(chains, tmp_path):
    a = chains("augsbert")  # built with ParamReads recording: the recording changes nothing either
    b = run_chain(a.params, tmp_path)
    assert unspeeded(a.result) == unspeeded(b)  # speed is measured, so it differs run to run
    for side in ("teacher", "gold", "distill"):  # both models really trained, so equal weights mean something
        assert json.loads((a.root / "metrics" / f"{side}.json").read_text())["best_step"] > 0
    for rel in ("data/raw/demo/train.parquet", "data/clean/train.parquet", "data/pairs/candidates.parquet",
                "data/silver/silver.parquet", "data/pseudo/cycle-01.parquet", "metrics/cycles.csv",
                "models/teacher/member-00/model.safetensors", "models/bi/model.safetensors",
                "models/gold/model.safetensors", "metrics/score-density.csv", "models/cross/model.safetensors"):
        assert (a.root / rel).read_bytes() == (tmp_path / rel).read_bytes(), rel
    untimed = [{k: v for k, v in json.loads((root / "metrics/label.json").read_text()).items()
                if not k.startswith("label_")} for root in (a.root, tmp_path)]
    assert untimed[0] == untimed[1]


def test_gold_only_run_has_an_empty_silver_file(chains, tmp_path):
    chain = chains("augsbert")
    params = chain.params.model_copy(update={"sample": chain.params.sample.model_copy(update={"strategy": "none"})})
    # The stages before `sample` read no sample.* key (tests/test_params_tracking.py): the chain's are this run's.
    run_chain(params, chain.copy_to(tmp_path), STAGES[STAGES.index("sample"):])
    assert schemas.read(tmp_path / "data/pseudo/cycle-01.parquet", schemas.PSEUDO).empty


@pytest.mark.parametrize("strategy", ["random", "semantic", "bm25+semantic", "kde"])
def test_every_strategy_runs_through_label(chains, tmp_path, strategy):
    chain = chains("augsbert")
    sp = chain.params.sample.model_copy(update={
        "strategy": strategy, "random": chain.params.sample.random.model_copy(update={"pairs": 150}),
        "kde": chain.params.sample.kde.model_copy(update={"pool": 400})})
    params = chain.params.model_copy(update={"sample": sp})
    root = chain.copy_to(tmp_path)  # download .. gold and teacher read no sample.* key: theirs are this run's
    s = run_chain(params, root, ("sample",))
    r = run_chain(params, root, ("label",))
    pseudo = schemas.read(root / "data/silver/silver.parquet", schemas.PSEUDO)
    assert r["silver_pairs"] == len(pseudo)
    if strategy == "kde":  # the barely trained teacher squeezes scores into a sliver: KDE keeps few
        assert s["candidates"] == 400 and r["kde"]["pool"] == 400
        assert r["kde"]["kept"] + r["kde"]["dropped"] == 400 and r["kde"]["kept"] == len(pseudo) < 400
        if len(pseudo) > 1 and r["kl_gold_silver"] is not None:
            assert r["kl_gold_silver"] <= r["kde"]["pool_kl_gold_silver"]
    else:
        assert len(pseudo) == s["candidates"] > 0
    if strategy == "random":
        assert s["candidates"] == 150
    if strategy == "bm25+semantic":
        assert set(s["found"]) == {"bm25", "semantic"}
        assert s["candidates"] <= s["found"]["bm25"] + s["found"]["semantic"]
        assert set(pseudo["strategy"]) <= {"bm25", "semantic", "bm25+semantic"}
        assert sum(s["found_by"].values()) == s["candidates"]


def test_trans_encoder_chain_trains_no_teacher_and_learns_no_gold_score(chains):
    chain = chains("trans-encoder")  # cycles 2, one epoch per step
    result, root = chain.result, chain.root
    assert (root / "models/teacher/SKIPPED.txt").is_file()
    assert "# Trans-Encoder bi-encoder" in (root / "models/bi/README.md").read_text()
    assert "# Trans-Encoder cross-encoder" in (root / "models/cross/README.md").read_text()
    assert "skipped" in json.loads((root / "metrics/teacher.json").read_text())
    assert json.loads((root / "metrics/label.json").read_text())["silver_pairs"] == 0
    report = json.loads((root / "metrics/distill.json").read_text())
    assert report["recipe"] == "trans-encoder" and len(report["per_cycle"]) == 2
    assert result["bi"]["dev"] == report["selected"]["bi"]["dev"]  # evaluate scores the selected models
    assert result["cross"]["test"] == report["selected"]["cross"]["test"]
    assert sorted(p.name for p in (root / "data/pseudo").iterdir()) == [
        "cycle-01-bi.parquet", "cycle-01-cross.parquet", "cycle-02-bi.parquet", "cycle-02-cross.parquet"]
    gold_train = schemas.read(root / "data/clean/train.parquet", schemas.PAIRS)
    labels = schemas.read(root / "data/pseudo/cycle-01-bi.parquet", schemas.PSEUDO)
    learned = labels[labels["strategy"] == "train"]
    assert len(learned) == len(gold_train)
    assert not np.allclose(learned["score"].to_numpy(), gold_train["score"].to_numpy())  # bi-encoder's, not gold


def test_dse_chain_learns_teacher_logits_on_gold_and_silver(chains):
    chain = chains("dse")  # 3 epochs of batch 8, a 16-wide head on last4 pooling
    result, root = chain.result, chain.root
    on_gold = schemas.read(root / "data/silver/gold.parquet", schemas.PSEUDO)
    silver = schemas.read(root / "data/silver/silver.parquet", schemas.PSEUDO)
    learned = schemas.read(root / "data/pseudo/cycle-01.parquet", schemas.PSEUDO)
    assert len(on_gold) == 60 and (on_gold["strategy"] == "gold").all() and on_gold["logit"].notna().all()
    assert len(learned) == 60 + len(silver) > 60
    report = json.loads((root / "metrics/distill.json").read_text())
    assert report["recipe"] == "dse" and report["head_dim"] == 2 * 32
    # 3 epochs of 20 steps, unless dev stopped improving for more than train.patience (1) epoch before
    assert report["steps"] == 3 * 20 or report["stopped_early"].startswith(f"at step {report['steps']} of {3 * 20}:")

    from pldistill.base.metrics import correlation
    from pldistill.models.dse import DSE
    student = DSE.load(root / "models/bi")
    test = schemas.read(root / "data/clean/test.parquet", schemas.PAIRS)
    pred = student.score(test["sentence1"], test["sentence2"], bf16=False)
    assert correlation(pred, test["score"]) == result["bi"]["test"]  # evaluate scored through the head
    SentenceTransformer(str(root / "models/bi"), device="cpu").encode(["plain ST still loads it"])
    assert "DSE.load(path)" in (root / "models/bi/README.md").read_text()


def test_dse_refuses_gold_logits_out_of_step_with_the_gold_pairs(small, tmp_path):
    from pldistill.recipes.dse import dse_rows as _dse_rows
    gold = pd.DataFrame({"sentence1": ["a", "b"], "sentence2": ["c", "d"], "score": [0.1, 0.9]})
    on_gold = gold[["sentence1", "sentence2"]].assign(score=0.5, logit=0.0, labeller="t", cycle=1, strategy="gold")
    silver = on_gold.iloc[:0]
    assert len(_dse_rows(gold, on_gold, silver, tmp_path / "train.parquet", tmp_path)) == 2
    swapped = on_gold.assign(sentence2=["d", "c"])
    with pytest.raises(schemas.SchemaError, match="does not follow .*train.parquet row by row"):
        _dse_rows(gold, swapped, silver, tmp_path / "train.parquet", tmp_path)
    with pytest.raises(schemas.SchemaError, match="'logit' has 1 null"):
        _dse_rows(gold, on_gold.assign(logit=[0.0, None]), silver, tmp_path / "train.parquet", tmp_path)


def test_rtt_ensemble_chain_distils_sub_models_into_one_student(chains):
    chain = chains("rtt-ensemble")  # k 2 sub-models weighted by softmax, batch 16
    result, params, root = chain.result, chain.params, chain.root

    members = json.loads((root / "models/teacher/members.json").read_text())["members"]
    assert [(m["name"], m["seed"]) for m in members] == [("sub-01", 8), ("sub-02", 9)]
    from safetensors.torch import load_file
    w1, w2 = (load_file(root / f"models/teacher/{n}/model.safetensors") for n in ("sub-01", "sub-02"))
    assert any(not np.allclose(w1[k], w2[k]) for k in w1)  # two seeds, two different sub-models
    curve = pd.read_csv(root / "metrics/teacher-dev.csv")
    assert list(curve["member"].unique()) == ["sub-01", "sub-02"] and (curve["step"].diff().iloc[1:] > 0).all()

    from pldistill.teach.ensemble import Ensemble, read_embeddings
    sentences, emb = read_embeddings(root / "data/silver/ensemble.parquet")
    train = schemas.read(root / "data/clean/train.parquet", schemas.PAIRS)
    assert sentences == list(dict.fromkeys([*train["sentence1"], *train["sentence2"]]))  # no RTT corpus
    np.testing.assert_allclose(np.linalg.norm(emb, axis=1), 1, atol=1e-5)
    label_report = json.loads((root / "metrics/label.json").read_text())
    assert label_report["ensemble"]["members"] == ["sub-01", "sub-02"] and label_report["silver_pairs"] == 0
    from pldistill.teach.ensemble import member_weights
    expected = member_weights([m["best_dev"] for m in members], "softmax")
    assert label_report["ensemble"]["weights"] == pytest.approx(expected, abs=1e-6)

    assert "cross" not in result and set(result["submodels"]) == {"sub-01", "sub-02"}
    test = schemas.read(root / "data/clean/test.parquet", schemas.PAIRS)
    teacher = Ensemble.load(root / "models/teacher", "softmax", 1.0, params.teacher.max_length)
    from pldistill.base.metrics import correlation
    assert correlation(teacher.score(test["sentence1"], test["sentence2"], bf16=False),
                       test["score"]) == result["ensemble"]["test"]
    report = json.loads((root / "metrics/distill.json").read_text())
    assert report["recipe"] == "rtt-ensemble" and report["sentences"] == len(sentences)
    assert report["steps"] == -(-len(sentences) // 16)
    assert (root / "models/cross/SKIPPED.txt").is_file()
    assert sorted(p.name for p in (root / "data/pseudo").iterdir()) == ["cycle-01-ensemble.parquet"]
    SentenceTransformer(str(root / "models/bi"), device="cpu").encode(["the student is a plain bi-encoder"])
    assert "# RTT-ensemble student" in (root / "models/bi/README.md").read_text()
    assert "| positives | dropout view |" in (root / "models/teacher/sub-02/README.md").read_text()


def test_classification_chain_reports_auc_f1_and_a_majority_baseline(chains):
    chain = chains("classification")  # 160 pairs of 0/1 scores in a csv, split 60/20/20
    result, root = chain.result, chain.root
    assert json.loads((root / "metrics/download.json").read_text())["task"] == "classification"
    assert set(result["baseline"]) == {"start", "gold", "jaccard", "majority"}
    assert set(result["gain"]["gold"]["test"]) == {"auc", "low", "high"}  # the lead in the primary metric
    for block in (result["bi"], result["cross"], *result["baseline"].values()):
        assert set(block) - {"speed", "speed_low", "speed_high"} == {"dev", "test", "threshold"}
        assert set(block["test"]) == {"auc", "auc@0.05", "f1", "accuracy"}
    test = schemas.read(root / "data/clean/test.parquet", schemas.PAIRS)
    share = test["score"].mean()
    assert result["baseline"]["majority"]["test"]["accuracy"] == pytest.approx(100 * max(share, 1 - share), abs=0.01)
    assert result["baseline"]["majority"]["test"]["auc"] == 50.0

    from pldistill.base.metrics import best_threshold, classification
    dev = schemas.read(root / "data/clean/dev.parquet", schemas.PAIRS)
    bi = SentenceTransformer(str(root / "models/bi"), device="cpu")
    cos = lambda df: np.sum(bi.encode(list(df["sentence1"]), normalize_embeddings=True)  # noqa: E731
                            * bi.encode(list(df["sentence2"]), normalize_embeddings=True), axis=1)
    t = best_threshold(cos(dev), dev["score"])
    assert result["bi"]["threshold"] == pytest.approx(t, abs=1e-4)  # chosen on dev, not on test
    assert result["bi"]["test"]["f1"] == pytest.approx(classification(cos(test), test["score"], t)["f1"], abs=0.5)


def test_extra_evaluation_sets_get_their_own_blocks(chains, tmp_path):
    import zipfile

    from tests.conftest import make_pairs
    from tests.test_download import SICK_HEADER, _sick_row
    chain = chains("augsbert")  # its models are read; eval.json goes to tmp_path
    rows = [_sick_row(i, r.sentence1, r.sentence2, 1 + 4 * r.score, ("TRAIN", "TRIAL", "TEST")[i % 3])
            for i, r in enumerate(make_pairs(60, offset=500).itertuples())]
    with zipfile.ZipFile(tmp_path / "SICK.zip", "w") as z:
        z.writestr("SICK.txt", "\n".join([SICK_HEADER, *rows]) + "\n")
    table = make_pairs(40, offset=900).assign(score=lambda d: (d["score"] > 0.5).astype(int))
    table.to_csv(tmp_path / "dups.csv", index=False)
    extra = [{"name": "sick", "data": {"dataset": "sickr", "source": str(tmp_path / "SICK.zip")}},
             {"name": "dups", "data": {"dataset": str(tmp_path / "dups.csv"), "split": {"dev": 0.3, "test": 0.3}}}]
    params = parse_params({**chain.params.model_dump(mode="json"),
                           "evaluate": {"bf16": False, "speed_min_seconds": 0, "extra": extra}})
    m, built = tmp_path / "metrics", chain.root
    result = evaluate(params, built / "data/clean", built / "models/bi", built / "models/cross",
                      built / "models/teacher", built / "models/gold", m / "eval.json", m / "pred.csv")
    assert set(result["extra"]) == {"sick", "dups"}
    assert set(result["extra"]["sick"]["bi"]["test"]) == {"spearman", "pearson"}  # regression, 1-5 scaled
    assert set(result["extra"]["dups"]["bi"]["test"]) == {"auc", "auc@0.05", "f1", "accuracy"}
    assert "majority" in result["extra"]["dups"]["baseline"] and "majority" not in result["baseline"]
    main = json.loads((m / "eval.json").read_text())
    assert main["bi"] == result["bi"] and main["extra"] == result["extra"]

    from pldistill.base.metrics import correlation
    sick_test = [r for i, r in enumerate(make_pairs(60, offset=500).itertuples()) if i % 3 == 2]
    bi = SentenceTransformer(str(built / "models/bi"), device="cpu")
    a = bi.encode([r.sentence1 for r in sick_test], normalize_embeddings=True)
    b = bi.encode([r.sentence2 for r in sick_test], normalize_embeddings=True)
    expected = correlation(np.sum(a * b, axis=1), [r.score for r in sick_test])["spearman"]
    assert result["extra"]["sick"]["bi"]["test"]["spearman"] == pytest.approx(expected, abs=0.5)


def test_domain_adaptation_teacher_learns_the_source_and_no_target_label_is_used(chains, tmp_path):
    # The chain's target is a table with its own split column. Its scores are scrambled in a second copy:
    # if no target label trains or selects a model, both runs must give the same student bit for bit.
    chain = chains("adaptation")
    target = adaptation_target()
    scrambled = target.assign(score=np.random.default_rng(0).permutation(target["score"].to_numpy()))
    scrambled.to_csv(tmp_path / "scrambled.csv", index=False)
    raw = chain.params.model_dump(mode="json")
    a, b, result = chain.root, tmp_path / "b", chain.result
    run_chain(parse_params({**raw, "data": {**raw["data"], "dataset": str(tmp_path / "scrambled.csv")}}), b)

    down = json.loads((a / "metrics/download.json").read_text())
    assert down["dataset"] == "target" and down["adapt"]["dataset"] == "demo" and down["adapt"]["rows"]["train"] == 40
    src_train = schemas.read(a / "data/clean/source/train.parquet", schemas.PAIRS)
    assert len(src_train) == json.loads((a / "metrics/gold.json").read_text())["train_pairs"]  # source-only baseline
    teacher_report = json.loads((a / "metrics/teacher.json").read_text())
    assert teacher_report["adapt"] == "demo" and teacher_report["train_pairs"] == 2 * len(src_train)

    silver = schemas.read(a / "data/silver/silver.parquet", schemas.PSEUDO)
    own = silver[silver["strategy"] == "target"]
    target_train = schemas.read(a / "data/clean/train.parquet", schemas.PAIRS)
    assert list(own["sentence1"]) == list(target_train["sentence1"])  # every target pair, relabelled
    assert (silver["strategy"] != "target").sum() > 0  # and the sampled ones
    distilled = json.loads((a / "metrics/distill.json").read_text())
    assert distilled["gold_pairs"] == 0 and distilled["silver_pairs"] == len(silver) and distilled["adapt"] == "demo"

    for model in ("models/gold", "models/teacher/member-00", "models/bi"):
        fa, fb = (p / model / "model.safetensors" for p in (a, b))
        assert fa.read_bytes() == fb.read_bytes(), model
    # Evaluation does read the target's labels: the two runs differ there only.
    assert result["bi"]["test"] != json.loads((b / "metrics/eval.json").read_text())["bi"]["test"]
    assert "adapting to target" in (a / "models/gold/README.md").read_text()


def test_without_adaptation_the_source_folder_holds_a_note(chains):
    from pldistill.base.io import SKIPPED_NOTE
    root = chains("augsbert").root
    assert [p.name for p in (root / "data/clean/source").iterdir()] == [SKIPPED_NOTE]
    assert "adapt" not in json.loads((root / "metrics/download.json").read_text())


def test_adaptation_is_refused_outside_augsbert(small):
    from pldistill.base.errors import ConfigError
    with pytest.raises(ConfigError, match="adapt.dataset.*recipe augsbert"):
        parse_params({**small.model_dump(mode="json"), "recipe": "dse", "adapt": {"dataset": "demo"}})
