"""What a recipe allows of the params beyond its own section, as data at the bottom of the import graph: each
recipe's params module (``pldistill/recipes/<recipe>_params.py``) holds its section and a ``RecipeSpec``, and
pldistill.config checks a run's params against the spec of its recipe without importing any recipe's code."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


def _no_rules(params: Any) -> None:
    return None


@dataclass(frozen=True)
class RecipeSpec:
    name: str
    cycles: str | None = None  # what one of its cycles does, where cycles > 1 runs; None: it labels once, trains once
    not_distributed: str | None = None  # None: runs on several processes (`processes`); else why it does not yet
    static_student: bool = False  # trains a student.kind static
    adapts: bool = False  # adapt.dataset (domain adaptation) applies
    student_loss: bool = False  # its student learns by student.loss (else by its own section's loss)
    teacher_members: bool = True  # teacher.members and teacher.layers apply (False: teacher.model is a start only)
    # what the scoring stages load and do, by kind (pldistill.scoring, pldistill.labelling), so they import no recipe
    student: str = "bi"  # bi: a bi-encoder student (models/bi) | dse: a DSE student, scored through its head
    teacher: str = "members"  # members: a Teacher (models/teacher) | cross: models/cross | ensemble: an Ensemble
    labels: str = "pairs"  # stage label: pairs | pairs+gold (the gold pairs' logits too) | distill (labels there) |
    # embeddings (the ensemble embeds the sentences the student learns)
    embed_start: bool = False  # stage distill starts the student from stage embed's (models/embed)
    # its own checks across sections, given the whole config (pldistill.config.Params, which imports this module,
    # so it is not named here): a ValueError naming the keys
    rules: Callable[[Any], None] = _no_rules
