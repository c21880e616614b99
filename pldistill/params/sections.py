"""The sections of params.yaml that say how models score and what is sampled: augment, sample, label and evaluate
(pldistill.params.config assembles them into one Params, with data and adapt from pldistill.params.data, which holds
what every section shares)."""

from __future__ import annotations

import glob
import importlib.util
import re
from typing import Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from pldistill.params.data import (
    DataParams,
    _one_of,
    _registered,
    _Section,
)
from pldistill.params.defaults import DEFAULTS
from pldistill.params.names import BUNDLED_MODELS, EXPORT_FORMATS

FAISS_INDEXES = ("flat", "torch", "ivf", "hnsw")
TEACHER_KINDS = ("cross", "bi")  # a teacher member: a cross-encoder (sigmoid of its logit) or a bi-encoder (cosine)
CALIBRATIONS = ("auto", "none", "linear", "isotonic")  # how a member's score is put on the gold scale


# bf16 autocast: "auto" turns it on only where the hardware has native bf16 matrix units (CPU flags
# amx_bf16 / avx512_bf16, or a bf16-capable GPU) and, on a CPU, a bf16 matmul measures faster (device.bf16_auto).
Bf16 = Literal["auto", True, False]
# Training precision: fp16 autocast runs with loss scaling (torch.amp.GradScaler), CUDA only.
PRECISIONS = ("auto", "fp32", "bf16", "fp16")
BF16_AS_PRECISION = {False: "fp32", True: "bf16", "auto": "auto"}

# What runs inference (pldistill.models.accel): torch, or the transformer exported to ONNX Runtime (fp32, or dynamic
# int8)
# or OpenVINO (fp32; bf16 on a CPU with native bf16 units; int8 feed-forward layers with group-wise activation
# scales). auto picks per machine; every backend but torch must match torch fp32 (Spearman >= 0.999).
BACKENDS = ("auto", "torch", "onnx", "onnx-int8", "openvino", "openvino-bf16", "openvino-int8")
INFER_BATCH = {"cpu": 64, "cuda": 512}  # batch_size auto: pairs or sentences per inference batch, by device


def _infer_batch(v: object) -> object:
    """``auto``: 64 on a CPU; 512 where a CUDA GPU is found (small batches leave a GPU waiting on kernel launches).
    Inference only: the same params still train the same on any device. Resolved here, so what ran is what the
    run's fingerprints and reports record."""
    if isinstance(v, str) and v != "auto" and not v.strip().isdigit():
        raise ValueError(f"expected a whole number of items, or auto (64 on a CPU, 512 on a CUDA GPU); found {v!r}")
    if v != "auto":
        return v
    return INFER_BATCH["cuda" if _cuda() else "cpu"]


GPU_NODES = ("/proc/driver/nvidia", "/dev/nvidia*", "/dev/dxg", "/dev/kfd")  # NVIDIA's, WSL2's and ROCm's


def _cuda() -> bool:
    """Whether torch sees a CUDA GPU; torch is asked only where a GPU's device node exists: importing it costs a data
    stage (check, download, augment, sample) about 3 s of its 4, for what a machine without one knows already."""
    if not any(glob.glob(node) for node in GPU_NODES):
        return False
    import torch  # only where a GPU may be: the config stays light to import

    return torch.cuda.is_available()


Backend = Literal["auto", "torch", "onnx", "onnx-int8", "openvino", "openvino-bf16", "openvino-int8"]
BACKEND_NEEDS = {"onnx": ("onnxruntime", "onnx"), "onnx-int8": ("onnxruntime", "onnx"),
                 "openvino": ("openvino", "onnx"), "openvino-bf16": ("openvino", "onnx"),
                 "openvino-int8": ("openvino", "onnx", "nncf")}
BACKEND_EXTRAS = {"onnx": "fast", "onnx-int8": "fast", "openvino": "openvino",  # pyproject's optional extras
                  "openvino-bf16": "openvino", "openvino-int8": "openvino"}


def install_hint(backend: str) -> str:
    return f"pip install 'pldistill[{BACKEND_EXTRAS[backend]}]'"


def _installed(backend: str) -> str:
    """A forced backend's packages must be there before any stage starts (auto falls back to torch on its own)."""
    lacking = [p for p in BACKEND_NEEDS.get(backend, ()) if importlib.util.find_spec(p) is None]
    if lacking:
        raise ValueError(f"backend {backend} needs {' and '.join(lacking)}, not installed: {install_hint(backend)} "
                         f"(or use auto, which falls back to torch)")
    return backend


class RTTParams(_Section):
    """Round-trip translation in stage augment: each corpus sentence out to a pivot language and back."""

    params_yaml = DEFAULTS["augment"]["rtt"]
    backend: str  # none, or one of pldistill.data.rtt.BACKENDS (validate.names()["rtt_backend"])
    source: str  # the corpus language
    languages: tuple[str, ...]  # pivot languages
    models: dict[str, tuple[str, str]]  # marian: {de: [out spec, back spec]}
    table: str | None  # table: a csv/tsv/jsonl/parquet of sentence, language, translation
    corpus: str | None  # null: the task's training sentences; or a .txt (one per line) / table file
    compensate: bool  # top a given corpus back up with task sentences, as many as cleaning dropped
    script: str | None  # null: the source language's script; letters of other scripts are stripped
    min_chars: int = Field(ge=1)  # sentences and paraphrases shorter than this are dropped (paper: <= 3)
    batch_size: int = Field(ge=1)
    num_beams: int = Field(ge=1)
    max_new_tokens: int = Field(ge=1)
    bf16: Bf16

    _known_backend = field_validator("backend")(lambda v, info: _registered("rtt_backend", v, info))

    @model_validator(mode="after")
    def _table_needs_a_file(self) -> RTTParams:
        if self.backend == "table" and not self.table:
            raise ValueError("backend table reads translations from a file: set augment.rtt.table to its path")
        return self


class AugmentParams(_Section):
    params_yaml = DEFAULTS["augment"]
    min_chars: int = Field(ge=1)
    unicode_form: Literal["NFC", "NFKC"]
    rtt: RTTParams


class BM25Params(_Section):
    params_yaml = DEFAULTS["sample"]["bm25"]
    k1: float = Field(gt=0)
    b: float = Field(ge=0, le=1)
    epsilon: float = Field(ge=0)


def _model_spec(v: str) -> str:
    if v.startswith("bundled:") and v.removeprefix("bundled:") not in BUNDLED_MODELS:
        raise ValueError(f"expected bundled:<name> with name one of {', '.join(BUNDLED_MODELS)}; found {v!r}")
    return v


class RandomParams(_Section):
    params_yaml = DEFAULTS["sample"]["random"]
    pairs: int = Field(ge=1)  # random pairs to draw (capped at the number of new pairs there are)


class SemanticParams(_Section):
    """Semantic-search sampling: top-k cosine neighbours from an encoder, searched with faiss."""

    params_yaml = DEFAULTS["sample"]["semantic"]
    encoder: str  # gold: the bi-encoder trained on the gold pairs (stage `gold`); or a model spec
    index: str  # flat: exact (faiss); torch: exact (torch matmul); ivf / hnsw: approximate (faiss)
    nlist: int = Field(ge=1)  # ivf: clusters (capped at sentences / 39, faiss's minimum per cluster)
    nprobe: int = Field(ge=1)  # ivf: clusters visited per query
    hnsw_m: int = Field(ge=4)  # hnsw: links per node
    ef_search: int = Field(ge=1)  # hnsw: candidate list size per query
    batch_size: int = Field(ge=1)  # encoding batch
    search_chunk: int = Field(ge=1)  # queries per faiss search call (faiss blocks BLAS by 4096)
    max_length: int = Field(ge=8)
    bf16: Bf16
    trust_remote_code: bool

    _known_index = field_validator("index")(lambda v: _one_of(v, FAISS_INDEXES))
    _known_encoder = field_validator("encoder")(lambda v: v if v == "gold" else _model_spec(v))


class KDEParams(_Section):
    params_yaml = DEFAULTS["sample"]["kde"]
    pool: int = Field(ge=1)  # random pairs the teacher labels before KDE keeps some
    grid: int = Field(ge=11)  # points in [0, 1] where the densities are evaluated


class SampleParams(_Section):
    params_yaml = DEFAULTS["sample"]
    strategy: str  # auto: given when data.unscored names given pairs, else bm25 (Params resolves it)
    top_k: int = Field(ge=1, le=100)
    query_chunk: int = Field(ge=1)
    corpus: bool  # the searches also pair embed.corpus's sentences (stage sample reads them as stage embed does)
    bm25: BM25Params
    random: RandomParams
    semantic: SemanticParams
    kde: KDEParams

    @field_validator("strategy")
    @classmethod
    def _known_strategy(cls, v: str, info: ValidationInfo) -> str:
        # a registered name (bm25+semantic is one), or registered names joined by "+" (given+bm25)
        allowed = (info.context or {}).get("strategy")
        if allowed is None or v in allowed:
            return v
        parts = v.split("+")
        if len(set(parts)) < len(parts) or any(p not in allowed or p in ("none", "kde") for p in parts):
            raise ValueError(f"expected one of {', '.join(allowed)}, or several of them but none and kde "
                             f"joined by + (e.g. given+bm25); found {v!r}")
        return v


class InferenceParams(_Section):
    """How a model scores: stage label (the teacher), stage evaluate and dev scoring during training."""

    params_yaml = DEFAULTS["label"]
    batch_size: int = Field(ge=1)  # auto: INFER_BATCH
    bf16: Bf16
    backend: Backend

    _backend_installed = field_validator("backend")(_installed)
    _auto_batch = field_validator("batch_size", mode="before")(_infer_batch)


LabelParams = InferenceParams  # the label section: inference settings, nothing more


class ExtraSet(_Section):
    """One more evaluation set (stage evaluate): a dataset read like data.*, scored on its dev and test."""

    name: str  # its block in eval.json: extra.<name>
    data: DataParams  # as the top-level data section: dataset, source, task, columns, ...

    @field_validator("name")
    @classmethod
    def _plain_name(cls, v: str) -> str:
        if not re.fullmatch(r"[A-Za-z0-9_-]+", v):
            raise ValueError(f"expected letters, digits, _ or - (it names a block in eval.json); found {v!r}")
        return v


class ExportParams(_Section):
    """Stage export: the student in the forms a serving stack loads; stage evaluate serves one of them."""

    params_yaml = DEFAULTS["export"]
    formats: Literal["auto"] | tuple[str, ...]  # auto: every form the installed packages allow for student.kind
    calibration: int = Field(ge=1)  # training sentences openvino-int8 is calibrated on
    max_drop: float = Field(ge=0)  # dev points below the student an export may score and still be served
    gate: float = Field(gt=0, le=1)  # its dev scores' Spearman with the torch student's, at least

    @field_validator("formats")
    @classmethod
    def _known_formats(cls, v: object) -> object:
        if v == "auto":
            return v
        if bad := [f for f in v if f not in EXPORT_FORMATS]:
            raise ValueError(f"expected auto, or a list of {', '.join(EXPORT_FORMATS)}; found {bad}")
        if len(set(v)) < len(v):
            raise ValueError(f"expected each format once; found {list(v)}")
        return v


class EvaluateParams(InferenceParams):
    """The evaluate section: inference settings, encode speed, and more evaluation sets."""

    params_yaml = DEFAULTS["evaluate"]
    speed_pairs: int = Field(ge=0)  # test pairs each model scores, in turns, for its speed ratio; 0: no timing
    # rounds of turns (pldistill.ship.speed): each model scores every chunk once a round
    speed_rounds: int = Field(ge=1)
    speed_chunk: int = Field(ge=1)  # pairs a turn
    speed_min_seconds: float = Field(ge=0)  # in each turn a model scores its chunk again until this long has gone
    speed_threads: int | None = Field(ge=1)  # threads each model is timed with; None: every core
    static_batch_size: int = Field(ge=1)  # a static model's batch when timed (Model2Vec's encode default)
    gain_rounds: int = Field(ge=0)  # paired-bootstrap resamples of the student's lead (eval.json gain); 0: off
    order_free: int = Field(ge=0)  # a static student: the teacher's word-order shuffles averaged (baseline.order_free)
    extra: tuple[ExtraSet, ...]  # e.g. [{name: sick, data: {dataset: sickr, source: path/to/SICK.zip}}]

    @field_validator("extra")
    @classmethod
    def _distinct(cls, v: tuple[ExtraSet, ...]) -> tuple[ExtraSet, ...]:
        names = [x.name for x in v]
        if len(set(names)) < len(names):
            raise ValueError(f"expected distinct names; found {names}")
        return v
