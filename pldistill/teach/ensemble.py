"""The rtt-ensemble teacher as stages label and evaluate load it: sub-models whose normalised embeddings are averaged
with weights (``Ensemble``), the sentences the student learns (``corpus``) and the ensemble's embedding of each
(``embed_corpus``, data/silver/ensemble.parquet). Training the sub-models is pldistill.recipes.rtt_ensemble."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from pldistill.base import schemas
from pldistill.base.cleaning import distinct
from pldistill.base.io import atomic_dir, write_card
from pldistill.base.numeric import l2_normalise
from pldistill.models.encoders import BiEncoder, ModelError, pair_embeddings
from pldistill.params.config import Params

MEMBERS_FILE = "members.json"  # in models/teacher/: who the members are and how they scored on dev


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
