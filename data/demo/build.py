"""Merge the hand-written parts into pairs.tsv with a split column (run once; output is committed).

Splits are by group, so the variants of one base sentence never straddle train and test:
every 7th group (offset 3) goes to dev, every 7th (offset 5) to test, the rest to train.
"""
import csv
from pathlib import Path

here = Path(__file__).parent
rows = []
for part in sorted((here / "parts").glob("*.tsv")):
    with part.open(encoding="utf-8") as f:
        rows += list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
groups = sorted({r["group"] for r in rows})
split_of = {g: ("dev" if i % 7 == 3 else "test" if i % 7 == 5 else "train") for i, g in enumerate(groups)}
with (here / "pairs.tsv").open("w", encoding="utf-8", newline="") as f:
    w = csv.writer(f, delimiter="\t", quoting=csv.QUOTE_NONE, lineterminator="\n")
    w.writerow(["split", "group", "score", "sentence1", "sentence2"])
    for r in rows:
        w.writerow([split_of[r["group"]], r["group"], r["score"], r["sentence1"], r["sentence2"]])
