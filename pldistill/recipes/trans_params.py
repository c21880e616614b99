"""Recipe trans-encoder's params (section ``trans``) and what it allows of the others (pldistill.recipes.spec)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import field_validator

from pldistill.defaults import DEFAULTS
from pldistill.params_base import PAIR_SPLITS, _model_spec, _Section
from pldistill.params_train import StepParams
from pldistill.recipes.spec import RecipeSpec


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


def rules(p: Any) -> None:
    s = p.sample
    if p.trans.sampled and "semantic" in s.strategy and s.semantic.encoder == "gold":
        raise ValueError(
            "trans.sampled with a semantic strategy would mine pairs with the `gold` encoder, which learned "
            "the gold scores, so the run would not be unsupervised; set sample.semantic.encoder to a model "
            "spec (e.g. bundled:all-MiniLM-L6-v2) or use sample.strategy bm25"
        )


SPEC = RecipeSpec("trans-encoder", cycles="where the bi- and cross-encoder label pairs for each other each cycle",
                  not_distributed="its cycles label and train inside stage distill, writing a store of finished "
                                  "steps as they go, which is not rank-aware",
                  teacher_members=False, teacher="cross", labels="distill", rules=rules)
