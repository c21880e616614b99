"""gold: the bi-encoder trained on the gold pairs only (SBERT, the paper's baseline), which is also the
default encoder for semantic-search sampling. Under domain adaptation it learns the source domain's
gold pairs: the source-only baseline the adapted student is compared with."""

from __future__ import annotations

from pathlib import Path

from pldistill.base import cards, schemas
from pldistill.base.io import write_report
from pldistill.data.datasets import gold_dir
from pldistill.params.config import Params, load_params
from pldistill.run import distributed
from pldistill.run.runtime import main
from pldistill.students.cut import resolve
from pldistill.train.stage_training import TRAINING
from pldistill.train.wrappers import train_model


def gold(params: Params, clean: Path, out: Path, report: Path, curve: Path, cut: Path | None = None) -> dict:
    """Train ``student.model`` (cut as stage cut chose) on the gold training pairs with the student's settings;
    write models/gold."""
    params = resolve(params, cut, trains="student")
    distributed.join(params.processes)
    where = gold_dir(params, clean)
    train = schemas.read(where / "train.parquet", schemas.PAIRS)
    dev = schemas.read(where / "dev.parquet", schemas.PAIRS)
    model, res = train_model(params.student, params.evaluate, list(train["sentence1"]), list(train["sentence2"]),
                             list(train["score"]), dev, params.seed, desc="gold bi-encoder",
                             wise=params.student.wise)
    if not distributed.is_main():  # its share of the training done; rank 0 writes
        return {}
    sp = params.student
    source = params.adapt.data
    model.save(out, cards.card(
        "Source-only bi-encoder (SBERT)" if source else "Gold-only bi-encoder (SBERT)", "bi", sp.model, {
            "dataset": source.name if source else params.data.name, "gold pairs": len(train),
            "loss": "MSE of the cosine to the gold score", **cards.fit_facts(res.summary(), sp), "seed": params.seed},
        f"Trained on the source domain's gold pairs alone: the baseline for adapting to {params.data.name}."
        if source else "The Augmented-SBERT baseline: the bi-encoder trained on the gold pairs alone."))
    res.write_curve(curve)
    result = {"model": params.student.model, "train_pairs": len(train),
              **({"adapt": source.name} if source else {}), **res.summary()}
    write_report(report, result)
    return result


if __name__ == "__main__":
    main(gold, ["clean", "out", "report", "curve", "cut"], kind=TRAINING, load=load_params)
