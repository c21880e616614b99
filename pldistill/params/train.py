"""The training sections of params.yaml: section train, the keys every training inherits (SharedStepParams); the
steps of any one training (StepParams); a trained model's (TrainParams: teacher, student), the static student's and
the embedding step's. Each recipe's own section is in pldistill.params.recipes;
pldistill.params.config assembles them all into one Params."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from pldistill.params.data import _one_of, _Section
from pldistill.params.defaults import DEFAULTS
from pldistill.params.names import TABLE_SUFFIXES, format_suffix
from pldistill.params.sections import BF16_AS_PRECISION, CALIBRATIONS, PRECISIONS, TEACHER_KINDS, Bf16, _model_spec


class SharedStepParams(_Section):
    """Section ``train``: how every training runs. Each training section (a StepParams wherever it sits) inherits
    these keys and overrides one by holding it (Params._resolved)."""

    params_yaml = DEFAULTS["train"]
    weight_decay: float = Field(ge=0)
    select: Literal["dev", "last"]  # the checkpoint kept: best dev score (the start counts) | the last
    bf16: Bf16
    # Mixed precision: null keeps what bf16 says (false: fp32, true: bf16, auto: auto); auto is bf16 with
    # native bf16 units, fp16 on a CUDA GPU without them, else fp32; fp16 scales the loss and needs CUDA.
    precision: str | None
    accumulate: int = Field(ge=1)  # micro-batches per optimizer step: batch_size rows in this many passes
    optimizer: Literal["adamw", "adamw-fused"]  # adamw: torch's for-loop AdamW | adamw-fused: its fused kernel
    checkpoint_every: int | None = Field(ge=0)  # mid-run checkpoints: null at each dev evaluation,
                                                      # N every N steps, 0 none (pldistill/train/resume.py)
    # a checkpoint (the end's too) waits until this many seconds have gone since the last: one costs about 0.9 s
    # for a 2-layer student on a 2-core CPU, so a short run writes few; 0: none waits
    checkpoint_seconds: float = Field(ge=0)
    # early stopping (select dev): training ends at the first dev evaluation where the best dev score is more than
    # this many epochs old; null trains every epoch. The steps before the stop are the same either way.
    patience: float | None = Field(gt=0)

    _known_precision = field_validator("precision")(lambda v: v if v is None else _one_of(v, PRECISIONS))

    @model_validator(mode="after")
    def _one_precision(self) -> SharedStepParams:
        # bf16 predates precision: a section may set either, or both when they agree
        bf16_set = "bf16" in self.model_fields_set and self.bf16 is not False
        if self.precision is not None and bf16_set and BF16_AS_PRECISION[self.bf16] != self.precision:
            raise ValueError(f"bf16 {str(self.bf16).lower()} and precision {self.precision} disagree; "
                             f"set precision alone (bf16 true is precision bf16, auto is auto) and bf16 to false")
        return self

    @property
    def amp(self) -> str:
        """The precision asked for: auto | fp32 | bf16 | fp16 (``precision``, else what ``bf16`` says)."""
        return self.precision if self.precision is not None else BF16_AS_PRECISION[self.bf16]


class StepParams(SharedStepParams):
    """How a model is trained, whatever it starts from: its own steps, and section train's keys it does not hold."""

    params_yaml = None  # each section's own; a key of section train it lacks comes from there (_resolved)
    epochs: int = Field(ge=1)
    batch_size: int = Field(ge=1)
    lr: float = Field(gt=0)
    warmup: float = Field(ge=0, lt=1)
    max_length: int = Field(ge=8)
    evals_per_epoch: int = Field(ge=1)

    @classmethod
    def _resolved(cls, raw: dict) -> dict:
        # built alone (not through Params, which hands each section params.yaml's train keys): train's defaults
        return {**SharedStepParams.params_yaml, **raw}

    @model_validator(mode="after")
    def _fits_a_batch(self) -> StepParams:
        if self.accumulate > self.batch_size:
            raise ValueError(f"accumulate {self.accumulate} splits each batch of batch_size {self.batch_size} "
                             f"rows into micro-batches; it must be at most batch_size")
        return self


class TrainParams(StepParams):
    """How one model (teacher or student) is initialised and trained."""

    model: str
    trust_remote_code: bool
    seeds: int = Field(ge=1)  # seed optimisation: seeds seed .. seed+seeds-1, each stopped at seed_stop,
    seed_stop: float = Field(gt=0, lt=1)  # the fraction of training steps; the best on dev is finished
    soup: bool  # seeds > 1: train every seed to the end and average their weights (pldistill/train/wrappers.py)
    layers: tuple[int, ...] | None  # keep only these transformer layers of `model` (e.g. [0, 2, 4])
    # a bi-encoder's pair loss: cosine, MSE of the cosine to the score (Sentence-BERT) | cosent, the order of the
    # scores within each batch (CoSENT). A cross-encoder learns soft BCE: cosine there
    loss: Literal["cosine", "cosent"]
    # batches of pairs of similar length (pldistill.base.batching): auto, for loss cosine (a mean over pairs); CoSENT
    # compares a batch's pairs with one another, so auto leaves its batches random (and a static model's, unpadded)
    group_by_length: bool | Literal["auto"]

    _known_model = field_validator("model")(_model_spec)

    def grouped(self, padded: bool = True) -> bool:
        """Whether the pair training's batches are grouped by length (``group_by_length`` resolved); ``padded``:
        the model pads a batch to its longest input (a transformer; a static model sums token vectors)."""
        return self.loss == "cosine" and padded if self.group_by_length == "auto" else self.group_by_length

    @model_validator(mode="after")
    def _a_soup_of_seeds(self) -> TrainParams:
        if self.soup and self.seeds < 2:
            raise ValueError(f"soup averages the runs of several seeds; found seeds {self.seeds}: set seeds to 2 or "
                             f"more (3: three runs, three times the training time), or soup to false")
        return self

    @field_validator("layers")
    @classmethod
    def _distinct_layers(cls, v: tuple[int, ...] | str | None) -> tuple[int, ...] | str | None:
        if isinstance(v, tuple) and (not v or min(v) < 0 or len(set(v)) < len(v)):
            raise ValueError(f"expected distinct layer indices >= 0 (e.g. [0, 2, 4]) or null; found {list(v)}")
        return v


class StudentParams(TrainParams):
    """The student section: a TrainParams whose ``layers`` may be ``auto``, the cut chosen on dev
    (pldistill.students.cut)."""

    params_yaml = DEFAULTS["student"]
    layers: tuple[int, ...] | Literal["auto"] | None  # auto: the best cut of `keep` layers, chosen on dev
    keep: int = Field(ge=1)  # layers auto: how many transformer layers the chosen cut keeps
    # transformer: `model`, cut to `layers` | static: token vectors distilled from a transformer (section static;
    # pldistill/students/static.py), no transformer at run time
    kind: Literal["transformer", "static"]
    # after each pair training: the weights mixed with its start's where dev prefers a mix (WiSE-FT; pldistill.soup)
    wise: bool


class TeacherMember(TrainParams):
    """One teacher: what it is, whether it learns the gold pairs, and how its score meets the gold scale."""

    kind: str  # cross: a cross-encoder | bi: a bi-encoder (cosine of the two embeddings)
    finetune: bool  # false: used as given, no gold pair learned (a ready-made teacher, GPL's setting)
    calibrate: str  # auto: none when fine-tuned (its loss targets the gold scale), else linear
                             # linear: least squares on dev | isotonic: monotone fit on dev | none: clipped to [0, 1]

    _known_kind = field_validator("kind")(lambda v: _one_of(v, TEACHER_KINDS))
    _known_calibration = field_validator("calibrate")(lambda v: _one_of(v, CALIBRATIONS))

    @model_validator(mode="after")
    def _a_bi_encoder_s_loss(self) -> TeacherMember:
        if self.kind == "cross" and self.loss != "cosine":
            raise ValueError(f"loss {self.loss} is a bi-encoder's pair loss; a cross-encoder ({self.model}) learns "
                             "soft binary cross-entropy: set its loss to cosine (the default) or its kind to bi")
        return self

    @property
    def calibration(self) -> str:
        """The calibration method ``auto`` stands for."""
        if self.calibrate != "auto":
            return self.calibrate
        return "none" if self.finetune else "linear"


class TeacherParams(TeacherMember):
    """The teacher section: the first member, and ``members`` for an ensemble, or ``candidates``, teachers tried
    beside it of which the best on dev labels (each of them inherits every key it does not set from this section)."""

    params_yaml = DEFAULTS["teacher"]
    members: tuple[TeacherMember, ...]
    candidates: tuple[TeacherMember, ...]

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


STATIC_WEIGHTS = ("counts", "zipf", "none")


class StaticParams(_Section):
    """student.kind static (stage cut): the start distilled from a transformer, and the rates it learns at."""

    params_yaml = DEFAULTS["static"]
    # distilled from: auto, student.model | a bi-encoder spec (its vocabulary and its space) | a list of them, each
    # tried (stage cut: the best on dev after stage embed's step kept; a bundled one not installed skipped)
    model: str | tuple[str, ...]
    finetune: int = Field(ge=0)  # epochs `model` first learns the gold pairs (stage cut); 0: as given
    # PCA dimensions of the token vectors; null: the model's width | a list of them, each tried as `model`'s are
    dims: int | tuple[int | None, ...] | None
    weights: str  # SIF weights from: counts (stage embed's sentences) | zipf (vocabulary rank) | none
    sif: float = Field(gt=0)  # the SIF weight a / (a + p(token))
    words: int = Field(ge=0)  # frequent whole words of those sentences added to the vocabulary (0: none)
    lr: float = Field(gt=0)  # the pair training's learning rate (stages gold, distill), in place of student.lr
    seeds: int = Field(ge=1)  # the pair training's seeds, a soup where dev prefers it, in place of student.seeds
    embed_lr: float = Field(gt=0)  # stage embed's, in place of embed.lr
    token_weights: int = Field(ge=0)  # epochs a weight per token learns after the pair training (stage distill)
    token_weights_lr: float = Field(gt=0)  # their learning rate

    _known_weights = field_validator("weights")(lambda v: _one_of(v, STATIC_WEIGHTS))

    _known_model = field_validator("model")(lambda v: _each(v, "models", lambda m: m == "auto" or _model_spec(m)))
    _known_dims = field_validator("dims")(lambda v: _each(v, "dims", _one_dims))


def _each(v: object, what: str, check: Callable[[Any], object]) -> object:
    """``v``, one value or a list of distinct ones (candidates), each passed to ``check`` (which raises)."""
    if isinstance(v, tuple) and (not v or len(set(v)) < len(v)):
        raise ValueError(f"expected one value or a list of distinct {what}; found {list(v)}")
    for x in v if isinstance(v, tuple) else (v,):
        check(x)
    return v


def _one_dims(d: int | None) -> None:
    if d is not None and d < 2:
        raise ValueError(f"expected null or a number of dimensions of at least 2 (or a list of them); found {d}")


def _distinct(v: tuple[str, ...], allowed: tuple[str, ...], what: str, empty: bool) -> tuple[str, ...]:
    if any(x not in allowed for x in v) or len(set(v)) < len(v) or not (v or empty):
        raise ValueError(f"expected {'' if empty else 'one or more '}distinct {what} among {', '.join(allowed)}; "
                         f"found {list(v)}")
    return v


EMBED_LOSSES = ("mse", "sim", "mse+sim")
PROJECTIONS = ("auto", "pca", "none")
EMBED_SOURCES = ("train", "given", "paraphrases")
EMBED_VARIANT_OPS = ("drop", "crop", "splice", "swap")  # pldistill.data.variants.OPS


class EmbedParams(StepParams):
    """Embedding distillation (stage embed): the student learns the teacher's sentence embeddings before its pairs."""

    params_yaml = DEFAULTS["embed"]
    epochs: int = Field(ge=0)  # 0: off
    teacher: str | None  # whose embeddings: auto (a cut student: its whole model; else the stage teacher's)
                                  # | None, the stage teacher's bi-encoders | a bi-encoder spec
    corpus: str | None  # more plain sentences: auto (the dataset's own: the demo's) | a .txt | a `sentence` table
    max_corpus: int | None = Field(ge=1)  # at most this many corpus sentences (drawn with the seed)
    sources: tuple[str, ...]  # the task's sentences it learns: train pairs, given pairs, paraphrases
    # variants of each sentence learned beside it (pldistill.data.variants); 0: none; auto: pldistill.data.variants.AUTO
    # of
    # them for a step of fewer than AUTO_BELOW sentences, none above
    variants: Annotated[int, Field(ge=0)] | Literal["auto"]
    variant_ops: tuple[str, ...]  # how a variant is made, one drawn per variant: drop | crop | splice | swap
    loss: str  # mse: to the teacher's (projected) embedding | sim: in-batch cosine matrices | mse+sim
    sim_weight: float = Field(ge=0)  # the sim term's weight in mse+sim
    projection: str  # auto: none for equal widths, else pca | pca: onto the student's width | none
    batch_size: int = Field(ge=2)
    # batches of sentences of similar length (pldistill.base.batching): auto, for loss mse (a mean over sentences);
    # sim compares a batch's sentences with one another, so auto leaves its batches random
    group_by_length: bool | Literal["auto"]

    _known_loss = field_validator("loss")(lambda v: _one_of(v, EMBED_LOSSES))
    _known_projection = field_validator("projection")(lambda v: _one_of(v, PROJECTIONS))

    @property
    def grouped(self) -> bool:
        """Whether the embedding step's batches are grouped by length (``group_by_length`` resolved)."""
        return self.loss == "mse" if self.group_by_length == "auto" else self.group_by_length

    _known_sources = field_validator("sources")(lambda v: _distinct(v, EMBED_SOURCES, "sources", empty=True))
    _known_ops = field_validator("variant_ops")(lambda v: _distinct(v, EMBED_VARIANT_OPS, "ops", empty=False))

    @field_validator("corpus")
    @classmethod
    def _corpus_file(cls, v: str | None) -> str | None:
        if v == "auto":  # resolved by Params from data.dataset; a section built alone knows no dataset's sentences
            return None
        if v is None or format_suffix(v) in (".txt", *TABLE_SUFFIXES):  # compressed too: corpus.txt.gz
            return v
        raise ValueError(f"expected auto, null, a .txt (one sentence a line) or a table ({', '.join(TABLE_SUFFIXES)}) "
                         f"with a sentence column; found {v!r}")
