"""teacher: fine-tune a cross-encoder on the gold training pairs (both orders), selected on dev; under
domain adaptation, on the source domain's gold pairs and dev.

recipe rtt-ensemble: train the ensemble's contrastive sub-models instead (pldistill.ensemble)."""

from __future__ import annotations

import sys
from pathlib import Path

from pldistill import cards, ensemble, schemas
from pldistill.config import Params
from pldistill.io import write_csv_rows, write_json, write_note_dir
from pldistill.datasets import gold_dir
from pldistill.runtime import run_stage
from pldistill.training import train_cross_encoder


def teacher(params: Params, clean: Path, out: Path, report: Path, curve: Path) -> dict:
    """Train the Augmented-SBERT teacher: a cross-encoder with soft BCE on scores in [0, 1]."""
    if params.recipe == "trans-encoder":  # unsupervised: no cross-encoder may learn the gold scores
        return skip(out, report, curve, "recipe trans-encoder trains its cross-encoders in stage distill, without gold labels")
    if params.recipe == "rtt-ensemble":
        return sub_models(params, clean, out, report, curve)
    where = gold_dir(params, clean)  # the source domain's, under domain adaptation
    train = schemas.read(where / "train.parquet", schemas.PAIRS)
    dev = schemas.read(where / "dev.parquet", schemas.PAIRS)
    tp = params.teacher
    # Both orders: a cross-encoder sees "a [SEP] b" and "b [SEP] a" as different inputs.
    s1 = [*train["sentence1"], *train["sentence2"]]
    s2 = [*train["sentence2"], *train["sentence1"]]
    y = [*train["score"], *train["score"]]
    model, res = train_cross_encoder(tp, params.evaluate, s1, s2, y, dev, params.seed, desc="teacher")
    source = params.adapt.data
    model.save(out, cards.card("Teacher cross-encoder", "cross", tp.model, {
        "dataset": source.name if source else params.data.name, "gold pairs (both orders)": len(s1),
        "loss": "binary cross-entropy of sigmoid(logit) to the gold score", **cards.fit_facts(res.summary(), tp),
        "seed": params.seed},
        f"Fine-tuned on the source domain's gold pairs; it labels {params.data.name}'s pairs for the student."
        if source else "Fine-tuned on the gold pairs; it labels new pairs for the student."))
    res.write_curve(curve)
    result = {"model": tp.model, "train_pairs": len(s1), **({"adapt": source.name} if source else {}),
              **res.summary()}
    write_json(report, result)
    return result


def sub_models(params: Params, clean: Path, out: Path, report: Path, curve: Path) -> dict:
    """The ensemble's members; their dev curves laid end to end in one plot (column `member`)."""
    trained = ensemble.train_members(params, clean, out)
    rows, offset = [], 0
    for m, c in zip(trained["members"], trained["curves"]):
        rows += [[offset + r["step"], r["epoch"], r["dev"], m["name"]] for r in c]
        offset += m["steps"] + 1  # the next member's step 0 gets an x of its own
    write_csv_rows(curve, ["step", "epoch", "dev_spearman", "member"], rows)
    if trained["warning"]:
        print(f"warning: {trained['warning']}", file=sys.stderr)
    result = {"recipe": "rtt-ensemble", "model": params.teacher.model, "positives": params.ensemble.positives,
              "members": trained["members"], **({"warning": trained["warning"]} if trained["warning"] else {})}
    write_json(report, result)
    return result


def skip(out: Path, report: Path, curve: Path, reason: str) -> dict:
    """Write the stage's outputs for a recipe that has no teacher: a note instead of a model."""
    write_note_dir(out, reason)
    write_csv_rows(curve, ["step", "epoch", "dev_spearman"], [])
    result = {"skipped": reason}
    write_json(report, result)
    return result


if __name__ == "__main__":
    run_stage(teacher, ["clean", "out", "report", "curve"])
