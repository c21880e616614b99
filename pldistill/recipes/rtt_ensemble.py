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
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from pldistill import cards, labelling, schemas
from pldistill.cleaning import distinct, sentence_key
from pldistill.config import Params
from pldistill.io import atomic_dir, write_card
from pldistill.losses.ensemble import EnsembleDistillLoss
from pldistill.losses.info_nce import SimCSELoss
from pldistill.metrics import split_scores
from pldistill.models import BiEncoder, ModelError, pair_embeddings
from pldistill.numeric import l2_normalise
from pldistill.recipes.base import DistillDirs, Recipe, cycle_row, end_distill
from pldistill.seeding import seed_all
from pldistill.training import train, write_curves

MEMBERS_FILE = "members.json"  # in models/teacher/: who the members are and how they scored on dev


@dataclass(frozen=True)
class Positives:
    """What one sub-model learns: each sentence and its positive (itself for dropout views)."""

    name: str  # sub-01
    seed: int
    language: str | None  # the pivot language of rtt positives
    sentences: list[str]
    positives: list[str]


def corpus(clean: Path) -> list[str]:
    """The unlabelled sentences the student learns: the cleaned RTT corpus when stage augment made one,
    else every distinct sentence of the cleaned training pairs and of the given pairs (data.unscored), in that
    order (no score is read); a sentence of a dev or test pair is left out, as stage embed leaves it out
    (cleaning.sentence_key: case, spacing, Unicode form aside)."""
    held = schemas.eval_keys(clean)
    para = schemas.read(clean / schemas.PARAPHRASES_FILE, schemas.PARAPHRASES)
    if len(para):
        return distinct(para["sentence"], held)[0]
    texts = schemas.sentences(clean / "train.parquet")
    if (clean / schemas.UNSCORED_FILE).is_file():  # cleaned before given pairs existed: none
        texts += schemas.sentences(clean / schemas.UNSCORED_FILE, schemas.UNSCORED)
    return distinct(texts, held)[0]


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


def member_weights(dev_spearman: Sequence[float], how: str, temperature: float = 1.0) -> np.ndarray:
    """Uniform, or softmax(dev Spearman in points / temperature): the paper's softmax over scores,
    here over dev rather than test scores, so that no test label shapes the teacher."""
    s = np.asarray(dev_spearman, dtype=np.float64)
    if how == "mean":
        return np.full(len(s), 1 / len(s))
    if how != "softmax":
        raise ValueError(f"ensemble.weights: expected mean or softmax; found {how!r}")
    z = np.exp((s - s.max()) / temperature)
    return z / z.sum()


class Ensemble:
    """The teacher of rtt-ensemble: sub-models whose normalised embeddings are averaged with weights."""

    def __init__(self, members: list[BiEncoder], names: list[str], dev: Sequence[float], how: str,
                 temperature: float = 1.0, name: str = "ensemble"):
        self.members, self.names, self.dev, self.name = members, names, list(dev), name
        self.weights = member_weights(self.dev, how, temperature)

    @classmethod
    def load(cls, path: Path | str, how: str, temperature: float, max_length: int) -> Ensemble:
        """The sub-models in ``path`` (stage teacher's output), weighted as ``how`` says."""
        path = Path(path)
        file = path / MEMBERS_FILE
        if not file.is_file():
            raise FileNotFoundError(f"{path}: no {MEMBERS_FILE}; not an ensemble (train one with recipe rtt-ensemble)")
        try:
            listed = json.loads(file.read_text())["members"]
            names, dev = [m["name"] for m in listed], [float(m["best_dev"]) for m in listed]
        except (ValueError, KeyError, TypeError) as err:
            raise ModelError(f"{file}: expected {{'members': [{{'name', 'best_dev', ...}}]}} ({err!r})") from None
        if not names:
            raise ModelError(f"{file}: lists no members; rerun stage teacher (`dvc repro -f -s teacher`)")
        members = [BiEncoder.load(str(path / n), max_length) for n in names]
        dims = {m.dim for m in members}
        if len(dims) > 1:
            raise ModelError(f"{path}: members embed in different sizes {sorted(dims)}; an average needs one")
        return cls(members, names, dev, how, temperature, str(path))

    def save(self, path: Path | str, card: str | None = None) -> None:
        """The sub-models and their dev scores, as stage teacher writes them (``load`` weighs them again)."""
        with atomic_dir(path) as tmp:
            for n, m in zip(self.names, self.members):
                m.save(tmp / n)
            listed = [{"name": n, "best_dev": d} for n, d in zip(self.names, self.dev)]
            (tmp / MEMBERS_FILE).write_text(json.dumps({"members": listed}, indent=2) + "\n")
            write_card(tmp, card)

    def use_backend(self, backend: str) -> None:
        for m in self.members:
            m.use_backend(backend)

    @property
    def dim(self) -> int:
        return self.members[0].dim

    def encode(self, texts: Sequence[str], batch_size: int = 64, bf16: bool | str = "auto",
               progress: bool = False) -> np.ndarray:
        """(len(texts), dim) float32: sum_k w_k * normalise(f_k(x)), normalised."""
        texts = list(texts)
        out = np.zeros((len(texts), self.dim), np.float32)
        for w, m in zip(self.weights, self.members):
            out += np.float32(w) * m.encode(texts, batch_size, bf16, progress)  # each already unit length
        return l2_normalise(out)

    def score(self, s1: Sequence[str], s2: Sequence[str], batch_size: int = 64, bf16: bool | str = "auto",
              progress: bool = False) -> np.ndarray:
        """Cosine of the ensemble embeddings of each pair."""
        a, b = pair_embeddings(self.encode, s1, s2, batch_size, bf16, progress)
        return np.sum(a * b, axis=1)


def embeddings_frame(sentences: list[str], emb: np.ndarray) -> pd.DataFrame:
    return pd.DataFrame({"sentence": sentences, "embedding": list(emb.astype(np.float32))})


def read_embeddings(path: Path) -> tuple[list[str], np.ndarray]:
    """Sentences and their (n, dim) embeddings from an ensemble.parquet; every row must have one size."""
    df = schemas.read(path, schemas.EMBEDDINGS)
    sizes = df["embedding"].map(len)
    if len(df) == 0 or sizes.nunique() != 1:
        found = "no rows" if len(df) == 0 else f"sizes {sorted(sizes.unique().tolist())}"
        raise schemas.SchemaError(f"{path}: expected rows of one embedding size; found {found}; rerun stage label")
    emb = np.stack(df["embedding"].to_numpy()).astype(np.float32)
    bad = ~np.isfinite(emb).all(axis=1)
    if bad.any():
        raise schemas.SchemaError(f"{path}: {int(bad.sum())} embedding(s) with NaN or inf, first at row "
                                  f"{int(np.argmax(bad))}; rerun stage label")
    return list(df["sentence"]), emb


def check_dims(student: BiEncoder, teacher_dim: int, where: Path) -> None:
    dim = student.dim
    if dim != teacher_dim:
        raise ModelError(f"{where}: the ensemble embeds in {teacher_dim} dimensions, the student "
                         f"({student.name}) in {dim}; MAE needs one size: pick a student.model of width {teacher_dim}")


def embed_corpus(params: Params, clean: Path, teacher: Path, silver_dir: Path) -> dict:
    """The ensemble's embedding of every sentence the student will learn (data/silver/ensemble.parquet)."""
    ep = params.ensemble
    model = Ensemble.load(teacher, ep.weights, ep.weight_temperature, params.teacher.max_length)
    sentences = corpus(clean)
    t0 = time.perf_counter()
    emb = model.encode(sentences, params.label.batch_size, params.label.bf16, progress=True)
    seconds = time.perf_counter() - t0
    schemas.write(silver_dir / schemas.ENSEMBLE_FILE, embeddings_frame(sentences, emb), schemas.EMBEDDINGS)
    return {"sentences": len(sentences), "dim": int(emb.shape[1]), "members": model.names,
            "weights": [round(float(w), 6) for w in model.weights], "embed_seconds": round(seconds, 1)}


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

    def label(self, params: Params, clean: Path, pairs: Path, teacher: Path, silver_dir: Path, density: Path) -> dict:
        embedded = {"ensemble": embed_corpus(params, clean, teacher, silver_dir)}
        return labelling.no_pairs(params, clean, silver_dir, density, "recipe rtt-ensemble labels sentences with "
                                  "embeddings (data/silver/ensemble.parquet)", embedded)

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

    def teacher_model(self, params: Params, cross: Path, teacher: Path) -> Ensemble:
        ep = params.ensemble
        return Ensemble.load(teacher, ep.weights, ep.weight_temperature, params.teacher.max_length)

    def teacher_parts(self, teacher: Ensemble) -> dict:
        return {f"sub/{n}": m for n, m in zip(teacher.names, teacher.members)}

    def teacher_blocks(self, teacher: Ensemble, block: Callable[[str], dict]) -> dict:
        """`ensemble` (the teacher) and `submodels`, one block each."""
        return {"ensemble": block("cross"), "submodels": {n: block(f"sub/{n}") for n in teacher.names}}


RECIPE = RTTEnsemble()
