"""What stage evaluate loads to score, by the recipe's spec (pldistill.params.recipes: ``student`` and ``teacher``
kinds): the student, the teacher, the teacher's parts scored on their own too, and eval.json's teacher blocks.
Loaders only: no recipe and no training code, so stage evaluate stays cached when training changes."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pldistill.models.dse import DSE
from pldistill.models.encoders import BiEncoder, CrossModel, PairModel
from pldistill.params.config import Params
from pldistill.params.recipes import SPECS
from pldistill.teach.ensemble import Ensemble
from pldistill.teach.teachers import Teacher

Block = Callable[[str], dict]  # a scored model's name -> its block of eval.json


def _member_parts(teacher: Teacher) -> dict:
    return {f"member/{m.name}": m for m in teacher.members} if len(teacher.members) > 1 else {}


def _member_blocks(teacher: Teacher, block: Block) -> dict:
    # one cross-encoder: `cross` (as before teachers had kinds); else `teacher` and each member's under `members`
    if teacher.single_cross:
        return {"cross": block("cross")}
    members = {name.removeprefix("member/"): block(name) for name in _member_parts(teacher)}
    return {"teacher": block("cross"), **({"members": members} if members else {})}


@dataclass(frozen=True)
class TeacherKind:
    """How evaluate loads one kind of teacher (from models/cross or models/teacher), which parts it scores on their
    own, and the blocks eval.json reports them in."""

    load: Callable[[Params, Path, Path], object]  # (params, cross, teacher) -> a model that scores pairs
    parts: Callable[[object], dict]  # the teacher -> {block name: model}
    blocks: Callable[[object, Block], dict]  # the teacher, block -> eval.json's teacher blocks


TEACHERS: dict[str, TeacherKind] = {
    "members": TeacherKind(lambda p, cross, teacher: Teacher.load(teacher, p.teacher.max_length), _member_parts,
                           _member_blocks),
    # trans-encoder: the cross-encoder its cycles selected
    "cross": TeacherKind(lambda p, cross, teacher: CrossModel.load(str(cross), p.teacher.max_length),
                         lambda t: {}, lambda t, block: {"cross": block("cross")}),
    # rtt-ensemble: `ensemble` (the teacher) and `submodels`, one block each
    "ensemble": TeacherKind(
        lambda p, cross, teacher: Ensemble.load(teacher, p.ensemble.weights, p.ensemble.weight_temperature,
                                                p.teacher.max_length),
        lambda t: {f"sub/{n}": m for n, m in zip(t.names, t.members)},
        lambda t, block: {"ensemble": block("cross"), "submodels": {n: block(f"sub/{n}") for n in t.names}}),
}

STUDENTS: dict[str, Callable[[Params, Path], PairModel]] = {
    "bi": lambda p, bi: BiEncoder.load(str(bi), p.student.max_length),
    "dse": lambda p, bi: DSE.load(bi),  # scores pairs through its head, at its training length
}


def student(params: Params, bi: Path) -> PairModel:
    """The trained student (models/bi), ready to ``score`` pairs."""
    return STUDENTS[SPECS[params.recipe].student](params, bi)


def teacher_kind(params: Params) -> TeacherKind:
    """How the recipe's teacher is loaded, split into parts and reported."""
    return TEACHERS[SPECS[params.recipe].teacher]
