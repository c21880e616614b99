"""Augmented SBERT (Thakur et al., 2021): a teacher fitted on the gold pairs labels new pairs (stage sample
chose them), and the student bi-encoder learns gold + silver with a cosine-similarity MSE. Under domain
adaptation the teacher learned the source domain and the student learns the target's silver pairs only,
selected on the source's dev set (no target label is used). Teacher and label: the defaults of ``Recipe``."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pandas as pd

from pldistill.base import cards, schemas
from pldistill.base.metrics import split_scores
from pldistill.base.store import Store
from pldistill.data.datasets import gold_dir
from pldistill.models.encoders import BiEncoder
from pldistill.params.config import Params
from pldistill.params.train import TrainParams
from pldistill.recipes import rounds
from pldistill.recipes.base import DistillDirs, Recipe, cycle_row, end_distill, student_start
from pldistill.run import distributed
from pldistill.students import token_weights
from pldistill.teach.teachers import Teacher
from pldistill.train.training import FitResult
from pldistill.train.wrappers import train_model


class AugSBERT(Recipe):
    name = "augsbert"

    def distill(self, params: Params, dirs: DistillDirs) -> dict:
        adapting = params.adapt.data
        gold = schemas.read(dirs.clean / "train.parquet", schemas.PAIRS)
        if adapting:  # the target's gold scores are never learned
            gold = gold.iloc[:0]
        scored = {s: schemas.read(dirs.clean / f"{s}.parquet", schemas.PAIRS) for s in ("dev", "test")}
        select_file = gold_dir(params, dirs.clean) / "dev.parquet"
        select_on = schemas.read(select_file, schemas.PAIRS)
        labelled = schemas.read(dirs.silver / schemas.SILVER_FILE, schemas.PSEUDO)
        s1 = [*gold["sentence1"], *labelled["sentence1"]]
        s2 = [*gold["sentence2"], *labelled["sentence2"]]
        y = [*gold["score"], *labelled["score"]]
        start_from = student_start(params, dirs.embed)
        learned: dict[str, dict | None] = {}  # a static student's token weights, learned after its pairs

        def first() -> tuple[BiEncoder, FitResult]:
            model, res = train_model(start_from, params.evaluate, s1, s2, y, select_on, params.seed, desc="student",
                                     wise=start_from.wise)
            learned["token_weights"] = token_weights.learn(model, s1, s2, y, select_on, start_from, params.static,
                                                           params.evaluate, params.seed)
            return model, res

        if params.cycles > 1:
            return self._cycles(params, dirs, gold, labelled, select_file, select_on, scored, first, start_from)
        student, res = first()
        if not distributed.is_main():  # its share of the training done; rank 0 writes
            return {}
        sp, ep = params.student, params.evaluate
        teacher = Teacher.load(dirs.teacher, params.teacher.max_length)
        card = self._card(params, teacher, len(gold), len(labelled), start_from, res.summary())

        def cycles() -> list[list]:
            start = BiEncoder.load(sp.model, sp.max_length, sp.trust_remote_code, sp.layers)
            return [cycle_row(0, split_scores(start, scored, ep), None),
                    cycle_row(1, split_scores(student, scored, ep), split_scores(teacher, scored, ep))]

        # what the student learned in its one cycle: the silver labels
        end_distill(dirs, student, card, res, teacher,
                    lambda tmp: schemas.write(tmp / schemas.pseudo_file(1), labelled, schemas.PSEUDO), cycles)
        return self._report(params, {"cycle": 1}, len(gold), len(labelled), res.summary(),
                            {"token_weights": learned["token_weights"]} if learned["token_weights"] else {})

    def _report(self, params: Params, cycles: dict, gold: int, silver: int, fit: dict, facts: dict) -> dict:
        """The stage's report: the pairs learned, the fit (``facts``: the recipe's own), a pruned student's layers.
        A pruned student's speed is stage evaluate's to measure, against its whole start in the same run, where the
        gold-only baseline and the teacher are timed too (eval.json ``speed``)."""
        layers = params.student.layers
        return {"recipe": self.name, **cycles, **({"adapt": params.adapt.data.name} if params.adapt.data else {}),
                "gold_pairs": gold, "silver_pairs": silver, **fit, **facts,
                **({"pruned": {"layers": list(layers)}} if layers is not None else {})}

    def _card(self, params: Params, teacher: Teacher, gold: int, silver: int, start_from: TrainParams, fit: dict,
              cycles: str | None = None) -> str:
        adapting, sp = params.adapt.data, params.student
        return cards.card("Augmented-SBERT student", "bi", sp.model, {
            "dataset": params.data.name, **({"adapted from": adapting.name} if adapting else {}),
            "gold pairs": gold, "silver pairs": silver,
            "sampling": params.sample.strategy, **({"cycles": cycles} if cycles else {}),
            **({"embedding distillation": f"{params.embed.epochs} epoch(s) first (models/embed)"}
               if start_from is not params.student else {}),
            "teacher": " + ".join(m.describe for m in teacher.members),
            "loss": "MSE of the cosine to the gold or silver score", **cards.fit_facts(fit, sp),
            "seed": params.seed},
            f"A bi-encoder trained on {params.data.name}'s pairs labelled by a teacher that learned {adapting.name}."
            if adapting else "A bi-encoder trained on gold pairs and on new pairs its teacher labelled.")

    def _cycles(self, params: Params, dirs: DistillDirs, gold: pd.DataFrame, labelled: pd.DataFrame,
                select_file: Path, select_on: pd.DataFrame, scored: dict[str, pd.DataFrame],
                first: Callable[[], tuple[BiEncoder, FitResult]], start_from: TrainParams) -> dict:
        """cycles > 1: the steps of pldistill.recipes.rounds, stored and resumable."""
        sp, ep = params.student, params.evaluate
        splits = {s: schemas.read(dirs.clean / f"{s}.parquet", schemas.PAIRS) for s in ("train", "dev", "test")}
        taken = pd.concat(list(splits.values()), ignore_index=True)[["sentence1", "sentence2"]]
        files = [dirs.clean / f"{s}.parquet" for s in ("train", "dev", "test")] + [
            dirs.silver / schemas.SILVER_FILE, select_file]
        models = [dirs.teacher, *([Path(start_from.model)] if start_from is not sp else [])]
        store = Store()
        store.sweep()  # temp dirs of killed runs
        steps = rounds.Cycles(params, store, files, models, gold, labelled, taken, select_on, scored, dirs.teacher,
                              first).run(params.cycles)
        teacher = Teacher.load(dirs.teacher, params.teacher.max_length)
        start = BiEncoder.load(sp.model, sp.max_length, sp.trust_remote_code, sp.layers)
        chosen = rounds.best(steps)
        silver = chosen.meta.get("silver_pairs", len(labelled))
        cycles = (f"{params.cycles} (selected on dev: cycle {chosen.cycle}; later cycles learn pairs the "
                  "student mined)")
        card = self._card(params, teacher, len(gold), silver, start_from, chosen.meta["fit"], cycles)
        facts = rounds.finish(steps, dirs, teacher, split_scores(start, scored, ep), split_scores(teacher, scored, ep),
                              labelled, card)
        return self._report(params, {"cycles": params.cycles}, len(gold), silver, chosen.meta["fit"], facts)


RECIPE = AugSBERT()
