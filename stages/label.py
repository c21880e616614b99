"""label: the teacher scores the candidate pairs (for `kde`, then keeps those that make the silver score
distribution match the gold one); writes data/silver/silver.parquet and the label diagnostics.

Under domain adaptation the teacher (trained on the source domain) also labels the target's own
training pairs, scores dropped (strategy `target`).

recipe trans-encoder has no teacher: its labellings happen inside stage distill, so this stage writes
an empty silver set and says so. recipe rtt-ensemble labels sentences, not pairs: the ensemble's
embedding of every corpus sentence goes to data/silver/ensemble.parquet."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pandas as pd

from pldistill import diagnostics, ensemble, schemas
from pldistill.config import Params
from pldistill.datasets import gold_dir, task_of
from pldistill.io import write_csv_rows, write_json
from pldistill.runtime import run_stage, seed_all
from pldistill.teachers import Teacher


def label_pairs(teacher: Teacher, pairs: pd.DataFrame, params: Params, cycle: int, labeller: str) -> pd.DataFrame:
    """The teacher's score (on the gold scale) and logit for every candidate pair."""
    score, logit = teacher.labels(pairs["sentence1"], pairs["sentence2"], params.label.batch_size, params.label.bf16,
                                  progress=True)
    out = pairs.copy()
    out["logit"] = logit
    out["score"] = score
    out["labeller"] = labeller
    out["cycle"] = cycle
    return out


def kde_filter(gold: pd.DataFrame, pool: pd.DataFrame, params: Params, rng: np.random.Generator) -> tuple[pd.DataFrame, dict]:
    """Keep the labelled pool pairs KDE selects; report pool size, kept, dropped and the pool's KL."""
    task = task_of(params.adapt.data or params.data, gold)
    scores, gold_scores = pool["score"].to_numpy(), gold["score"].to_numpy()
    keep = diagnostics.kde_select(gold_scores, scores, task, rng, params.sample.kde.grid)
    pool_kl = diagnostics.report(gold_scores, scores)[0]["kl_gold_silver"]
    extra = {"kde": {"task": task, "pool": len(pool), "kept": int(keep.sum()), "dropped": int((~keep).sum()),
                     "pool_kl_gold_silver": pool_kl}}
    return pool[keep].reset_index(drop=True), extra


TARGET = "target"  # domain adaptation: the strategy of the target's own training pairs (scores dropped)

SKIPPED = {"trans-encoder": "recipe trans-encoder labels inside stage distill",
           "rtt-ensemble": "recipe rtt-ensemble labels sentences with embeddings (data/silver/ensemble.parquet)"}


def embed_corpus(params: Params, clean: Path, teacher: Path, silver_dir: Path) -> dict:
    """The ensemble's embedding of every sentence the student will learn."""
    ep = params.ensemble
    model = ensemble.Ensemble.load(teacher, ep.weights, ep.weight_temperature, params.teacher.max_length)
    sentences = ensemble.corpus(clean)
    t0 = time.perf_counter()
    emb = model.encode(sentences, params.label.batch_size, params.label.bf16, progress=True)
    seconds = time.perf_counter() - t0
    schemas.write(silver_dir / schemas.ENSEMBLE_FILE, ensemble.embeddings_frame(sentences, emb), schemas.EMBEDDINGS)
    return {"sentences": len(sentences), "dim": int(emb.shape[1]), "members": model.names,
            "weights": [round(float(w), 6) for w in model.weights], "embed_seconds": round(seconds, 1)}


def label(params: Params, clean: Path, pairs: Path, teacher: Path, silver_dir: Path, report: Path,
          density: Path) -> dict:
    """Label the candidates with the teacher; KDE-select when sample.strategy is kde; report diagnostics."""
    rng, _ = seed_all(params.seed)
    gold = schemas.read(gold_dir(params, clean) / "train.parquet", schemas.PAIRS)  # the source's, when adapting
    cands = schemas.read(pairs / schemas.CANDIDATES_FILE, schemas.CANDIDATES)
    skipped = params.recipe in ("trans-encoder", "rtt-ensemble")
    if skipped:
        cands = cands.iloc[:0]
    if params.adapt.dataset:  # the target's own training pairs, scores dropped, are labelled first
        target = schemas.read(clean / "train.parquet", schemas.PAIRS)[["sentence1", "sentence2"]]
        cands = pd.concat([target.assign(strategy=TARGET), cands], ignore_index=True)
    extra: dict = {}
    if params.recipe == "rtt-ensemble":
        extra["ensemble"] = embed_corpus(params, clean, teacher, silver_dir)
    cycle = 1
    silver = pd.DataFrame(columns=schemas.PSEUDO.names)
    seconds = 0.0
    dse = params.recipe == "dse"  # DSE also learns the teacher's logits on the gold pairs
    if len(cands) or dse:
        model = Teacher.load(teacher, params.teacher.max_length)
        labeller = model.labeller(teacher)
        t0 = time.perf_counter()
        silver = label_pairs(model, cands, params, cycle, labeller) if len(cands) else silver
        seconds = time.perf_counter() - t0
        if dse:
            gold_pairs = gold[["sentence1", "sentence2"]].assign(strategy="gold")
            schemas.write(silver_dir / schemas.GOLD_LOGITS_FILE, label_pairs(model, gold_pairs, params, cycle, labeller),
                          schemas.PSEUDO)

    if params.sample.strategy == "kde" and len(silver):  # the target's own pairs are all kept
        own = silver["strategy"] == TARGET
        kept, kde = kde_filter(gold, silver[~own].reset_index(drop=True), params, rng)
        silver = pd.concat([silver[own], kept], ignore_index=True)
        extra.update(kde)
    schemas.write(silver_dir / schemas.SILVER_FILE, silver, schemas.PSEUDO)  # after the gold logits: same dir

    summary, rows = diagnostics.report(gold["score"].to_numpy(), silver["score"].to_numpy(dtype=np.float64))
    write_csv_rows(density, ["score", "gold", "silver"], rows)
    result = {
        **({"skipped": SKIPPED[params.recipe]} if skipped else {}),
        "cycle": cycle, "strategy": params.sample.strategy, "candidates": len(cands), **summary, **extra,
        "label_seconds": round(seconds, 1),
        "label_pairs_per_s": round(len(cands) / seconds, 1) if seconds else None,
    }
    write_json(report, result)
    return result


if __name__ == "__main__":
    run_stage(label, ["clean", "pairs", "teacher", "silver_dir", "report", "density"])
