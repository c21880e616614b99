"""Teachers: the model(s) that label pairs for a student.

A teacher is one member or an ensemble of them. A member is a cross-encoder (its score: sigmoid of its
logit) or a bi-encoder (its score: the cosine of the two embeddings), fine-tuned on the gold pairs or
used as given (a ready-made model, GPL's setting). Each member's score is put on the gold scale by a
calibration fitted on the dev pairs (``Calibration``); the teacher's score is the mean of its members'.

Saved as ``teacher.json`` (the members, their kinds and calibrations) beside one model folder per member
(``member-00/`` ...), each loadable with sentence-transformers on its own. Making the members (fine-tuning
them: training) is pldistill.recipes.members; this module only loads, calibrates and scores, so the stages that
score import no training code.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.isotonic import IsotonicRegression

from pldistill.base.io import atomic_dir, sha256_file, write_card
from pldistill.base.metrics import correlation
from pldistill.base.numeric import logit, sigmoid
from pldistill.models.encoders import (
    LOADERS,  # a kind -> its load
    BiEncoder,
    CrossModel,
    ModelError,
)
from pldistill.params.sections import EvaluateParams
from pldistill.params.train import TeacherMember

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
        """What its last call ran on (pldistill.models.accel), and the gate it passed."""
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
        """What scoring costs depends on (pldistill.ship.speed): one member's model's, its calibration costing next to
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
        """``backend``: what runs the members' inference (pldistill.models.accel; label.backend / evaluate.backend)."""
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
