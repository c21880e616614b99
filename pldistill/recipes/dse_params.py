"""Recipe dse's params (section ``dse``) and what it allows of the others (pldistill.recipes.spec)."""

from __future__ import annotations

from pydantic import Field, field_validator

from pldistill.defaults import DEFAULTS
from pldistill.params_base import _one_of
from pldistill.params_train import StepParams
from pldistill.recipes.spec import RecipeSpec

DSE_POOLINGS = ("last4", "mean", "cls")


class DSEParams(StepParams):
    """recipe dse: the student and its training (the paper, STS-B: batch 32, lr 1e-5, 8 epochs)."""

    params_yaml = DEFAULTS["dse"]
    alpha: float = Field(ge=0, le=1)  # weight of the teacher-logit term; 1 - alpha on the gold label
    pooling: str  # last4: token means of the last four layers without [CLS] | mean | cls
    hidden: int = Field(ge=1)  # the head's hidden layer
    head_lr: float = Field(gt=0)  # the new head's learning rate (the encoder uses lr)

    _known_pooling = field_validator("pooling")(lambda v: _one_of(v, DSE_POOLINGS))


SPEC = RecipeSpec("dse", student="dse", labels="pairs+gold", embed_start=True)
