"""What word order is worth to a bi-encoder: its Spearman on a pairs file as is, and with each pair's words shuffled
(the mean of --shuffles shuffles, drawn from --seed; pldistill.base.metrics.order_free, as stage evaluate's
baseline.order_free). A static student (a mean of token vectors) reads no word order at all.

    python benchmarks/order_free.py --model bundled:all-MiniLM-L6-v2 --pairs data/clean/test.parquet --shuffles 8
"""

from __future__ import annotations

import argparse
import json

import numpy as np

from pldistill.base import schemas
from pldistill.base.metrics import correlation, order_free
from pldistill.models.encoders import BiEncoder


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True, help="a bi-encoder: bundled:<name>, a directory or a hub id")
    ap.add_argument("--pairs", required=True, help="a pairs file of the pipeline's (data/clean/<split>.parquet)")
    ap.add_argument("--shuffles", type=int, default=8)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--batch-size", type=int, default=64)
    args = ap.parse_args()
    df = schemas.read(args.pairs, schemas.PAIRS)
    model = BiEncoder.load(args.model)
    score = lambda a, b: model.score(a, b, args.batch_size, False)  # noqa: E731
    s1, s2 = list(df["sentence1"]), list(df["sentence2"])
    as_is = correlation(score(s1, s2), df["score"])
    free = correlation(order_free(score, s1, s2, args.shuffles, np.random.default_rng(args.seed)), df["score"])
    print(json.dumps({"model": args.model, "pairs": args.pairs, "shuffles": args.shuffles, "as_is": as_is,
                      "order_free": free}))


if __name__ == "__main__":
    main()
