"""Recipe rtt-ensemble's params (section ``ensemble``) and what it allows of the others
(pldistill.recipes.spec)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator

from pldistill.defaults import DEFAULTS
from pldistill.params_base import _one_of, _Section
from pldistill.params_train import StepParams
from pldistill.recipes.spec import RecipeSpec

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


def rules(p: Any) -> None:
    if p.ensemble.positives == "rtt" and p.augment.rtt.backend == "none":
        raise ValueError(
            "ensemble.positives rtt contrasts each sentence with its round-trip paraphrase, but "
            "augment.rtt.backend is none; set it to marian or table, or use ensemble.positives dropout"
        )


SPEC = RecipeSpec("rtt-ensemble", not_distributed="InfoNCE's in-batch negatives would see only a rank's slice of "
                                                   "each batch",
                  teacher_members=False, teacher="ensemble", labels="embeddings", rules=rules)
