"""Exports of the student that a serving stack loads as it is, each in a folder of its own (stage export).

A transformer student (a SentenceTransformer folder) becomes, each in sentence-transformers' layout (the student's
config, tokenizer and modules, and the backend's file where ``SentenceTransformer(path, backend=...,
model_kwargs={"file_name": ...})`` looks for it):
- ``onnx``: ONNX, fp32, its graph optimised by ONNX Runtime's transformer optimizer (attention, layer norm and
  GELU fused: what optimum's O2 does, without optimum);
- ``onnx-int8``: that graph with int8 weights, activations quantised at run time (ONNX Runtime's dynamic
  quantisation, as sentence-transformers' ``export_dynamic_quantized_onnx_model`` does through optimum);
- ``openvino``: OpenVINO IR, fp32;
- ``openvino-int8``: OpenVINO IR quantised to int8 by NNCF's static post-training quantisation, calibrated on the
  task's training sentences (as ``export_static_quantized_openvino_model`` does through optimum-intel).

sentence-transformers' own export helpers go through optimum-onnx / optimum-intel, which pin transformers below
this project's (optimum-onnx 0.1: transformers < 4.58; ours is 5.x): the same steps are done here on onnxruntime,
openvino and nncf directly. A static student becomes Model2Vec's layout (``model2vec.StaticModel.from_pretrained``
loads it; numpy, no torch): its table in float32, float16, and int8 with one scale (Model2Vec's own int8).

ONNX is protobuf and OpenVINO IR is XML and raw weights: nothing here unpickles.
"""

from __future__ import annotations

import json
import logging
import shutil
import tempfile
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pldistill.base.console import library_output_off_terminal
from pldistill.base.errors import ModelError

# format -> the file a backend loads, relative to the format's folder (sentence-transformers' subfolders)
FILES = {
    "onnx": "onnx/model_optimized.onnx",
    "onnx-int8": "onnx/model_qint8.onnx",
    "openvino": "openvino/openvino_model.xml",
    "openvino-int8": "openvino/openvino_model_qint8.xml",
    "model2vec": "model.safetensors",
    "model2vec-f16": "model.safetensors",
    "model2vec-int8": "model.safetensors",
}
TRANSFORMER = ("onnx", "onnx-int8", "openvino", "openvino-int8")
STATIC = ("model2vec", "model2vec-f16", "model2vec-int8")
NEEDS = {"onnx": ("onnxruntime", "onnx"), "onnx-int8": ("onnxruntime", "onnx"), "openvino": ("openvino", "onnx"),
         "openvino-int8": ("openvino", "onnx", "nncf"), "model2vec": ("model2vec",),
         "model2vec-f16": ("model2vec",), "model2vec-int8": ("model2vec",)}
BACKEND = {"onnx": "onnx", "onnx-int8": "onnx", "openvino": "openvino", "openvino-int8": "openvino"}
EXTRA = {"onnx": "fast", "onnx-int8": "fast", "openvino": "openvino", "openvino-int8": "openvino",  # pyproject's
         "model2vec": "fast", "model2vec-f16": "fast", "model2vec-int8": "fast"}
MANIFEST = "exports.json"  # in models/export: what was made, what failed and why, what was left out


class ExportError(ModelError):
    """One format could not be made (a package missing, an operation the exporter cannot take)."""


def formats_for(kind: str) -> tuple[str, ...]:
    return STATIC if kind == "static" else TRANSFORMER


def lacking(fmt: str) -> list[str]:
    import importlib.util

    return [p for p in NEEDS[fmt] if importlib.util.find_spec(p) is None]


def model_bytes(folder: Path, fmt: str) -> int:
    """The bytes of a format's weights: its model file (an OpenVINO .xml with its .bin)."""
    file = folder / FILES[fmt]
    files = [file, file.with_suffix(".bin")] if file.suffix == ".xml" else [file]
    return sum(f.stat().st_size for f in files if f.is_file())


def install_hint(fmt: str) -> str:
    return f"pip install 'pldistill[{EXTRA[fmt]}]'"


@dataclass(frozen=True)
class Student:
    """What every transformer format is made from: the student's folder and its Hugging Face model in torch."""

    path: Path
    st: object  # a SentenceTransformer
    hf: object  # its transformer (torch.nn.Module)
    output: str  # last_hidden_state
    names: tuple[str, ...]  # the graph's inputs, as the tokenizer gives them

    @classmethod
    def load(cls, path: Path) -> Student:
        from sentence_transformers import SentenceTransformer

        from pldistill.models.accel import INPUTS, first_module

        st = SentenceTransformer(str(path), device="cpu", model_kwargs={"use_safetensors": True})
        hf, output, _ = first_module(st)
        hf.eval()
        names = tuple(n for n in INPUTS if n in st.preprocess(["a"]))
        return cls(path, st, hf, output, names)

    def probe(self) -> dict:
        return self.st.preprocess(["A probe sentence for the exporter.", "Another, a little longer, one."])


# sentence-transformers' module types as the hub's models (and sentence-transformers 5 and 6) name them: the serving
# environment the backends install with may hold an older release than the one that saved the student
LEGACY = {"Transformer": "sentence_transformers.models.Transformer", "Pooling": "sentence_transformers.models.Pooling",
          "Normalize": "sentence_transformers.models.Normalize"}
POOLING = {"mean": "pooling_mode_mean_tokens", "cls": "pooling_mode_cls_token", "max": "pooling_mode_max_tokens",
           "mean_sqrt_len_tokens": "pooling_mode_mean_sqrt_len_tokens"}
# model parts kept beside modules.json (pldistill.models.dse.HEAD_DIR): no serving form holds them
HEADS = ("dse_head",)
COPIED = ("config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt",
          "config_sentence_transformers.json")


def st_layout(student: Path, dest: Path) -> dict:
    """The student's sentence-transformers files in the layout every release since 2.x reads (the hub's: modules.json,
    sentence_bert_config.json, 1_Pooling, 2_Normalize), with its config and tokenizer, not its torch weights.
    Returns what a served copy needs to encode as the student does: max_length, pooling, normalize."""
    if heads := [h for h in HEADS if (student / h).exists()]:
        raise ExportError(f"{student}: the student scores pairs through {heads[0]}/, a head beside its encoder that "
                          f"no serving form holds (recipe dse); its encoder alone would score other pairs")
    modules = json.loads((student / "modules.json").read_text())
    kinds = [m["type"].rsplit(".", 1)[-1] for m in modules]
    if kinds[:2] != ["Transformer", "Pooling"] or kinds[2:] not in ([], ["Normalize"]):
        raise ExportError(f"{student}: only a Transformer, a Pooling and a Normalize module can be exported; found "
                          f"{kinds}")
    pooling = json.loads((student / modules[1]["path"] / "config.json").read_text())
    mode = pooling.get("pooling_mode") or next((k for k, v in POOLING.items() if pooling.get(v)), None)
    if mode not in POOLING:
        raise ExportError(f"{student}: pooling {mode!r} cannot be exported; expected one of {', '.join(POOLING)}")
    tok_cfg = json.loads((student / "tokenizer_config.json").read_text())
    max_length = int(json.loads((student / "sentence_bert_config.json").read_text()).get("max_seq_length")
                     or tok_cfg.get("model_max_length") or 512)
    for name in COPIED:
        if (student / name).is_file():
            shutil.copy2(student / name, dest / name)
    layout = [{"idx": i, "name": str(i), "path": path, "type": LEGACY[k]}
              for i, (k, path) in enumerate(zip(kinds, ["", "1_Pooling", "2_Normalize"]))]
    (dest / "modules.json").write_text(json.dumps(layout, indent=2) + "\n")
    (dest / "sentence_bert_config.json").write_text(
        json.dumps({"max_seq_length": max_length, "do_lower_case": False}, indent=2) + "\n")
    width = pooling.get("embedding_dimension", pooling.get("word_embedding_dimension"))
    (dest / "1_Pooling").mkdir()
    (dest / "1_Pooling" / "config.json").write_text(json.dumps(
        {"word_embedding_dimension": width, **{v: k == mode for k, v in POOLING.items()}}, indent=2) + "\n")
    if "Normalize" in kinds:
        (dest / "2_Normalize").mkdir()
        (dest / "2_Normalize" / "config.json").write_text("{}\n")
    return {"max_length": max_length, "pooling": mode, "normalize": "Normalize" in kinds}


def _fp32_onnx(s: Student, dest: Path) -> Path:
    from pldistill.models.accel import export_onnx

    raw = dest / "raw"
    raw.mkdir()
    export_onnx(s.hf, s.names, s.output, s.probe(), raw)
    return raw / "model.onnx"


def _optimised(s: Student, src: Path, out: Path) -> None:
    """ONNX Runtime's transformer optimizer: attention, skip layer norm, bias GELU and embeddings fused (its level
    1 fusions; the file runs on any CPU, nothing tuned to this one)."""
    from onnxruntime.transformers.optimizer import optimize_model

    cfg = s.hf.config
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = optimize_model(str(src), model_type="bert", num_heads=cfg.num_attention_heads,
                               hidden_size=cfg.hidden_size, opt_level=1)
    out.parent.mkdir(parents=True, exist_ok=True)
    model.save_model_to_file(str(out))


def _quantised(src: Path, out: Path) -> None:
    """Dynamic int8: weights per output channel, activations per tensor at run time (ONNX Runtime)."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    def advice(record: logging.LogRecord) -> bool:  # its generic "consider pre-processing" note
        return "pre-processing before quantization" not in record.getMessage()

    logging.getLogger().addFilter(advice)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        quantize_dynamic(str(src), str(out), weight_type=QuantType.QInt8, per_channel=True,
                         extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})
    finally:
        logging.getLogger().removeFilter(advice)


def calibration_feeds(s: Student, sentences: Sequence[str]) -> list[dict[str, np.ndarray]]:
    """The tokenizer's inputs for each calibration sentence, one a batch (what a served model sees)."""
    feeds = []
    for text in sentences:
        f = s.st.preprocess([text])
        feeds.append({n: f[n].numpy().astype(np.int64) for n in s.names})
    return feeds


def _openvino(src: Path, out: Path, calibration: list[dict[str, np.ndarray]] | None) -> None:
    """OpenVINO IR from the fp32 ONNX graph; ``calibration``: quantised to int8 by NNCF (post-training, static:
    activation ranges from these inputs; transformer preset: SmoothQuant, attention's softmax left in fp32)."""
    import openvino as ov

    model = ov.Core().read_model(str(src))
    if calibration is not None:
        import nncf
        from nncf.common.logging.logger import set_log_level

        set_log_level(logging.ERROR)
        with library_output_off_terminal():  # its rich bars: on a terminal only
            model = nncf.quantize(model, nncf.Dataset(calibration), model_type=nncf.ModelType.TRANSFORMER,
                                  subset_size=len(calibration), preset=nncf.QuantizationPreset.MIXED)
    out.parent.mkdir(parents=True, exist_ok=True)
    ov.save_model(model, str(out), compress_to_fp16=False)


def transformer_exports(student: Path, formats: Sequence[str], out: Path, calibration: Sequence[str],
                        write: Callable[[str, Callable[[Path], None]], None]) -> None:
    """Each of ``formats`` into ``write(fmt, fill)``: ``fill(folder)`` puts that format's files into an empty folder
    (the caller writes it atomically, and records a failure). The fp32 graph is exported once and shared."""
    s = Student.load(student)
    with tempfile.TemporaryDirectory(prefix="pldistill-export-") as scratch:  # the shared fp32 graphs
        _exports(s, student, formats, Path(scratch), calibration, write)


def _exports(s: Student, student: Path, formats: Sequence[str], work: Path, calibration: Sequence[str],
             write: Callable[[str, Callable[[Path], None]], None]) -> None:
    """``transformer_exports`` with a scratch folder ``work`` for the graphs the formats share."""
    made: dict[str, Path] = {}

    def fp32() -> Path:
        if "fp32" not in made:
            made["fp32"] = _fp32_onnx(s, work)
        return made["fp32"]

    def optimised() -> Path:
        if "opt" not in made:
            made["opt"] = work / "optimised.onnx"
            _optimised(s, fp32(), made["opt"])
        return made["opt"]

    steps: dict[str, Callable[[Path], None]] = {
        "onnx": lambda d: shutil.copy2(optimised(), _mkparent(d / FILES["onnx"])),
        "onnx-int8": lambda d: _quantised(optimised(), d / FILES["onnx-int8"]),
        "openvino": lambda d: _openvino(fp32(), d / FILES["openvino"], None),
        "openvino-int8": lambda d: _openvino(fp32(), d / FILES["openvino-int8"],
                                             calibration_feeds(s, calibration)),
    }
    for fmt in formats:
        def fill(d: Path, fmt: str = fmt) -> None:
            st_layout(student, d)
            steps[fmt](d)
        write(fmt, fill)


def _mkparent(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


# --- a static student: Model2Vec's layout ---------------------------------------------------------------------------

def static_table(student: Path) -> tuple[np.ndarray, Path, bool, str]:
    """A static student's table (vocab, dims) float32, its tokenizer.json, whether it normalises, its base model."""
    from safetensors.numpy import load_file

    modules = json.loads((student / "modules.json").read_text())
    first = student / modules[0]["path"]
    weights = first / "model.safetensors"
    if not weights.is_file() or not (first / "tokenizer.json").is_file():
        raise ExportError(f"{student}: expected a static student (a StaticEmbedding module with model.safetensors "
                          f"and tokenizer.json in {first}); found {sorted(p.name for p in first.iterdir())}")
    tensors = load_file(str(weights))
    table = tensors.get("embedding.weight", tensors.get("embeddings"))
    if table is None:
        raise ExportError(f"{weights}: expected a tensor embedding.weight; found {sorted(tensors)}")
    normalise = any(m["type"].endswith("Normalize") for m in modules[1:])
    cfg = first / "config.json"
    base = json.loads(cfg.read_text()).get("base_model", "") if cfg.is_file() else ""
    return table.astype(np.float32), first / "tokenizer.json", normalise, base or ""


def int8_table(table: np.ndarray) -> tuple[np.ndarray, float]:
    """Symmetric int8 with one scale for the whole table, as Model2Vec's own int8: ``q * scale`` is the table again
    to half a step. One scale changes no cosine, and a table without per-token scales keeps Model2Vec's batched
    path (its per-token ``weights`` run in a Python loop a sentence: 3x slower on STS-B, docs/results.md)."""
    peak = float(np.abs(table).max())
    scale = peak / 127.0 if peak > 0 else 1.0
    return np.clip(np.rint(table / scale), -127, 127).astype(np.int8), scale


def model2vec_folder(student: Path, fmt: str, dest: Path) -> None:
    """Model2Vec's files (model.safetensors with ``embeddings``; tokenizer.json; config.json, with int8's one scale)
    for ``fmt`` into ``dest``."""
    from safetensors.numpy import save_file

    table, tokenizer, normalise, base = static_table(student)
    tensors: dict[str, np.ndarray]
    if fmt == "model2vec":
        tensors = {"embeddings": table}
    elif fmt == "model2vec-f16":
        tensors = {"embeddings": table.astype(np.float16)}
    elif fmt == "model2vec-int8":
        q, scale = int8_table(table)
        tensors = {"embeddings": q}
    else:
        raise ExportError(f"{fmt}: not a static format; expected one of {', '.join(STATIC)}")
    save_file({k: np.ascontiguousarray(v) for k, v in tensors.items()}, str(dest / "model.safetensors"))
    shutil.copy2(tokenizer, dest / "tokenizer.json")
    config = {"model_type": "model2vec", "architectures": ["StaticModel"], "tokenizer_name": base,
              "apply_pca": None, "hidden_dim": int(table.shape[1]), "max_length": None, "normalize": normalise,
              "embedding_dtype": np.dtype(tensors["embeddings"].dtype).name,
              **({"embedding_scale": scale} if fmt == "model2vec-int8" else {})}  # int8 * scale: the table
    (dest / "config.json").write_text(json.dumps(config, indent=2) + "\n")
