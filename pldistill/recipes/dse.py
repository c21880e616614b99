"""Distilled Sentence Embedding (Barkan et al., 2020): a bi-encoder student with a small learned
similarity head over [u, v, u*v, |u-v|] (pldistill.models.dse) learns the teacher's logits on every pair, mixed
with the gold labels on the gold pairs (weight dse.alpha). Its teacher and labels are the supervised
defaults, plus the teacher's logits on the gold pairs (stage label)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from pldistill.base import cards, schemas
from pldistill.base.metrics import split_scores
from pldistill.base.seeding import seed_all
from pldistill.data.datasets import task_of
from pldistill.models.dse import DSE
from pldistill.params.config import Params
from pldistill.recipes.base import DistillDirs, Recipe, cycle_row, end_distill, student_start
from pldistill.run import distributed
from pldistill.teach.teachers import Teacher
from pldistill.train.losses.dse import DSELoss
from pldistill.train.training import train


def dse_rows(gold: pd.DataFrame, on_gold: pd.DataFrame, labelled: pd.DataFrame, gold_file: Path,
             silver: Path) -> pd.DataFrame:
    """Gold pairs (with their teacher logits and gold scores), then silver pairs (gold NaN)."""
    logits_file = silver / schemas.GOLD_LOGITS_FILE
    same = len(on_gold) == len(gold) and all((on_gold[c].to_numpy() == gold[c].to_numpy()).all()
                                             for c in ("sentence1", "sentence2"))
    if not same:
        raise schemas.SchemaError(f"{logits_file}: does not follow {gold_file} row by row; rerun stage label "
                                  "(`dvc repro -f -s label`)")
    for name, df in ((logits_file, on_gold), (silver / schemas.SILVER_FILE, labelled)):
        if df["logit"].isna().any():
            raise schemas.SchemaError(f"{name}: column 'logit' has {int(df['logit'].isna().sum())} null value(s); "
                                      "DSE learns the teacher's logit for every pair")
    return pd.concat([on_gold.assign(gold=gold["score"].to_numpy()), labelled.assign(gold=np.nan)], ignore_index=True)


class DSERecipe(Recipe):
    name = "dse"

    def distill(self, params: Params, dirs: DistillDirs) -> dict:
        dp = params.dse
        _, gen = seed_all(params.seed)  # also the head's init
        gold = schemas.read(dirs.clean / "train.parquet", schemas.PAIRS)
        scored = {s: schemas.read(dirs.clean / f"{s}.parquet", schemas.PAIRS) for s in ("dev", "test")}
        on_gold = schemas.read(dirs.silver / schemas.GOLD_LOGITS_FILE, schemas.PSEUDO)
        labelled = schemas.read(dirs.silver / schemas.SILVER_FILE, schemas.PSEUDO)
        rows = dse_rows(gold, on_gold, labelled, dirs.clean / "train.parquet", dirs.silver)
        target = rows[["logit", "gold"]].to_numpy(dtype=np.float32)  # (pairs, 2): teacher logit, gold or NaN
        sp = student_start(params, dirs.embed)
        student = DSE.create(sp.model, dp.pooling, dp.hidden, dp.max_length, sp.trust_remote_code, sp.layers)
        task = task_of(params.data, gold)
        loss = DSELoss(student.st, student.head, student.pooling, dp.alpha, task)  # the head trains in the loss
        res = train(student, loss, (list(rows["sentence1"]), list(rows["sentence2"])),
                    target, scored["dev"], dp, params.evaluate, gen, desc="dse student",
                    lr_by_prefix={"head": dp.head_lr})
        if not distributed.is_main():  # its share of the training done; rank 0 writes
            return {}
        card = cards.card("DSE student", "bi", params.student.model, {
            "dataset": params.data.name, "gold pairs": len(gold), "silver pairs": len(labelled), "alpha": dp.alpha,
            "pooling": dp.pooling, "head": f"[u, v, u*v, |u-v|] -> {dp.hidden} (ReLU) -> logit",
            "loss": "alpha (S - T)^2 + (1 - alpha) loss on gold; (S - T)^2 on silver",
            **cards.fit_facts(res.summary(), dp), "seed": params.seed},
            "A Distilled Sentence Embedding student. Load it with `pldistill.models.dse.DSE.load(path)` to score pairs "
            "through its learned head (from cached embeddings); plain `SentenceTransformer(path)` loads the "
            "encoder alone, with mean pooling and cosine.")
        teacher, ep = Teacher.load(dirs.teacher, params.teacher.max_length), params.evaluate
        # what the student learned: the teacher's logits on gold and silver
        end_distill(dirs, student, card, res, teacher,
                    lambda tmp: schemas.write(tmp / schemas.pseudo_file(1), rows.drop(columns="gold"), schemas.PSEUDO),
                    lambda: [cycle_row(1, split_scores(student, scored, ep), split_scores(teacher, scored, ep))])
        return {"recipe": self.name, "alpha": dp.alpha, "pooling": dp.pooling, "head_dim": student.head.dim,
                "gold_pairs": len(gold), "silver_pairs": len(labelled), **res.summary()}


RECIPE = DSERecipe()
