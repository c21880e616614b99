"""Teachers: the model(s) that label pairs for a student.

A teacher is one member or an ensemble of them. A member is a cross-encoder (its score: sigmoid of its
logit) or a bi-encoder (its score: the cosine of the two embeddings), fine-tuned on the gold pairs or
used as given (a ready-made model, GPL's setting). Each member's score is put on the gold scale by a
calibration fitted on the dev pairs (``Calibration``); the teacher's score is the mean of its members'.

Saved as ``teacher.json`` (the members, their kinds and calibrations) beside one model folder per member
(``member-00/`` ...), each loadable with sentence-transformers on its own.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.isotonic import IsotonicRegression

from pldistill import cards, distributed, schemas
from pldistill.bundled import not_installed, short_hint
from pldistill.config import EvaluateParams, Params, TeacherMember
from pldistill.console import detail, hint
from pldistill.datasets import gold_dir
from pldistill.io import atomic_dir, sha256_file, write_card
from pldistill.metrics import correlation
from pldistill.models import (
    LOADERS,  # a kind -> its load
    BiEncoder,
    CrossModel,
    ModelError,
)
from pldistill.numeric import logit, sigmoid
from pldistill.training import FitResult, write_curves
from pldistill.wrappers import train_model

MANIFEST = "teacher.json"


@dataclass(frozen=True)
class Calibration:
    """A monotone map from a member's raw score to the gold scale, clipped to [0, 1].

    none: the raw score itself; linear: ``a * raw + b`` (least squares on dev); isotonic: the
    non-decreasing step fit on dev, interpolated between its knots ``x`` -> ``y`` (as sklearn predicts)."""

    method: str = "none"
    x: tuple[float, ...] = ()  # linear: (a, b); isotonic: knots on the raw scale
    y: tuple[float, ...] = ()  # isotonic: their gold-scale values

    @classmethod
    def fit(cls, method: str, raw: np.ndarray, gold: np.ndarray) -> Calibration:
        raw, gold = np.asarray(raw, np.float64), np.asarray(gold, np.float64)
        if method == "linear":
            a, b = np.polyfit(raw, gold, 1)
            return cls("linear", (float(a), float(b)))
        if method == "isotonic":
            iso = IsotonicRegression(y_min=0.0, y_max=1.0, out_of_bounds="clip").fit(raw, gold)
            return cls("isotonic", tuple(map(float, iso.X_thresholds_)), tuple(map(float, iso.y_thresholds_)))
        return cls("none")

    def __call__(self, raw: np.ndarray) -> np.ndarray:
        raw = np.asarray(raw, np.float64)
        if self.method == "linear":
            raw = self.x[0] * raw + self.x[1]
        elif self.method == "isotonic":
            raw = np.interp(raw, self.x, self.y)
        return np.clip(raw, 0.0, 1.0)


@dataclass
class Member:
    """One teacher model with its calibration; ``score`` is on the gold scale."""

    name: str  # member-00, member-01, ...
    kind: str  # cross | bi
    spec: str  # the model it started from
    finetuned: bool
    model: CrossModel | BiEncoder
    calibration: Calibration

    def raw(self, s1: Sequence[str], s2: Sequence[str], batch_size: int = 64, bf16: bool | str = "auto",
            progress: bool = False) -> np.ndarray:
        """cross: sigmoid(logit); bi: cosine."""
        return self.model.score(s1, s2, batch_size, bf16, progress)

    def score(self, s1: Sequence[str], s2: Sequence[str], batch_size: int = 64, bf16: bool | str = "auto",
              progress: bool = False) -> np.ndarray:
        return self.calibration(self.raw(s1, s2, batch_size, bf16, progress))

    def use_backend(self, backend: str) -> None:
        self.model.use_backend(backend)

    @property
    def ran_on(self) -> str:
        """What its last call ran on (pldistill.accel), and the gate it passed."""
        choice = self.model.choice
        return f"{self.model.backend}, as asked" if choice is None else choice.summary

    @property
    def describe(self) -> str:
        how = "fine-tuned on gold" if self.finetuned else "as given"
        return f"{self.kind}-encoder from {self.spec}, {how}, calibration {self.calibration.method}"


class Teacher:
    """The members' mean score on the gold scale; the same ``score`` interface as the students."""

    def __init__(self, members: list[Member], name: str = "teacher"):
        if not members:
            raise ValueError("a teacher needs at least one member")
        self.members, self.name = members, name

    @property
    def single_cross(self) -> bool:
        """One uncalibrated cross-encoder: its raw logit is the label's logit (Augmented SBERT's teacher)."""
        m = self.members[0]
        return len(self.members) == 1 and m.kind == "cross" and m.calibration.method == "none"

    def labels(self, s1: Sequence[str], s2: Sequence[str], batch_size: int = 64, bf16: bool | str = "auto",
               progress: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """(score in [0, 1], logit) per pair. The logit is a cross-encoder's own, or else the logit of the
        calibrated mean score (what a DSE student learns)."""
        if self.single_cross:
            raw_logit = self.members[0].model.logits(s1, s2, batch_size, bf16, progress).astype(np.float64)
            return sigmoid(raw_logit), raw_logit
        score = np.mean([m.score(s1, s2, batch_size, bf16, progress) for m in self.members], axis=0)
        return score, logit(score)

    def score(self, s1: Sequence[str], s2: Sequence[str], batch_size: int = 64, bf16: bool | str = "auto",
              progress: bool = False) -> np.ndarray:
        return self.labels(s1, s2, batch_size, bf16, progress)[0]

    def use_backend(self, backend: str) -> None:
        for m in self.members:
            m.use_backend(backend)

    def cost_key(self) -> tuple | None:
        """What scoring costs depends on (pldistill.speed): one member's model's, its calibration costing next to
        nothing; None (time it) for several."""
        return self.members[0].model.cost_key() if len(self.members) == 1 else None

    @property
    def ran_on(self) -> dict[str, str]:
        """Each member's backend at its last call, and the gate it passed (the label report's ``backend``)."""
        return {m.name: m.ran_on for m in self.members}

    def labeller(self, path: Path) -> str:
        """Which teacher labelled: each member's kind, start and weights' hash (two teachers never share one)."""
        return "+".join(f"{m.kind}:{m.spec}@{sha256_file(path / m.name / 'model.safetensors')[:12]}"
                        for m in self.members)

    @property
    def cross_dir(self) -> str | None:
        """The member folder that is this teacher whole, when it is one cross-encoder (models/cross copies it)."""
        return self.members[0].name if self.single_cross else None

    def save(self, path: Path | str, card: str | None = None, cards: dict[str, str] | None = None) -> None:
        """``card``: the teacher folder's README.md; ``cards``: each member's."""
        cards = cards or {}
        with atomic_dir(path) as tmp:
            for m in self.members:
                m.model.save(tmp / m.name, cards.get(m.name))
            manifest = {"members": [{"name": m.name, "kind": m.kind, "spec": m.spec, "finetuned": m.finetuned,
                                     "calibration": asdict(m.calibration)} for m in self.members]}
            (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
            write_card(tmp, card)

    @classmethod
    def load(cls, path: Path | str, max_length: int = 128, backend: str = "torch") -> Teacher:
        """``backend``: what runs the members' inference (pldistill.accel; label.backend / evaluate.backend)."""
        path = Path(path)
        file = path / MANIFEST
        if not file.is_file():
            raise ModelError(f"{file}: not found; {path} is not a teacher folder (run stage teacher: "
                             "`dvc repro teacher`)")
        members = []
        for m in json.loads(file.read_text())["members"]:
            load = LOADERS[m["kind"]]
            c = m["calibration"]
            members.append(Member(m["name"], m["kind"], m["spec"], m["finetuned"],
                                  load(str(path / m["name"]), max_length, backend=backend),
                                  Calibration(c["method"], tuple(c["x"]), tuple(c["y"]))))
        return cls(members, str(path))


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


def calibrate(name: str, mp: TeacherMember, model: CrossModel | BiEncoder, dev: pd.DataFrame,
              ep: EvaluateParams) -> tuple[Member, dict]:
    """Fit the member's calibration on dev; return it and its dev scores before and after."""
    member = Member(name, mp.kind, mp.model, mp.finetune, model, Calibration())
    raw = member.raw(dev["sentence1"], dev["sentence2"], ep.batch_size, ep.bf16, progress=True)
    member.calibration = Calibration.fit(mp.calibration, raw, dev["score"].to_numpy())
    calibrated = member.calibration(raw)
    gold = dev["score"].to_numpy(np.float64)
    return member, {"dev": correlation(calibrated, gold),
                    "dev_mae": {"raw": round(float(np.mean(np.abs(np.clip(raw, 0, 1) - gold))), 4),
                                "calibrated": round(float(np.mean(np.abs(calibrated - gold))), 4)},
                    "calibration": asdict(member.calibration) if mp.calibration != "isotonic"
                    else {"method": "isotonic", "knots": len(member.calibration.x)}}


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
