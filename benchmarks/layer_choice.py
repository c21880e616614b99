"""Which layers a pruned student should keep: every k-of-n cut of a model, scored untrained on dev.

Stage cut does this in the pipeline (student.layers: auto, student.keep: k); this script prints the ranking of
several depths at once, with a split shown beside dev that never ranks.

A cut's start is where its training begins (all-MiniLM-L6-v2 cut to [0, 2, 4] starts at 67.41 test). This ranks
every subset of ``--keep`` layers by the dev Spearman of its cosine, with no training; ``--report`` adds a split
that is shown, never used to rank (e.g. test). The encode cost depends on how many layers are kept, not which.

    python benchmarks/layer_choice.py --dev /tmp/fast/base/data/clean/dev.parquet --keep 2,3 \
        --report /tmp/fast/base/data/clean/test.parquet
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pandas as pd
import torch

from pldistill.base import schemas
from pldistill.base.device import cpu_flags
from pldistill.models.encoders import BiEncoder, native_bf16
from pldistill.students import cut


def rank(model: str, keep: int, splits: dict[str, pd.DataFrame], max_length: int = 128,
         batch_size: int = 64) -> list[dict]:
    """Every ``keep``-layer cut of ``model`` with its Spearman on each split, best on ``splits["dev"]`` first: stage
    cut's ranking (pldistill.students.cut.rank), with the other splits scored beside it."""
    rows = cut.rank(BiEncoder.load(model, max_length), keep, splits["dev"], batch_size)
    for r in rows:
        alone = BiEncoder.load(model, max_length, layers=r["layers"])
        r.update({name: cut.dev_spearman(alone, df, batch_size) for name, df in splits.items() if name != "dev"})
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dev", required=True, type=Path, help="the split that ranks the cuts (Parquet, schema PAIRS)")
    ap.add_argument("--report", type=Path, default=None, help="a split shown beside dev, never used to rank")
    ap.add_argument("--model", default="bundled:all-MiniLM-L6-v2")
    ap.add_argument("--keep", default="3", help="how many layers each cut keeps, e.g. 2,3")
    a = ap.parse_args()
    splits = {"dev": schemas.read(a.dev, schemas.PAIRS)}
    if a.report:
        splits["report"] = schemas.read(a.report, schemas.PAIRS)
    print(json.dumps({"cpu": cpu_flags(), "native_bf16": native_bf16(), "torch_threads": torch.get_num_threads()}))
    for keep in map(int, a.keep.split(",")):
        rows = rank(a.model, keep, splits)
        extra = ("report |", "---|") if a.report else ("", "")
        print(f"\n{keep} layers\n| layers | dev | {extra[0]}\n|---|---|{extra[1]}")
        for r in rows:
            print(f"| {r['layers']} | {r['dev']} | " + (f"{r['report']} |" if a.report else ""))


if __name__ == "__main__":
    main()
