"""gold: the bi-encoder trained on the gold pairs only (SBERT, the paper's baseline), which is also the
default encoder for semantic-search sampling."""

from __future__ import annotations

from pathlib import Path

from pldistill import cards, schemas
from pldistill.config import Params
from pldistill.io import write_json
from pldistill.runtime import run_stage, seed_all
from pldistill.training import train_bi_encoder


def gold(params: Params, clean: Path, out: Path, report: Path, curve: Path) -> dict:
    """Train ``student.model`` on the gold training pairs with the student's settings; write models/gold."""
    _, gen = seed_all(params.seed)
    train = schemas.read(clean / "train.parquet", schemas.PAIRS)
    dev = schemas.read(clean / "dev.parquet", schemas.PAIRS)
    model, res = train_bi_encoder(params.student, params.evaluate, list(train["sentence1"]),
                                  list(train["sentence2"]), list(train["score"]), dev, gen, desc="gold bi-encoder")
    sp = params.student
    model.save(out, cards.card("Gold-only bi-encoder (SBERT)", "bi", sp.model, {
        "dataset": params.data.name, "gold pairs": len(train), "loss": "MSE of the cosine to the gold score",
        **cards.fit_facts(res.summary(), sp), "seed": params.seed},
        "The Augmented-SBERT baseline: the bi-encoder trained on the gold pairs alone."))
    res.write_curve(curve)
    result = {"model": params.student.model, "train_pairs": len(train), **res.summary()}
    write_json(report, result)
    return result


if __name__ == "__main__":
    run_stage(gold, ["clean", "out", "report", "curve"])
