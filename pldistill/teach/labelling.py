"""The teacher labels pairs (stage label, for the recipes with a teacher): candidates are read, labelled and
written chunk by chunk into data/silver/silver.parquet; for `kde`, the labelled pool is then cut to the
pairs that make the silver score distribution match the gold one. Under domain adaptation the teacher
(trained on the source domain) also labels the target's own training pairs, scores dropped (strategy
`target`)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from pldistill.base import schemas
from pldistill.base.io import scratch, write_csv_rows
from pldistill.base.seeding import seed_all
from pldistill.data.datasets import gold_dir, task_of
from pldistill.params.config import Params
from pldistill.params.recipes import SPECS
from pldistill.run import distributed
from pldistill.teach import diagnostics
from pldistill.teach.ensemble import embed_corpus
from pldistill.teach.teachers import Teacher

CYCLE = 1  # the label stage's labelling is cycle 1 (Trans-Encoder's cycles label inside stage distill)
TARGET = "target"  # domain adaptation: the strategy of the target's own training pairs (scores dropped)
# Pairs labelled and written at a time: memory stays flat however many pairs there are (docs/benchmarks.md "Labelling
# a million pairs" measures it); batches are length-sorted inside a chunk. Several processes: each labels
# its slice of every chunk, and rank 0 writes the chunk whole (one row group, as one process writes it).
CHUNK_ROWS = 16_384


def label_pairs(teacher: Teacher, pairs: pd.DataFrame, params: Params, cycle: int, labeller: str,
                progress: bool = True) -> pd.DataFrame:
    """The teacher's score (on the gold scale) and logit for every pair."""
    score, logit = teacher.labels(pairs["sentence1"], pairs["sentence2"], params.label.batch_size, params.label.bf16,
                                  progress=progress)
    out = pairs.copy()
    out["logit"] = logit
    out["score"] = score
    out["labeller"] = labeller
    out["cycle"] = cycle
    return out


def label_sharded(teacher: Teacher, pairs: pd.DataFrame, params: Params, labeller: str,
                  progress: bool = False) -> pd.DataFrame | None:
    """``label_pairs`` of ``pairs``, each process labelling its slice; rank 0 gets them all, in order, the
    other ranks None (every rank calls this with the same pairs)."""
    return distributed.shard_apply(lambda part: label_pairs(teacher, part, params, CYCLE, labeller, progress), pairs)


def label_stream(teacher: Teacher, chunks: Iterable[pd.DataFrame], total: int, params: Params, labeller: str,
                 add: Callable[[pd.DataFrame], None]) -> np.ndarray:
    """Label each chunk of pairs and hand it to ``add`` (a Parquet writer); return every score, in order.
    Several processes: every rank goes through the same chunks and labels its slice of each; rank 0 alone
    adds and returns the scores (the other ranks return none)."""
    scores = [np.empty(0)]
    with tqdm(total=total, desc="label", unit="pair", disable=not total or not distributed.is_main(),
              mininterval=2) as bar:
        for chunk in chunks:
            out = label_sharded(teacher, chunk, params, labeller)
            if out is not None:
                add(out)
                scores.append(out["score"].to_numpy(np.float64))
            bar.update(len(chunk))
    return np.concatenate(scores)


def candidate_chunks(params: Params, clean: Path, pairs: Path) -> tuple[Iterator[pd.DataFrame], int, int]:
    """The pairs to label, in chunks; how many in all; how many of them come first from the target's own
    training pairs (domain adaptation: scores dropped)."""
    file = pairs / schemas.CANDIDATES_FILE
    n = schemas.rows(file)
    target = pd.DataFrame(columns=["sentence1", "sentence2", "strategy"])
    if params.adapt.dataset:
        own = schemas.read(clean / "train.parquet", schemas.PAIRS)[["sentence1", "sentence2"]]
        target = own.assign(strategy=TARGET)

    def chunks() -> Iterator[pd.DataFrame]:
        for i in range(0, len(target), CHUNK_ROWS):
            yield target.iloc[i : i + CHUNK_ROWS]
        if n:
            yield from schemas.read_chunks(file, schemas.CANDIDATES, CHUNK_ROWS)

    return chunks(), len(target) + n, len(target)


def kde_keep(gold: pd.DataFrame, scores: np.ndarray, params: Params,
             rng: np.random.Generator) -> tuple[np.ndarray, dict]:
    """Which labelled pool pairs KDE selects (a mask over ``scores``); report pool size, kept, dropped and
    the pool's KL."""
    task = task_of(params.adapt.data or params.data, gold)
    gold_scores = gold["score"].to_numpy()
    keep = diagnostics.kde_select(gold_scores, scores, task, rng, params.sample.kde.grid)
    pool_kl = diagnostics.report(gold_scores, scores)[0]["kl_gold_silver"]
    extra = {"kde": {"task": task, "pool": len(scores), "kept": int(keep.sum()), "dropped": int((~keep).sum()),
                     "pool_kl_gold_silver": pool_kl}}
    return keep, extra


def kde_rewrite(pool: Path, out: Path, keep: np.ndarray) -> None:
    """Copy the labelled pool to ``out``, keeping the rows ``keep`` marks, chunk by chunk."""
    at = 0
    with schemas.writer(out, schemas.PSEUDO) as add:
        for chunk in schemas.read_chunks(pool, schemas.PSEUDO, CHUNK_ROWS):
            add(chunk[keep[at : at + len(chunk)]])
            at += len(chunk)


def _report(gold: pd.DataFrame, scores: np.ndarray, density: Path) -> dict:
    """The silver-vs-gold score diagnostics; the density plot."""
    summary, rows = diagnostics.report(gold["score"].to_numpy(), scores)
    write_csv_rows(density, ["score", "gold", "silver"], rows)
    return summary


def label_candidates(params: Params, clean: Path, pairs: Path, teacher: Path, silver_dir: Path, density: Path,
                     gold_logits: bool = False) -> dict:
    """Label the candidates with the teacher, streaming them to the silver file; KDE-select when
    sample.strategy is kde. ``gold_logits``: also write the teacher's labels of the gold training pairs,
    in their order (a DSE student learns them). Returns the diagnostics."""
    rng, _ = seed_all(params.seed)
    gold = schemas.read(gold_dir(params, clean) / "train.parquet", schemas.PAIRS)  # the source's, when adapting
    chunks, total, n_target = candidate_chunks(params, clean, pairs)
    # auto times its candidates on each process, which could then pick differently: several processes run the
    # backend named, or torch for auto
    backend = params.label.backend if params.label.backend != "auto" or distributed.world() == 1 else "torch"
    model = Teacher.load(teacher, params.teacher.max_length, backend) if total or gold_logits else None
    labeller = model.labeller(teacher) if model else ""
    main = distributed.is_main()
    if gold_logits:
        gold_pairs = gold[["sentence1", "sentence2"]].assign(strategy="gold")
        on_gold = label_sharded(model, gold_pairs, params, labeller, progress=main)
        if main:
            schemas.write(silver_dir / schemas.GOLD_LOGITS_FILE, on_gold, schemas.PSEUDO)
    if not main:  # its slice of every chunk, handed to rank 0, which writes the silver file and the report
        if model:
            label_stream(model, chunks, total, params, labeller, add=lambda out: None)
        return {}
    silver_file = silver_dir / schemas.SILVER_FILE
    kde = params.sample.strategy == "kde"
    extra: dict = {}
    t0 = time.perf_counter()
    with scratch(silver_file) if kde else contextlib.nullcontext(silver_file) as pool:
        with schemas.writer(pool, schemas.PSEUDO, atomic=not kde) as add:  # kde: a pool first, then its selection
            scores = label_stream(model, chunks, total, params, labeller, add) if model else np.empty(0)
        seconds = time.perf_counter() - t0
        if kde:
            keep = np.ones(len(scores), bool)  # the target's own pairs (first) are all kept
            if len(scores) > n_target:
                selected, extra = kde_keep(gold, scores[n_target:], params, rng)
                keep[n_target:] = selected
            kde_rewrite(pool, silver_file, keep)
            scores = scores[keep]
    return {"cycle": CYCLE, "strategy": params.sample.strategy, "candidates": total, **_report(gold, scores, density),
            **extra, "backend": model.ran_on if model else None,
            "label_seconds": round(seconds, 1),
            "label_pairs_per_s": round(total / seconds, 1) if seconds and total else None}


def no_pairs(params: Params, clean: Path, silver_dir: Path, density: Path, reason: str,
             extra: dict | None = None) -> dict:
    """For a recipe that labels no pairs here: an empty silver file, and the report saying why (with
    ``extra``: what it labelled instead)."""
    gold = schemas.read(gold_dir(params, clean) / "train.parquet", schemas.PAIRS)
    schemas.write(silver_dir / schemas.SILVER_FILE, pd.DataFrame(columns=schemas.PSEUDO.names), schemas.PSEUDO)
    return {"skipped": reason, "cycle": CYCLE, "strategy": params.sample.strategy, "candidates": 0,
            **_report(gold, np.empty(0), density), **(extra or {}), "label_seconds": 0.0, "label_pairs_per_s": None}


def label(params: Params, clean: Path, pairs: Path, teacher: Path, silver_dir: Path, density: Path) -> dict:
    """Stage label, as the recipe's spec says (``labels``): the teacher labels the candidate pairs (``pairs``; with
    ``pairs+gold`` its logits of the gold training pairs too, which a DSE student learns); ``distill``: no pairs
    here (the recipe labels inside stage distill); ``embeddings``: the ensemble embeds the sentences the student
    learns. Returns the report."""
    spec = SPECS[params.recipe]
    if spec.labels == "distill":
        return no_pairs(params, clean, silver_dir, density, f"recipe {spec.name} labels inside stage distill")
    if spec.labels == "embeddings":
        embedded = {"ensemble": embed_corpus(params, clean, teacher, silver_dir)}
        return no_pairs(params, clean, silver_dir, density, f"recipe {spec.name} labels sentences with embeddings "
                        f"(data/silver/{schemas.ENSEMBLE_FILE})", embedded)
    return label_candidates(params, clean, pairs, teacher, silver_dir, density, spec.labels == "pairs+gold")
