"""Recipe augsbert's params (section ``rounds``) and what it allows of the others (pldistill.recipes.spec)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from pldistill.defaults import DEFAULTS
from pldistill.params_base import _Section
from pldistill.recipes.spec import RecipeSpec


class RoundsParams(_Section):
    """recipe augsbert with cycles > 1 (pldistill.recipes.rounds): each cycle after the first, the student
    mines new pairs by semantic search with its own encoder, the teacher labels only those, the student learns on."""

    params_yaml = DEFAULTS["rounds"]
    pairs: int = Field(ge=1)  # new pairs kept per cycle, at most (a seeded draw when the search finds more)
    top_k: int = Field(ge=1, le=100)  # nearest neighbours of each pool sentence under the student
    epochs: int = Field(ge=1)  # the student's epochs in each cycle after the first (gold + every silver pair so far)


def rules(p: Any) -> None:
    if p.cycles > 1 and p.processes > 1:
        raise ValueError(
            f"cycles {p.cycles} of recipe augsbert run in one process (each cycle mines, labels and trains "
            f"in turn); found processes {p.processes}: set processes to 1, or cycles to 1"
        )


SPEC = RecipeSpec("augsbert", cycles="where the student mines new pairs each cycle", static_student=True, adapts=True,
                  student_loss=True, embed_start=True, rules=rules)
