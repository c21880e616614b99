"""Augmented SBERT (Thakur et al., 2021): a teacher fitted on the gold pairs labels new pairs (stage sample
chose them), and the student bi-encoder learns gold + silver with a cosine-similarity MSE. Under domain
adaptation the teacher learned the source domain and the student learns the target's silver pairs only,
selected on the source's dev set (no target label is used). Teacher and label: the defaults of ``Recipe``."""

from __future__ import annotations

from pldistill import cards, distributed, schemas
from pldistill.config import Params
from pldistill.datasets import gold_dir
from pldistill.models import BiEncoder
from pldistill.recipes.base import DistillDirs, Recipe, cycle_row, encode_speed, end_distill, student_start
from pldistill.teachers import Teacher
from pldistill.training import split_scores, train_bi_encoder


class AugSBERT(Recipe):
    name = "augsbert"

    def distill(self, params: Params, dirs: DistillDirs) -> dict:
        adapting = params.adapt.data
        gold = schemas.read(dirs.clean / "train.parquet", schemas.PAIRS)
        if adapting:  # the target's gold scores are never learned
            gold = gold.iloc[:0]
        scored = {s: schemas.read(dirs.clean / f"{s}.parquet", schemas.PAIRS) for s in ("dev", "test")}
        select_on = schemas.read(gold_dir(params, dirs.clean) / "dev.parquet", schemas.PAIRS)
        labelled = schemas.read(dirs.silver / schemas.SILVER_FILE, schemas.PSEUDO)
        s1 = [*gold["sentence1"], *labelled["sentence1"]]
        s2 = [*gold["sentence2"], *labelled["sentence2"]]
        y = [*gold["score"], *labelled["score"]]
        start_from = student_start(params, dirs.embed)
        student, res = train_bi_encoder(start_from, params.evaluate, s1, s2, y, select_on, params.seed,
                                        desc="student")
        if not distributed.is_main():  # its share of the training done; rank 0 writes
            return {}
        sp, ep = params.student, params.evaluate
        teacher = Teacher.load(dirs.teacher, params.teacher.max_length)
        card = cards.card("Augmented-SBERT student", "bi", sp.model, {
            "dataset": params.data.name, **({"adapted from": adapting.name} if adapting else {}),
            "gold pairs": len(gold), "silver pairs": len(labelled),
            "sampling": params.sample.strategy,
            **({"embedding distillation": f"{params.embed.epochs} epoch(s) first (models/embed)"}
               if start_from is not params.student else {}),
            "teacher": " + ".join(m.describe for m in teacher.members),
            "loss": "MSE of the cosine to the gold or silver score", **cards.fit_facts(res.summary(), sp),
            "seed": params.seed},
            f"A bi-encoder trained on {params.data.name}'s pairs labelled by a teacher that learned {adapting.name}."
            if adapting else "A bi-encoder trained on gold pairs and on new pairs its teacher labelled.")

        def cycles() -> list[list]:
            start = BiEncoder.load(sp.model, sp.max_length, sp.trust_remote_code, sp.layers)
            return [cycle_row(0, split_scores(start, scored, ep), None),
                    cycle_row(1, split_scores(student, scored, ep), split_scores(teacher, scored, ep))]

        # what the student learned in its one cycle: the silver labels
        end_distill(dirs, student, card, res, teacher,
                    lambda tmp: schemas.write(tmp / schemas.pseudo_file(1), labelled, schemas.PSEUDO), cycles)
        return {"recipe": self.name, "cycle": 1, **({"adapt": adapting.name} if adapting else {}),
                "gold_pairs": len(gold), "silver_pairs": len(labelled), **res.summary(),
                **({"pruned": encode_speed(student, sp, scored["dev"], ep)} if sp.layers is not None else {})}


RECIPE = AugSBERT()
