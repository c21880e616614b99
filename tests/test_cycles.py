"""Trans-Encoder cycles (pldistill.recipes.trans_encoder): labels, selection,
mutual distillation, and resuming from the store -- after more cycles, a kill, a stale or corrupt entry."""

import json
import os
import signal
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
import yaml
from sentence_transformers import CrossEncoder, SentenceTransformer

from pldistill.base import schemas
from pldistill.base.errors import ConfigError
from pldistill.base.io import write_json
from pldistill.base.store import Store
from pldistill.models.encoders import BiEncoder, CrossModel
from pldistill.params.config import parse_params
from pldistill.recipes.base import DistillDirs
from pldistill.recipes.trans_encoder import run as run_trans_encoder
from pldistill.recipes.trans_encoder import to_target, unlabelled_pairs
from tests.conftest import ROOT, make_pairs

# What a finished run leaves that users rely on; all must be byte-identical between equal runs.
ARTIFACTS = ["models/bi/model.safetensors", "models/cross/model.safetensors", "metrics/plots/cycles.csv",
             "metrics/plots/student-dev.csv"]


def raw_params(model: str, cycles: int = 2, **trans) -> dict:
    step = {"epochs": 1, "batch_size": 8, "lr": 1e-3, "max_length": 32, "evals_per_epoch": 2}
    return {"seed": 7, "recipe": "trans-encoder", "cycles": cycles, "teacher": {"model": model},
            "student": {"model": model, "layers": None}, "trans": {"cross": step, "bi": step, **trans},
            "label": {"bf16": False}, "evaluate": {"bf16": False}}


@pytest.fixture
def clean(tmp_path):
    out = tmp_path / "clean"
    for split, (n, offset) in {"train": (48, 0), "dev": (24, 100), "test": (24, 200)}.items():
        schemas.write(out / f"{split}.parquet", make_pairs(n, offset), schemas.PAIRS)
    return out


def run(params, clean, root, store):
    m = root / "metrics"
    dirs = DistillDirs(clean, root / "data/pairs", root / "data/silver", root / "models/teacher", root / "data/pseudo",
                       root / "models/bi", root / "models/cross", m / "plots/student-dev.csv", m / "plots/cycles.csv")
    result = run_trans_encoder(params, dirs, store=Store(store))
    write_json(m / "distill.json", result)
    return result


def same_artifacts(a, b, cycles: int) -> None:
    files = ARTIFACTS + [f"data/pseudo/cycle-{c:02d}-{who}.parquet"
                         for c in range(1, cycles + 1) for who in ("bi", "cross")]
    for rel in files:
        assert (a / rel).read_bytes() == (b / rel).read_bytes(), rel


def untimed(per_cycle: list[dict]) -> list[dict]:
    """Drop the timings (which differ between equal runs) from per-cycle or selection blocks."""
    def strip(m):
        return {f: v for f, v in m.items() if f != "train_seconds"}
    return [{k: [strip(m) for m in v] if isinstance(v, list) else strip(v) if isinstance(v, dict) else v
             for k, v in c.items()} for c in per_cycle]


def test_unlabelled_pairs_keep_each_pair_once_and_say_where_it_came_from():
    train = pd.DataFrame({"sentence1": ["a", "b"], "sentence2": ["x", "y"], "score": [0.1, 0.2]})
    dev = pd.DataFrame({"sentence1": ["a", "c"], "sentence2": ["x", "z"], "score": [0.9, 0.3]})
    cands = pd.DataFrame({"sentence1": ["c", "d"], "sentence2": ["z", "w"], "strategy": ["bm25", "bm25"]})
    pairs = unlabelled_pairs({"train": train, "dev": dev}, cands)
    assert list(pairs.columns) == ["sentence1", "sentence2", "strategy"]  # no scores: nothing gold is learned
    assert pairs.values.tolist() == [["a", "x", "train"], ["b", "y", "train"], ["c", "z", "dev"], ["d", "w", "bm25"]]
    swapped = pd.DataFrame({"sentence1": ["X", "w"], "sentence2": ["A", "e"], "strategy": ["bm25", "bm25"]})
    pairs = unlabelled_pairs({"train": train}, swapped)  # either order, any case: the same pair
    assert pairs.values.tolist() == [["a", "x", "train"], ["b", "y", "train"], ["w", "e", "bm25"]]


def test_cosine_targets_are_in_unit_interval():
    cos = np.array([-0.5, 0.0, 0.3, 1.0])
    assert to_target(cos, "clip").tolist() == [0.0, 0.0, 0.3, 1.0]
    assert to_target(cos, "affine").tolist() == [0.25, 0.5, 0.65, 1.0]


def test_trans_params_are_checked(tiny_model_dir):
    with pytest.raises(ConfigError, match="trans.splits.*expected distinct splits"):
        parse_params(raw_params(str(tiny_model_dir), splits=["train", "gold"]))
    with pytest.raises(ConfigError, match="trans.init"):
        parse_params(raw_params(str(tiny_model_dir), init="warm"))
    with pytest.raises(ConfigError, match="cycles must be 1"):
        parse_params({**raw_params(str(tiny_model_dir)), "recipe": "dse"})


def test_cycles_write_labels_models_and_scores(tiny_model_dir, clean, tmp_path):
    params = parse_params(raw_params(str(tiny_model_dir), splits=["train", "dev"]))
    r = run(params, clean, tmp_path, tmp_path / "store")
    assert r["pairs"] == 72 and r["pairs_by_source"] == {"dev": 24, "train": 48}  # test pairs kept out
    assert r["steps"]["reused"] == [] and r["steps"]["computed"][0] == "c00-start"
    for c in (1, 2):
        bi = schemas.read(tmp_path / f"data/pseudo/cycle-{c:02d}-bi.parquet", schemas.PSEUDO)
        cross = schemas.read(tmp_path / f"data/pseudo/cycle-{c:02d}-cross.parquet", schemas.PSEUDO)
        assert len(bi) == len(cross) == 72 and (bi["cycle"] == c).all()
        assert bi["score"].between(0, 1).all() and bi["logit"].isna().all()
        np.testing.assert_allclose(cross["score"], 1 / (1 + np.exp(-cross["logit"])))  # one member: sigmoid(logit)
        labeller = f"bi:{tiny_model_dir}" if c == 1 else f"bi:c01-bi-0@{_weights_sha(tmp_path, 'c01-bi-0')}"
        assert bi["labeller"].iloc[0] == labeller
        assert cross["labeller"].iloc[0].startswith(f"cross:c{c:02d}-cross-0@")

    # The cross-encoder labels of cycle 1 are what the stored cycle-1 cross-encoder predicts.
    cross1 = schemas.read(tmp_path / "data/pseudo/cycle-01-cross.parquet", schemas.PSEUDO)
    again = CrossModel.load(str(tmp_path / "store" / _key(r, tmp_path, "c01-cross-0") / "model"), 128)
    np.testing.assert_allclose(again.logits(cross1["sentence1"], cross1["sentence2"], bf16=False), cross1["logit"],
                               rtol=1e-5, atol=1e-5)

    # The selected models are the best on dev across cycles, and load with plain sentence-transformers.
    per = r["per_cycle"]
    assert r["selected"]["bi"]["dev"]["spearman"] == max(b["dev"]["spearman"] for c in per for b in c["bi"])
    assert r["selected"]["cross"]["dev"]["spearman"] == max(x["dev"]["spearman"] for c in per for x in c["cross"])
    dev = pd.read_parquet(clean / "dev.parquet")
    bi = BiEncoder.load(str(tmp_path / "models/bi"))
    from pldistill.base.metrics import correlation
    dev_spearman = correlation(bi.score(dev["sentence1"], dev["sentence2"], bf16=False), dev["score"])
    assert dev_spearman == r["selected"]["bi"]["dev"]
    SentenceTransformer(str(tmp_path / "models/bi"), device="cpu").encode(["plain ST"])
    CrossEncoder(str(tmp_path / "models/cross"), device="cpu").predict([("a", "b")])

    plot = pd.read_csv(tmp_path / "metrics/plots/cycles.csv")
    assert plot["cycle"].tolist() == [0, 1, 2] and pd.isna(plot["cross_dev"].iloc[0])
    assert plot["bi_dev"].tolist()[1:] == [c["bi"][0]["dev"]["spearman"] for c in per]
    assert json.loads((tmp_path / "metrics/distill.json").read_text()) == r


def _weights_sha(root, step):
    from pldistill.base.io import sha256_file
    return sha256_file(root / "store" / _key(None, root, step) / "model/model.safetensors")[:12]


def _key(report, root, step):
    """The store entry of ``step`` (found by its manifest)."""
    for d in (root / "store").iterdir():
        manifest = d / "MANIFEST.json"
        if manifest.is_file() and json.loads(manifest.read_text())["meta"]["step"] == step:
            return d.name
    raise AssertionError(f"no stored {step}")


def test_more_cycles_compute_only_the_new_ones_and_equal_a_cold_run(tiny_model_dir, clean, tmp_path):
    model = str(tiny_model_dir)
    run(parse_params(raw_params(model, cycles=1)), clean, tmp_path / "warm", tmp_path / "store")
    r = run(parse_params(raw_params(model, cycles=2)), clean, tmp_path / "warm", tmp_path / "store")
    assert all(s.startswith("c02-") for s in r["steps"]["computed"]) and len(r["steps"]["computed"]) == 4
    assert len(r["steps"]["reused"]) == 5  # start + 4 steps x 1 cycle
    cold = run(parse_params(raw_params(model, cycles=2)), clean, tmp_path / "cold", tmp_path / "cold-store")
    assert len(cold["steps"]["computed"]) == 9
    same_artifacts(tmp_path / "warm", tmp_path / "cold", 2)
    assert untimed(cold["per_cycle"]) == untimed(r["per_cycle"])
    assert untimed([cold["selected"]]) == untimed([r["selected"]])


def test_a_changed_input_reuses_nothing(tiny_model_dir, clean, tmp_path):
    model = str(tiny_model_dir)
    run(parse_params(raw_params(model, cycles=1)), clean, tmp_path, tmp_path / "store")
    r = run(parse_params(raw_params(model, cycles=1, target="affine")), clean, tmp_path, tmp_path / "store")
    assert r["steps"]["reused"] == []
    dev = pd.read_parquet(clean / "dev.parquet")
    schemas.write(clean / "dev.parquet", dev.assign(score=dev["score"][::-1].to_numpy()), schemas.PAIRS)
    r = run(parse_params(raw_params(model, cycles=1)), clean, tmp_path, tmp_path / "store")
    assert r["steps"]["reused"] == []  # new dev labels change checkpoint selection, so every step is stale


def test_a_corrupt_entry_is_detected_and_recomputed(tiny_model_dir, clean, tmp_path):
    params = parse_params(raw_params(str(tiny_model_dir), cycles=1))
    run(params, clean, tmp_path / "a", tmp_path / "store")
    weights = tmp_path / "store" / _key(None, tmp_path, "c01-bi-0") / "model/model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0xFF  # one flipped bit in the stored cycle-1 bi-encoder
    weights.write_bytes(bytes(data))
    r = run(params, clean, tmp_path / "b", tmp_path / "store")
    assert r["steps"]["corrupt_moved_aside"] == 1
    assert r["steps"]["computed"] == ["c01-bi-0"]  # only the damaged step; its recomputed bytes match the chain
    same_artifacts(tmp_path / "a", tmp_path / "b", 1)


def test_mutual_labels_are_the_mean_of_both_models(tiny_model_dir, clean, tmp_path):
    model = str(tiny_model_dir)
    params = parse_params(raw_params(model, cycles=2, mutual=[{"bi": model}]))
    r = run(params, clean, tmp_path, tmp_path / "store")
    assert r["members"] == 2 and [x["step"] for x in r["per_cycle"][0]["cross"]] == ["c01-cross-0", "c01-cross-1"]

    def stored(step):
        return str(tmp_path / "store" / _key(r, tmp_path, step) / "model")

    cross_labels = schemas.read(tmp_path / "data/pseudo/cycle-01-cross.parquet", schemas.PSEUDO)
    s1, s2 = cross_labels["sentence1"], cross_labels["sentence2"]
    logits = np.array([CrossModel.load(stored(f"c01-cross-{i}"), 128).logits(s1, s2, bf16=False) for i in (0, 1)])
    assert not np.allclose(logits[0], logits[1])  # two members really differ (own seeds)
    np.testing.assert_allclose(cross_labels["score"], (1 / (1 + np.exp(-logits))).mean(0), rtol=1e-5, atol=1e-6)
    assert cross_labels["labeller"].iloc[0].count("+") == 1

    bi_labels = schemas.read(tmp_path / "data/pseudo/cycle-02-bi.parquet", schemas.PSEUDO)
    cos = np.array([BiEncoder.load(stored(f"c01-bi-{i}")).score(s1, s2, bf16=False) for i in (0, 1)])
    assert not np.allclose(cos[0], cos[1])
    np.testing.assert_allclose(bi_labels["score"], to_target(cos, "clip").mean(0), rtol=1e-5, atol=1e-6)


def test_pruned_student_with_its_whole_model_as_mutual_member(tiny_model_dir, clean, tmp_path):
    """student.layers cuts the first member only (a mutual member named as student.model stays whole: it is the
    whole model teaching its cut), and models/bi is the cut student's best, however well the whole one scores."""
    model = str(tiny_model_dir)  # 2 layers
    raw = raw_params(model, cycles=2, mutual=[{"bi": model}])
    raw["student"]["layers"] = [0]
    r = run(parse_params(raw), clean, tmp_path, tmp_path / "store")

    def depth(path) -> int:
        return json.loads((path / "config.json").read_text())["num_hidden_layers"]

    store = tmp_path / "store"
    for c in (1, 2):
        assert depth(store / _key(r, tmp_path, f"c0{c}-bi-0") / "model") == 1
        assert depth(store / _key(r, tmp_path, f"c0{c}-bi-1") / "model") == 2
    assert depth(tmp_path / "models/bi") == 1
    own = [m for c in r["per_cycle"] for m in c["bi"] if m["step"].endswith("-0")]
    assert r["selected"]["bi"]["step"] == max(own, key=lambda m: m["dev"]["spearman"])["step"]
    assert r["start"][0] != r["start"][1]  # cut and whole start apart
    plot = pd.read_csv(tmp_path / "metrics/plots/cycles.csv")  # the cut student's scores, cycle 0 its start
    assert plot["bi_dev"].tolist() == [r["start"][0]["dev"]["spearman"],
                                       *(max(m["dev"]["spearman"] for m in c["bi"] if m["step"].endswith("-0"))
                                         for c in r["per_cycle"])]


def test_sequential_starts_each_model_from_the_one_that_just_labelled(tiny_model_dir, clean, tmp_path):
    import shutil
    bi_start, cross_base = tmp_path / "bi-start", tmp_path / "cross-base"  # two names, so roles can't swap unseen
    shutil.copytree(tiny_model_dir, bi_start)
    shutil.copytree(tiny_model_dir, cross_base)
    for init in ("refresh", "sequential"):
        raw = {**raw_params(str(bi_start), init=init), "teacher": {"model": str(cross_base)}}
        root = tmp_path / init
        run(parse_params(raw), clean, root, root / "store")

        def start(step, root=root):
            return json.loads((root / "store" / _key(None, root, step) / "MANIFEST.json").read_text())["meta"]["start"]

        def model(step, root=root):
            return str(root / "store" / _key(None, root, step) / "model")

        if init == "refresh":
            assert [start(s) for s in ("c01-cross-0", "c01-bi-0", "c02-cross-0", "c02-bi-0")] == [
                str(cross_base), str(bi_start), str(cross_base), str(bi_start)]
        else:  # the paper: the cross-encoder starts from the bi-encoder that labelled, and vice versa
            assert [start(s) for s in ("c01-cross-0", "c01-bi-0", "c02-cross-0", "c02-bi-0")] == [
                str(bi_start), model("c01-cross-0"), model("c01-bi-0"), model("c02-cross-0")]


def test_the_stored_cycles_are_keyed_by_what_dvc_yaml_tracks_for_distill(tiny_model_dir, tmp_path):
    """One list (dvc.yaml's), not a second kept by hand: a tracked key or code file changes the fingerprint,
    ``cycles`` does not (growing it reuses the finished cycles)."""
    from pldistill.recipes import cycles

    stage = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]["distill"]
    keys, code = cycles.tracked()
    assert keys == [k for k in stage["params"] if isinstance(k, str)] and "cycles" in keys
    assert {str(p.relative_to(ROOT)) for p in code} == {d for d in stage["deps"] if d.endswith(".py")}
    params = parse_params(raw_params(str(tiny_model_dir)))
    data = tmp_path / "d.parquet"
    data.write_bytes(b"rows")
    base = cycles.run_fingerprint(params, [data], [])
    assert cycles.run_fingerprint(params.model_copy(update={"cycles": 7}), [data], []) == base
    for section, change in (("trans", {"target": "affine"}), ("evaluate", {"batch_size": 3})):
        other = params.model_copy(update={section: getattr(params, section).model_copy(update=change)})
        assert cycles.run_fingerprint(other, [data], []) != base, section
    untracked = params.model_copy(update={"augment": params.augment.model_copy(update={"min_chars": 9})})
    assert cycles.run_fingerprint(untracked, [data], []) == base  # stage distill does not read it
    missing = tmp_path / "dvc.yaml"
    missing.write_text("stages: {}\n")
    with pytest.raises(cycles.TrackingError, match="expected stage distill"):
        cycles.tracked(dvc_yaml=missing)
    with pytest.raises(cycles.TrackingError, match=r"tracks params key trans.nope, .* \(at 'nope'\)"):
        cycles.values(params, ["seed", "trans.nope"])


def test_a_semantic_sample_with_the_gold_encoder_is_not_unsupervised(tiny_model_dir):
    raw = {**raw_params(str(tiny_model_dir), sampled=True), "sample": {"strategy": "bm25+semantic"}}
    with pytest.raises(ConfigError, match="would not be unsupervised"):
        parse_params(raw)
    parse_params({**raw, "sample": {"strategy": "bm25+semantic", "semantic": {"encoder": str(tiny_model_dir)}}})


@pytest.mark.slow  # 30 s; the default tier covers its parts: a SIGKILLed stage resumes (test_checkpoints) and a
# rerun reuses the finished cycles from the store (test_more_cycles_compute_only_the_new_ones_and_equal_a_cold_run)
def test_killed_run_resumes_at_the_unfinished_step(tiny_model_dir, clean, tmp_path):
    """SIGKILL while cycle 2's cross-encoder trains; the rerun reuses cycle 1 and ends where a run that was
    never interrupted ends, byte for byte."""
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(raw_params(str(tiny_model_dir), cycles=2)))

    def cli(root, store):
        args = [sys.executable, "-m", "stages.distill", "--params", str(tmp_path / "params.yaml"),
                "--clean", str(clean),
                "--pairs", str(root / "data/pairs"), "--silver", str(root / "data/silver"),
                "--teacher", str(root / "models/teacher"), "--pseudo", str(root / "data/pseudo"),
                "--bi", str(root / "models/bi"), "--cross", str(root / "models/cross"),
                "--report", str(root / "metrics/distill.json"), "--curve", str(root / "metrics/plots/student-dev.csv"),
                "--cycles-plot", str(root / "metrics/plots/cycles.csv"), "--embed", str(root / "models/embed")]
        env = {**os.environ, "PLDISTILL_STORE": str(store), "TQDM_DISABLE": "1"}
        return subprocess.Popen(args, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    proc = cli(tmp_path / "killed", tmp_path / "store")
    for line in proc.stderr:
        if "c02-cross-0: computing" in line:
            proc.send_signal(signal.SIGKILL)
            break
    proc.wait()
    assert proc.returncode == -signal.SIGKILL  # killed mid-run, not finished
    assert not (tmp_path / "killed/models/bi").exists()

    resumed = cli(tmp_path / "killed", tmp_path / "store")
    _, err = resumed.communicate()
    assert resumed.returncode == 0, err
    report = json.loads((tmp_path / "killed/metrics/distill.json").read_text())  # stdout: one line (issue 77)
    assert report["steps"]["reused"] == ["c00-start", "c01-label-bi", "c01-cross-0", "c01-label-cross", "c01-bi-0",
                                         "c02-label-bi"]
    assert report["steps"]["computed"] == ["c02-cross-0", "c02-label-cross", "c02-bi-0"]
    assert report["steps"]["orphans_swept"] == 1  # the killed step's temp dir

    cold = cli(tmp_path / "cold", tmp_path / "cold-store")
    _, err = cold.communicate()
    assert cold.returncode == 0, err
    same_artifacts(tmp_path / "killed", tmp_path / "cold", 2)
