"""sample: choose new unlabelled sentence pairs for the teacher to label (sample.strategy)."""

from __future__ import annotations

import time
from pathlib import Path

from pldistill import sampling, schemas
from pldistill.config import Params
from pldistill.io import write_json
from pldistill.runtime import run_stage, seed_all

def sample(params: Params, clean: Path, out: Path, report: Path) -> dict:
    """Write data/pairs/candidates.parquet: pairs over the training sentences, with the strategy that found each."""
    rng, _ = seed_all(params.seed)
    gold = schemas.read(clean / "train.parquet", schemas.PAIRS)
    t0 = time.perf_counter()
    pairs = sampling.sample(gold, params.sample, rng)
    seconds = time.perf_counter() - t0
    schemas.write(out / schemas.CANDIDATES_FILE, pairs, schemas.CANDIDATES)
    result = {
        "strategy": params.sample.strategy, "top_k": params.sample.top_k,
        "unique_sentences": len(sampling.unique_sentences(gold)), "gold_pairs": len(gold),
        "candidates": len(pairs), "seconds": round(seconds, 2),
    }
    write_json(report, result)
    return result


if __name__ == "__main__":
    run_stage(sample, ["clean", "out", "report"])
