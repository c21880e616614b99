"""Stage export (pldistill.ship.export) and the exports run as served (pldistill.ship.served), on the tiny random BERT
and a static student distilled from it: every format made in sentence-transformers' or Model2Vec's layout, scoring as
the torch student does, the same bytes from the same student, a failed format named with its cause while the others
run, and stage evaluate's choice of the one it serves."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy.stats import spearmanr

from pldistill.base.errors import ModelError
from pldistill.models.encoders import BiEncoder
from pldistill.ship import export as ex
from pldistill.ship.served import Served, serve_card
from stages.evaluate import _choose
from stages.export import export
from tests.conftest import make_pairs
from tests.test_accel import sentences

S1, S2 = sentences(60, 3), sentences(60, 4)


@pytest.fixture(scope="module")
def student(tiny_model_dir, tmp_path_factory) -> Path:
    """The tiny BERT saved as the pipeline saves a student (sentence-transformers' current layout)."""
    out = tmp_path_factory.mktemp("student") / "bi"
    BiEncoder.load(str(tiny_model_dir), max_length=32).save(out)
    return out


@pytest.fixture(scope="module")
def clean(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("clean")
    make_pairs(40).to_parquet(out / "train.parquet")
    return out


def _params(tiny_params, **export_keys):
    return tiny_params.model_copy(update={"export": tiny_params.export.model_copy(update=export_keys)})


@pytest.fixture(scope="module")
def exported(student, clean, tmp_path_factory, tiny_model_dir):
    from tests.conftest import tiny

    params = _params(tiny(tiny_model_dir), formats="auto", calibration=20)
    root = tmp_path_factory.mktemp("exported")
    report = export(params, student, clean, root / "export", root / "export.json")
    return root / "export", report


def test_every_transformer_format_is_made_in_the_layout_sentence_transformers_loads(exported):
    out, report = exported
    assert set(report["formats"]) == set(ex.TRANSFORMER) and report["failed"] == {} and report["skipped"] == {}
    manifest = json.loads((out / ex.MANIFEST).read_text())
    assert manifest["formats"] == {f: {"file": ex.FILES[f], "bytes": m["bytes"]} for f, m in report["formats"].items()}
    for fmt in ex.TRANSFORMER:
        folder = out / fmt
        assert (folder / ex.FILES[fmt]).is_file() and not (folder / "model.safetensors").exists()
        modules = json.loads((folder / "modules.json").read_text())
        # the names every sentence-transformers release reads, whatever release saved the student
        assert [m["type"] for m in modules] == ["sentence_transformers.models.Transformer",
                                               "sentence_transformers.models.Pooling"]
        assert json.loads((folder / "1_Pooling/config.json").read_text())["pooling_mode_mean_tokens"] is True
        assert json.loads((folder / "sentence_bert_config.json").read_text())["max_seq_length"] == 32
    int8, fp32 = report["formats"]["onnx-int8"]["bytes"], report["formats"]["onnx"]["bytes"]
    assert int8 < fp32 / 2  # int8 weights


@pytest.mark.parametrize("fmt", ex.TRANSFORMER)
def test_each_export_scores_as_the_torch_student_does(exported, student, fmt):
    torch_scores = BiEncoder.load(str(student), 32).score(S1, S2, 16, False)
    served = Served(exported[0] / fmt, fmt)
    got = served.score(S1, S2, 16)
    rho = spearmanr(got, torch_scores)[0]
    if fmt in ("onnx", "openvino"):  # fp32: the same numbers to rounding
        np.testing.assert_allclose(got, torch_scores, atol=1e-4)
    else:  # int8 on a random 32-wide model: near, not equal
        assert rho > 0.95
    assert served.bytes == exported[1]["formats"][fmt]["bytes"]
    assert served.encode(["one sentence"], 1).shape == (1, 32)  # batch 1: the latency path


def test_the_same_student_gives_the_same_bytes(exported, student, clean, tmp_path, tiny_model_dir):
    """In one process, that is; OpenVINO numbers its graph's nodes with a counter of the process, so its .xml is
    compared across processes (`dvc repro` twice on the STS-B student: the same bytes, docs/results.md), its weights
    (.bin) here."""
    from tests.conftest import tiny

    again = export(_params(tiny(tiny_model_dir), formats="auto", calibration=20), student, clean, tmp_path / "export",
                   tmp_path / "export.json")
    assert again["formats"].keys() == exported[1]["formats"].keys()
    for fmt in ex.TRANSFORMER:
        files = (p.relative_to(exported[0] / fmt) for p in (exported[0] / fmt).rglob("*") if p.is_file())
        for file in sorted(f for f in files if f.suffix != ".xml"):
            assert (exported[0] / fmt / file).read_bytes() == (tmp_path / "export" / fmt / file).read_bytes(), file


def test_a_format_that_fails_is_named_with_its_cause_and_the_others_still_run(student, clean, tmp_path,
                                                                              tiny_params, monkeypatch):
    def broken(src, out):
        raise RuntimeError("Unsupported op: DynamicQuantizeLinear\nmore detail")

    monkeypatch.setattr(ex, "_quantised", broken)
    real = ex.lacking
    monkeypatch.setattr(ex, "lacking", lambda f: ["nncf"] if f == "openvino-int8" else real(f))
    params = _params(tiny_params, formats=("onnx", "onnx-int8", "openvino-int8"))
    report = export(params, student, clean, tmp_path / "export", tmp_path / "export.json")
    assert set(report["formats"]) == {"onnx"}
    assert report["failed"] == {
        "onnx-int8": "RuntimeError: Unsupported op: DynamicQuantizeLinear",
        "openvino-int8": "ExportError: needs nncf, not installed: pip install 'pldistill[openvino]'"}
    assert not (tmp_path / "export" / "onnx-int8").exists()
    # auto leaves out, with the reason, what the installed packages do not allow
    auto = export(_params(tiny_params, formats="auto"), student, clean, tmp_path / "auto", tmp_path / "auto.json")
    assert auto["skipped"] == {"openvino-int8": "needs nncf, not installed: pip install 'pldistill[openvino]'"}


def test_static_formats_asked_of_a_transformer_student_are_left_out_with_the_reason(student, clean, tmp_path,
                                                                                  tiny_params):
    report = export(_params(tiny_params, formats=("model2vec",)), student, clean, tmp_path / "e", tmp_path / "e.json")
    assert report["formats"] == {} and "a format of a static student" in report["skipped"]["model2vec"]


@pytest.fixture(scope="module")
def static_student(tiny_model_dir, tmp_path_factory) -> Path:
    from sentence_transformers import SentenceTransformer

    from pldistill.students.static import distil

    model = SentenceTransformer(str(tiny_model_dir), device="cpu")
    static, _ = distil(model, str(tiny_model_dir), None, "counts", 1e-3, S1 + S2, progress=False)
    out = tmp_path_factory.mktemp("static") / "bi"
    static.save(str(out))
    return out


def test_a_static_student_exports_to_model2vec_float32_float16_and_int8(static_student, clean, tmp_path,
                                                                                   tiny_params):
    pytest.importorskip("model2vec")
    from sentence_transformers import SentenceTransformer

    params = _params(tiny_params, formats="auto")
    params = params.model_copy(update={"student": params.student.model_copy(update={"kind": "static"})})
    report = export(params, static_student, clean, tmp_path / "export", tmp_path / "export.json")
    assert set(report["formats"]) == set(ex.STATIC) and report["failed"] == {}
    st = SentenceTransformer(str(static_student), device="cpu")
    want = st.encode(S1, normalize_embeddings=True)
    for fmt in ex.STATIC:
        served = Served(tmp_path / "export" / fmt, fmt)
        got = served.encode(S1, 1024)
        cos = np.sum(got * want, axis=1)
        assert cos.min() > (0.9999 if fmt == "model2vec" else 0.995), fmt
    b = {f: report["formats"][f]["bytes"] for f in ex.STATIC}
    assert b["model2vec-f16"] < 0.51 * b["model2vec"] and b["model2vec-int8"] < 0.26 * b["model2vec"]
    config = json.loads((tmp_path / "export" / "model2vec-int8" / "config.json").read_text())
    assert config["embedding_dtype"] == "int8" and config["embedding_scale"] > 0


def test_the_heads_no_export_holds_are_the_dse_students():
    from pldistill.models.dse import HEAD_DIR

    assert ex.HEADS == (HEAD_DIR,)


def test_int8_keeps_the_table_to_half_a_step_of_its_one_scale():
    rng = np.random.default_rng(0)
    table = rng.normal(size=(50, 16)).astype(np.float32) * rng.uniform(0.01, 10, size=(50, 1)).astype(np.float32)
    q, scale = ex.int8_table(table)
    assert q.dtype == np.int8 and np.abs(q).max() == 127
    assert np.abs(q * scale - table).max() <= 0.5 * scale + 1e-6
    assert ex.int8_table(np.zeros((2, 3), np.float32))[1] == 1.0


def result(student_dev: float = 90.0, **exports) -> dict:
    return {"bi": {"dev": {"spearman": student_dev}, "test": {"spearman": 88.0}, "speed": 2.7},
            "export": {f: {"dev": {"spearman": d}, "test": {"spearman": d}, "speed": s, "bytes": 1, "gate": g}
                       for f, (d, s, g) in exports.items()}}


def test_evaluate_serves_the_fastest_export_within_max_drop_that_passes_the_gate(tiny_params):
    p = _params(tiny_params, max_drop=0.5)
    r = result(**{"onnx": (90.0, 3.0, "passes"), "onnx-int8": (89.6, 7.0, "passes"),
                  "openvino-int8": (89.0, 9.0, "passes"), "openvino": (90.1, 12.0, "fails")})
    assert _choose(p, r) == "onnx-int8"  # openvino-int8 drops 1.0 dev points; openvino drifts past the gate
    assert _choose(_params(tiny_params, max_drop=0.0), result(**{"onnx-int8": (89.6, 7.0, "passes")})) == "torch"
    card = serve_card("onnx-int8", {**r, "export": {**r["export"], "chosen": "onnx-int8"}}, "stsb")
    assert 'backend="onnx"' in card and ex.FILES["onnx-int8"] in card and "pip install" in card


# ---------------------------------------------------------------------------- python -m pldistill.score
def test_score_reads_each_folder_as_the_form_it_holds(exported, student, tmp_path):
    from pldistill.score import form

    assert {fmt: form(exported[0] / fmt) for fmt in ex.TRANSFORMER} == {fmt: fmt for fmt in ex.TRANSFORMER}
    assert form(student) == "torch"
    with pytest.raises(ModelError, match="no such folder"):
        form(tmp_path / "missing")


def test_score_a_table_as_stage_evaluate_scores_it(exported, student, tmp_path, capsys):
    from pldistill.score import main

    table = tmp_path / "pairs.csv"
    pd.DataFrame({"sentence1": S1[:8], "sentence2": S2[:8]}).to_csv(table, index=False)
    assert main([str(exported[0] / "onnx"), "--table", str(table), "--out", str(tmp_path / "scored.csv")]) == 0
    got = pd.read_csv(tmp_path / "scored.csv")["similarity"].to_numpy()
    np.testing.assert_allclose(got, BiEncoder.load(str(student), 32).score(S1[:8], S2[:8], 16, False), atol=1e-4)
    assert main([str(student), "--pair", S1[0], S2[0]]) == 0
    assert float(capsys.readouterr().out.split()[-1]) == pytest.approx(got[0], abs=1e-4)
    pd.DataFrame({"a": ["x"], "b": ["y"]}).to_csv(table, index=False)
    assert main([str(student), "--table", str(table)]) == 2
    assert "expected columns sentence1, sentence2; found ['a', 'b']" in capsys.readouterr().err
    assert main([str(student), "--table", str(table), "--columns", "a,b"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == "a,b,similarity"
