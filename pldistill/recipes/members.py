"""Stage teacher's members for the recipes with one (augsbert, dse): each fine-tuned on the gold pairs or taken as
given, calibrated on dev (pldistill.teach.teachers.calibrate), with teacher.candidates the best on dev kept; saved as a
pldistill.teach.teachers.Teacher. This is the training side of a teacher; loading and scoring one is
pldistill.teach.teachers."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from pldistill.base import cards, schemas
from pldistill.base.bundled import not_installed, short_hint
from pldistill.base.console import detail, hint
from pldistill.base.errors import ModelError
from pldistill.base.metrics import correlation
from pldistill.data.datasets import gold_dir
from pldistill.models.encoders import LOADERS, BiEncoder, CrossModel
from pldistill.params.config import Params
from pldistill.params.sections import EvaluateParams
from pldistill.params.train import TeacherMember
from pldistill.run import distributed
from pldistill.teach.teachers import Member, Teacher, calibrate
from pldistill.train.training import FitResult, write_curves
from pldistill.train.wrappers import train_model


def train_member(mp: TeacherMember, ep: EvaluateParams, train: pd.DataFrame, dev: pd.DataFrame, seed: int,
                 desc: str) -> tuple[CrossModel | BiEncoder, FitResult | None, int]:
    """Fine-tune one member on the gold pairs (or load it as given); returns it, its fit, the pairs learned.

    A cross-encoder learns both orders ("a [SEP] b" and "b [SEP] a" are different inputs); a bi-encoder,
    symmetric, learns each pair once."""
    if not mp.finetune:
        return LOADERS[mp.kind](mp.model, mp.max_length, mp.trust_remote_code, mp.layers), None, 0
    s1, s2, y = list(train["sentence1"]), list(train["sentence2"]), list(train["score"])
    if mp.kind == "cross":
        s1, s2, y = s1 + s2, s2 + s1, y + y
    model, res = train_model(mp, ep, s1, s2, y, dev, seed, desc=desc, kind=mp.kind)
    return model, res, len(y)


LOSSES = {"cross": "binary cross-entropy of sigmoid(logit) to the gold score",
          "bi": "MSE of the cosine to the gold score"}


@dataclass
class Made:
    """One teacher member as stage teacher made it: the member, its report, card and dev curve."""

    member: Member
    report: dict
    card: str
    curve: tuple[str, list, int]

    def renamed(self, name: str) -> Made:
        self.member.name = name
        return Made(self.member, {**self.report, "name": name}, self.card, (name, *self.curve[1:]))


def make_member(params: Params, name: str, mp: TeacherMember, seed: int, train: pd.DataFrame, dev: pd.DataFrame,
                dataset: str, desc: str) -> Made:
    """One member fine-tuned on the gold pairs (or taken as given) and calibrated on dev."""
    model, res, pairs = train_member(mp, params.evaluate, train, dev, seed, desc)
    member, scores = calibrate(name, mp, model, dev, params.evaluate)
    fit = res.summary() if res else {}
    report = {"name": name, "kind": mp.kind, "model": mp.model, "finetuned": mp.finetune, "train_pairs": pairs,
              **scores, **fit}
    card = cards.card(
        f"Teacher {mp.kind}-encoder", mp.kind, mp.model, {
            "dataset": dataset, "gold pairs learned": pairs or "none (used as given)",
            **({"loss": LOSSES[mp.kind], **cards.fit_facts(fit, mp)} if res else {}),
            "calibration to the gold scale": f"{mp.calibration} (fitted on dev)", "seed": seed},
        f"Fine-tuned on {dataset}'s gold pairs; it labels {params.data.name}'s pairs for the student."
        if res else f"Used as given; it labels {params.data.name}'s pairs for the student.")
    return Made(member, report, card, (name, res.curve if res else [], fit.get("steps", 0)))


def choose(params: Params, train: pd.DataFrame, dev: pd.DataFrame, dataset: str) -> tuple[Made, list[dict]]:
    """teacher.candidates: the section's own teacher and each candidate made and scored on dev; the best (the
    first of equals) is kept. A bundled candidate that is not installed is skipped, saying what it would add.
    Returns the kept one (as member-00) and a line per candidate for the report and the card."""
    made: list[Made | None] = []
    lines = []
    for i, mp in enumerate(params.teacher.tried):
        why = not_installed(mp.model)
        how = "fine-tuned on gold" if mp.finetune else "as given"
        if why:
            hint(mp.model, f"teacher: candidates with {mp.model} skipped: {short_hint(mp.model)}")
            made.append(None)
            lines.append({"model": mp.model, "kind": mp.kind, "finetuned": mp.finetune, "skipped": why})
            continue
        made.append(make_member(params, f"candidate-{i:02d}", mp, params.seed + i, train, dev, dataset,
                                f"teacher candidate {i}"))
        lines.append({"model": mp.model, "kind": mp.kind, "finetuned": mp.finetune,
                      "dev_spearman": made[-1].report["dev"]["spearman"]})
        detail(f"teacher: candidate {i} ({mp.kind}-encoder {mp.model}, {how}): dev {lines[-1]['dev_spearman']}")
    scored = [m for m in made if m is not None]
    if not scored:
        raise ModelError("teacher: no candidate could be made here; " + "; ".join(x["skipped"] for x in lines))
    best = max(scored, key=lambda m: m.report["dev"]["spearman"])  # max keeps the first of equals
    for line, m in zip(lines, made):
        line["chosen"] = m is best
    return best.renamed("member-00"), lines


def build(params: Params, clean: Path, out: Path, curve: Path) -> dict:
    """Stage teacher for the recipes with one: each member fine-tuned on the gold pairs (or taken as given)
    and calibrated on dev (under domain adaptation, the source domain's); saved to ``out``, the members'
    dev curves to ``curve``. With teacher.candidates, the one teacher that scores best on dev of those tried.
    Returns the report."""
    where = gold_dir(params, clean)
    train = schemas.read(where / "train.parquet", schemas.PAIRS)
    dev = schemas.read(where / "dev.parquet", schemas.PAIRS)
    source = params.adapt.data
    dataset = source.name if source else params.data.name
    tried: list[dict] = []
    if params.teacher.candidates:
        kept, tried = choose(params, train, dev, dataset)
        made = [kept]
    else:
        made = [make_member(params, f"member-{i:02d}", mp, params.seed + i, train, dev, dataset,
                            "teacher" if not params.teacher.members else f"teacher member-{i:02d}")
                for i, mp in enumerate(params.teacher.ensemble)]
    members, reports = [m.member for m in made], [m.report for m in made]
    model = Teacher(members)
    result = {"model": params.teacher.model, "kind": params.teacher.kind, **({"adapt": source.name} if source else {}),
              "members": reports}
    if len(members) > 1:
        score = model.score(dev["sentence1"], dev["sentence2"], params.evaluate.batch_size, params.evaluate.bf16)
        result["ensemble_dev"] = correlation(score, dev["score"])
    else:  # one member: its facts at the top level, as before ensembles
        result = {**reports[0], **result, "members": reports}
    if tried:
        result["candidates"] = tried
    if not distributed.is_main():  # its share of the training done; rank 0 writes
        return {}
    model.save(out, cards.teacher_card(dataset, [m.describe for m in members], tried),
               {m.member.name: m.card for m in made})
    write_curves(curve, [m.curve for m in made])
    return result
