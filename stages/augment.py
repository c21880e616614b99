"""augment: clean the gold pairs (normalise text; drop empty, too-short and repeated training pairs)."""

from __future__ import annotations

from pathlib import Path

from pldistill import cleaning, schemas
from pldistill.config import Params
from pldistill.datasets import SPLITS, DataError
from pldistill.io import write_json
from pldistill.runtime import run_stage


def augment(params: Params, raw: Path, out: Path, report: Path) -> dict:
    """Clean train (dropping rows, counted by reason); dev and test are normalised but never dropped,
    so their scores stay comparable with published ones."""
    src = raw / params.data.name
    rows_in, rows_out = {}, {}
    dropped = {}
    for split in SPLITS:
        df = schemas.read(src / f"{split}.parquet", schemas.PAIRS)
        rows_in[split] = len(df)
        if split == "train":
            df, counts = cleaning.clean_train(df, params.augment.min_chars, params.augment.unicode_form)
            dropped = dict(counts)
            if df.empty:
                raise DataError(f"{src / 'train.parquet'}: cleaning dropped every training pair ({dropped}); "
                                f"check the data or lower augment.min_chars")
        else:
            df = cleaning.normalise_pairs(df, params.augment.unicode_form)
        rows_out[split] = len(df)
        schemas.write(out / f"{split}.parquet", df, schemas.PAIRS)
    result = {"rows_in": rows_in, "rows_out": rows_out, "dropped": dropped}
    write_json(report, result)
    return result


if __name__ == "__main__":
    run_stage(augment, ["raw", "out", "report"])
