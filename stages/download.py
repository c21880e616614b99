"""download: read the dataset named by data.dataset and write data/raw/<name>/{train,dev,test}.parquet;
with domain adaptation (adapt.dataset), the source domain's too, to data/raw/source/<name>/."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from pldistill.base import schemas
from pldistill.base.io import write_report
from pldistill.data import datasets
from pldistill.params.data import DataParams, DataSections, load_data_sections
from pldistill.run.runtime import main

FIX = ("Add pairs (with varied scores) to the table; for a table we split, data.split sets the dev and test "
       "fractions, and data.max_train must leave train at least 2")


def warn_overlap(source: str, overlap: dict[str, int], splits: dict) -> None:
    """A given split whose dev or test pairs are also training pairs: their scores would partly measure memory."""
    found = [f"{n} of {len(splits[s])} {s} pairs" for s in ("dev", "test") if (n := overlap[f"{s}_in_train"])]
    if found:
        print(f"warning: {source}: {' and '.join(found)} also occur in train (the same two sentences, in either "
              f"order, ignoring case, spacing and Unicode form), so their scores partly measure memory; remove them "
              f"from train, or drop the split column and let the pairs be split for you (copies merged first)")


def fetch(data: DataParams, rng: np.random.Generator, out: Path) -> dict:
    """Load, validate and split one dataset into ``out/<name>/``; report where from and what was dropped."""
    loaded = datasets.load(data, rng)  # one stream: the split first, then max_train
    task = datasets.task_of(data, loaded.splits["train"])
    splits, left_out = dict(loaded.splits), None
    if data.max_train and len(splits["train"]) > data.max_train:
        keep = sorted(rng.choice(len(splits["train"]), data.max_train, replace=False))
        left_out = splits["train"].drop(index=splits["train"].index[keep])  # data.unscored rest: scores dropped
        splits["train"] = splits["train"].iloc[keep].reset_index(drop=True)
    datasets.check_splits(splits, loaded.source, FIX)
    overlap = datasets.overlap(splits)
    warn_overlap(loaded.source, overlap, splits)
    for split, df in splits.items():
        schemas.write(out / data.name / f"{split}.parquet", df, schemas.PAIRS)
    unscored, unscored_report = datasets.read_given(data, left_out)
    datasets.write_given(out / data.name / schemas.UNSCORED_FILE, unscored)
    return {
        "dataset": data.name, "source": loaded.source, "sha256": loaded.sha256, "task": task,
        "rows": {s: len(df) for s, df in splits.items()},
        "dropped": dict(sorted(loaded.dropped.items())), "dropped_total": sum(loaded.dropped.values()),
        **({"unscored": unscored_report} if data.unscored else {}),
        "duplicates": loaded.duplicates, "overlap": overlap,
    }


def download(params: DataSections, out: Path, report: Path) -> dict:
    """``params``: the sections it reads (DataSections; a whole Params serves as well). Malformed rows are
    dropped and counted by reason. The target is drawn first from the seed's stream, so adding a source domain
    leaves the target's split as it was."""
    rng = np.random.default_rng(params.seed)  # the stream seed_all's numpy generator gives; no torch in a data stage
    result = fetch(params.data, rng, out)
    if params.adapt.data:
        result["adapt"] = fetch(params.adapt.data, rng, out / datasets.SOURCE_DIR)
    write_report(report, result)
    return result


if __name__ == "__main__":
    main(download, ["out", "report"], load=load_data_sections)
