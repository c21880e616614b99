"""Trans-Encoder (Liu et al., 2022): a bi- and a cross-encoder label the same unlabelled pairs for each
other, `cycles` times. Mutual distillation runs several model pairs side by side; every labelling is
the mean of all their predictions.

Cycle c:  label-bi     the bi-encoders of cycle c-1 (cycle 1: the starting ones) score the pairs
          cross-<m>    each cross-encoder learns those scores (soft BCE, both pair orders)
          label-cross  the cross-encoders score the pairs
          bi-<m>       each bi-encoder learns those scores (MSE on cosine)

The steps run in the one N-cycle loop augsbert's cycles run in (pldistill.recipes.cycles): every step is an entry in a
Store (pldistill.base.store) under a key that chains the run's fingerprint (what stage distill tracks, ``cycles``
aside), the step's name and the key and stored bytes of the step before it. A step already stored is reused,
not recomputed; a computed step is read back from the store before the next step uses it, so a
resumed run and an uninterrupted one go through the same bytes. Each step seeds itself from
(seed, step name), not from a running stream.
"""

from __future__ import annotations

import functools
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from pldistill.base import cards, schemas
from pldistill.base.cleaning import pair_keys
from pldistill.base.io import atomic_dir, write_csv_rows, write_note_dir
from pldistill.base.metrics import split_scores
from pldistill.base.numeric import sigmoid
from pldistill.base.seeding import seed_all
from pldistill.base.store import Store, digest
from pldistill.models.encoders import BiEncoder, CrossModel
from pldistill.params.config import Params
from pldistill.params.train import StepParams
from pldistill.recipes.base import DistillDirs, Recipe, copy_dir, cycle_row
from pldistill.recipes.cycles import MODEL, Engine, Step, steps_report, write_plots
from pldistill.recipes.cycles import best as best_of
from pldistill.train.losses.cosine_mse import CosineMSELoss
from pldistill.train.losses.soft_bce import SoftBCELoss
from pldistill.train.training import FitResult, train

LABELS = "labels.parquet"  # a labelling step's file


@dataclass(frozen=True)
class Member:
    """One model pair of the run: a starting bi-encoder and the base of its cross-encoder."""

    bi: str
    cross: str


def members(params: Params) -> list[Member]:
    """The first pair is (student.model, teacher.model); trans.mutual adds more."""
    first = Member(params.student.model, params.teacher.model)
    return [first, *(Member(m.bi, m.cross or m.bi) for m in params.trans.mutual)]


def unlabelled_pairs(splits: dict[str, pd.DataFrame], candidates: pd.DataFrame | None) -> pd.DataFrame:
    """The pairs to learn, without their scores: the named splits' pairs, then sampled candidates.

    ``strategy`` records where each pair came from (the split's name, or the sampling strategy); a pair
    seen twice (cleaning.pair_key: in either order, case and spacing aside) is kept once, where it was first seen.
    """
    parts = [df[["sentence1", "sentence2"]].assign(strategy=name) for name, df in splits.items()]
    if candidates is not None:
        parts.append(candidates[["sentence1", "sentence2", "strategy"]])
    pairs = pd.concat(parts, ignore_index=True)
    first = ~pd.Series(pair_keys(pairs)).duplicated(keep="first")  # either order; case, spacing aside
    return pairs[first.to_numpy()].reset_index(drop=True)


def to_target(cosine: np.ndarray, how: str) -> np.ndarray:
    """A bi-encoder's cosine in [-1, 1] as a cross-encoder target in [0, 1]."""
    if how == "clip":  # the paper's code uses the raw cosine; sentence encoders rarely go below 0
        return np.clip(cosine, 0.0, 1.0)
    return (cosine + 1.0) / 2.0  # affine


class TransEncoder(Engine):
    """Runs the cycles over ``pairs``; dev picks checkpoints and the final models, test is only reported.
    ``files``: the data it reads; the members' starting models enter its fingerprint."""

    name = "trans-encoder"

    def __init__(self, params: Params, pairs: pd.DataFrame, dev: pd.DataFrame, test: pd.DataFrame, store: Store,
                 files: list[Path]):
        self.members = members(params)
        super().__init__(params, store, files, [spec for m in self.members for spec in (m.bi, m.cross)])
        self.t = params.trans
        self.pairs, self.dev, self.test = pairs, dev, test

    def _labeller(self, step: Step, kind: str) -> str:
        """``bi:c01-bi-0@<weights sha256, 12>``: which stored model labelled (hash read from its manifest)."""
        sha = self.store.files(step.key)[f"{MODEL}/model.safetensors"]["sha256"]
        return f"{kind}:{step.name}@{sha[:12]}"

    def _scores(self, model: BiEncoder | CrossModel) -> dict:
        return split_scores(model, {"dev": self.dev, "test": self.test}, self.p.evaluate)

    def _fit(self, model: BiEncoder | CrossModel, loss, s1: list[str], s2: list[str], y: np.ndarray,
             step: StepParams, desc: str) -> FitResult:
        """Train at ``step.max_length``; score dev at the model's full length, as evaluation will. ``loss``: the
        model's own (cosine MSE, soft BCE)."""
        _, gen = seed_all(int(digest({"seed": self.p.seed, "fit": desc})[:8], 16))
        return train(model, loss, (s1, s2), y, self.dev, step, self.p.evaluate, gen, desc)

    # -- the kinds of step --------------------------------------------------------------------------
    def _start(self, tmp: Path, meta: dict) -> None:
        meta["members"] = [self._scores(self._load_bi(m.bi, i)) for i, m in enumerate(self.members)]

    def _load_bi(self, spec: str, member: int | None = None) -> BiEncoder:
        sp = self.p.student  # remote code only ever for the user's own specs, never a stored directory
        # student.layers prunes the first member's starting student only; stored models (already cut) and
        # the mutual members load whole, even one named as student.model (the whole model teaching its cut)
        return BiEncoder.load(spec, sp.max_length, sp.trust_remote_code and not Path(spec).is_dir(),
                              sp.layers if member == 0 and spec == sp.model else None)

    def _load_cross(self, spec: str) -> CrossModel:
        tp = self.p.teacher
        return CrossModel.load(spec, tp.max_length, tp.trust_remote_code and not Path(spec).is_dir())

    def _write_labels(self, tmp: Path, meta: dict, cycle: int, score: np.ndarray, logit: np.ndarray | None,
                      labellers: list[str]) -> None:
        out = self.pairs.assign(score=score.astype(np.float64),
                                logit=None if logit is None else logit.astype(np.float64),
                                labeller="+".join(labellers), cycle=cycle)
        schemas.write(tmp / LABELS, out, schemas.PSEUDO)
        meta.update(labellers=labellers, pairs=len(out), score_mean=round(float(score.mean()), 4),
                    score_std=round(float(score.std()), 4))

    def _label_bi(self, tmp: Path, meta: dict, cycle: int, prev: list[Step]) -> None:
        if prev:
            specs = [(str(s.model), self._labeller(s, "bi")) for s in prev]
        else:
            specs = [(m.bi, f"bi:{m.bi}") for m in self.members]
        lp, targets = self.p.label, []
        for i, (spec, _) in enumerate(specs):
            model = self._load_bi(spec, None if prev else i)  # cycle 1: the members' own starts
            cos = model.score(self.pairs["sentence1"], self.pairs["sentence2"], lp.batch_size, lp.bf16, progress=True)
            targets.append(to_target(cos.astype(np.float64), self.t.target))
        self._write_labels(tmp, meta, cycle, np.mean(targets, axis=0), None, [name for _, name in specs])

    def _label_cross(self, tmp: Path, meta: dict, cycle: int, crosses: list[Step]) -> None:
        lp = self.p.label
        logits = np.asarray([self._load_cross(str(s.model)).logits(
            self.pairs["sentence1"], self.pairs["sentence2"], lp.batch_size, lp.bf16, progress=True) for s in crosses],
            dtype=np.float64)  # (members, pairs)
        # Mutual: the mean of the members' probabilities; `logit` holds the mean of their logits.
        self._write_labels(tmp, meta, cycle, sigmoid(logits).mean(axis=0), logits.mean(axis=0),
                           [self._labeller(s, "cross") for s in crosses])

    def _train_cross(self, tmp: Path, meta: dict, start: str, labels: Step, desc: str) -> None:
        s1, s2, y = self._read(labels)
        model = self._load_cross(start)
        # Both orders: a cross-encoder reads "a [SEP] b" and "b [SEP] a" as different inputs.
        loss = SoftBCELoss(model.model)
        res = self._fit(model, loss, s1 + s2, s2 + s1, np.concatenate([y, y]), self.t.cross, desc)
        self._keep(tmp, meta, model, start, res)

    def _train_bi(self, tmp: Path, meta: dict, start: str, labels: Step, desc: str, member: int) -> None:
        s1, s2, y = self._read(labels)
        model = self._load_bi(start, member)
        self._keep(tmp, meta, model, start, self._fit(model, CosineMSELoss(model.model), s1, s2, y, self.t.bi, desc))

    @staticmethod
    def _read(labels: Step) -> tuple[list[str], list[str], np.ndarray]:
        df = schemas.read(labels.path / LABELS, schemas.PSEUDO)
        return list(df["sentence1"]), list(df["sentence2"]), df["score"].to_numpy()

    def _keep(self, tmp: Path, meta: dict, model: BiEncoder | CrossModel, start: str, res: FitResult) -> None:
        self.keep(tmp, meta, model, res, start=start, **self._scores(model))

    # -- the cycles (Engine.run) ---------------------------------------------------------------------
    def begin(self) -> list[Step]:
        """Cycle 0: the starting bi-encoders scored; cycle 1 labels with them."""
        self.step(0, "start", self._start)
        return []

    def cycle(self, c: int, bis: list[Step]) -> list[Step]:
        """The bi-encoders of cycle c-1 (``bis``; none: the starting ones) label, the cross-encoders learn and
        label, the bi-encoders learn; returns cycle c's bi-encoders."""
        labellers = [str(s.model) for s in bis] or [m.bi for m in self.members]
        lb = self.step(c, "label-bi", functools.partial(self._label_bi, cycle=c, prev=bis))
        crosses = [self.step(c, "cross", functools.partial(
            self._train_cross, start=self._init(m.cross, labellers[i]), labels=lb,
            desc=f"cycle {c} cross-encoder {i}"), member=i)
            for i, m in enumerate(self.members)]
        lc = self.step(c, "label-cross", functools.partial(self._label_cross, cycle=c, crosses=crosses))
        return [self.step(c, "bi", functools.partial(
            self._train_bi, start=self._init(m.bi, str(crosses[i].model)), labels=lc,
            desc=f"cycle {c} bi-encoder {i}", member=i), member=i)
            for i, m in enumerate(self.members)]

    def _init(self, original: str, labeller: str) -> str:
        """refresh: the original weights every cycle. sequential (the paper's): start from the model that
        just labelled -- the cross-encoder from that bi-encoder, the bi-encoder from that cross-encoder."""
        return labeller if self.t.init == "sequential" else original


def _summary(s: Step) -> dict:
    return {"step": s.name, "cycle": s.cycle, "dev": s.meta["dev"], "test": s.meta["test"],
            "best_step": s.meta["fit"]["best_step"], "train_seconds": s.meta["fit"]["train_seconds"]}


def _students(steps: list[Step], own: bool) -> list[Step]:
    """The bi-encoders ``models/bi`` is picked from: every member's (the paper), or with ``own`` only the first
    member's -- a pruned student (student.layers) is the fast model asked for; whole mutual members teach it."""
    return [s for s in steps if s.role == "bi" and (not own or s.member == 0)]


def _write_cycle_plots(steps: list[Step], cycles: int, bi_epochs: int, cycles_plot: Path, curve: Path,
                       own: bool) -> list[dict]:
    """Score per cycle (the best bi-encoder ``_students`` allows and the best cross-encoder; cycle 0: the
    starting bi-encoder) and the first member's bi-encoder dev curve with the cycles laid end to end. Returns
    the per-cycle summary (every member)."""
    starts = steps[0].meta["members"]
    start = starts[0] if own else max(starts, key=lambda m: m["dev"]["spearman"])
    rows, per_cycle, parts = [cycle_row(0, start, None)], [], []
    for c in range(1, cycles + 1):
        bis = [s for s in steps if s.cycle == c and s.role == "bi"]
        crosses = [s for s in steps if s.cycle == c and s.role == "cross"]
        per_cycle.append({"cycle": c, "bi": [_summary(s) for s in bis], "cross": [_summary(s) for s in crosses]})
        rows.append(cycle_row(c, best_of(_students(bis, own)).meta, best_of(crosses).meta))
        parts.append((bis[0].meta["curve"], bis[0].meta["fit"]["steps"], lambda e, c=c: c - 1 + e / bi_epochs))
    write_plots(cycles_plot, curve, rows, parts)
    return per_cycle


def run(params: Params, dirs: DistillDirs, store: Store | None = None) -> dict:
    """Run or resume the cycles; write the labellings, the selected models and the scores; return the report."""
    tp = params.trans
    files = {s: dirs.clean / f"{s}.parquet" for s in ("train", "dev", "test")}
    splits = {s: schemas.read(f, schemas.PAIRS) for s, f in files.items()}
    cands_file = dirs.pairs / schemas.CANDIDATES_FILE
    cands = schemas.read(cands_file, schemas.CANDIDATES) if tp.sampled else None
    learned = unlabelled_pairs({s: splits[s] for s in tp.splits}, cands)
    inputs = [files[s] for s in sorted({*tp.splits, "dev", "test"})] + ([cands_file] if tp.sampled else [])
    store = store or Store()
    swept = store.sweep()  # temp dirs of killed runs
    engine = TransEncoder(params, learned, splits["dev"], splits["test"], store, inputs)
    steps = engine.run(params.cycles)

    with atomic_dir(dirs.pseudo) as tmp:
        for s in steps:
            if s.role.startswith("label-"):
                shutil.copyfile(s.path / LABELS, tmp / schemas.pseudo_file(s.cycle, s.role.removeprefix("label-")))
    own = params.student.layers is not None
    best_bi = best_of(_students(steps, own))
    best_cross = best_of([s for s in steps if s.role == "cross"])
    for role, best, base, out in (("bi-encoder", best_bi, params.student.model, dirs.bi),
                                  ("cross-encoder", best_cross, params.teacher.model, dirs.cross)):
        facts = {"dataset": params.data.name, "selected step": best.name, "cycles run": params.cycles,
                 "init": tp.init, "dev Spearman x100 (selection)": best.meta["dev"]["spearman"],
                 "pairs learned (scores dropped)": len(learned), "seed": params.seed}
        how = "Unsupervised: the bi- and cross-encoder labelled the pairs for each other."
        copy_dir(best.model, out, cards.card(f"Trans-Encoder {role}", role[:2] if role == "bi-encoder" else "cross",
                                             base, facts, how))
    per_cycle = _write_cycle_plots(steps, params.cycles, tp.bi.epochs, dirs.cycles_plot, dirs.curve, own)
    return {
        "recipe": "trans-encoder", "cycles": params.cycles, "init": tp.init, "members": len(engine.members),
        "pairs": len(learned), "pairs_by_source": learned["strategy"].value_counts().sort_index().to_dict(),
        "start": steps[0].meta["members"], "per_cycle": per_cycle,
        "selected": {"bi": _summary(best_bi), "cross": _summary(best_cross)},
        "steps": {**steps_report(steps),
                  "seconds": round(sum(s.seconds for s in steps), 1),
                  "corrupt_moved_aside": len(store.corrupt), "orphans_swept": len(swept)},
    }


def skip_teacher(out: Path, curve: Path, reason: str) -> dict:
    """Stage teacher's outputs for a recipe without a teacher: a note instead of a model, an empty curve."""
    write_note_dir(out, reason)
    write_csv_rows(curve, ["step", "epoch", "dev_spearman"], [])
    return {"skipped": reason}


class TransEncoderRecipe(Recipe):
    """Unsupervised: no teacher stage (no cross-encoder may learn the gold scores) and no label stage; the
    cycles label and train inside stage distill. Finished steps live in a store outside DVC's outputs
    (pldistill.base.store), so a rerun resumes."""

    name = "trans-encoder"

    def teacher(self, params: Params, clean: Path, out: Path, curve: Path) -> dict:
        return skip_teacher(out, curve, "recipe trans-encoder trains its cross-encoders in stage distill, without "
                            "gold labels, from teacher.model (teacher.kind, finetune and calibrate are not used)")

    def distill(self, params: Params, dirs: DistillDirs) -> dict:
        return run(params, dirs)


RECIPE = TransEncoderRecipe()
