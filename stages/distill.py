"""distill: the bi-encoder student learns from gold + the teacher's silver labels; writes models/bi and
models/cross (for augsbert, the teacher itself)."""

from __future__ import annotations

import shutil
from pathlib import Path

from pldistill import schemas
from pldistill.config import Params
from pldistill.io import atomic_dir, write_json
from pldistill.runtime import run_stage, seed_all
from pldistill.training import train_bi_encoder


def distill(params: Params, clean: Path, pseudo: Path, teacher: Path, bi: Path, cross: Path, report: Path,
            curve: Path) -> dict:
    """Train the student bi-encoder with a cosine-similarity MSE on gold + silver."""
    _, gen = seed_all(params.seed)
    gold = schemas.read(clean / "train.parquet", schemas.PAIRS)
    dev = schemas.read(clean / "dev.parquet", schemas.PAIRS)
    cycle = 1
    silver = schemas.read(pseudo / schemas.pseudo_file(cycle), schemas.PSEUDO)
    s1 = [*gold["sentence1"], *silver["sentence1"]]
    s2 = [*gold["sentence2"], *silver["sentence2"]]
    y = [*gold["score"], *silver["score"]]
    student, res = train_bi_encoder(params.student, params.evaluate, s1, s2, y, dev, gen, desc="student")
    student.save(bi)
    with atomic_dir(cross) as tmp:  # the teacher is this recipe's selected cross-encoder
        shutil.copytree(teacher, tmp, dirs_exist_ok=True)
    res.write_curve(curve)
    result = {"cycle": cycle, "gold_pairs": len(gold), "silver_pairs": len(silver), **res.summary()}
    write_json(report, result)
    return result


if __name__ == "__main__":
    run_stage(distill, ["clean", "pseudo", "teacher", "bi", "cross", "report", "curve"])
