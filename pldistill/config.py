"""One typed configuration, loaded from params.yaml and validated before any heavy work.

Every section is a pydantic model with ``extra="forbid"``: an unknown or misspelt key stops the run
with a message naming the key, and a bad value names the key and what is allowed.

Configuration is plain data at the bottom of the import graph: it imports no registry. The names only a
registry knows (recipes, named datasets, sampling strategies, round-trip translation backends) come in as
``names`` (pldistill.validate hands over the registries' own), and are checked like any other value.
"""

from __future__ import annotations

import difflib
import importlib.util
import re
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator, model_validator

from pldistill.bundled import BUNDLED

TABLE_SUFFIXES = (".csv", ".tsv", ".jsonl", ".parquet")
POSITIVES = ("dropout", "rtt")  # rtt-ensemble: what a sentence is contrasted with
DSE_POOLINGS = ("last4", "mean", "cls")
PAIR_SPLITS = ("train", "dev", "test")
FAISS_INDEXES = ("flat", "torch", "ivf", "hnsw")
TASKS = ("regression", "classification")
TEACHER_KINDS = ("cross", "bi")  # a teacher member: a cross-encoder (sigmoid of its logit) or a bi-encoder (cosine)
CALIBRATIONS = ("auto", "none", "linear", "isotonic")  # how a member's score is put on the gold scale
BUNDLED_MODELS = tuple(BUNDLED)
# What runs on several processes (params `processes`, pldistill.distributed), and why the others do not yet.
DISTRIBUTED_RECIPES = ("augsbert", "dse")
DISTRIBUTED_WHY = {
    "trans-encoder": "its cycles label and train inside stage distill, writing a store of finished steps as they go, "
                     "which is not rank-aware",
    "rtt-ensemble": "InfoNCE's in-batch negatives would see only a rank's slice of each batch",
}  # `bundled:<name>`; weights and sha256 in pldistill.bundled


# The values a registry defines (a pldistill.validate.names() key each): checked only when ``names`` holds them.
Names = dict[str, tuple[str, ...]]


def _registered(kind: str, value: str, info: ValidationInfo) -> str:
    """``value`` must be one of the names the registry ``kind`` holds, when the caller handed them over."""
    allowed = (info.context or {}).get(kind)
    return value if allowed is None else _one_of(value, allowed)


class ConfigError(ValueError):
    """params.yaml is missing, unreadable or invalid; the message names the key."""


def is_table(dataset: str) -> bool:
    """A ``data.dataset`` that names a table by path (else it names a dataset)."""
    return dataset.lower().endswith(TABLE_SUFFIXES)


def _one_of(value: str, allowed: tuple[str, ...]) -> str:
    # Plain str + this check (not Literal) so the message lists the values we accept today.
    if value not in allowed:
        raise ValueError(f"expected one of {', '.join(allowed)}; found {value!r}")
    return value


def _merged(default: dict, given: dict) -> dict:
    """``given`` over ``default``, key by key and section by section."""
    out = dict(default)
    for k, v in given.items():
        out[k] = _merged(default[k], v) if isinstance(v, dict) and isinstance(default.get(k), dict) else v
    return out


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    @model_validator(mode="before")
    @classmethod
    def _sections_keep_their_defaults(cls, raw: object) -> object:
        # A section given in part keeps the rest of its own default, which may differ from its class's: trans.cross
        # and trans.bi are both StepParams, with the paper's settings for each; teacher and student TrainParams.
        if not isinstance(raw, dict):
            return raw
        return {k: _merged(d.model_dump(), v) if isinstance(v, dict) and isinstance(
                    d := getattr(cls.model_fields.get(k), "default", None), BaseModel) else v
                for k, v in raw.items()}

    @field_validator("*", mode="before")
    @classmethod
    def _no_bool_for_a_number(cls, v: object, info: ValidationInfo) -> object:
        # pydantic's lax mode reads true as 1 and false as 0; for a number key that is a typo, not a value
        number = (int, float, int | None, float | None)
        if isinstance(v, bool) and info.field_name and cls.model_fields[info.field_name].annotation in number:
            raise ValueError(f"expected a number; found {v}")
        return v


class SplitParams(_Section):
    dev: float = Field(0.1, gt=0, lt=0.5)
    test: float = Field(0.1, gt=0, lt=0.5)


class DataParams(_Section):
    dataset: str = "demo"
    source: str | None = None
    task: str | None = None
    columns: dict[str, str] = Field(default_factory=dict)
    score_range: tuple[float, float] | None = None
    split: SplitParams = SplitParams()
    max_train: int | None = Field(None, gt=0)
    max_drop_share: float = Field(0.05, ge=0, le=1)  # more rows dropped for one reason stop the run
    split_by: Literal["pair", "sentence"] = "pair"  # what a table we split keeps on one side
    # pairs without scores for the teacher to label (sample.strategy given): a table path (any score column
    # is never read) | rest: the training pairs max_train left out | null: none
    unscored: str | None = None

    @field_validator("unscored")
    @classmethod
    def _unscored_source(cls, v: str | None) -> str | None:
        if v is None or v == "rest" or v.lower().endswith(TABLE_SUFFIXES):
            return v
        raise ValueError(f"expected rest, null, or a path ending in {', '.join(TABLE_SUFFIXES)}; found {v!r}")

    @field_validator("dataset")
    @classmethod
    def _known_dataset(cls, v: str, info: ValidationInfo) -> str:
        named = (info.context or {}).get("dataset")
        if named is None or v in named or is_table(v):
            return v
        packed = (" (a compressed table is read as one: name it for what it holds, e.g. pairs.csv)"
                  if v.lower().endswith((".gz", ".bz2", ".xz", ".zip")) else "")
        raise ValueError(f"expected one of {', '.join(named)} or a path ending in {', '.join(TABLE_SUFFIXES)}; "
                         f"found {v!r}{packed}")

    _known_task = field_validator("task")(lambda v: v if v is None else _one_of(v, TASKS))

    @field_validator("columns")
    @classmethod
    def _known_columns(cls, v: dict[str, str]) -> dict[str, str]:
        allowed = {"sentence1", "sentence2", "score", "split"}
        bad = sorted(set(v) - allowed)
        if bad:
            raise ValueError(
                f"maps our column names to yours; keys must be among {sorted(allowed)}, found {bad}"
            )
        if len(set(v.values())) < len(v):
            raise ValueError(f"maps two of our columns to the same column of yours: {v}")
        return v

    @field_validator("score_range")
    @classmethod
    def _ordered(cls, v: tuple[float, float] | None) -> tuple[float, float] | None:
        if v is not None and not v[0] < v[1]:
            raise ValueError(f"expected [low, high] with low < high; found {list(v)}")
        return v

    @property
    def name(self) -> str:
        """Folder name under data/raw/: the dataset's name, or a path's file stem."""
        if not is_table(self.dataset):  # a named dataset
            return self.dataset
        return re.sub(r"[^A-Za-z0-9_.-]+", "_", Path(self.dataset).stem) or "table"


class AdaptParams(DataParams):
    """Domain adaptation (recipe augsbert): the source domain's dataset, read like ``data``.

    The teacher (and the source-only baseline, stage gold) learn its gold pairs and are selected on its
    dev set; the teacher labels the target's (``data``) training pairs, scores dropped, and the sampled
    pairs; the student learns those silver labels only. No target label trains or selects a model.
    """

    dataset: str | None = None  # null: no adaptation

    @field_validator("dataset")
    @classmethod
    def _known_dataset(cls, v: str | None, info: ValidationInfo) -> str | None:
        return v if v is None else DataParams._known_dataset(v, info)

    @property
    def data(self) -> DataParams | None:
        """The source as a DataParams, or None when there is no adaptation."""
        return None if self.dataset is None else DataParams(**self.model_dump())


# bf16 autocast: "auto" turns it on only where the hardware has native bf16 matrix units (CPU flags
# amx_bf16 / avx512_bf16, or a bf16-capable GPU); elsewhere it is emulated and slower than fp32.
Bf16 = Literal["auto", True, False]
# Training precision: fp16 autocast runs with loss scaling (torch.amp.GradScaler), CUDA only.
PRECISIONS = ("auto", "fp32", "bf16", "fp16")
BF16_AS_PRECISION = {False: "fp32", True: "bf16", "auto": "auto"}

# What runs inference (pldistill.accel): torch, or the transformer exported to ONNX Runtime (fp32, or dynamic int8)
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
    import torch  # only when asked: the config stays light to import

    return INFER_BATCH["cuda" if torch.cuda.is_available() else "cpu"]


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

    backend: str = "none"  # none, or one of pldistill.rtt.BACKENDS (validate.names()["rtt_backend"])
    source: str = "en"  # the corpus language
    languages: tuple[str, ...] = ("de",)  # pivot languages
    models: dict[str, tuple[str, str]] = Field(default_factory=dict)  # marian: {de: [out spec, back spec]}
    table: str | None = None  # table: a csv/tsv/jsonl/parquet of sentence, language, translation
    corpus: str | None = None  # null: the task's training sentences; or a .txt (one per line) / table file
    compensate: bool = True  # top a given corpus back up with task sentences, as many as cleaning dropped
    script: str | None = None  # null: the source language's script; letters of other scripts are stripped
    min_chars: int = Field(4, ge=1)  # sentences and paraphrases shorter than this are dropped (paper: <= 3)
    batch_size: int = Field(32, ge=1)
    num_beams: int = Field(4, ge=1)
    max_new_tokens: int = Field(128, ge=1)
    bf16: Bf16 = "auto"

    _known_backend = field_validator("backend")(lambda v, info: _registered("rtt_backend", v, info))

    @model_validator(mode="after")
    def _table_needs_a_file(self) -> RTTParams:
        if self.backend == "table" and not self.table:
            raise ValueError("backend table reads translations from a file: set augment.rtt.table to its path")
        return self


class AugmentParams(_Section):
    min_chars: int = Field(4, ge=1)
    unicode_form: Literal["NFC", "NFKC"] = "NFKC"
    rtt: RTTParams = RTTParams()


class BM25Params(_Section):
    k1: float = Field(1.5, gt=0)
    b: float = Field(0.75, ge=0, le=1)
    epsilon: float = Field(0.25, ge=0)


def _model_spec(v: str) -> str:
    if v.startswith("bundled:") and v.removeprefix("bundled:") not in BUNDLED_MODELS:
        raise ValueError(f"expected bundled:<name> with name one of {', '.join(BUNDLED_MODELS)}; found {v!r}")
    return v


class RandomParams(_Section):
    pairs: int = Field(10_000, ge=1)  # random pairs to draw (capped at the number of new pairs there are)


class SemanticParams(_Section):
    """Semantic-search sampling: top-k cosine neighbours from an encoder, searched with faiss."""

    encoder: str = "gold"  # gold: the bi-encoder trained on the gold pairs (stage `gold`); or a model spec
    index: str = "flat"  # flat: exact (faiss); torch: exact (torch matmul); ivf / hnsw: approximate (faiss)
    nlist: int = Field(1024, ge=1)  # ivf: clusters (capped at sentences / 39, faiss's minimum per cluster)
    nprobe: int = Field(16, ge=1)  # ivf: clusters visited per query
    hnsw_m: int = Field(32, ge=4)  # hnsw: links per node
    ef_search: int = Field(128, ge=1)  # hnsw: candidate list size per query
    batch_size: int = Field(128, ge=1)  # encoding batch
    search_chunk: int = Field(4096, ge=1)  # queries per faiss search call (faiss blocks BLAS by 4096)
    max_length: int = Field(128, ge=8)
    bf16: Bf16 = "auto"
    trust_remote_code: bool = False

    _known_index = field_validator("index")(lambda v: _one_of(v, FAISS_INDEXES))
    _known_encoder = field_validator("encoder")(lambda v: v if v == "gold" else _model_spec(v))


class KDEParams(_Section):
    pool: int = Field(50_000, ge=1)  # random pairs the teacher labels before KDE keeps some
    grid: int = Field(1001, ge=11)  # points in [0, 1] where the densities are evaluated


class SampleParams(_Section):
    strategy: str = "auto"  # auto: given when data.unscored names given pairs, else bm25 (Params resolves it)
    top_k: int = Field(10, ge=1, le=100)
    query_chunk: int = Field(256, ge=1)
    bm25: BM25Params = BM25Params()
    random: RandomParams = RandomParams()
    semantic: SemanticParams = SemanticParams()
    kde: KDEParams = KDEParams()

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


class StepParams(_Section):
    """How a model is trained, whatever it starts from."""

    epochs: int = Field(1, ge=1)
    batch_size: int = Field(16, ge=1)
    lr: float = Field(2e-5, gt=0)
    warmup: float = Field(0.1, ge=0, lt=1)
    weight_decay: float = Field(0.01, ge=0)
    max_length: int = Field(128, ge=8)
    evals_per_epoch: int = Field(4, ge=1)
    bf16: Bf16 = False
    # Mixed precision: null keeps what bf16 says (false: fp32, true: bf16, auto: auto); auto is bf16 with
    # native bf16 units, fp16 on a CUDA GPU without them, else fp32; fp16 scales the loss and needs CUDA.
    precision: str | None = None
    accumulate: int = Field(1, ge=1)  # micro-batches per optimizer step: batch_size rows in this many passes
    # adamw: torch's for-loop AdamW (the default: same seed, same weights as every release before); adamw-fused:
    # its fused kernel, what transformers' Trainer uses (5x faster steps on a CPU, weights equal to float rounding)
    optimizer: Literal["adamw", "adamw-fused"] = "adamw"
    checkpoint_every: int | None = Field(None, ge=0)  # mid-run checkpoints: null at each dev evaluation,
                                                      # N every N steps, 0 none (pldistill/checkpoints.py)
    select: Literal["dev", "last"] = "dev"  # the checkpoint kept: best dev score (the start counts) | the last

    _known_precision = field_validator("precision")(lambda v: v if v is None else _one_of(v, PRECISIONS))

    @model_validator(mode="after")
    def _one_precision(self) -> StepParams:
        # bf16 predates precision: a section may set either, or both when they agree
        bf16_set = "bf16" in self.model_fields_set and self.bf16 is not False
        if self.precision is not None and bf16_set and BF16_AS_PRECISION[self.bf16] != self.precision:
            raise ValueError(f"bf16 {str(self.bf16).lower()} and precision {self.precision} disagree; "
                             f"set precision alone (bf16 true is precision bf16, auto is auto) and bf16 to false")
        if self.accumulate > self.batch_size:
            raise ValueError(f"accumulate {self.accumulate} splits each batch of batch_size {self.batch_size} "
                             f"rows into micro-batches; it must be at most batch_size")
        return self

    @property
    def amp(self) -> str:
        """The precision asked for: auto | fp32 | bf16 | fp16 (``precision``, else what ``bf16`` says)."""
        return self.precision if self.precision is not None else BF16_AS_PRECISION[self.bf16]


class TrainParams(StepParams):
    """How one model (teacher or student) is initialised and trained."""

    model: str = "bundled:all-MiniLM-L6-v2"
    trust_remote_code: bool = False
    seeds: int = Field(1, ge=1)  # seed optimisation: seeds seed .. seed+seeds-1, each stopped at seed_stop,
    seed_stop: float = Field(0.2, gt=0, lt=1)  # the fraction of training steps; the best on dev is finished
    layers: tuple[int, ...] | None = None  # keep only these transformer layers of `model` (e.g. [0, 2, 4])
    # ours: pldistill.loop | sentence-transformers: its SentenceTransformerTrainer / CrossEncoderTrainer
    # (pldistill/st_trainer.py; not with seeds > 1)
    trainer: Literal["ours", "sentence-transformers"] = "ours"

    _known_model = field_validator("model")(_model_spec)

    @field_validator("trainer")
    @classmethod
    def _trainer_installed(cls, v: str) -> str:
        lacking = [p for p in ("datasets", "accelerate") if importlib.util.find_spec(p) is None]
        if v == "sentence-transformers" and lacking:
            raise ValueError(f"trainer sentence-transformers needs {' and '.join(lacking)}, not installed: "
                             f"pip install 'pldistill[trainers]' (or set trainer: ours)")
        return v

    @field_validator("layers")
    @classmethod
    def _distinct_layers(cls, v: tuple[int, ...] | str | None) -> tuple[int, ...] | str | None:
        if isinstance(v, tuple) and (not v or min(v) < 0 or len(set(v)) < len(v)):
            raise ValueError(f"expected distinct layer indices >= 0 (e.g. [0, 2, 4]) or null; found {list(v)}")
        return v


class StudentParams(TrainParams):
    """The student section: a TrainParams whose ``layers`` may be ``auto``, the cut chosen on dev (pldistill.cut)."""

    layers: tuple[int, ...] | Literal["auto"] | None = "auto"  # auto: the best cut of `keep` layers, chosen on dev
    keep: int = Field(2, ge=1)  # layers auto: how many transformer layers the chosen cut keeps


class TeacherMember(TrainParams):
    """One teacher: what it is, whether it learns the gold pairs, and how its score meets the gold scale."""

    kind: str = "bi"  # cross: a cross-encoder | bi: a bi-encoder (cosine of the two embeddings)
    finetune: bool = False  # false: used as given, no gold pair learned (a ready-made teacher, GPL's setting)
    calibrate: str = "auto"  # auto: none when fine-tuned (its loss targets the gold scale), else linear
                             # linear: least squares on dev | isotonic: monotone fit on dev | none: clipped to [0, 1]

    _known_kind = field_validator("kind")(lambda v: _one_of(v, TEACHER_KINDS))
    _known_calibration = field_validator("calibrate")(lambda v: _one_of(v, CALIBRATIONS))

    @property
    def calibration(self) -> str:
        """The calibration method ``auto`` stands for."""
        if self.calibrate != "auto":
            return self.calibrate
        return "none" if self.finetune else "linear"


class TeacherParams(TeacherMember):
    """The teacher section: the first member, and ``members`` for an ensemble, or ``candidates``, teachers tried
    beside it of which the best on dev labels (each of them inherits every key it does not set from this section)."""

    members: tuple[TeacherMember, ...] = ()
    candidates: tuple[TeacherMember, ...] = ()

    @model_validator(mode="before")
    @classmethod
    def _members_inherit(cls, raw: object) -> object:
        if isinstance(raw, dict):
            own = {k: v for k, v in raw.items() if k not in ("members", "candidates")}
            for key in ("members", "candidates"):
                if raw.get(key):
                    raw = {**raw, key: [{**own, **m} if isinstance(m, dict) else m for m in raw[key]]}
        return raw

    @model_validator(mode="after")
    def _members_or_candidates(self) -> TeacherParams:
        if self.members and self.candidates:
            raise ValueError("members (an ensemble, every member labels) and candidates (the best on dev labels "
                             "alone) do not mix; set one of them to []")
        return self

    @property
    def ensemble(self) -> tuple[TeacherMember, ...]:
        """Every member, this section's own first."""
        return (TeacherMember(**self.model_dump(exclude={"members", "candidates"})), *self.members)

    @property
    def tried(self) -> tuple[TeacherMember, ...]:
        """With candidates: this section's own teacher and each candidate, in order (the best on dev is kept)."""
        return (self.ensemble[0], *self.candidates)

    @property
    def plain(self) -> bool:
        """One cross-encoder fine-tuned on gold: the Augmented-SBERT teacher (and the other recipes' cross)."""
        return (not self.members and not self.candidates and self.kind == "cross" and self.finetune
                and self.calibration == "none" and self.layers is None)


class MutualModel(_Section):
    """One more model pair for mutual distillation: a starting bi-encoder and a cross-encoder base."""

    bi: str
    cross: str | None = None  # null: the same spec as `bi` (the paper starts it from the base language model)

    _known_models = field_validator("bi", "cross")(lambda v: v if v is None else _model_spec(v))


class DSEParams(StepParams):
    """recipe dse: the student and its training (the paper, STS-B: batch 32, lr 1e-5, 8 epochs)."""

    alpha: float = Field(0.5, ge=0, le=1)  # weight of the teacher-logit term; 1 - alpha on the gold label
    pooling: str = "last4"  # last4: token means of the last four layers without [CLS] | mean | cls
    hidden: int = Field(512, ge=1)  # the head's hidden layer
    head_lr: float = Field(1e-3, gt=0)  # the new head's learning rate (the encoder uses lr)
    epochs: int = Field(8, ge=1)
    batch_size: int = Field(32, ge=1)
    lr: float = Field(1e-5, gt=0)
    evals_per_epoch: int = Field(2, ge=1)

    _known_pooling = field_validator("pooling")(lambda v: _one_of(v, DSE_POOLINGS))


class SubParams(StepParams):
    """rtt-ensemble: one contrastive sub-model (SimCSE, unsupervised: batch 64, lr 3e-5, length 32, 1 epoch)."""

    batch_size: int = Field(64, ge=2)  # in-batch negatives: batch - 1 per sentence
    lr: float = Field(3e-5, gt=0)
    warmup: float = Field(0.0, ge=0, lt=1)
    max_length: int = Field(32, ge=8)
    temperature: float = Field(0.05, gt=0)  # InfoNCE temperature (SimCSE, and the paper: 0.05)

    @field_validator("accumulate")
    @classmethod
    def _whole_batches(cls, v: int) -> int:
        if v != 1:  # each row's negatives are the rest of its batch: micro-batches would change the loss
            raise ValueError(f"InfoNCE takes its negatives from the whole batch, so micro-batches would change the "
                             f"loss; expected 1, found {v} (lower batch_size instead)")
        return v


class EnsembleDistillParams(SubParams):
    """rtt-ensemble: the student learns the ensemble's embeddings, (1 - w) MAE + w InfoNCE (the paper's Eq. 3)."""

    infonce_weight: float = Field(0.1, ge=0, le=1)  # the paper's lambda
    temperature: float = Field(0.3, gt=0)  # the paper's best distillation temperature (Table 7)


class EnsembleParams(_Section):
    """recipe rtt-ensemble: K contrastive sub-models, their (weighted) mean as teacher, one student."""

    positives: str = "dropout"  # dropout: the sentence itself under another dropout mask | rtt: its paraphrase
    k: int = Field(5, ge=1)  # dropout: number of sub-models (seeds seed+1 .. seed+k); rtt: one per language
    weights: Literal["mean", "softmax"] = "mean"  # softmax: of the sub-models' dev Spearman (points) / temperature
    weight_temperature: float = Field(1.0, gt=0)
    sub: SubParams = SubParams()
    distill: EnsembleDistillParams = EnsembleDistillParams()

    _known_positives = field_validator("positives")(lambda v: _one_of(v, POSITIVES))


class RoundsParams(_Section):
    """recipe augsbert with cycles > 1 (pldistill.recipes.rounds): each cycle after the first, the student
    mines new pairs by semantic search with its own encoder, the teacher labels only those, the student learns on."""

    pairs: int = Field(2000, ge=1)  # new pairs kept per cycle, at most (a seeded draw when the search finds more)
    top_k: int = Field(5, ge=1, le=100)  # nearest neighbours of each pool sentence under the student
    epochs: int = Field(1, ge=1)  # the student's epochs in each cycle after the first (gold + every silver pair so far)


class TransParams(_Section):
    """recipe trans-encoder: the bi- and cross-encoder label the pairs for each other, `cycles` times."""

    init: Literal["refresh", "sequential"] = "refresh"
    splits: tuple[str, ...] = PAIR_SPLITS  # whose pairs (labels dropped) are learned; drop test: inductive
    sampled: bool = False  # also learn the pairs stage `sample` found
    target: Literal["clip", "affine"] = "clip"  # cosine -> [0, 1]: clip(c, 0, 1) or (c + 1) / 2
    mutual: tuple[MutualModel, ...] = ()  # extra model pairs; labels are the mean of all pairs' predictions
    # the paper's Table 16: bi -> cross, soft BCE (lr 2e-5, batch 32, 1 epoch, length 64); cross -> bi, cosine MSE
    # (lr 5e-5, batch 128, 10 epochs, length 32)
    cross: StepParams = StepParams(batch_size=32, max_length=64)
    bi: StepParams = StepParams(epochs=10, batch_size=128, lr=5e-5, warmup=0.0, max_length=32, evals_per_epoch=1)

    @field_validator("splits")
    @classmethod
    def _known_splits(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        bad = [s for s in v if s not in PAIR_SPLITS]
        if bad or not v or len(set(v)) < len(v):
            raise ValueError(f"expected distinct splits among {', '.join(PAIR_SPLITS)}; found {list(v)}")
        return v


EMBED_LOSSES = ("mse", "sim", "mse+sim")
PROJECTIONS = ("auto", "pca", "none")
EMBED_SOURCES = ("train", "given", "paraphrases")


class EmbedParams(StepParams):
    """Embedding distillation (stage embed): the student learns the teacher's sentence embeddings before its pairs."""

    epochs: int = Field(0, ge=0)  # 0: off
    teacher: str | None = "auto"  # whose embeddings: auto (a cut student: its whole model; else the stage teacher's)
                                  # | None, the stage teacher's bi-encoders | a bi-encoder spec
    corpus: str | None = None  # more plain sentences: a .txt (one a line) or a table with a `sentence` column
    max_corpus: int | None = Field(None, ge=1)  # at most this many corpus sentences (drawn with the seed)
    sources: tuple[str, ...] = EMBED_SOURCES  # the task's sentences it learns: train pairs, given pairs, paraphrases
    loss: str = "mse"  # mse: to the teacher's (projected) embedding | sim: in-batch cosine matrices | mse+sim
    sim_weight: float = Field(1.0, ge=0)  # the sim term's weight in mse+sim
    projection: str = "auto"  # auto: none for equal widths, else pca | pca: onto the student's width | none
    batch_size: int = Field(64, ge=2)
    lr: float = Field(1e-4, gt=0)
    evals_per_epoch: int = Field(1, ge=1)

    _known_loss = field_validator("loss")(lambda v: _one_of(v, EMBED_LOSSES))
    _known_projection = field_validator("projection")(lambda v: _one_of(v, PROJECTIONS))

    @field_validator("sources")
    @classmethod
    def _known_sources(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        bad = [s for s in v if s not in EMBED_SOURCES]
        if bad or len(set(v)) < len(v):
            raise ValueError(f"expected distinct sources among {', '.join(EMBED_SOURCES)}; found {list(v)}")
        return v

    @field_validator("corpus")
    @classmethod
    def _corpus_file(cls, v: str | None) -> str | None:
        if v is None or v.lower().endswith((".txt", *TABLE_SUFFIXES)):
            return v
        raise ValueError(f"expected null, a .txt (one sentence a line) or a table ({', '.join(TABLE_SUFFIXES)}) "
                         f"with a sentence column; found {v!r}")


class InferenceParams(_Section):
    """How a model scores: stage label (the teacher), stage evaluate and dev scoring during training."""

    batch_size: int = Field("auto", ge=1, validate_default=True)  # auto: INFER_BATCH
    bf16: Bf16 = "auto"
    backend: Backend = "auto"

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


class EvaluateParams(InferenceParams):
    """The evaluate section: inference settings, encode speed, and more evaluation sets."""

    speed_pairs: int = Field(512, ge=0)  # test pairs each model scores, in turns, for its speed ratio; 0: no timing
    speed_rounds: int = Field(5, ge=1)  # rounds of those turns; the ratio is the median of the per-round ratios
    extra: tuple[ExtraSet, ...] = ()  # e.g. [{name: sick, data: {dataset: sickr, source: ../SICK.zip}}]

    @field_validator("extra")
    @classmethod
    def _distinct(cls, v: tuple[ExtraSet, ...]) -> tuple[ExtraSet, ...]:
        names = [x.name for x in v]
        if len(set(names)) < len(names):
            raise ValueError(f"expected distinct names; found {names}")
        return v


MPNET = "bundled:all-mpnet-base-v2"  # the stronger bundled model: a teacher candidate by default (make mpnet)


class Params(_Section):
    seed: int = Field(42, ge=0)
    cycles: int = Field(1, ge=1)
    recipe: str = "augsbert"
    processes: int = Field(1, ge=1)  # stages gold, teacher, label, distill: processes on torch.distributed
    data: DataParams = DataParams()
    adapt: AdaptParams = AdaptParams()
    augment: AugmentParams = AugmentParams()
    sample: SampleParams = SampleParams()
    teacher: TeacherParams = TeacherParams.model_validate({"epochs": 4, "candidates": [  # MPNet as given, fine-tuned
        {"model": MPNET, "kind": "bi", "finetune": False, "calibrate": "auto"},
        {"model": MPNET, "kind": "bi", "finetune": True, "calibrate": "auto", "epochs": 4, "evals_per_epoch": 1}]})
    label: LabelParams = Field(default_factory=LabelParams)  # a factory: batch_size auto looks for a GPU
    student: StudentParams = StudentParams(epochs=2, lr=1e-4)  # pruned: needs more than 2e-5
    embed: EmbedParams = EmbedParams(epochs=5, lr=2e-4)  # on for the demo: the pruned student learns its teacher first
    rounds: RoundsParams = RoundsParams()
    trans: TransParams = TransParams()
    dse: DSEParams = DSEParams()
    ensemble: EnsembleParams = EnsembleParams()
    evaluate: EvaluateParams = Field(default_factory=EvaluateParams)

    _known_recipe = field_validator("recipe")(lambda v, info: _registered("recipe", v, info))

    @model_validator(mode="before")
    @classmethod
    def _auto_strategy(cls, raw: object) -> object:
        # sample.strategy auto: the pairs the user gave (data.unscored) are what the teacher labels (measured on STS-B:
        # the best student of docs/fast-student.md learned them); without any, BM25 pairs of the training sentences
        if not isinstance(raw, dict):
            return raw
        sample = raw.get("sample") if isinstance(raw.get("sample"), dict) else {}
        if sample.get("strategy", "auto") != "auto":
            return raw
        data = raw.get("data") if isinstance(raw.get("data"), dict) else {}
        return {**raw, "sample": {**sample, "strategy": "bm25" if data.get("unscored") is None else "given"}}

    @model_validator(mode="after")
    def _recipe_cycles(self) -> Params:
        if self.recipe not in ("trans-encoder", "augsbert") and self.cycles != 1:
            raise ValueError(
                f"recipe {self.recipe} labels once and trains once, so cycles must be 1; found {self.cycles} "
                "(cycles > 1: recipes augsbert, where the student mines new pairs each cycle, and trans-encoder)"
            )
        if self.recipe == "augsbert" and self.cycles > 1 and self.processes > 1:
            raise ValueError(
                f"cycles {self.cycles} of recipe augsbert run in one process (each cycle mines, labels and trains "
                f"in turn); found processes {self.processes}: set processes to 1, or cycles to 1"
            )
        s = self.sample
        if (self.recipe == "trans-encoder" and self.trans.sampled and "semantic" in s.strategy
                and s.semantic.encoder == "gold"):
            raise ValueError(
                "trans.sampled with a semantic strategy would mine pairs with the `gold` encoder, which learned "
                "the gold scores, so the run would not be unsupervised; set sample.semantic.encoder to a model "
                "spec (e.g. bundled:all-MiniLM-L6-v2) or use sample.strategy bm25"
            )
        if "given" in s.strategy.split("+") and self.data.unscored is None:
            raise ValueError(
                f"sample.strategy {s.strategy} has the teacher label the given pairs of data.unscored, which is "
                "null; set data.unscored to a table of pairs (scores never read) or to rest (the training pairs "
                "data.max_train left out)"
            )
        if self.adapt.dataset is not None and self.recipe != "augsbert":
            raise ValueError(
                f"adapt.dataset (domain adaptation) trains an Augmented-SBERT teacher on the source domain; "
                f"it needs recipe augsbert, found {self.recipe}; set adapt.dataset to null for this recipe"
            )
        if self.recipe in ("trans-encoder", "rtt-ensemble") and (self.teacher.members or self.teacher.layers):
            raise ValueError(
                f"recipe {self.recipe} uses teacher.model only as a starting point; teacher.members and "
                "teacher.layers apply to augsbert and dse: set them to [] and null"
            )
        if self.processes > 1 and self.recipe not in DISTRIBUTED_RECIPES:
            raise ValueError(
                f"processes: {self.processes} processes run recipes {' and '.join(DISTRIBUTED_RECIPES)} only; "
                f"found recipe {self.recipe} ({DISTRIBUTED_WHY[self.recipe]}); set processes to 1"
            )
        if self.recipe == "rtt-ensemble" and self.ensemble.positives == "rtt" and self.augment.rtt.backend == "none":
            raise ValueError(
                "ensemble.positives rtt contrasts each sentence with its round-trip paraphrase, but "
                "augment.rtt.backend is none; set it to marian or table, or use ensemble.positives dropout"
            )
        return self


def _allowed_keys(loc: tuple) -> list[str]:
    """The keys allowed beside the last element of ``loc`` (walking the section models)."""
    model: type[BaseModel] = Params
    for part in loc[:-1]:
        ann = model.model_fields[part].annotation
        if not (isinstance(ann, type) and issubclass(ann, BaseModel)):
            return []
        model = ann
    return list(model.model_fields)


def _keys_named(name: str, model: type[BaseModel] = Params, prefix: str = "") -> list[str]:
    """Every dotted key of ``model`` whose last part is ``name`` (a key put in the wrong section)."""
    found = []
    for field, info in model.model_fields.items():
        ann = info.annotation
        if field == name:
            found.append(prefix + field)
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            found += _keys_named(name, ann, f"{prefix}{field}.")
    return found


def _closest(loc: tuple) -> str:
    """' (did you mean <key>?)' for an unknown key: the nearest spelling here (difflib), else the same name in
    other sections; '' when nothing is close."""
    prefix = "".join(f"{p}." for p in loc[:-1])
    near = difflib.get_close_matches(str(loc[-1]), _allowed_keys(loc), n=1)
    if near:
        return f" (did you mean {prefix}{near[0]}?)"
    elsewhere = _keys_named(str(loc[-1]))
    more = ", or another" if len(elsewhere) > 3 else ""
    return f" (did you mean {' or '.join(elsewhere[:3])}{more}?)" if elsewhere else ""


def _describe(err: ValidationError, path: Path) -> str:
    lines = [f"{path}: {err.error_count()} problem(s) in params"]
    for e in err.errors():
        key = ".".join(str(p) for p in e["loc"]) or "(top level)"
        if e["type"] == "extra_forbidden":
            allowed = ", ".join(_allowed_keys(e["loc"]))
            lines.append(f"  - {key}: unknown key{_closest(e['loc'])}; allowed here: {allowed}")
        else:
            msg = e["msg"].removeprefix("Value error, ")
            found = "" if "found" in msg else f" (found {e.get('input')!r})"
            lines.append(f"  - {key}: {msg}{found}")
    return "\n".join(lines)


def parse_params(raw: dict, path: Path | str = "params.yaml", names: Names | None = None) -> Params:
    """Validate a params mapping; raise ConfigError naming every bad key. ``names``: the registries' names
    (pldistill.validate.names()); a key whose registry is not among them is checked for its type only."""
    try:
        return Params.model_validate(raw, context=names)
    except ValidationError as err:
        raise ConfigError(_describe(err, Path(path))) from None


class _UniqueKeys(yaml.SafeLoader):
    """safe_load that refuses a key given twice in one mapping (plain YAML keeps the last, silently)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen: dict = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {key!r} is given twice (first on line {seen[key] + 1}); keep one",
                    key_node.start_mark)
            seen[key] = key_node.start_mark.line
        return super().construct_mapping(node, deep=deep)


def read_params(path: Path | str = "params.yaml") -> dict:
    """params.yaml as a mapping, unvalidated; ConfigError when it is missing or not a YAML mapping."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: params file not found (run from the project root)")
    try:
        raw = yaml.load(path.read_text(), Loader=_UniqueKeys)  # a SafeLoader: no arbitrary objects
        if raw is None:
            raise ConfigError(f"{path}: empty (no keys at all); expected the project's params: restore them "
                              f"with git checkout {path.name}")
    except yaml.YAMLError as err:
        raise ConfigError(f"{path}: not valid YAML: {err}") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: expected a mapping of keys at the top level, found {type(raw).__name__}")
    return raw


def load_params(path: Path | str = "params.yaml", names: Names | None = None) -> Params:
    """params.yaml, validated (``names``: as parse_params)."""
    return parse_params(read_params(path), path, names)
