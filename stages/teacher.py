"""teacher: the model(s) that label pairs for the student (pldistill.teachers). By default a cross-encoder
fine-tuned on the gold training pairs (both orders), selected on dev; `teacher.kind: bi` a bi-encoder,
`teacher.finetune: false` a ready-made model used as given, `teacher.members` an ensemble. Each member
is calibrated onto the gold scale on dev. Under domain adaptation, the source domain's gold pairs and dev.

recipe rtt-ensemble: train the ensemble's contrastive sub-models instead (pldistill.ensemble)."""

from __future__ import annotations

import sys
from pathlib import Path

from pldistill import cards, ensemble, schemas, teachers
from pldistill.config import Params
from pldistill.datasets import gold_dir
from pldistill.io import write_csv_rows, write_json, write_note_dir
from pldistill.metrics import correlation
from pldistill.runtime import run_stage


def teacher(params: Params, clean: Path, out: Path, report: Path, curve: Path) -> dict:
    """Make the teacher: each member fine-tuned on the gold pairs (or taken as given), calibrated on dev."""
    if params.recipe == "trans-encoder":  # unsupervised: no cross-encoder may learn the gold scores
        return skip(out, report, curve, "recipe trans-encoder trains its cross-encoders in stage distill, without "
                    "gold labels, from teacher.model (teacher.kind, finetune and calibrate are not used)")
    if params.recipe == "rtt-ensemble":
        return sub_models(params, clean, out, report, curve)
    where = gold_dir(params, clean)  # the source domain's, under domain adaptation
    train = schemas.read(where / "train.parquet", schemas.PAIRS)
    dev = schemas.read(where / "dev.parquet", schemas.PAIRS)
    source = params.adapt.data
    dataset = source.name if source else params.data.name
    members, reports, member_cards, curves = [], [], {}, []
    for i, mp in enumerate(params.teacher.ensemble):
        name = f"member-{i:02d}"
        desc = "teacher" if not params.teacher.members else f"teacher {name}"
        model, res, pairs = teachers.train_member(mp, params.evaluate, train, dev, params.seed + i, desc)
        member, scores = teachers.calibrate(name, mp, model, dev, params.evaluate)
        members.append(member)
        fit = res.summary() if res else {}
        reports.append({"name": name, "kind": mp.kind, "model": mp.model, "finetuned": mp.finetune,
                        "train_pairs": pairs, **scores, **fit})
        curves.append((name, res.curve if res else [], fit.get("steps", 0)))
        member_cards[name] = cards.card(
            f"Teacher {mp.kind}-encoder", mp.kind, mp.model, {
                "dataset": dataset, "gold pairs learned": pairs or "none (used as given)",
                **({"loss": LOSSES[mp.kind], **cards.fit_facts(fit, mp)} if res else {}),
                "calibration to the gold scale": f"{mp.calibration} (fitted on dev)", "seed": params.seed + i},
            f"Fine-tuned on {dataset}'s gold pairs; it labels {params.data.name}'s pairs for the student."
            if res else f"Used as given; it labels {params.data.name}'s pairs for the student.")
    model = teachers.Teacher(members)
    result = {"model": params.teacher.model, "kind": params.teacher.kind, **({"adapt": source.name} if source else {}),
              "members": reports}
    if len(members) > 1:
        score = model.score(dev["sentence1"], dev["sentence2"], params.evaluate.batch_size, params.evaluate.bf16)
        result["ensemble_dev"] = correlation(score, dev["score"])
    else:  # one member: its facts at the top level, as before ensembles
        result = {**reports[0], **result, "members": reports}
    model.save(out, member_cards, cards.teacher_card(dataset, [m.describe for m in members]))
    _write_curves(curve, curves)
    write_json(report, result)
    return result


LOSSES = {"cross": "binary cross-entropy of sigmoid(logit) to the gold score",
          "bi": "MSE of the cosine to the gold score"}


def _write_curves(curve: Path, curves: list[tuple[str, list[dict], int]]) -> None:
    """Each member's dev curve laid end to end in one plot (column ``member`` when there are several)."""
    rows, offset = [], 0
    for name, c, steps in curves:
        rows += [[offset + r["step"], r["epoch"], r["dev"], *([name] if len(curves) > 1 else [])] for r in c]
        offset += steps + 1  # the next member's step 0 gets an x of its own
    write_csv_rows(curve, ["step", "epoch", "dev_spearman", *(["member"] if len(curves) > 1 else [])], rows)


def sub_models(params: Params, clean: Path, out: Path, report: Path, curve: Path) -> dict:
    """The ensemble's members; their dev curves laid end to end in one plot (column `member`)."""
    trained = ensemble.train_members(params, clean, out)
    _write_curves(curve, [(m["name"], c, m["steps"]) for m, c in zip(trained["members"], trained["curves"])])
    if trained["warning"]:
        print(f"warning: {trained['warning']}", file=sys.stderr)
    result = {"recipe": "rtt-ensemble", "model": params.teacher.model, "positives": params.ensemble.positives,
              "note": "sub-models are bi-encoders trained from teacher.model; teacher.kind, finetune and calibrate "
                      "are not used",
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
