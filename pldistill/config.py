"""One typed configuration, loaded from params.yaml and validated before any heavy work.

Every section is a pydantic model with ``extra="forbid"``: an unknown or misspelt key stops the run
with a message naming the key, and a bad value names the key and what is allowed.

Configuration is plain data at the bottom of the import graph: it imports no registry. The names only a
registry knows (recipes, named datasets, sampling strategies, round-trip translation backends) come in as
``names`` (pldistill.validate hands over the registries' own), and are checked like any other value.

The sections live in two modules, both re-exported here: pldistill.params_base (what every section shares; data,
adapt, augment, sample, label, evaluate) and pldistill.params_train (the training sections). This module
assembles them into ``Params``, its cross-section rules, and the loading that names a bad key.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, ValidationError, field_validator, model_validator

from pldistill.errors import ConfigError
from pldistill.params_base import (  # noqa: F401  (the sections, re-exported: pldistill.config is their one door)
    BACKEND_EXTRAS,
    BACKEND_NEEDS,
    BACKENDS,
    BF16_AS_PRECISION,
    BUNDLED_MODELS,
    CALIBRATIONS,
    DISTRIBUTED_RECIPES,
    DISTRIBUTED_WHY,
    DSE_POOLINGS,
    FAISS_INDEXES,
    INFER_BATCH,
    PAIR_SPLITS,
    POSITIVES,
    PRECISIONS,
    TABLE_SUFFIXES,
    TASKS,
    TEACHER_KINDS,
    AdaptParams,
    AugmentParams,
    Backend,
    Bf16,
    BM25Params,
    DataParams,
    EvaluateParams,
    ExtraSet,
    InferenceParams,
    KDEParams,
    LabelParams,
    Names,
    RandomParams,
    RTTParams,
    SampleParams,
    SemanticParams,
    SplitParams,
    _infer_batch,
    _installed,
    _merged,
    _model_spec,
    _one_of,
    _registered,
    _Section,
    install_hint,
    is_table,
)
from pldistill.params_file import describe, read_params
from pldistill.params_train import (  # noqa: F401  (re-exported)
    EMBED_LOSSES,
    EMBED_SOURCES,
    PROJECTIONS,
    DSEParams,
    EmbedParams,
    EnsembleDistillParams,
    EnsembleParams,
    MutualModel,
    RoundsParams,
    StaticParams,
    StepParams,
    StudentParams,
    SubParams,
    TeacherMember,
    TeacherParams,
    TrainParams,
    TransParams,
)

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
    static: StaticParams = StaticParams()
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
        if self.student.kind == "static" and self.recipe != "augsbert":
            raise ValueError(
                f"student.kind static is a bi-encoder of token vectors, trained by recipe augsbert (stages gold, "
                f"embed, distill); recipe {self.recipe} needs a transformer student (its layers, or a cross-encoder "
                "side): set student.kind to transformer, or recipe to augsbert"
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


def parse_params(raw: dict, path: Path | str = "params.yaml", names: Names | None = None) -> Params:
    """Validate a params mapping; raise ConfigError naming every bad key. ``names``: the registries' names
    (pldistill.validate.names()); a key whose registry is not among them is checked for its type only."""
    try:
        return Params.model_validate(raw, context=names)
    except ValidationError as err:
        raise ConfigError(describe(err, Path(path), Params)) from None


def load_params(path: Path | str = "params.yaml", names: Names | None = None) -> Params:
    """params.yaml, validated (``names``: as parse_params)."""
    return parse_params(read_params(path), path, names)
