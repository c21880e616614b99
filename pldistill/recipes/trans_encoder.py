"""Trans-Encoder (Liu et al., 2022): a bi- and a cross-encoder label the same unlabelled pairs for each
other, `cycles` times. Mutual distillation runs several model pairs side by side; every labelling is
the mean of all their predictions.

Cycle c:  label-bi     the bi-encoders of cycle c-1 (cycle 1: the starting ones) score the pairs
          cross-<m>    each cross-encoder learns those scores (soft BCE, both pair orders)
          label-cross  the cross-encoders score the pairs
          bi-<m>       each bi-encoder learns those scores (MSE on cosine)

Every step is an entry in a Store (pldistill.store) under a key that chains the run's fingerprint,
the step's name and the key and stored bytes of the step before it. A step already stored is reused,
not recomputed; a computed step is read back from the store before the next step uses it, so a
resumed run and an uninterrupted one go through the same bytes. Each step seeds itself from
(seed, step name), not from a running stream.
"""

from __future__ import annotations

import functools
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from pldistill import cards, labelling, schemas
from pldistill.config import Params, StepParams
from pldistill.io import atomic_dir, write_csv_rows, write_note_dir
from pldistill.models import BiEncoder, CrossModel
from pldistill.numeric import sigmoid
from pldistill.recipes.base import (
    CODE,
    CYCLE_COLUMNS,
    DistillDirs,
    Recipe,
    copy_dir,
    cycle_row,
    environment,
    weights_digest,
)
from pldistill.seeding import seed_all
from pldistill.store import Steps, Store, digest, fingerprint
from pldistill.training import FitResult, fit_at, split_scores

LABELS = "labels.parquet"  # a labelling step's file
MODEL = "model"  # a training step's model directory


@dataclass(frozen=True)
class Member:
    """One model pair of the run: a starting bi-encoder and the base of its cross-encoder."""

    bi: str
    cross: str


@dataclass(frozen=True)
class Step:
    name: str  # c02-cross-1, c02-label-bi, c00-start
    cycle: int
    role: str  # start | label-bi | label-cross | cross | bi
    member: int | None  # which model pair trained it (0: student.model / teacher.model); None: start, labels
    key: str
    path: Path
    meta: dict
    computed: bool
    seconds: float

    @property
    def model(self) -> Path:
        return self.path / MODEL


def members(params: Params) -> list[Member]:
    """The first pair is (student.model, teacher.model); trans.mutual adds more."""
    first = Member(params.student.model, params.teacher.model)
    return [first, *(Member(m.bi, m.cross or m.bi) for m in params.trans.mutual)]


def unlabelled_pairs(splits: dict[str, pd.DataFrame], candidates: pd.DataFrame | None) -> pd.DataFrame:
    """The pairs to learn, without their scores: the named splits' pairs, then sampled candidates.

    ``strategy`` records where each pair came from (the split's name, or the sampling strategy); a pair
    seen twice is kept once, where it was first seen.
    """
    parts = [df[["sentence1", "sentence2"]].assign(strategy=name) for name, df in splits.items()]
    if candidates is not None:
        parts.append(candidates[["sentence1", "sentence2", "strategy"]])
    pairs = pd.concat(parts, ignore_index=True)
    return pairs.drop_duplicates(["sentence1", "sentence2"], keep="first").reset_index(drop=True)


def to_target(cosine: np.ndarray, how: str) -> np.ndarray:
    """A bi-encoder's cosine in [-1, 1] as a cross-encoder target in [0, 1]."""
    if how == "clip":  # the paper's code uses the raw cosine; sentence encoders rarely go below 0
        return np.clip(cosine, 0.0, 1.0)
    return (cosine + 1.0) / 2.0  # affine


def run_fingerprint(params: Params, files: list[Path]) -> str:
    """Everything a stored step depends on except `cycles`: data files, the params the recipe reads,
    the code, the starting models, library versions and the device."""
    used = {
        "seed": params.seed,
        "trans": params.trans.model_dump(mode="json"),
        "student": params.student.model_dump(mode="json", include={"model", "max_length", "trust_remote_code",
                                                                   "layers"}),
        "teacher": params.teacher.model_dump(mode="json", include={"model", "max_length", "trust_remote_code"}),
        "label": params.label.model_dump(mode="json"),
        "evaluate": params.evaluate.model_dump(mode="json"),
    }
    extra = {"models": {spec: weights_digest(spec) for m in members(params) for spec in (m.bi, m.cross)},
             **environment()}
    return fingerprint([*files, *CODE], used, extra)


def _log(msg: str) -> None:
    print(f"[trans-encoder] {msg}", file=sys.stderr, flush=True)


class TransEncoder:
    """Runs the cycles over ``pairs``; dev picks checkpoints and the final models, test is only reported."""

    def __init__(self, params: Params, pairs: pd.DataFrame, dev: pd.DataFrame, test: pd.DataFrame, store: Store,
                 base: str, log: Callable[[str], None] = _log):
        self.p, self.t = params, params.trans
        self.pairs, self.dev, self.test = pairs, dev, test
        self.store, self.base, self.log = store, base, log
        self.members = members(params)
        self.steps: list[Step] = []
        self.chain = Steps(store, base, params.seed, log)

    # -- the step machinery -------------------------------------------------------------------------
    def _step(self, cycle: int, role: str, member: int | None, compute: Callable[[Path, dict], None]) -> Step:
        """Reuse the stored step, or compute it into the store (``Steps.run``)."""
        e = self.chain.run(f"c{cycle:02d}-{role}" + ("" if member is None else f"-{member}"), compute)
        step = Step(e.name, cycle, role, member, e.key, e.path, e.meta, e.computed, e.seconds)
        self.steps.append(step)
        return step

    def _labeller(self, step: Step, kind: str) -> str:
        """``bi:c01-bi-0@<weights sha256, 12>``: which stored model labelled (hash read from its manifest)."""
        sha = self.store.files(step.key)[f"{MODEL}/model.safetensors"]["sha256"]
        return f"{kind}:{step.name}@{sha[:12]}"

    def _scores(self, model: BiEncoder | CrossModel) -> dict:
        return split_scores(model, {"dev": self.dev, "test": self.test}, self.p.evaluate)

    def _fit(self, model: BiEncoder | CrossModel, loss, s1: list[str], s2: list[str], y: np.ndarray,
             step: StepParams, desc: str) -> FitResult:
        """Train at ``step.max_length``; score dev at the model's full length, as evaluation will. ``loss`` is
        the model's own (cosine MSE, soft BCE), so its inputs are tokenised ahead."""
        _, gen = seed_all(int(digest({"seed": self.p.seed, "fit": desc})[:8], 16))
        return fit_at(model, loss, s1, s2, y, self.dev, step, self.p.evaluate, gen, desc, model.prefetch)

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
        res = self._fit(model, model.soft_bce_loss, s1 + s2, s2 + s1, np.concatenate([y, y]), self.t.cross, desc)
        self._keep(tmp, meta, model, start, res)

    def _train_bi(self, tmp: Path, meta: dict, start: str, labels: Step, desc: str, member: int) -> None:
        s1, s2, y = self._read(labels)
        model = self._load_bi(start, member)
        self._keep(tmp, meta, model, start, self._fit(model, model.cosine_mse_loss, s1, s2, y, self.t.bi, desc))

    @staticmethod
    def _read(labels: Step) -> tuple[list[str], list[str], np.ndarray]:
        df = schemas.read(labels.path / LABELS, schemas.PSEUDO)
        return list(df["sentence1"]), list(df["sentence2"]), df["score"].to_numpy()

    def _keep(self, tmp: Path, meta: dict, model: BiEncoder | CrossModel, start: str, res: FitResult) -> None:
        model.save(tmp / MODEL)
        meta.update(start=start, fit=res.summary(), curve=res.curve, **self._scores(model))

    # -- the run ------------------------------------------------------------------------------------
    def run(self, cycles: int) -> list[Step]:
        """Run (or reuse) every step of ``cycles`` cycles; return the steps in order."""
        self._step(0, "start", None, self._start)
        bis: list[Step] = []
        for c in range(1, cycles + 1):
            labellers = [str(s.model) for s in bis] or [m.bi for m in self.members]
            lb = self._step(c, "label-bi", None, functools.partial(self._label_bi, cycle=c, prev=bis))
            crosses = [self._step(c, "cross", i, functools.partial(
                self._train_cross, start=self._init(m.cross, labellers[i]), labels=lb,
                desc=f"cycle {c} cross-encoder {i}"))
                for i, m in enumerate(self.members)]
            lc = self._step(c, "label-cross", None, functools.partial(self._label_cross, cycle=c, crosses=crosses))
            bis = [self._step(c, "bi", i, functools.partial(
                self._train_bi, start=self._init(m.bi, str(crosses[i].model)), labels=lc,
                desc=f"cycle {c} bi-encoder {i}", member=i))
                for i, m in enumerate(self.members)]
        return self.steps

    def _init(self, original: str, labeller: str) -> str:
        """refresh: the original weights every cycle. sequential (the paper's): start from the model that
        just labelled -- the cross-encoder from that bi-encoder, the bi-encoder from that cross-encoder."""
        return labeller if self.t.init == "sequential" else original


def _best(steps: list[Step]) -> Step:
    """Highest dev Spearman; the earliest wins a tie."""
    return max(steps, key=lambda s: (s.meta["dev"]["spearman"], -steps.index(s)))


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
    rows, per_cycle, curve_rows, offset = [cycle_row(0, start, None)], [], [], 0
    for c in range(1, cycles + 1):
        bis = [s for s in steps if s.cycle == c and s.role == "bi"]
        crosses = [s for s in steps if s.cycle == c and s.role == "cross"]
        per_cycle.append({"cycle": c, "bi": [_summary(s) for s in bis], "cross": [_summary(s) for s in crosses]})
        rows.append(cycle_row(c, _best(_students(bis, own)).meta, _best(crosses).meta))
        curve_rows += [[offset + r["step"], round(c - 1 + r["epoch"] / bi_epochs, 3), r["dev"]]
                       for r in bis[0].meta["curve"]]
        offset += bis[0].meta["fit"]["steps"]
    write_csv_rows(cycles_plot, CYCLE_COLUMNS, rows)
    write_csv_rows(curve, ["step", "epoch", "dev_spearman"], curve_rows)
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
    engine = TransEncoder(params, learned, splits["dev"], splits["test"], store, run_fingerprint(params, inputs))
    steps = engine.run(params.cycles)

    with atomic_dir(dirs.pseudo) as tmp:
        for s in steps:
            if s.role.startswith("label-"):
                shutil.copyfile(s.path / LABELS, tmp / schemas.pseudo_file(s.cycle, s.role.removeprefix("label-")))
    own = params.student.layers is not None
    best_bi = _best(_students(steps, own))
    best_cross = _best([s for s in steps if s.role == "cross"])
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
        "steps": {"computed": [s.name for s in steps if s.computed],
                  "reused": [s.name for s in steps if not s.computed],
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
    (pldistill.store), so a rerun resumes."""

    name = "trans-encoder"

    def teacher(self, params: Params, clean: Path, out: Path, curve: Path) -> dict:
        return skip_teacher(out, curve, "recipe trans-encoder trains its cross-encoders in stage distill, without "
                            "gold labels, from teacher.model (teacher.kind, finetune and calibrate are not used)")

    def label(self, params: Params, clean: Path, pairs: Path, teacher: Path, silver_dir: Path, density: Path) -> dict:
        return labelling.no_pairs(params, clean, silver_dir, density,
                                  "recipe trans-encoder labels inside stage distill")

    def distill(self, params: Params, dirs: DistillDirs) -> dict:
        return run(params, dirs)

    def teacher_model(self, params: Params, cross: Path, teacher: Path) -> CrossModel:
        """The cross-encoder the cycles selected."""
        return CrossModel.load(str(cross), params.teacher.max_length)

    def teacher_parts(self, teacher: CrossModel) -> dict:
        return {}

    def teacher_blocks(self, teacher: CrossModel, block: Callable[[str], dict]) -> dict:
        return {"cross": block("cross")}


RECIPE = TransEncoderRecipe()
