"""Score sentence pairs with a model folder the pipeline wrote: the served student (models/serve), an export
(models/export/<format>) or the torch student (models/bi). The similarity is the cosine of the two embeddings
(a DSE student's: its head's score), as stage evaluate scores them.

    python -m pldistill.score models/serve --pair "A man plays a guitar." "Someone plays an instrument."
    python -m pldistill.score models/serve --table pairs.csv --out scored.csv   # columns sentence1, sentence2
    python -m pldistill.score models/serve --table mine.csv --columns question,answer --out scored.csv
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pldistill.base.errors import DataError, ModelError
from pldistill.base.io import atomic_path
from pldistill.data.reading import read_table
from pldistill.ship.export import FILES, HEADS, STATIC, ExportError


def form(folder: Path) -> str:
    """What a folder holds: an export's format name (its graph file, int8 before fp32), or ``torch``."""
    if not folder.is_dir():
        raise ModelError(f"{folder}: no such folder; expected a model folder the pipeline wrote, e.g. models/serve")
    for fmt in ("openvino-int8", "openvino", "onnx-int8", "onnx"):
        if (folder / FILES[fmt]).is_file():
            return fmt
    if (folder / FILES[STATIC[0]]).is_file() and not (folder / "modules.json").is_file():
        return STATIC[0]  # Model2Vec's layout; its loader reads float32, float16 and int8 tables alike
    return "torch"


def open_model(folder: Path):
    """The folder's model, with ``score(s1, s2)`` as stage evaluate calls it."""
    fmt = form(folder)
    if fmt != "torch":
        from pldistill.ship.served import Served

        return Served(folder, fmt)
    if any((folder / head).is_dir() for head in HEADS):
        from pldistill.models.dse import DSE

        return DSE.load(folder)
    from pldistill.models.encoders import BiEncoder

    return BiEncoder.load(str(folder))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model", type=Path, help="a model folder: models/serve, models/export/<format> or models/bi")
    what = ap.add_mutually_exclusive_group(required=True)
    what.add_argument("--pair", nargs=2, metavar=("SENTENCE1", "SENTENCE2"), help="one pair, scored and printed")
    what.add_argument("--table", type=Path, help="a .csv/.tsv/.jsonl/.parquet table with sentence1, sentence2")
    ap.add_argument("--columns", default="sentence1,sentence2", metavar="A,B",
                    help="with --table: the table's two sentence columns (default sentence1,sentence2)")
    ap.add_argument("--out", type=Path, help="with --table: write it here with a column `similarity` (.csv)")
    args = ap.parse_args(argv)
    try:
        model = open_model(args.model)
        if args.pair:
            print(f"{float(model.score([args.pair[0]], [args.pair[1]])[0]):.4f}")
            return 0
        df, bad = read_table(args.table)
        cols = args.columns.split(",")
        if len(cols) != 2:
            raise DataError(f"--columns {args.columns}: expected two column names, e.g. question,answer")
        if missing := [c for c in cols if c not in df.columns]:
            raise DataError(f"{args.table}: expected columns {', '.join(cols)}; found {list(df.columns)} "
                            f"(missing {', '.join(missing)}; name yours with --columns A,B)")
        if bad:
            print(f"{args.table}: {bad} lines could not be parsed and were skipped", file=sys.stderr)
        df = df.assign(similarity=model.score(df[cols[0]].astype(str).tolist(), df[cols[1]].astype(str).tolist()))
        if args.out:
            with atomic_path(args.out) as tmp:
                df.to_csv(tmp, index=False)
            print(f"{args.out}: {len(df)} pairs scored ({form(args.model)})")
        else:
            print(df.to_csv(index=False), end="")
    except (DataError, ModelError, ExportError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
