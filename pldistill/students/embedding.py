"""Embedding distillation (stage embed): before it learns any pair, the student learns the teacher's sentence
embeddings, as sentence-transformers' model-distillation example does (Reimers & Gurevych, 2020).

1. The sentences: the task's training sentences, the given pairs' (data.unscored), the round-trip paraphrases
   and an optional corpus of plain sentences (embed.corpus); every dev and test sentence is held out.
2. The teacher's embedding of each, computed once, in chunks kept in the store so a killed run resumes
   (data/embed/teacher.parquet). Several bi-encoder members: their unit embeddings side by side, each scaled
   by 1/sqrt(k), so the cosine of two such vectors is the mean of the members' cosines, the ensemble's label.
3. The student learns them: MSE to the teacher's embedding (projected onto the student's width by PCA when
   the widths differ), and/or MSE between the in-batch cosine matrices (no projection needed).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from pldistill.base import schemas, store
from pldistill.base.batching import token_counts
from pldistill.base.console import detail
from pldistill.base.device import bf16_on
from pldistill.base.io import ROW_GROUP, atomic_path
from pldistill.base.keys import weights_digest
from pldistill.base.numeric import l2_normalise, principal_directions
from pldistill.data.sentences import EmbedError, gather, read_corpus  # noqa: F401  (re-exported)
from pldistill.models.encoders import BiEncoder
from pldistill.params.sections import EvaluateParams
from pldistill.params.train import EmbedParams
from pldistill.run import distributed
from pldistill.teach.teachers import Teacher
from pldistill.train.losses.embedding import EmbeddingLoss
from pldistill.train.training import FitResult, train

TEACHER_FILE = "teacher.parquet"  # data/embed/: each sentence and the teacher's embedding of it
CHUNK = 4096  # sentences per stored chunk of teacher embeddings: a killed run loses at most one


def bi_members(teacher: Teacher) -> list[BiEncoder]:
    """The teacher's bi-encoder members; a cross-encoder embeds no sentence."""
    models = [m.model for m in teacher.members if m.kind == "bi"]
    if not models:
        raise EmbedError(f"{teacher.name}: every member is a cross-encoder, which scores pairs and embeds no "
                         f"sentence; set embed.epochs to 0 or add a bi-encoder to teacher.members")
    return models


def bi_key(name: str, weights: str) -> str:
    """The store key of a bi-encoder's embeddings: its name as the stage names it, and the hash of the files at
    ``weights`` (the same model found elsewhere, e.g. in stage cut's folder before it is renamed)."""
    return f"bi:{name}@{weights_digest(weights)[:12]}"


def teacher_embeddings(models: Sequence[BiEncoder], key: str, sentences: list[str], batch_size: int,
                       bf16: bool | str, root: Path | None = None) -> np.ndarray:
    """(n, sum of widths) float32: each member's unit embedding scaled by 1/sqrt(k), side by side.

    Encoded in chunks of ``CHUNK`` sentences, each kept in the store under a key of the teacher
    (``key``), the chunk's text and how it is encoded, so a rerun after a kill, or another run over the same
    corpus, encodes only the rest. Several processes (``processes``): the chunks not stored yet are shared out,
    rank r encoding every world-th of them into the store; then every rank reads the whole matrix from it."""
    root = (root or store.default_root()) / "embed"
    on = bf16_on(bf16)  # in the key as resolved: "auto" means fp32 on one machine and bf16 on another
    starts = range(0, len(sentences), CHUNK)
    how = {"teacher": key, "batch": batch_size, "bf16": on}
    files = [root / f"{store.digest({**how, 'texts': sentences[s : s + CHUNK]})}.npy" for s in starts]
    # what is left to encode, as rank 0 sees it: every rank must share out the same list
    todo = distributed.on_main(lambda: [i for i, f in enumerate(files) if not f.is_file()])
    mine = todo[distributed.rank() :: distributed.world()]
    if distributed.is_main() and len(todo) < len(files):
        detail(f"embed: teacher embeddings of {len(files) - len(todo)} of {len(files)} chunks found in the store")
    for n, i in enumerate(mine, 1):
        chunk = sentences[starts[i] : starts[i] + CHUNK]
        _encode_into(models, chunk, batch_size, bf16, files[i])
        detail(f"embed: teacher embeddings, rank {distributed.rank()}: chunk {n}/{len(mine)} ({len(chunk)} sentences)")
    if todo and distributed.world() > 1:  # wait until every rank has put its chunks in the store
        distributed.everywhere(True)
    out: np.ndarray | None = None  # filled chunk by chunk: the matrix is held once, never beside its pieces
    for s, f in zip(starts, files):
        emb = np.load(f, allow_pickle=False)
        if out is None:
            out = np.empty((len(sentences), emb.shape[1]), np.float32)
        out[s : s + len(emb)] = emb
    assert out is not None  # gather refuses an empty sentence list
    return out


def _encode_into(models: Sequence[BiEncoder], chunk: list[str], batch_size: int, bf16: bool | str,
                 file: Path) -> None:
    """One chunk's embeddings, (len(chunk), sum of widths), written whole to ``file``."""
    scale = np.float32(1 / np.sqrt(len(models)))
    emb = np.concatenate([m.encode(chunk, batch_size, bf16, progress=distributed.is_main()) * scale
                          for m in models], axis=1).astype(np.float32)
    file.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(file) as tmp, open(tmp, "wb") as f:
        np.save(f, emb, allow_pickle=False)


def pca_projection(emb: np.ndarray, dim: int) -> np.ndarray:
    """(dim, width): the top ``dim`` principal directions of ``emb`` (centred to find them, as
    sentence-transformers' example does with scikit-learn's PCA; applied without centring)."""
    if dim > emb.shape[1] or dim > len(emb):
        raise EmbedError(f"PCA onto {dim} dimensions needs at least {dim} sentences and a teacher at least that "
                         f"wide; found {len(emb)} sentences of width {emb.shape[1]}")
    return principal_directions(emb, dim).astype(np.float32)


def targets(emb: np.ndarray, student_dim: int, params: EmbedParams,
            directions: np.ndarray | None = None) -> tuple[np.ndarray, str]:
    """What the student's embedding is pulled towards, and the projection used (none | pca | start).
    ``directions`` (student_dim, width): the map a static start was reduced by (pldistill.students.static.start); with
    it, pca projects the targets by those same directions (``start``), so the start already lies near its targets;
    without, by the sentences' own principal directions, a basis the student has to learn its way into."""
    how = params.projection
    if params.loss == "sim":  # cosines alone: the teacher's own space, whatever its width
        return emb, "none"
    if how == "auto":
        how = "none" if emb.shape[1] == student_dim else "pca"
    if how == "none":
        if "mse" in params.loss.split("+") and emb.shape[1] != student_dim:
            raise EmbedError(f"embed.loss {params.loss} compares embeddings coordinate by coordinate, but the "
                             f"teacher is {emb.shape[1]} wide and the student {student_dim}; set embed.projection "
                             f"to pca (or auto), or embed.loss to sim")
        return emb, "none"
    if directions is not None and directions.shape == (student_dim, emb.shape[1]):
        return l2_normalise(emb @ directions.T), "start"
    return l2_normalise(emb @ pca_projection(emb, student_dim).T), "pca"


def learn(student: BiEncoder, sentences: list[str], target: np.ndarray, dev: pd.DataFrame, params: EmbedParams,
          evaluate: EvaluateParams, gen: torch.Generator, desc: str = "embed") -> FitResult:
    """The step itself: ``student`` learns ``target`` (``targets``' rows, one a sentence of ``sentences``), the best
    on ``dev`` kept; its fit."""
    lengths = token_counts(student.model.tokenizer, sentences, None, params.max_length) if params.grouped else None
    return train(student, embed_loss(student, params), (sentences,), target, dev, params, evaluate, gen, desc=desc,
                 lengths=lengths)


def embed_loss(student: BiEncoder, params: EmbedParams) -> EmbeddingLoss:
    """The step's loss: MSE to the targets (rows), and/or MSE of the in-batch cosine matrices (``params.loss``)."""
    return EmbeddingLoss(student.model, params.loss.split("+"), params.sim_weight)


def frame(sentences: list[str], emb: np.ndarray) -> pd.DataFrame:
    return pd.DataFrame({"sentence": sentences, "embedding": list(emb.astype(np.float32))})


def write_embeddings(path: Path, sentences: list[str], emb: np.ndarray) -> None:
    """data/embed/teacher.parquet, a row group at a time: a corpus's frame of per-row arrays (several times the
    matrix's size) never exists whole. Under ROW_GROUP rows: one piece, the bytes ``schemas.write`` gives."""
    with schemas.writer(path, schemas.EMBEDDINGS) as add:
        for start in range(0, len(sentences), ROW_GROUP):
            add(frame(sentences[start : start + ROW_GROUP], emb[start : start + ROW_GROUP]))


def write_meta(path: Path, meta: dict) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(meta, indent=2) + "\n")
