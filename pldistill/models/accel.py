"""Faster CPU inference for a loaded model: its transformer run by ONNX Runtime or OpenVINO in place of torch.

A backend replaces only the model's first module (the Hugging Face transformer); what follows it (pooling,
normalisation) still runs in torch, so a sentence-transformers model keeps its own head. The transformer is
exported once to ONNX (TorchScript exporter, eager attention) into a cache folder keyed by a hash of its weights
and config, written whole or not at all, and reused. ONNX files are protobuf: nothing is unpickled.

Every backend but torch fp32 must pass a quality gate before it labels anything: on a sample of the input, the
Spearman correlation of its outputs with torch fp32's must be at least ``GATE_SPEARMAN``. ``auto`` runs this
machine's candidates on that sample, timed, and keeps the fastest that passes (torch fp32 unless one is clearly
faster); a forced backend that fails the gate is an error.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import logging
import time
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import numpy as np
import torch
from scipy.stats import spearmanr

from pldistill.base.bundled import cache_root
from pldistill.base.io import atomic_dir
from pldistill.params.sections import BACKEND_NEEDS, BACKENDS, install_hint

GATE_SPEARMAN = 0.999  # a backend's outputs vs torch fp32's on the gate sample
GATE_SAMPLE = 512  # pairs (cross) or sentences (bi) in the gate sample, spread over the input
GATE_MIN = 32  # fewer items than this cannot gate a backend: the call runs in torch
AUTO_MIN = 10_000  # auto keeps torch for smaller calls: its trials (exports, 4 runs of 512 items) would not pay off
AUTO_MARGIN = 1.1  # auto leaves torch fp32 only for a backend at least this much faster on the gate sample
NEEDS = BACKEND_NEEDS  # the packages each backend imports (onnx: the exporter writes with it)
# what the exported graph takes, where the tokenizer gives it
INPUTS = ("input_ids", "attention_mask", "token_type_ids")
FORMAT = 1  # bump when the export changes: old cache entries are then ignored
# openvino-int8: activations quantised at run time in groups of this many input channels, one scale each (per
# tensor, as ONNX Runtime's dynamic int8, moved STS-B labels to Spearman 0.996; groups of 64, 0.9998)
INT8_GROUP = 64
# ... and the layers left in floating point: attention's projections (int8 there moved a MiniLM bi-encoder's
# pair cosines to Spearman 0.9987 against fp32; the feed-forward layers alone, 0.9995)
INT8_SKIP = (".*attention.*", ".*attn.*")

CPU_BACKENDS = ("onnx-int8", "onnx", "openvino", "openvino-int8")  # what auto tries on a CPU, where installed
BF16_BACKENDS = ("openvino-bf16",)  # and on a CPU with native bf16 units (AMX / AVX512-BF16)

Features = dict[str, object]
Forward = Callable[[Features], Features]  # a sentence-transformers model's call: features in, features out
Probe = Callable[[], Mapping[str, torch.Tensor]]  # a few tokenized inputs for the exporter to trace


class BackendError(RuntimeError):
    """A backend cannot run here (a package is missing, the model is not supported) or fails the quality gate."""


def missing(backend: str) -> list[str]:
    """The packages ``backend`` needs that are not installed."""
    return [p for p in NEEDS.get(backend, ()) if importlib.util.find_spec(p) is None]


def candidates(bf16_native: bool, bf16: bool | str) -> list[str]:
    """What auto tries against torch fp32 on a CPU: each installed backend, and where the CPU has native bf16
    units (and the bf16 key allows it) torch in bf16 and the installed bf16 backends."""
    bf16_ok = bf16_native and bf16 is not False
    first = ["torch-bf16"] if bf16_ok else []
    return first + [b for b in (*CPU_BACKENDS, *(BF16_BACKENDS if bf16_ok else ())) if not missing(b)]


def gate_sample(n: int) -> np.ndarray:
    """Indices of at most ``GATE_SAMPLE`` items spread evenly over ``n`` (the input's own mix of lengths)."""
    return np.unique(np.linspace(0, n - 1, min(n, GATE_SAMPLE)).round().astype(int)) if n else np.empty(0, int)


def spearman(ref: np.ndarray, out: np.ndarray) -> float:
    """Spearman of two outputs: cross-encoder logits (n,) directly; embeddings (n, dim) through the cosine of every
    pair of sentences (what a bi-encoder's labels are made of). nan (constant outputs) counts as 0."""
    if ref.ndim == 2:
        iu = np.triu_indices(len(ref), 1)
        ref, out = (_unit(x) @ _unit(x).T for x in (ref, out))
        ref, out = ref[iu], out[iu]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # scipy warns on constant input, then returns nan
        rho = spearmanr(ref, out)[0]
    return 0.0 if np.isnan(rho) else float(rho)


def _unit(x: np.ndarray) -> np.ndarray:
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)


@dataclass(frozen=True)
class Choice:
    """The backend a model runs on, and the gate it passed."""

    backend: str  # torch | onnx | onnx-int8 | openvino | openvino-bf16 | openvino-int8
    bf16: bool  # torch only: bf16 autocast on
    spearman: float | None  # vs torch fp32 on the gate sample; None: torch fp32 itself
    sample: int
    why: str
    final: bool = True  # False: decided for this call only (auto on a small call); the next call decides again

    @property
    def summary(self) -> str:
        """The backend, bf16 for torch, and the gate it passed."""
        gate = "" if self.spearman is None else f", Spearman {self.spearman:.5f} vs torch fp32 on {self.sample} items"
        return f"{self.backend}{' bf16' if self.backend == 'torch' and self.bf16 else ''}{gate}"

    def describe(self) -> str:
        return f"{self.summary} ({self.why})"


# --- export --------------------------------------------------------------------------------------------------------

class _Graph(torch.nn.Module):
    """The transformer as a function of positional tensors, returning one output (logits or last_hidden_state)."""

    def __init__(self, hf: torch.nn.Module, names: tuple[str, ...], output: str):
        super().__init__()
        self.hf, self.names, self.output = hf, names, output

    def forward(self, *tensors: torch.Tensor) -> torch.Tensor:
        return getattr(self.hf(**dict(zip(self.names, tensors)), return_dict=True), self.output)


def first_module(st_model: torch.nn.Module) -> tuple[torch.nn.Module, str, str]:
    """The sentence-transformers Transformer module, its HF output field and the feature it writes; a model of
    another shape (a custom first module, a model method other than forward) is not supported."""
    first = st_model[0]
    hf = getattr(first, "auto_model", None)
    cfg = getattr(first, "modality_config", {}).get("text", {})
    out = cfg.get("method_output_name")
    plain = cfg.get("method") == "forward" and out in ("logits", "last_hidden_state")
    if not isinstance(hf, torch.nn.Module) or not plain:
        raise BackendError(f"{type(first).__name__}: only a plain Hugging Face transformer as the first module can "
                           f"run on onnx/openvino (found method {cfg.get('method')!r} -> {out!r}); use backend torch")
    return hf, out, first.module_output_name


def _digest(hf: torch.nn.Module, names: tuple[str, ...], output: str) -> str:
    """The cache key: the weights as they are in memory (a pruned or fine-tuned model differs from its files),
    the config, the graph's inputs and output, and the versions that shape the export."""
    h = hashlib.sha256()
    for part in (hf.config.to_json_string(), ",".join(names), output, str(FORMAT), torch.__version__,
                 _version("transformers"), _version("onnx"), _version("onnxruntime")):
        h.update(part.encode() + b"\0")
    for name, tensor in hf.state_dict().items():
        t = tensor.detach().cpu().contiguous()
        h.update(f"{name}:{t.dtype}:{tuple(t.shape)}".encode())
        h.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()


def _version(package: str) -> str:
    try:
        return version(package)
    except PackageNotFoundError:
        return "-"


def export_onnx(hf: torch.nn.Module, names: tuple[str, ...], output: str, probe: Mapping[str, torch.Tensor],
            path: Path) -> None:
    """``path``/model.onnx: the transformer with dynamic batch and sequence axes. Exported with eager attention,
    the path the TorchScript exporter traces faithfully (sdpa's mask code bakes in the probe's shapes)."""
    before = hf.config._attn_implementation
    hf.set_attn_implementation("eager")
    graph = _Graph(hf, names, output).eval()
    axes = {n: {0: "batch", 1: "seq"} for n in names}
    axes[output] = {0: "batch"} if output == "logits" else {0: "batch", 1: "seq"}
    try:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # TracerWarnings and the exporter's deprecation notice
            torch.onnx.export(graph, tuple(probe[n].cpu() for n in names), str(path / "model.onnx"), dynamo=False,
                              input_names=list(names), output_names=[output], dynamic_axes=axes, opset_version=17)
    finally:
        hf.set_attn_implementation(before)


def _quantize(src: Path, dest: Path) -> None:
    """Dynamic int8: weights per output channel, activations per tensor at run time (ONNX Runtime's
    ``quantize_dynamic``, as sentence-transformers' export_dynamic_quantized_onnx_model does)."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    def advice(record: logging.LogRecord) -> bool:  # its generic "consider pre-processing" note, on every call
        return "pre-processing before quantization" not in record.getMessage()

    logging.getLogger().addFilter(advice)
    try:
        quantize_dynamic(str(src / "model.onnx"), str(dest / "model.onnx"), weight_type=QuantType.QInt8,
                         per_channel=True, extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})
    finally:
        logging.getLogger().removeFilter(advice)


def _compress(src: Path, dest: Path) -> None:
    """OpenVINO IR (model.xml + model.bin) with int8 weights (per output channel, NNCF's weight compression) in
    the feed-forward layers; at run time OpenVINO quantises their inputs too (``INT8_GROUP``) and multiplies on
    the CPU's int8 units (VNNI / AMX where present)."""
    import nncf
    import openvino as ov
    from nncf.common.logging.logger import set_log_level

    set_log_level(logging.ERROR)  # its per-call table of bit widths
    model = nncf.compress_weights(ov.Core().read_model(str(src / "model.onnx")),
                                  mode=nncf.CompressWeightsMode.INT8_ASYM,
                                  ignored_scope=nncf.IgnoredScope(patterns=list(INT8_SKIP), validate=False))
    ov.save_model(model, str(dest / "model.xml"), compress_to_fp16=False)


DERIVED = {"onnx-int8": ("int8", _quantize), "openvino-int8": ("ovint8", _compress)}  # made from the fp32 export


def exported(backend: str, st_model: torch.nn.Module, probe: Probe, cache_dir: Path | str | None = None) -> Path:
    """The folder holding ``backend``'s model (model.onnx, or OpenVINO's model.xml) for this model, exported (and
    quantised) on first use; ``probe()``: a few tokenized inputs, traced by the exporter."""
    hf, output, _ = first_module(st_model)
    feats = probe()
    names = tuple(n for n in INPUTS if n in feats)
    key = _digest(hf, names, output)[:20]
    root = cache_root(cache_dir) / "accel"
    fp32 = root / f"{key}-fp32"
    if not (fp32 / "model.onnx").is_file():
        with atomic_dir(fp32) as tmp:
            export_onnx(hf, names, output, feats, tmp)
            (tmp / "meta.json").write_text(json.dumps({"inputs": names, "output": output}) + "\n")
    if backend not in DERIVED:
        return fp32
    suffix, make = DERIVED[backend]
    out = root / f"{key}-{suffix}"
    if not (out / "meta.json").is_file():  # written last, inside the folder that appears whole
        with atomic_dir(out) as tmp:
            make(fp32, tmp)
            (tmp / "meta.json").write_text((fp32 / "meta.json").read_text())
    return out


# --- runtimes ------------------------------------------------------------------------------------------------------

def _threads() -> int:
    return max(1, torch.get_num_threads())


def ort_session(path: Path) -> Callable[[dict[str, np.ndarray]], np.ndarray]:
    """``path``: an .onnx file, or a folder holding model.onnx."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads, so.inter_op_num_threads = _threads(), 1
    so.log_severity_level = 3
    # Idle threads sleep rather than spin: on a CPU shared with other jobs spinning cost 15% here
    so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    file = path / "model.onnx" if path.is_dir() else path
    sess = ort.InferenceSession(str(file), so, providers=["CPUExecutionProvider"])
    return lambda feeds: sess.run(None, feeds)[0]


def openvino_session(path: Path, precision: str = "f32",
                     int8: bool = False) -> Callable[[dict[str, np.ndarray]], np.ndarray]:
    """``path``: an .xml or .onnx file, or a folder holding model.xml or model.onnx. ``precision``: f32, said
    explicitly (on AMX / AVX512-BF16 CPUs OpenVINO would otherwise pick bf16 on its own); bf16: the matrix
    products in bf16 on the CPU's native units, accumulated in f32; native: bf16 where OpenVINO finds such units,
    else f32. ``int8``: the int8 layers of ``_compress`` run on int8 units, their
    inputs quantised in groups of ``INT8_GROUP`` channels."""
    import openvino as ov

    core = ov.Core()
    if precision == "native":
        precision = "bf16" if "BF16" in core.get_property("CPU", "OPTIMIZATION_CAPABILITIES") else "f32"
    config = {"INFERENCE_NUM_THREADS": _threads(), "PERFORMANCE_HINT": "LATENCY", "INFERENCE_PRECISION_HINT": precision}
    if int8:
        config["DYNAMIC_QUANTIZATION_GROUP_SIZE"] = INT8_GROUP
    model = path if not path.is_dir() else path / "model.xml" if (path / "model.xml").is_file() else path / "model.onnx"
    compiled = core.compile_model(core.read_model(str(model)), "CPU", config)
    request = compiled.create_infer_request()
    return lambda feeds: request.infer(feeds)[0]


SESSIONS = {"onnx": ort_session, "onnx-int8": ort_session, "openvino": openvino_session,
            "openvino-bf16": functools.partial(openvino_session, precision="bf16"),
            "openvino-int8": functools.partial(openvino_session, precision="native", int8=True)}


def forward(backend: str, st_model: torch.nn.Module, probe: Probe, cache_dir: Path | str | None = None) -> Forward:
    """A drop-in for ``st_model(features)`` whose transformer runs on ``backend``; the modules after it run in torch."""
    if lacking := missing(backend):
        raise BackendError(f"backend {backend} needs {' and '.join(lacking)}, not installed: {install_hint(backend)} "
                           f"(or set the backend to auto or torch)")
    _, _, feature = first_module(st_model)
    try:
        path = exported(backend, st_model, probe, cache_dir)
        names = tuple(json.loads((path / "meta.json").read_text())["inputs"])
        run = SESSIONS[backend](path)
    except Exception as err:  # an architecture the exporter or runtime cannot take: auto moves on, forced says why
        first = str(err).strip().splitlines()[0] if str(err).strip() else ""
        raise BackendError(f"backend {backend} cannot run this model: {type(err).__name__}: "
                           f"{first}; use auto or torch") from err
    rest = list(st_model)[1:]

    def call(features: Features) -> Features:
        feeds = {n: features[n].cpu().numpy().astype(np.int64) for n in names}  # type: ignore[union-attr]
        features = dict(features)
        features[feature] = torch.from_numpy(np.asarray(run(feeds), np.float32))  # (batch, 1) or (batch, seq, dim)
        for module in rest:
            features = module(features)
        return features

    return call


# --- choosing ------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Trial:
    """One candidate run on the gate sample: its speed against torch fp32's and its Spearman to torch fp32."""

    backend: str
    speedup: float
    spearman: float

    @property
    def passed(self) -> bool:
        return self.spearman >= GATE_SPEARMAN

    def __str__(self) -> str:
        return f"{self.backend} {self.speedup:.2f}x {'passes' if self.passed else 'FAILS'} {self.spearman:.5f}"


def _timed(fn: Callable[[], np.ndarray]) -> tuple[np.ndarray, float]:
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def choose(requested: str, st_model: torch.nn.Module, probe: Probe,
           outputs: Callable[[Forward, bool], np.ndarray], bf16: bool | str, n: int, bf16_native: bool, cuda: bool,
           cache_dir: Path | str | None = None) -> tuple[Choice, Forward | None]:
    """The backend for a call on ``n`` items and its forward (None: torch, autocast per ``Choice.bf16``).

    ``outputs(forward, bf16)`` computes the gate sample's outputs (logits or embeddings) with a forward.
    torch: as asked (bf16 per its key), no gate. A forced backend runs and passes the gate, or raises.
    auto: torch on a GPU or for a call under ``AUTO_MIN`` items (on a CPU in fp32 unless bf16 is true); else every
    candidate here (``candidates``) runs the gate sample, timed against torch fp32 on the same sample, and the
    fastest that passes wins if it beats torch fp32 by ``AUTO_MARGIN`` (one timed run on a CPU others may share: a
    near tie stays with torch).
    """
    if requested not in BACKENDS:
        raise BackendError(f"backend: expected one of {', '.join(BACKENDS)}; found {requested!r}")
    on = bf16_native if bf16 == "auto" else bool(bf16)  # by the flags (device.bf16_auto also times a CPU)
    if requested == "torch":
        return Choice("torch", on, None, 0, "as asked"), None
    if requested in BF16_BACKENDS and not bf16_native:  # emulated bf16 is slower than fp32: never worth it
        raise BackendError(f"backend {requested} needs native bf16 units (CPU flags amx_bf16 or avx512_bf16); "
                           f"this machine has none: use auto, openvino or torch")
    # Ungated on a CPU, torch runs in fp32 unless bf16 is asked for outright: bf16 "auto" is a candidate that
    # passes the gate like any other (else a native-bf16 CPU's labels would differ from other CPUs', unchecked)
    ungated = on and (cuda or bf16 is True)
    if requested == "auto" and (cuda or n < AUTO_MIN):
        why = "auto on a GPU" if cuda else f"auto: {n} items < {AUTO_MIN}, not worth the trials"
        return Choice("torch", ungated, None, 0, why, final=cuda), None
    if n < GATE_MIN:
        return Choice("torch", ungated, None, 0, f"{n} items < {GATE_MIN}: too few to gate {requested}",
                      final=False), None
    outputs(st_model, False)  # a warm-up: the first run pays for allocations
    ref, t_ref = _timed(lambda: outputs(st_model, False))  # torch fp32: the reference
    trials: list[tuple[Trial, Forward | None]] = []
    skipped: list[str] = []
    for backend in candidates(bf16_native, bf16) if requested == "auto" else [requested]:
        try:
            fwd = None if backend == "torch-bf16" else forward(backend, st_model, probe, cache_dir)
        except BackendError as err:
            if requested != "auto":
                raise
            skipped.append(f"{backend} ({err})")
            continue
        out, t = _timed(functools.partial(outputs, fwd or st_model, fwd is None))
        trials.append((Trial(backend, t_ref / t, spearman(ref, out)), fwd))
    if requested != "auto":
        trial, fwd = trials[0]
        if not trial.passed:
            raise BackendError(f"backend {requested} fails the quality gate: Spearman {trial.spearman:.5f} vs torch "
                               f"fp32 on {len(ref)} items, expected >= {GATE_SPEARMAN}; "
                               f"use auto (which skips it) or torch")
        return Choice(requested, False, trial.spearman, len(ref), f"as asked; {trial}"), fwd
    tried = "; ".join([*(str(t) for t, _ in trials), *skipped]) or f"nothing: {install_hint('onnx')} adds backends"
    good = [(t, f) for t, f in trials if t.passed and t.speedup >= AUTO_MARGIN]
    if not good:
        return Choice("torch", False, None, 0, f"auto: none passes and is {AUTO_MARGIN}x faster; tried {tried}"), None
    best, fwd = max(good, key=lambda tf: tf[0].speedup)
    return Choice("torch" if best.backend == "torch-bf16" else best.backend, fwd is None, best.spearman, len(ref),
                  f"auto: the fastest that passes; tried {tried}"), fwd
