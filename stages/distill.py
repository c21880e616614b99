"""distill: the teacher labels the candidate pairs (one cycle), then the bi-encoder student learns
from gold + silver; writes data/pseudo/cycle-01.parquet, models/bi and models/cross."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import numpy as np
import pandas as pd

from pldistill import schemas
from pldistill.config import Params
from pldistill.io import atomic_dir, sha256_file, write_json
from pldistill.models import BiEncoder, CrossModel
from pldistill.runtime import run_stage, seed_all
from pldistill.training import dev_spearman, fit


def label(teacher: CrossModel, pairs: pd.DataFrame, params: Params, cycle: int, labeller: str) -> pd.DataFrame:
    """The teacher's logit and sigmoid score for every candidate pair."""
    logits = teacher.logits(pairs["sentence1"], pairs["sentence2"], params.label.batch_size, params.label.bf16,
                            progress=True).astype(np.float64)
    out = pairs.copy()
    out["logit"] = logits
    out["score"] = 1 / (1 + np.exp(-logits))
    out["labeller"] = labeller
    out["cycle"] = cycle
    return out


def distill(params: Params, clean: Path, pairs: Path, teacher: Path, pseudo: Path, bi: Path, cross: Path,
            report: Path, curve: Path) -> dict:
    """Label, then train the student bi-encoder with a cosine-similarity MSE on gold + silver."""
    _, gen = seed_all(params.seed)
    gold = schemas.read(clean / "train.parquet", schemas.PAIRS)
    dev = schemas.read(clean / "dev.parquet", schemas.PAIRS)
    cands = schemas.read(pairs / schemas.CANDIDATES_FILE, schemas.CANDIDATES)

    cycle = 1
    silver = pd.DataFrame(columns=schemas.PSEUDO.names)
    label_seconds = 0.0
    if len(cands):
        teacher_model = CrossModel.load(str(teacher), params.teacher.max_length, params.teacher.trust_remote_code)
        # Which teacher: its starting spec and the fine-tuned weights' hash (two teachers never share an id).
        labeller = f"cross:{params.teacher.model}@{sha256_file(teacher / 'model.safetensors')[:12]}"
        t0 = time.perf_counter()
        silver = label(teacher_model, cands, params, cycle, labeller)
        label_seconds = time.perf_counter() - t0
    schemas.write(pseudo / schemas.pseudo_file(cycle), silver, schemas.PSEUDO)

    sp = params.student
    student = BiEncoder.load(sp.model, sp.max_length, sp.trust_remote_code)
    s1 = [*gold["sentence1"], *silver["sentence1"]]
    s2 = [*gold["sentence2"], *silver["sentence2"]]
    y = [*gold["score"], *silver["score"]]
    res = fit(student.module, student.cosine_mse_loss, s1, s2, y, dev_spearman(student, dev, params.evaluate), sp, gen,
              desc="student")
    student.save(bi)
    with atomic_dir(cross) as tmp:  # the teacher is this recipe's selected cross-encoder
        shutil.copytree(teacher, tmp, dirs_exist_ok=True)
    res.write_curve(curve)
    result = {
        "cycle": cycle, "gold_pairs": len(gold), "silver_pairs": len(silver),
        "label_seconds": round(label_seconds, 1),
        "label_pairs_per_s": round(len(silver) / label_seconds, 1) if len(silver) else None,
        "silver_score_mean": round(float(silver["score"].mean()), 4) if len(silver) else None,
        **res.summary(),
    }
    write_json(report, result)
    return result


if __name__ == "__main__":
    run_stage(distill, ["clean", "pairs", "teacher", "pseudo", "bi", "cross", "report", "curve"])
