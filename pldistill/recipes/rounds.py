"""Cycles of recipe augsbert (``cycles`` > 1): the student mines new pairs, the teacher labels only those,
and the student learns on.

Cycle 1    c01-bi     the recipe's one training: the student learns gold + the silver pairs of stage label
Cycle c>1  c0N-mine   the student of cycle c-1 embeds the pool (every sentence of the gold and silver pairs so
                      far) and each sentence's ``rounds.top_k`` nearest neighbours under it become candidates;
                      self pairs, gold / dev / test pairs and every pair labelled before are dropped, and at
                      most ``rounds.pairs`` are kept (a seeded draw when it found more)
           c0N-label  the teacher labels only those new pairs (data/pseudo/cycle-0N.parquet)
           c0N-bi     the student of cycle c-1 trains ``rounds.epochs`` more epochs on gold + every silver pair
                      so far, selected on dev (its start counts, so a cycle never ends below the one before)

The steps run in the one N-cycle loop Trans-Encoder's run in (pldistill.recipes.cycles), under a fingerprint of
what stage distill tracks but ``cycles`` and section ``rounds`` (which the keys of cycles 2.. add, so changing it
keeps cycle 1): growing ``cycles`` reuses the finished cycles, and a killed run resumes at the step it was in.
The student of the best cycle on dev is the stage's student; test is only reported.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

from pldistill.base import schemas
from pldistill.base.io import atomic_dir
from pldistill.base.metrics import split_scores
from pldistill.base.store import Store, digest
from pldistill.models.encoders import BiEncoder
from pldistill.pairs import semantic
from pldistill.pairs.sampling import new_pairs, unique_sentences
from pldistill.params.config import Params
from pldistill.params.train import TrainParams
from pldistill.recipes.base import DistillDirs, copy_dir, cycle_row, teacher_as_cross
from pldistill.recipes.cycles import MODEL, Engine, Step, steps_report, write_plots
from pldistill.recipes.cycles import best as best_of
from pldistill.teach import labelling
from pldistill.teach.teachers import Teacher
from pldistill.train.training import FitResult
from pldistill.train.wrappers import train_model

PAIRS = "pairs.parquet"  # a mining or labelling step's pairs
MINED = "student"  # the strategy (provenance) of the pairs the student mined


class Cycles(Engine):
    """The steps of one run: ``first`` trains cycle 1's student (the recipe's own training). ``files``: the data it
    reads; ``models``: the teacher and the student's start where another stage made it. Section ``rounds`` is left
    out of the run's fingerprint: the keys of cycles 2.. add it, so changing it keeps cycle 1."""

    name = "cycles"
    leave_out = ("rounds",)
    packages = ("faiss-cpu",)

    def __init__(self, params: Params, store: Store, files: list[Path], models: list[Path], gold: pd.DataFrame,
                 silver: pd.DataFrame, taken: pd.DataFrame, select_on: pd.DataFrame, scored: dict[str, pd.DataFrame],
                 teacher: Path, first: Callable[[], tuple[BiEncoder, FitResult]]):
        super().__init__(params, store, files, [str(m) for m in models])
        self.gold, self.silver, self.taken = gold, silver, taken
        self.select_on, self.scored, self.teacher, self.first = select_on, scored, teacher, first

    def _step(self, cycle: int, role: str, compute: Callable[[Path, dict], None]) -> Step:
        """The section ``rounds`` enters the keys of cycles 2 and later only."""
        return self.step(cycle, role, compute, salt=digest(self.p.rounds.model_dump(mode="json")))

    def _keep(self, tmp: Path, meta: dict, student: BiEncoder, res: FitResult) -> None:
        self.keep(tmp, meta, student, res, **split_scores(student, self.scored, self.p.evaluate))

    def _first(self, tmp: Path, meta: dict) -> None:
        student, res = self.first()
        self._keep(tmp, meta, student, res)

    def _silver_so_far(self) -> pd.DataFrame:
        labelled = [schemas.read(s.path / PAIRS, schemas.PSEUDO) for s in self.steps if s.role == "label"]
        return pd.concat([self.silver, *labelled], ignore_index=True)

    def _mine(self, tmp: Path, meta: dict, cycle: int, student: Step) -> None:
        rp, sp = self.p.rounds, self.p.sample.semantic
        silver = self._silver_so_far()
        pool = unique_sentences(pd.concat([self.gold, silver], ignore_index=True))
        model = BiEncoder.load(str(student.path / MODEL), self.p.student.max_length)
        emb = model.encode(pool, sp.batch_size, sp.bf16, progress=True)
        hits = semantic.neighbours(emb, rp.top_k, sp, self.p.seed, chunk=sp.search_chunk)
        found = ((pool[q], pool[d]) for q, docs, _ in hits for d in docs)
        fresh = new_pairs(found, pd.concat([self.taken, silver], ignore_index=True), MINED)
        kept = fresh
        if len(fresh) > rp.pairs:
            rng = np.random.default_rng(int(digest({"seed": self.p.seed, "mine": cycle})[:8], 16))
            kept = fresh.iloc[np.sort(rng.choice(len(fresh), rp.pairs, replace=False))].reset_index(drop=True)
        schemas.write(tmp / PAIRS, kept, schemas.CANDIDATES)
        meta.update(pool=len(pool), found=len(fresh), kept=len(kept))

    def _label(self, tmp: Path, meta: dict, cycle: int, mined: Step) -> None:
        pairs = schemas.read(mined.path / PAIRS, schemas.CANDIDATES)
        teacher = Teacher.load(self.teacher, self.p.teacher.max_length)
        t0 = time.perf_counter()
        out = labelling.label_pairs(teacher, pairs, self.p, cycle, teacher.labeller(self.teacher))
        schemas.write(tmp / PAIRS, out, schemas.PSEUDO)
        meta.update(pairs=len(out), score_mean=round(float(out["score"].mean()), 4) if len(out) else None,
                    label_seconds=round(time.perf_counter() - t0, 1))

    def _train(self, tmp: Path, meta: dict, cycle: int, student: Step) -> None:
        silver = self._silver_so_far()
        s1 = [*self.gold["sentence1"], *silver["sentence1"]]
        s2 = [*self.gold["sentence2"], *silver["sentence2"]]
        y = [*self.gold["score"], *silver["score"]]
        # the stored student goes on (already pruned: no layer dropped again), one seed
        sp: TrainParams = self.p.student.model_copy(update={
            "model": str(student.path / MODEL), "layers": None, "epochs": self.p.rounds.epochs, "seeds": 1,
            "trust_remote_code": False})
        seed = int(digest({"seed": self.p.seed, "fit": cycle})[:8], 16)
        model, res = train_model(sp, self.p.evaluate, s1, s2, y, self.select_on, seed, desc=f"student, cycle {cycle}",
                                 wise=sp.wise)
        self._keep(tmp, meta, model, res)
        meta["silver_pairs"] = len(silver)

    def cycle(self, c: int, student: Step | None) -> Step:
        """Cycle 1: the recipe's own training; later: mine with the last student, label, train it on."""
        if c == 1:
            return self._step(1, "bi", self._first)
        mined = self._step(c, "mine", lambda tmp, meta: self._mine(tmp, meta, c, student))
        self._step(c, "label", lambda tmp, meta: self._label(tmp, meta, c, mined))
        return self._step(c, "bi", lambda tmp, meta: self._train(tmp, meta, c, student))


def best(steps: list[Step]) -> Step:
    """The student of highest dev Spearman; the earliest wins a tie."""
    return best_of([s for s in steps if s.role == "bi"])


def finish(steps: list[Step], dirs: DistillDirs, teacher: Teacher, start: dict, teacher_scores: dict,
           silver: pd.DataFrame, card: str) -> dict:
    """Write the stage's outputs from the steps: the best cycle's student (models/bi), the teacher as
    models/cross, one Parquet per cycle of what the teacher labelled for it (data/pseudo), the score per
    cycle (the teacher's beside each) and the student's dev curve, the cycles laid end to end. Returns the
    per-cycle report."""
    chosen = best(steps)
    copy_dir(chosen.path / MODEL, dirs.bi, card)
    teacher_as_cross(teacher, dirs.teacher, dirs.cross)
    with atomic_dir(dirs.pseudo) as tmp:
        schemas.write(tmp / schemas.pseudo_file(1), silver, schemas.PSEUDO)
        for s in steps:
            if s.role == "label":
                shutil.copyfile(s.path / PAIRS, tmp / schemas.pseudo_file(s.cycle))
    metas = {s.name: s.meta for s in steps}
    rows, parts, per_cycle = [cycle_row(0, start, None)], [], []
    epoch_off = 0
    for s in (s for s in steps if s.role == "bi"):
        rows.append(cycle_row(s.cycle, s.meta, teacher_scores))
        parts.append((s.meta["curve"], s.meta["fit"]["steps"], lambda e, off=epoch_off: off + e))
        epoch_off += s.meta["curve"][-1]["epoch"] if s.meta["curve"] else 0
        mine, label = metas.get(f"c{s.cycle:02d}-mine"), metas.get(f"c{s.cycle:02d}-label")
        per_cycle.append({"cycle": s.cycle, "dev": s.meta["dev"], "test": s.meta["test"], **s.meta["fit"],
                          "silver_pairs": s.meta.get("silver_pairs", len(silver)),
                          **({"mined": {k: mine[k] for k in ("pool", "found", "kept")},
                              "label_seconds": label["label_seconds"]} if mine and label else {})})
    write_plots(dirs.cycles_plot, dirs.curve, rows, parts)
    return {"selected_cycle": chosen.cycle, "per_cycle": per_cycle, "steps": steps_report(steps)}
