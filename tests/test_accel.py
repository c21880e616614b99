"""Inference backends (pldistill.models.accel) on the tiny random BERT: each matches torch, auto falls back where a
package is missing or the quality gate fails, a forced backend that cannot run or fails says so."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from pldistill.base.errors import ConfigError
from pldistill.models import accel
from pldistill.models.encoders import BiEncoder, CrossModel, native_bf16
from pldistill.params.config import parse_params

WORDS = "cat dog car rain music bread river phone chess garden the a on in big small red blue old new".split()  # noqa: SIM905 -- a word list reads best as one string


def sentences(n: int, seed: int = 0) -> list[str]:
    """``n`` sentences of 2 to 13 words: a mix of lengths, as real pairs have."""
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(WORDS, rng.integers(2, 14))) for _ in range(n)]


S1, S2 = sentences(80, 1), sentences(80, 2)


@pytest.fixture(autouse=True)
def cache(tmp_path_factory, monkeypatch):
    """One export cache for the module (exports are the slow part), never the user's."""
    monkeypatch.setenv("PLDISTILL_CACHE", str(tmp_path_factory.getbasetemp() / "accel-cache"))


@pytest.fixture
def cross(tiny_model_dir) -> CrossModel:
    torch.manual_seed(0)  # the classification head is initialised at random
    return CrossModel.load(str(tiny_model_dir), max_length=32)


@pytest.fixture
def bi(tiny_model_dir) -> BiEncoder:
    return BiEncoder.load(str(tiny_model_dir), max_length=32)


def noisy(scale: float | dict[str, float]):
    """A stand-in for accel.forward: torch plus noise of ``scale`` (per backend, if a dict) on every output."""
    def forward(backend, st_model, probe, cache_dir=None):
        gen = torch.Generator().manual_seed(0)
        sd = scale[backend] if isinstance(scale, dict) else scale

        def call(features):
            out = dict(st_model(features))
            key = "scores" if "scores" in out else "sentence_embedding"
            out[key] = out[key] + sd * torch.randn(out[key].shape, generator=gen)
            return out
        return call
    return forward


@pytest.fixture
def trials(monkeypatch):
    """Every CPU backend installed (stand-ins from ``noisy``), auto deciding on small calls, and timed runs that
    take the seconds given: torch fp32 first, then each candidate in accel.CPU_BACKENDS order."""
    monkeypatch.setattr(accel, "missing", lambda backend: [])
    monkeypatch.setattr(accel, "AUTO_MIN", 16)

    def given(seconds: list[float], scale: float | dict[str, float]) -> None:
        it = iter(seconds)
        monkeypatch.setattr(accel, "_timed", lambda fn: (fn(), next(it)))
        monkeypatch.setattr(accel, "forward", noisy(scale))
    return given


@pytest.mark.parametrize("backend", ["onnx", "openvino"])
def test_fp32_backends_match_torch(backend, cross, bi):
    for package in accel.NEEDS[backend]:
        pytest.importorskip(package)
    ref_logits, ref_emb = cross.logits(S1, S2, 16, bf16=False), bi.encode(S1 + S2, 16, bf16=False)
    cross.use_backend(backend)
    bi.use_backend(backend)
    np.testing.assert_allclose(cross.logits(S1, S2, 16, bf16=False), ref_logits, atol=1e-5)
    np.testing.assert_allclose(bi.encode(S1 + S2, 16, bf16=False), ref_emb, atol=1e-5)
    assert (cross.choice.backend, bi.choice.backend) == (backend, backend)
    assert cross.choice.spearman >= accel.GATE_SPEARMAN and cross.choice.sample == len(S1)


def test_int8_embeddings_pass_the_gate_and_stay_close(bi):
    for package in accel.NEEDS["onnx-int8"]:
        pytest.importorskip(package)
    ref = bi.encode(S1 + S2, 16, bf16=False)
    bi.use_backend("onnx-int8")
    emb = bi.encode(S1 + S2, 16, bf16=False)
    assert bi.choice.backend == "onnx-int8" and bi.choice.spearman >= accel.GATE_SPEARMAN
    assert np.min(np.sum(emb * ref, axis=1)) > 0.99  # cosine of each int8 embedding to its fp32 one


def test_export_is_cached_by_weights(cross, monkeypatch, tmp_path):
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    probe = lambda: cross._features(S1[:2], S2[:2])  # noqa: E731
    first = accel.exported("onnx", cross.model, probe, tmp_path)
    monkeypatch.setattr(accel, "export_onnx", lambda *a: pytest.fail("exported again: the cache was not used"))
    assert accel.exported("onnx", cross.model, probe, tmp_path) == first
    with torch.no_grad():
        cross.model.model.classifier.bias += 1.0  # new weights, a new entry
    monkeypatch.undo()
    assert accel.exported("onnx", cross.model, probe, tmp_path) != first


def test_gate_refuses_a_backend_below_0_999(cross, bi, monkeypatch):
    monkeypatch.setattr(accel, "forward", noisy(10.0))
    cross.use_backend("onnx")
    with pytest.raises(accel.BackendError, match=r"onnx fails the quality gate: Spearman .* expected >= 0.999"):
        cross.logits(S1, S2, 16, bf16=False)
    bi.use_backend("openvino")
    with pytest.raises(accel.BackendError, match="openvino fails the quality gate"):
        bi.encode(S1 + S2, 16, bf16=False)


def test_auto_skips_what_fails_the_gate_and_keeps_torch(cross, trials):
    trials([1.0, 0.2, 0.2, 0.2, 0.2], scale=10.0)  # all five times faster, all far off
    ref = cross.logits(S1, S2, 16, bf16=False)
    cross.use_backend("auto")
    np.testing.assert_array_equal(cross.logits(S1, S2, 16, bf16=False), ref)
    assert cross.choice.backend == "torch" and cross.choice.final
    assert all(f"{b} 5.00x FAILS" in cross.choice.why for b in accel.CPU_BACKENDS)


def test_auto_takes_the_fastest_that_passes(cross, trials):
    int8, onnx, openvino, ov_int8 = accel.CPU_BACKENDS
    trials([1.0, 0.25, 0.8, 0.5, 0.6],  # int8: fastest, but it fails
           scale={int8: 10.0, onnx: 1e-6, openvino: 1e-6, ov_int8: 1e-6})
    cross.use_backend("auto")
    cross.logits(S1, S2, 16, bf16=False)
    assert cross.choice.backend == openvino and cross.choice.spearman >= accel.GATE_SPEARMAN
    assert f"{int8} 4.00x FAILS" in cross.choice.why and f"{onnx} 1.25x passes" in cross.choice.why


def test_auto_keeps_torch_on_a_near_tie(bi, trials):
    trials([1.0, 0.95, 0.95, 0.95, 0.95], scale=1e-6)  # all pass, none 1.1x faster
    bi.use_backend("auto")
    bi.encode(S1 + S2, 16, bf16=False)
    assert bi.choice.backend == "torch" and "none passes and is 1.1x faster" in bi.choice.why


def test_auto_falls_back_to_torch_without_the_packages(cross, monkeypatch):
    monkeypatch.setattr(accel, "missing", lambda backend: list(accel.NEEDS[backend]))
    monkeypatch.setattr(accel, "AUTO_MIN", 16)
    ref = cross.logits(S1, S2, 16, bf16=False)
    cross.use_backend("auto")
    np.testing.assert_array_equal(cross.logits(S1, S2, 16, bf16=False), ref)
    assert cross.choice.backend == "torch" and "pldistill[fast]" in cross.choice.why


def test_a_forced_backend_without_its_package_names_the_extra(cross, monkeypatch):
    monkeypatch.setattr(accel, "missing", lambda backend: ["onnxruntime"])
    cross.use_backend("onnx-int8")
    with pytest.raises(accel.BackendError,
                       match=r"onnx-int8 needs onnxruntime, not installed: pip install 'pldistill\[fast\]'"):
        cross.logits(S1, S2, 16, bf16=False)


def test_auto_keeps_torch_for_small_calls_and_decides_later(cross, monkeypatch):
    monkeypatch.setattr(accel, "forward", lambda *a, **k: pytest.fail("no export for a small call"))
    cross.use_backend("auto")
    cross.logits(S1, S2, 16, bf16=False)  # 80 pairs < AUTO_MIN
    assert cross.choice.backend == "torch" and not cross.choice.final  # the next, bigger call decides


def test_cuda_keeps_torch():
    choice, fwd = accel.choose("auto", None, None, None, "auto", 10**6, bf16_native=True, cuda=True)
    assert (choice.backend, fwd) == ("torch", None)


def test_native_bf16_cpu_tries_the_bf16_backends_too(monkeypatch):
    monkeypatch.setattr(accel, "missing", lambda backend: [])
    assert accel.candidates(bf16_native=True, bf16="auto") == ["torch-bf16", *accel.CPU_BACKENDS,
                                                                 *accel.BF16_BACKENDS]
    assert accel.candidates(bf16_native=True, bf16=False) == list(accel.CPU_BACKENDS)
    assert accel.candidates(bf16_native=False, bf16=True) == list(accel.CPU_BACKENDS)


def test_auto_never_runs_ungated_bf16_on_a_cpu(cross):
    """Below AUTO_MIN, auto runs torch without trials: fp32 on a native-bf16 CPU unless bf16 is true outright."""
    outputs = lambda fwd, b: pytest.fail("no trial for a small call")  # noqa: E731
    for bf16, on in (("auto", False), (True, True), (False, False)):
        choice, fwd = accel.choose("auto", cross.model, None, outputs, bf16, 80, bf16_native=True, cuda=False)
        assert (choice.backend, choice.bf16, fwd) == ("torch", on, None), bf16
    assert accel.choose("torch", cross.model, None, outputs, "auto", 80, bf16_native=True, cuda=False)[0].bf16


def test_auto_names_the_bf16_backend_it_takes(cross, trials):
    """On a native-bf16 CPU: torch-bf16 and openvino-bf16 are candidates too; the winner is named as it runs."""
    trials([1.0, 0.5, 0.9, 0.9, 0.9, 0.9, 0.3], scale=1e-6)  # torch fp32, torch-bf16, CPU_BACKENDS, openvino-bf16
    idx = accel.gate_sample(len(S1))
    outputs = lambda fwd, b: cross._infer([S1[i] for i in idx], [S2[i] for i in idx], 16, b, False,  # noqa: E731
                                          None if fwd is cross.model else fwd)
    choice, fwd = accel.choose("auto", cross.model, lambda: cross._features(S1[:4], S2[:4]), outputs, "auto", 10**5,
                               bf16_native=True, cuda=False)
    assert (choice.backend, choice.bf16, fwd is not None) == ("openvino-bf16", False, True)
    assert "torch-bf16 2.00x" in choice.why and "openvino-bf16 3.33x passes" in choice.why


def test_forced_bf16_backend_needs_native_bf16(cross):
    with pytest.raises(accel.BackendError, match=r"openvino-bf16 needs native bf16 units .*amx_bf16 or avx512_bf16"):
        accel.choose("openvino-bf16", cross.model, None, None, "auto", 10**5, bf16_native=False, cuda=False)


@pytest.mark.parametrize("backend", ["openvino-bf16", "openvino-int8"])
def test_openvino_low_precision_stays_close_to_fp32(backend, bi):
    for package in accel.NEEDS[backend]:
        pytest.importorskip(package)
    if backend.endswith("bf16") and not native_bf16():
        pytest.skip("this CPU has no native bf16 units (amx_bf16 / avx512_bf16)")
    ref = bi.encode(S1 + S2, 16, bf16=False)
    bi.use_backend(backend)
    emb = bi.encode(S1 + S2, 16, bf16=False)
    assert bi.choice.backend == backend and bi.choice.spearman >= accel.GATE_SPEARMAN
    assert np.min(np.sum(emb * ref, axis=1)) > 0.999  # cosine of each embedding to its fp32 one
    assert not np.array_equal(emb, ref)  # it did run in lower precision


def test_openvino_int8_compresses_the_feed_forward_layers_once(bi, tmp_path, monkeypatch):
    for package in accel.NEEDS["openvino-int8"]:
        pytest.importorskip(package)
    import openvino as ov

    probe = lambda: bi._features(S1[:2])  # noqa: E731
    path = accel.exported("openvino-int8", bi.model, probe, tmp_path)
    ops = ov.Core().read_model(str(path / "model.xml")).get_ops()
    matmul_int8 = [op for op in ops if op.get_type_name() == "Constant" and op.get_element_type() == ov.Type.u8
                   and op.get_friendly_name().startswith("onnx::MatMul") and "zero_point" not in op.get_friendly_name()]
    layers = bi.model[0].auto_model.config.num_hidden_layers
    assert len(matmul_int8) == 2 * layers  # each layer's two feed-forward weights; not attention's four
    monkeypatch.setattr(accel, "_compress", lambda *a: pytest.fail("compressed again: the cache was not used"))
    monkeypatch.setitem(accel.DERIVED, "openvino-int8", ("ovint8", accel._compress))
    assert accel.exported("openvino-int8", bi.model, probe, tmp_path) == path


def test_spearman_of_embeddings_compares_every_pair_cosine():
    rng = np.random.default_rng(0)
    emb = rng.normal(size=(30, 8))
    assert accel.spearman(emb, 2 * emb) == pytest.approx(1.0)
    assert accel.spearman(emb, rng.normal(size=(30, 8))) < 0.5
    assert accel.spearman(np.ones(5), np.arange(5.0)) == 0.0  # constant outputs: nan counts as a failure


def test_gate_sample_spreads_over_the_input():
    assert list(accel.gate_sample(5)) == [0, 1, 2, 3, 4]
    idx = accel.gate_sample(10_000)
    assert len(idx) == accel.GATE_SAMPLE and idx[0] == 0 and idx[-1] == 9_999


def test_backend_key_is_checked():
    assert parse_params({"label": {"backend": "onnx-int8"}}).label.backend == "onnx-int8"
    with pytest.raises(ConfigError, match="label.backend"):
        parse_params({"label": {"backend": "onnx8"}})
    with pytest.raises(ConfigError, match="evaluate.backend"):
        parse_params({"evaluate": {"backend": "tensorrt"}})


def test_a_forced_backend_without_its_package_stops_at_the_params(monkeypatch):
    real = accel.importlib.util.find_spec
    monkeypatch.setattr("importlib.util.find_spec", lambda name, *a: None if name == "onnxruntime" else real(name, *a))
    with pytest.raises(ConfigError,
                       match=r"label.backend.*onnx needs onnxruntime, not installed: pip install 'pldistill\[fast\]'"):
        parse_params({"label": {"backend": "onnx"}})
    assert parse_params({"label": {"backend": "auto"}, "evaluate": {"backend": "torch"}}).label.backend == "auto"


def test_batches_follow_token_counts_not_characters(cross, bi):
    from pldistill.base.batching import token_counts
    # 9 characters each; [CLS] 1 , 234 , 56 ##7 [SEP] vs [CLS] aa ##aa ##aa ##aa [SEP]
    assert token_counts(bi.model.tokenizer, ["1,234,567", "aaaaaaaaa"], None, 32) == [8, 6]
    counts = token_counts(cross.model.tokenizer, S1, S2, 32)
    assert counts == [len(cross._features([a], [b])["input_ids"][0]) for a, b in zip(S1, S2)]
    assert token_counts(None, ["ab", "c"], ["d", ""], 32) == [3, 1]  # no tokenizer: characters


def test_label_and_evaluate_run_on_the_backend_their_params_name(chains, tmp_path, monkeypatch):
    from pldistill.base import schemas
    from tests.conftest import stage_calls

    chain = chains("augsbert")
    root = chain.copy_to(tmp_path / "chain")
    raw = chain.params.model_dump(mode="json")
    raw["label"]["backend"] = raw["evaluate"]["backend"] = "onnx"
    params = parse_params(raw)
    asked: list[str] = []
    real = accel.choose
    monkeypatch.setattr(accel, "choose", lambda backend, *a, **k: (asked.append(backend), real(backend, *a, **k))[1])
    monkeypatch.setenv("PLDISTILL_CACHE", str(tmp_path / "cache"))
    calls = stage_calls(root)
    for stage in ("label", "evaluate"):  # the teacher labels on onnx; then every model scores on it
        fn, paths = calls[stage]
        fn(params, *paths)
        assert asked and set(asked) == {"onnx"}, stage
        asked.clear()
    silver = schemas.read(root / "data/silver/silver.parquet", schemas.PSEUDO)
    before = schemas.read(chain.root / "data/silver/silver.parquet", schemas.PSEUDO)
    assert len(silver) == len(before) > accel.GATE_MIN
    np.testing.assert_allclose(silver["score"], before["score"], atol=1e-4)  # fp32 onnx: torch's labels
    ran_on = json.loads((root / "metrics/label.json").read_text())["backend"]  # the report says what labelled
    assert list(ran_on) == ["member-00"] and ran_on["member-00"].startswith("onnx, Spearman "), ran_on
    # fp32 onnx agrees with torch to float rounding: 1.00000 on an avx2 CPU, 0.99999 on an AMX / AVX512 Xeon
    # (its kernels round differently: two near-tied items of the 98 swap places)
    assert float(ran_on["member-00"].split()[2]) >= 0.9999, ran_on
