"""Every recipe's params: its own section and its ``RecipeSpec`` (its section's name and model, the keys of it each
stage reads, what it allows of the other sections, its rules, and the kinds the scoring stages follow:
pldistill.teach.scoring, pldistill.teach.labelling.label), all plain data, so pldistill.params.config checks a run
against its recipe without importing any recipe's code. ``SPECS``: each recipe's spec by name, in the order
params.yaml writes their sections; ``RECIPES``: their names, the first the default.

Adding a recipe takes four places (docs/layout.md, "Where to add"; tests/test_recipes.py adds a toy one): its
section and spec here, listed in ``SPECS``; ``recipes/<name>.py``; its entry in pldistill/recipes/registry.py; its
section in params.yaml. What follows from them is derived: ``RECIPES``, the field of pldistill.params.config.Params
(from the spec's ``section`` and ``params``), the defaults (``python scripts/params_doc.py``) and dvc.yaml's params
keys of the section (from the spec's ``reads``, ``python scripts/stage_deps.py --write``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import Field, field_validator

from pldistill.params.data import PAIR_SPLITS, _one_of, _Section
from pldistill.params.defaults import DEFAULTS
from pldistill.params.sections import _model_spec
from pldistill.params.train import StepParams


def _no_rules(params: Any) -> None:
    return None


@dataclass(frozen=True)
class RecipeSpec:
    name: str
    # its own section of params.yaml (a Params field of this name and type, pldistill.params.config); None: it has none
    section: str | None = None
    params: type[_Section] | None = None
    # stage -> the keys of its section the stage reads (() : the whole section), which dvc.yaml tracks
    # (scripts/stage_deps.py --write; tests/test_params_tracking.py checks them against what the stages read)
    reads: Mapping[str, tuple[str, ...]] = field(default_factory=dict, compare=False)  # (a spec stays hashable)
    cycles: str | None = None  # what one of its cycles does, where cycles > 1 runs; None: it labels once, trains once
    not_distributed: str | None = None  # None: runs on several processes (`processes`); else why it does not yet
    static_student: bool = False  # trains a student.kind static
    adapts: bool = False  # adapt.dataset (domain adaptation) applies
    student_loss: bool = False  # its student learns by student.loss (else by its own section's loss)
    teacher_members: bool = True  # teacher.members and teacher.layers apply (False: teacher.model is a start only)
    # what the scoring stages load and do, by kind (pldistill.teach.scoring, pldistill.teach.labelling), so they import
    # no recipe
    student: str = "bi"  # bi: a bi-encoder student (models/bi) | dse: a DSE student, scored through its head
    teacher: str = "members"  # members: a Teacher (models/teacher) | cross: models/cross | ensemble: an Ensemble
    labels: str = "pairs"  # stage label: pairs | pairs+gold (the gold pairs' logits too) | distill (labels there) |
    # embeddings (the ensemble embeds the sentences the student learns)
    embed_start: bool = False  # stage distill starts the student from stage embed's (models/embed)
    # its own checks across sections, given the whole config (pldistill.params.config.Params, which imports this module,
    # so it is not named here): a ValueError naming the keys
    rules: Callable[[Any], None] = _no_rules


# -- augsbert (section rounds) ------------------------------------------------------------------------------------
class RoundsParams(_Section):
    """recipe augsbert with cycles > 1 (pldistill.recipes.rounds): each cycle after the first, the student
    mines new pairs by semantic search with its own encoder, the teacher labels only those, the student learns on."""

    params_yaml = DEFAULTS["rounds"]
    pairs: int = Field(ge=1)  # new pairs kept per cycle, at most (a seeded draw when the search finds more)
    top_k: int = Field(ge=1, le=100)  # nearest neighbours of each pool sentence under the student
    epochs: int = Field(ge=1)  # the student's epochs in each cycle after the first (gold + every silver pair so far)


def _augsbert_rules(p: Any) -> None:
    if p.cycles > 1 and p.processes > 1:
        raise ValueError(
            f"cycles {p.cycles} of recipe augsbert run in one process (each cycle mines, labels and trains "
            f"in turn); found processes {p.processes}: set processes to 1, or cycles to 1"
        )


AUGSBERT_SPEC = RecipeSpec("augsbert", "rounds", RoundsParams, {"distill": ()},
                           cycles="where the student mines new pairs each cycle", static_student=True, adapts=True,
                           student_loss=True, embed_start=True, rules=_augsbert_rules)


# -- trans-encoder (section trans) ------------------------------------------------------------------------------
class MutualModel(_Section):
    """One more model pair for mutual distillation: a starting bi-encoder and a cross-encoder base."""

    bi: str
    cross: str | None = None  # null: the same spec as `bi` (the paper starts it from the base language model)

    _known_models = field_validator("bi", "cross")(lambda v: v if v is None else _model_spec(v))


class TransParams(_Section):
    """recipe trans-encoder: the bi- and cross-encoder label the pairs for each other, `cycles` times."""

    params_yaml = DEFAULTS["trans"]
    init: Literal["refresh", "sequential"]
    splits: tuple[str, ...]  # whose pairs (labels dropped) are learned; drop test: inductive
    sampled: bool  # also learn the pairs stage `sample` found
    target: Literal["clip", "affine"]  # cosine -> [0, 1]: clip(c, 0, 1) or (c + 1) / 2
    mutual: tuple[MutualModel, ...]  # extra model pairs; labels are the mean of all pairs' predictions
    # the paper's Table 16: bi -> cross, soft BCE (lr 2e-5, batch 32, 1 epoch, length 64); cross -> bi, cosine MSE
    # (lr 5e-5, batch 128, 10 epochs, length 32)
    cross: StepParams
    bi: StepParams

    @field_validator("splits")
    @classmethod
    def _known_splits(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        bad = [s for s in v if s not in PAIR_SPLITS]
        if bad or not v or len(set(v)) < len(v):
            raise ValueError(f"expected distinct splits among {', '.join(PAIR_SPLITS)}; found {list(v)}")
        return v


def _trans_rules(p: Any) -> None:
    s = p.sample
    if p.trans.sampled and "semantic" in s.strategy and s.semantic.encoder == "gold":
        raise ValueError(
            "trans.sampled with a semantic strategy would mine pairs with the `gold` encoder, which learned "
            "the gold scores, so the run would not be unsupervised; set sample.semantic.encoder to a model "
            "spec (e.g. bundled:all-MiniLM-L6-v2) or use sample.strategy bm25"
        )


TRANS_SPEC = RecipeSpec("trans-encoder", "trans", TransParams, {"distill": ()},
                        cycles="where the bi- and cross-encoder label pairs for each other each cycle",
                        not_distributed="its cycles label and train inside stage distill, writing a store of finished "
                                        "steps as they go, which is not rank-aware",
                        teacher_members=False, teacher="cross", labels="distill", rules=_trans_rules)


# -- dse (section dse) ------------------------------------------------------------------------------------------
DSE_POOLINGS = ("last4", "mean", "cls")


class DSEParams(StepParams):
    """recipe dse: the student and its training (the paper, STS-B: batch 32, lr 1e-5, 8 epochs)."""

    params_yaml = DEFAULTS["dse"]
    alpha: float = Field(ge=0, le=1)  # weight of the teacher-logit term; 1 - alpha on the gold label
    pooling: str  # last4: token means of the last four layers without [CLS] | mean | cls
    hidden: int = Field(ge=1)  # the head's hidden layer
    head_lr: float = Field(gt=0)  # the new head's learning rate (the encoder uses lr)

    _known_pooling = field_validator("pooling")(lambda v: _one_of(v, DSE_POOLINGS))


DSE_SPEC = RecipeSpec("dse", "dse", DSEParams, {"distill": ()}, student="dse", labels="pairs+gold", embed_start=True)


# -- rtt-ensemble (section ensemble) ---------------------------------------------------------------------------
POSITIVES = ("dropout", "rtt")  # what a sentence is contrasted with


class SubParams(StepParams):
    """rtt-ensemble: one contrastive sub-model (SimCSE, unsupervised: batch 64, lr 3e-5, length 32, 1 epoch)."""

    params_yaml = DEFAULTS["ensemble"]["sub"]
    batch_size: int = Field(ge=2)  # in-batch negatives: batch - 1 per sentence
    temperature: float = Field(gt=0)  # InfoNCE temperature (SimCSE, and the paper: 0.05)

    @field_validator("accumulate")
    @classmethod
    def _whole_batches(cls, v: int) -> int:
        if v != 1:  # each row's negatives are the rest of its batch: micro-batches would change the loss
            raise ValueError(f"InfoNCE takes its negatives from the whole batch, so micro-batches would change the "
                             f"loss; expected 1, found {v} (lower batch_size instead)")
        return v


class EnsembleDistillParams(SubParams):
    """rtt-ensemble: the student learns the ensemble's embeddings, (1 - w) MAE + w InfoNCE (the paper's Eq. 3)."""

    params_yaml = DEFAULTS["ensemble"]["distill"]
    infonce_weight: float = Field(ge=0, le=1)  # the paper's lambda


class EnsembleParams(_Section):
    """recipe rtt-ensemble: K contrastive sub-models, their (weighted) mean as teacher, one student."""

    params_yaml = DEFAULTS["ensemble"]
    positives: str  # dropout: the sentence itself under another dropout mask | rtt: its paraphrase
    k: int = Field(ge=1)  # dropout: number of sub-models (seeds seed+1 .. seed+k); rtt: one per language
    weights: Literal["mean", "softmax"]  # softmax: of the sub-models' dev Spearman (points) / temperature
    weight_temperature: float = Field(gt=0)
    sub: SubParams
    distill: EnsembleDistillParams

    _known_positives = field_validator("positives")(lambda v: _one_of(v, POSITIVES))


def _ensemble_rules(p: Any) -> None:
    if p.ensemble.positives == "rtt" and p.augment.rtt.backend == "none":
        raise ValueError(
            "ensemble.positives rtt contrasts each sentence with its round-trip paraphrase, but "
            "augment.rtt.backend is none; set it to marian or table, or use ensemble.positives dropout"
        )


ENSEMBLE_SPEC = RecipeSpec("rtt-ensemble", "ensemble", EnsembleParams,
                           # sub: the sub-models' training, handed whole to the trainer; weights: how they are averaged
                           {"teacher": ("positives", "k", "sub"), "label": ("weights", "weight_temperature"),
                            "distill": ("distill",), "evaluate": ("weights", "weight_temperature")},
                           not_distributed="InfoNCE's in-batch negatives would see only a rank's slice of each batch",
                           teacher_members=False, teacher="ensemble", labels="embeddings", rules=_ensemble_rules)


SPECS: dict[str, RecipeSpec] = {s.name: s for s in (AUGSBERT_SPEC, TRANS_SPEC, DSE_SPEC, ENSEMBLE_SPEC)}
RECIPES = tuple(SPECS)  # params.recipe's values; the first is the default


def named(test: Callable[[RecipeSpec], object]) -> str:
    """The recipes whose spec passes ``test``, as a message lists them ("augsbert and dse")."""
    return " and ".join(name for name, spec in SPECS.items() if test(spec))
