"""``Recipe``: what a method trains, in stages teacher and distill. Its teacher is by default the supervised one
(Augmented SBERT and DSE share it): members fitted and calibrated on gold (pldistill.recipes.members). A recipe
overrides what it does differently; ``distill`` is its own. Stages label and evaluate follow the recipe's spec
instead (pldistill.teach.labelling.label, pldistill.teach.scoring). Also the parts recipes share."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from pldistill.base.io import SKIPPED_NOTE, atomic_dir, write_card, write_csv_rows, write_note_dir
from pldistill.models.encoders import PairModel
from pldistill.params.config import Params
from pldistill.params.train import TrainParams
from pldistill.recipes import members
from pldistill.teach.teachers import Teacher
from pldistill.train.training import FitResult

CYCLE_COLUMNS = ["cycle", "bi_dev", "bi_test", "cross_dev", "cross_test"]  # the score-per-cycle plot


@dataclass(frozen=True)
class DistillDirs:
    """Stage distill's inputs and outputs (dvc.yaml names them)."""

    clean: Path
    pairs: Path
    silver: Path
    teacher: Path
    pseudo: Path  # out: what the student learned, per cycle
    bi: Path  # out: the student
    cross: Path  # out: the cross-encoder, or a note
    curve: Path  # out: the student's dev curve
    cycles_plot: Path  # out: score per cycle
    embed: Path | None = None  # stage embed's student (models/embed), or a note when it made none


class Recipe:
    """One method's training side: stages teacher and distill call the method of the same name. What the scoring
    stages do for it (label, evaluate) its spec says (pldistill.params.recipes), so they import no recipe."""

    name: ClassVar[str]

    def teacher(self, params: Params, clean: Path, out: Path, curve: Path) -> dict:
        """Stage teacher: make the model(s) that label for the student; return the report."""
        return members.build(params, clean, out, curve)

    def distill(self, params: Params, dirs: DistillDirs) -> dict:
        """Stage distill: train the student(s); return the report."""
        raise NotImplementedError


def student_start(params: Params, embed: Path | None) -> TrainParams:
    """The student's training section, starting from stage embed's student when it made one (already
    pruned to student.layers, so no layer is dropped again)."""
    if embed is None or not embed.is_dir() or (embed / SKIPPED_NOTE).is_file():
        return params.student
    return params.student.model_copy(update={"model": str(embed), "layers": None})


def copy_dir(src: Path, dst: Path, card: str | None = None) -> None:
    """Copy a model directory whole; ``card`` replaces its README.md."""
    with atomic_dir(dst) as tmp:
        shutil.copytree(src, tmp, dirs_exist_ok=True)
        write_card(tmp, card)


def cycle_row(cycle: int, bi: dict | None, cross: dict | None) -> list:
    """One line of the score-per-cycle plot: Spearman x100 on dev and test (blank where no model)."""
    return [cycle, *(("" if b is None else b[s]["spearman"]) for b in (bi, cross) for s in ("dev", "test"))]


def teacher_as_cross(teacher: Teacher, path: Path, cross: Path) -> None:
    """models/cross: the teacher, when it is one cross-encoder; else a note pointing at models/teacher."""
    if teacher.cross_dir:
        copy_dir(path / teacher.cross_dir, cross)
    else:
        write_note_dir(cross, "the teacher is not one cross-encoder: " + "; ".join(m.describe for m in teacher.members)
                       + f". It lives in {path} (pldistill.teach.teachers.Teacher.load)")


def end_distill(dirs: DistillDirs, student: PairModel, card: str, res: FitResult, cross: Teacher | str,
                learned: Callable[[Path], None], cycles: Callable[[], list[list]]) -> None:
    """How a recipe that trains its student once ends stage distill: the student and its card (models/bi);
    models/cross (``cross``: the teacher, copied when it is one cross-encoder, or a note's text); what the
    student learned (data/pseudo: ``learned`` writes it into the folder being built); the score-per-cycle
    plot (``cycles()``: its rows, scored once the student is saved); the student's dev curve."""
    student.save(dirs.bi, card)
    if isinstance(cross, str):
        write_note_dir(dirs.cross, cross)
    else:
        teacher_as_cross(cross, dirs.teacher, dirs.cross)
    with atomic_dir(dirs.pseudo) as tmp:
        learned(tmp)
    write_csv_rows(dirs.cycles_plot, CYCLE_COLUMNS, cycles())
    res.write_curve(dirs.curve)
