"""Round-trip-translation ensemble distillation (recipe rtt-ensemble).

1. K contrastive sub-models (SimCSE's InfoNCE, temperature 0.05) learn the corpus without labels; a
   sentence's positive is either itself under another dropout mask (`dropout`, one sub-model per seed)
   or its round-trip paraphrase (`rtt`, one sub-model per pivot language).
2. The ensemble embeds a sentence as the weighted mean of its members' L2-normalised embeddings,
   normalised again (weights: uniform, or a softmax of the members' dev Spearman).
3. One student learns the ensemble's embeddings: (1 - w) MAE + w InfoNCE (the paper's Eq. 3, w 0.1).

Checkpoints are chosen on the gold dev pairs, as SimCSE chooses its own on STS-B dev.
"""

from __future__ import annotations

import json
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pldistill.base import cards, schemas
from pldistill.base.cleaning import sentence_key
from pldistill.base.io import atomic_dir
from pldistill.base.metrics import split_scores
from pldistill.base.seeding import seed_all
from pldistill.models.encoders import BiEncoder, ModelError
from pldistill.params.config import Params
from pldistill.recipes.base import DistillDirs, Recipe, cycle_row, end_distill
from pldistill.teach.ensemble import MEMBERS_FILE, corpus, read_embeddings
from pldistill.train.losses.ensemble import EnsembleDistillLoss
from pldistill.train.losses.info_nce import SimCSELoss
from pldistill.train.training import train, write_curves


@dataclass(frozen=True)
class Positives:
    """What one sub-model learns: each sentence and its positive (itself for dropout views)."""

    name: str  # sub-01
    seed: int
    language: str | None  # the pivot language of rtt positives
    sentences: list[str]
    positives: list[str]


def positive_sets(params: Params, clean: Path) -> list[Positives]:
    """One entry per sub-model: ensemble.k dropout seeds, or one per language of the paraphrases."""
    ep = params.ensemble
    if ep.positives == "dropout":
        sents = corpus(clean)
        return [Positives(f"sub-{k:02d}", params.seed + k, None, sents, sents) for k in range(1, ep.k + 1)]
    para = schemas.read(clean / schemas.PARAPHRASES_FILE, schemas.PARAPHRASES)
    if para.empty:
        raise schemas.SchemaError(f"{clean / schemas.PARAPHRASES_FILE}: no paraphrases; ensemble.positives rtt "
                                  "needs augment.rtt to produce some (see metrics/augment.json)")
    held = schemas.eval_keys(clean)
    para = para[[sentence_key(t) not in held for t in para["sentence"]]]  # as corpus() leaves them out
    if para.empty:
        raise schemas.SchemaError(f"{clean / schemas.PARAPHRASES_FILE}: every paraphrased sentence is a dev or "
                                  "test sentence, which no model may learn; give augment.rtt.corpus other sentences")
    sets = []
    for k, (lang, df) in enumerate(sorted(para.groupby("language", sort=True)), start=1):
        sets.append(Positives(f"sub-{k:02d}", params.seed + k, str(lang), list(df["sentence"]), list(df["paraphrase"])))
    return sets


def train_members(params: Params, clean: Path, out: Path) -> dict:
    """Train every sub-model from teacher.model and save them as ``out``/sub-NN plus members.json."""
    tp, sp = params.teacher, params.ensemble.sub
    dev = schemas.read(clean / "dev.parquet", schemas.PAIRS)
    members, curves = [], []
    with atomic_dir(out) as tmp:
        for pos in positive_sets(params, clean):
            _, gen = seed_all(pos.seed)  # torch's global seed drives the dropout masks
            model = BiEncoder.load(tp.model, tp.max_length, tp.trust_remote_code)
            res = train(model, SimCSELoss(model.model, sp.temperature), (pos.sentences, pos.positives),
                        np.zeros(len(pos.sentences), np.float32), dev, sp, params.evaluate, gen, desc=pos.name)
            model.save(tmp / pos.name, cards.card(f"RTT-ensemble sub-model {pos.name}", "bi", tp.model, {
                "positives": f"round-trip paraphrase via {pos.language}" if pos.language else "dropout view",
                "sentences": len(pos.sentences), "loss": f"InfoNCE, in-batch negatives, temperature {sp.temperature}",
                **cards.fit_facts(res.summary(), sp), "seed": pos.seed}))
            members.append({"name": pos.name, "seed": pos.seed, "language": pos.language,
                            "sentences": len(pos.sentences), **res.summary(),
                            "start_dev": res.curve[0]["dev"]})
            curves.append(res.curve)
        (tmp / MEMBERS_FILE).write_text(json.dumps({"positives": params.ensemble.positives, "members": members},
                                                   indent=2) + "\n")
    return {"members": members, "curves": curves, "warning": collapse_warning(members, tp.model)}


def collapse_warning(members: list[dict], start: str) -> str | None:
    """Every member kept its starting weights (no checkpoint beat the start on dev): the ensemble is
    K copies of ``start``. Likely when ``start`` is already a trained sentence encoder, where the
    contrastive loss has little left to teach; the paper starts from BERT-base."""
    if all(m["best_step"] == 0 for m in members):
        return (f"no sub-model beat its start ({start}) on dev, so every member is a copy of it and the "
                "ensemble adds nothing; start the sub-models from a base language model (teacher.model)")
    return None


def check_dims(student: BiEncoder, teacher_dim: int, where: Path) -> None:
    dim = student.dim
    if dim != teacher_dim:
        raise ModelError(f"{where}: the ensemble embeds in {teacher_dim} dimensions, the student "
                         f"({student.name}) in {dim}; MAE needs one size: pick a student.model of width {teacher_dim}")


class RTTEnsemble(Recipe):
    """Stage teacher trains the contrastive sub-models; label embeds the corpus with their ensemble (no pair
    is labelled); distill has one bi-encoder learn those embeddings; evaluate scores the ensemble."""

    name = "rtt-ensemble"

    def teacher(self, params: Params, clean: Path, out: Path, curve: Path) -> dict:
        """The ensemble's members; their dev curves laid end to end in one plot (column `member`)."""
        trained = train_members(params, clean, out)
        write_curves(curve, [(m["name"], c, m["steps"]) for m, c in zip(trained["members"], trained["curves"])])
        if trained["warning"]:
            print(f"warning: {trained['warning']}", file=sys.stderr)
        return {"recipe": self.name, "model": params.teacher.model, "positives": params.ensemble.positives,
                "note": "sub-models are bi-encoders trained from teacher.model; teacher.kind, finetune and calibrate "
                        "are not used",
                "members": trained["members"], **({"warning": trained["warning"]} if trained["warning"] else {})}

    def distill(self, params: Params, dirs: DistillDirs) -> dict:
        """Distil the ensemble into one bi-encoder: it learns the ensemble's embedding of each corpus sentence."""
        dp, sp, ep = params.ensemble.distill, params.student, params.evaluate
        _, gen = seed_all(params.seed)
        file = dirs.silver / schemas.ENSEMBLE_FILE
        sentences, target = read_embeddings(file)
        scored = {s: schemas.read(dirs.clean / f"{s}.parquet", schemas.PAIRS) for s in ("dev", "test")}
        student = BiEncoder.load(sp.model, sp.max_length, sp.trust_remote_code, sp.layers)
        check_dims(student, target.shape[1], file)
        start = split_scores(student, scored, ep)
        res = train(student, EnsembleDistillLoss(student.model, dp.infonce_weight, dp.temperature), (sentences,),
                    target, scored["dev"], dp, ep, gen, desc="student")
        card = cards.card("RTT-ensemble student", "bi", params.student.model, {
            "dataset": params.data.name, "sentences": len(sentences), "teacher": "ensemble in models/teacher",
            "loss": f"{1 - dp.infonce_weight:g} MAE + {dp.infonce_weight:g} InfoNCE (temperature {dp.temperature}) "
                    "to the ensemble's embeddings", **cards.fit_facts(res.summary(), dp), "seed": params.seed},
            "Distilled from an ensemble of contrastive sub-models; no gold score was learned.")
        # what the student learned: the ensemble's embeddings
        end_distill(dirs, student, card, res, "recipe rtt-ensemble has no cross-encoder; its teacher is the ensemble "
                                              "of sub-models in models/teacher",
                    lambda tmp: shutil.copyfile(file, tmp / schemas.pseudo_file(1, "ensemble")),
                    lambda: [cycle_row(0, start, None), cycle_row(1, split_scores(student, scored, ep), None)])
        return {"recipe": self.name, "cycle": 1, "sentences": len(sentences), "dim": int(target.shape[1]),
                "infonce_weight": dp.infonce_weight, "temperature": dp.temperature, **res.summary()}


RECIPE = RTTEnsemble()
