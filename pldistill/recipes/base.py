"""``Recipe``: what a method does at each stage. Its defaults are the supervised teacher's (Augmented
SBERT and DSE share them): stage teacher fits and calibrates the teacher members on gold, stage label has
the teacher label the candidate pairs, stage evaluate scores a bi-encoder student and the teacher.
A recipe overrides what it does differently; ``distill`` is its own. Also the parts recipes share."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import ClassVar

import torch

from pldistill import labelling, teachers
from pldistill.bundled import resolve
from pldistill.config import Params, TrainParams
from pldistill.device import bf16_auto
from pldistill.io import SKIPPED_NOTE, atomic_dir, sha256_file, write_card, write_csv_rows, write_note_dir
from pldistill.models import BiEncoder, PairModel
from pldistill.store import digest
from pldistill.teachers import Teacher
from pldistill.training import FitResult


def weights_digest(spec: str) -> str:
    """What identifies a model in a stored step's key: the hashes of every file of a local (or bundled) directory;
    for a hub id only its name (the hub may change a model behind a name; pin one by downloading it)."""
    path = Path(resolve(spec))
    if not path.is_dir():
        return f"hub:{spec}"
    return digest({f.relative_to(path).as_posix(): sha256_file(f) for f in sorted(path.rglob("*")) if f.is_file()})


def environment(packages: tuple[str, ...] = ()) -> dict:
    """What else a stored step depends on: library versions (``packages`` beyond the usual), device, bf16's
    decision (pldistill.device.bf16_auto)."""
    names = ("torch", "transformers", "sentence-transformers", "tokenizers", "numpy", *packages)
    return {"versions": {p: version(p) for p in names},
            "device": torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu",
            "bf16": bf16_auto()}


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
    """One method. Each stage calls the method of the same name (evaluate: ``student``, ``teacher_model``
    and ``teacher_blocks``)."""

    name: ClassVar[str]
    gold_logits: ClassVar[bool] = False  # stage label also labels the gold training pairs (a DSE student learns them)
    embed_start: ClassVar[bool] = False  # stage distill starts the student from stage embed's (models/embed)

    def teacher(self, params: Params, clean: Path, out: Path, curve: Path) -> dict:
        """Stage teacher: make the model(s) that label for the student; return the report."""
        return teachers.build(params, clean, out, curve)

    def label(self, params: Params, clean: Path, pairs: Path, teacher: Path, silver_dir: Path, density: Path) -> dict:
        """Stage label: the teacher's labels into ``silver_dir``; return the diagnostics."""
        return labelling.label_candidates(params, clean, pairs, teacher, silver_dir, density, self.gold_logits)

    def distill(self, params: Params, dirs: DistillDirs) -> dict:
        """Stage distill: train the student(s); return the report."""
        raise NotImplementedError

    def student(self, params: Params, bi: Path) -> BiEncoder:
        """Stage evaluate: the trained student, ready to ``score`` pairs."""
        return BiEncoder.load(str(bi), params.student.max_length)

    def teacher_model(self, params: Params, cross: Path, teacher: Path) -> Teacher:
        """Stage evaluate: the teacher, ready to ``score`` pairs."""
        return Teacher.load(teacher, params.teacher.max_length)

    def teacher_parts(self, teacher: Teacher) -> dict:
        """Stage evaluate: the teacher's parts scored on their own too (an ensemble's members), by block name."""
        return {f"member/{m.name}": m for m in teacher.members} if len(teacher.members) > 1 else {}

    def teacher_blocks(self, teacher: Teacher, block: Callable[[str], dict]) -> dict:
        """eval.json's teacher blocks: `cross` for one cross-encoder (as before teachers had kinds), else
        `teacher` and, with several members, each member's under `members`."""
        if teacher.single_cross:
            return {"cross": block("cross")}
        members = {name.removeprefix("member/"): block(name) for name in self.teacher_parts(teacher)}
        return {"teacher": block("cross"), **({"members": members} if members else {})}


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
                       + f". It lives in {path} (pldistill.teachers.Teacher.load)")


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
