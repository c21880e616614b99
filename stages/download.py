"""download: read the dataset named by data.dataset and write data/raw/<name>/{train,dev,test}.parquet;
with domain adaptation (adapt.dataset), the source domain's too, to data/raw/source/<name>/."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from pldistill import datasets, schemas
from pldistill.config import DataParams, Params
from pldistill.io import write_report
from pldistill.runtime import run_stage
from pldistill.seeding import seed_all


def fetch(data: DataParams, rng: np.random.Generator, out: Path) -> dict:
    """Load, validate and split one dataset into ``out/<name>/``; report where from and what was dropped."""
    loaded = datasets.load(data, rng)  # one stream: the split first, then max_train
    task = datasets.task_of(data, loaded.splits["train"])
    splits = dict(loaded.splits)
    if data.max_train and len(splits["train"]) > data.max_train:
        keep = sorted(rng.choice(len(splits["train"]), data.max_train, replace=False))
        splits["train"] = splits["train"].iloc[keep].reset_index(drop=True)
    for split, df in splits.items():
        schemas.write(out / data.name / f"{split}.parquet", df, schemas.PAIRS)
    return {
        "dataset": data.name, "source": loaded.source, "sha256": loaded.sha256, "task": task,
        "rows": {s: len(df) for s, df in splits.items()},
        "dropped": dict(sorted(loaded.dropped.items())), "dropped_total": sum(loaded.dropped.values()),
    }


def download(params: Params, out: Path, report: Path) -> dict:
    """Malformed rows are dropped and counted by reason. The target is drawn first from the seed's
    stream, so adding a source domain leaves the target's split as it was."""
    rng, _ = seed_all(params.seed)
    result = fetch(params.data, rng, out)
    if params.adapt.data:
        result["adapt"] = fetch(params.adapt.data, rng, out / datasets.SOURCE_DIR)
    write_report(report, result)
    return result


if __name__ == "__main__":
    run_stage(download, ["out", "report"])
