"""download: read the dataset named by data.dataset and write data/raw/<name>/{train,dev,test}.parquet."""

from __future__ import annotations

from pathlib import Path

from pldistill import datasets, schemas
from pldistill.config import Params
from pldistill.io import write_json
from pldistill.runtime import run_stage, seed_all


def download(params: Params, out: Path, report: Path) -> dict:
    """Load, validate and split the dataset; malformed rows are dropped and counted by reason."""
    rng, _ = seed_all(params.seed)
    loaded = datasets.load(params.data, rng)  # one stream: the split first, then max_train
    task = datasets.task_of(params.data, loaded.splits["train"])
    splits = dict(loaded.splits)
    if params.data.max_train and len(splits["train"]) > params.data.max_train:
        keep = sorted(rng.choice(len(splits["train"]), params.data.max_train, replace=False))
        splits["train"] = splits["train"].iloc[keep].reset_index(drop=True)
    for split, df in splits.items():
        schemas.write(out / params.data.name / f"{split}.parquet", df, schemas.PAIRS)
    result = {
        "dataset": params.data.name, "source": loaded.source, "sha256": loaded.sha256, "task": task,
        "rows": {s: len(df) for s, df in splits.items()},
        "dropped": dict(sorted(loaded.dropped.items())), "dropped_total": sum(loaded.dropped.values()),
    }
    write_json(report, result)
    return result


if __name__ == "__main__":
    run_stage(download, ["out", "report"])
