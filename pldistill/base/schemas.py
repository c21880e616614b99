"""Parquet schemas of every artifact passed between stages, and checked reads/writes of them."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import yaml

from pldistill.base.cleaning import sentence_key
from pldistill.base.errors import SchemaError
from pldistill.base.io import ROW_GROUP, atomic_path, write_parquet

# Gold pairs: data/raw/<dataset>/{train,dev,test}.parquet and data/clean/{train,dev,test}.parquet.
# Regression scores are scaled to [0, 1]; classification labels are 0/1.
PAIRS = pa.schema(
    [
        pa.field("sentence1", pa.string(), nullable=False),
        pa.field("sentence2", pa.string(), nullable=False),
        pa.field("score", pa.float64(), nullable=False),
    ]
)

# Candidate pairs: data/pairs/candidates.parquet. `strategy` names what found the pair
# ("bm25", or several joined by "+" when more than one strategy found it).
CANDIDATES = pa.schema(
    [
        pa.field("sentence1", pa.string(), nullable=False),
        pa.field("sentence2", pa.string(), nullable=False),
        pa.field("strategy", pa.string(), nullable=False),
    ]
)

# Round-trip paraphrases: data/clean/paraphrases.parquet (empty without an RTT backend).
PARAPHRASES = pa.schema(
    [
        pa.field("sentence", pa.string(), nullable=False),
        pa.field("paraphrase", pa.string(), nullable=False),
        pa.field("language", pa.string(), nullable=False),
    ]
)
PARAPHRASES_FILE = "paraphrases.parquet"

# Ensemble embeddings: data/silver/ensemble.parquet (recipe rtt-ensemble), the teacher's L2-normalised
# embedding of each sentence the student learns from; every row has the same length.
EMBEDDINGS = pa.schema(
    [
        pa.field("sentence", pa.string(), nullable=False),
        pa.field("embedding", pa.list_(pa.float32()), nullable=False),
    ]
)

# Given pairs: data/raw/<dataset>/unscored.parquet and data/clean/unscored.parquet, pairs the user has
# without scores (data.unscored: a table, or `rest`, the training pairs max_train left out) for the teacher
# to label (sample.strategy given). Empty when data.unscored is null.
UNSCORED = pa.schema(
    [
        pa.field("sentence1", pa.string(), nullable=False),
        pa.field("sentence2", pa.string(), nullable=False),
    ]
)

# Pseudo-labels: data/pseudo/cycle-NN.parquet. `score` in [0, 1]; `logit` is the teacher's raw
# output before the sigmoid (null for labellers without one, e.g. a bi-encoder's cosine).
PSEUDO = pa.schema(
    [
        pa.field("sentence1", pa.string(), nullable=False),
        pa.field("sentence2", pa.string(), nullable=False),
        pa.field("score", pa.float64(), nullable=False),
        pa.field("logit", pa.float64(), nullable=True),
        pa.field("labeller", pa.string(), nullable=False),
        pa.field("cycle", pa.int32(), nullable=False),
        pa.field("strategy", pa.string(), nullable=False),
    ]
)


# File names inside the stage output folders that dvc.yaml names (data/pairs/, data/silver/, data/pseudo/).
CANDIDATES_FILE = "candidates.parquet"
SILVER_FILE = "silver.parquet"  # the teacher's labels of the candidates (stage label)
GOLD_LOGITS_FILE = "gold.parquet"  # recipe dse: the teacher's logits on the gold training pairs, same order
UNSCORED_FILE = "unscored.parquet"  # data/raw/<dataset>/ and data/clean/: the given pairs (data.unscored)
ENSEMBLE_FILE = "ensemble.parquet"  # recipe rtt-ensemble: the ensemble's embedding of each corpus sentence


def pseudo_file(cycle: int, labeller: str | None = None) -> str:
    """cycle-01.parquet: what the student learned in cycle 1; cycle-01-cross.parquet: the labels the
    cross-encoder(s) gave in cycle 1 of a recipe where several models label (trans-encoder)."""
    return f"cycle-{cycle:02d}.parquet" if labeller is None else f"cycle-{cycle:02d}-{labeller}.parquet"


def _rerun(path: Path) -> str:
    """What to do about a bad artifact: force the dvc.yaml stage whose output holds ``path`` to run again."""
    try:  # dvc.yaml is where the paths are written; read it only on this error path
        stages = yaml.safe_load(Path("dvc.yaml").read_text())["stages"]
        rel = path.resolve().relative_to(Path.cwd().resolve())
    except (OSError, ValueError, KeyError, TypeError, yaml.YAMLError):
        stages, rel = {}, path
    for name, stage in stages.items():
        for out in stage.get("outs", []):
            target = Path(next(iter(out)) if isinstance(out, dict) else out)  # "- path:" with options, or "- path"
            if rel == target or target in rel.parents:
                return f"rerun the stage that writes it: dvc repro -f -s {name}"
    return "rerun the stage that writes it: dvc repro -f -s <stage> (dvc.yaml lists it among the stage's outs)"


def _open(path: Path) -> pq.ParquetFile:
    if not path.is_file():
        raise SchemaError(f"{path}: file not found; run the stage that writes it (`dvc repro`)")
    try:
        return pq.ParquetFile(path)
    except (pa.ArrowException, OSError) as err:  # random bytes, a truncated file
        raise SchemaError(f"{path}: not a readable Parquet file ({err}); {_rerun(path)}") from None


def _checked(table: pa.Table, schema: pa.Schema, path: Path) -> pa.Table:
    """``table``'s columns in schema order, cast to the schema's types; nulls only where it allows them."""
    missing = [f.name for f in schema if f.name not in table.column_names]
    if missing:
        raise SchemaError(
            f"{path}: expected columns {schema.names}; missing {missing} (found {table.column_names}); {_rerun(path)}"
        )
    for field in schema:
        col = table.column(field.name)
        if not col.type.equals(field.type):
            try:
                col = col.cast(field.type)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                raise SchemaError(
                    f"{path}: column {field.name!r} should be {field.type}, found {col.type}; {_rerun(path)}"
                ) from None
            table = table.set_column(table.column_names.index(field.name), field.name, col)
        if not field.nullable and col.null_count:
            raise SchemaError(f"{path}: column {field.name!r} has {col.null_count} null value(s); {_rerun(path)}")
    return table.select(schema.names)


def read(path: Path | str, schema: pa.Schema) -> pd.DataFrame:
    """Read a Parquet artifact, check it against ``schema`` and return its columns in schema order."""
    path = Path(path)
    pf = _open(path)
    try:
        table = pf.read()
    except (pa.ArrowException, OSError) as err:  # a readable footer over corrupt pages
        raise SchemaError(f"{path}: not a readable Parquet file ({err}); {_rerun(path)}") from None
    return _checked(table, schema, path).to_pandas()


def sentences(path: Path | str, schema: pa.Schema = PAIRS) -> list[str]:
    """Every sentence1, then every sentence2, of a pair table (repeats kept)."""
    df = read(path, schema)
    return [*df["sentence1"], *df["sentence2"]]


def eval_keys(clean: Path | str) -> set[str]:
    """The sentences of the cleaned dev and test pairs, as cleaning.sentence_key compares them (case, spacing,
    Unicode form aside): no stage may learn one of them."""
    return {sentence_key(t) for split in ("dev", "test") for t in sentences(Path(clean) / f"{split}.parquet")}


def rows(path: Path | str) -> int:
    """How many rows a Parquet artifact holds (its footer alone is read)."""
    path = Path(path)
    return _open(path).metadata.num_rows


def read_chunks(path: Path | str, schema: pa.Schema, chunk_rows: int) -> Iterator[pd.DataFrame]:
    """``read`` in pieces of at most ``chunk_rows`` rows, each checked: memory follows the piece, not the file."""
    path = Path(path)
    pf = _open(path)
    _checked(pf.schema_arrow.empty_table(), schema, path)  # a missing column fails before any work
    batches = pf.iter_batches(batch_size=chunk_rows, columns=[n for n in schema.names if n in pf.schema_arrow.names])
    while True:
        try:
            batch = next(batches)
        except StopIteration:
            return
        except (pa.ArrowException, OSError) as err:
            raise SchemaError(f"{path}: not a readable Parquet file ({err}); {_rerun(path)}") from None
        yield _checked(pa.Table.from_batches([batch]), schema, path).to_pandas()


def _table(path: Path | str, df: pd.DataFrame, schema: pa.Schema) -> pa.Table:
    missing = [n for n in schema.names if n not in df.columns]
    if missing:
        raise SchemaError(f"{path}: cannot write, columns {missing} missing from the frame")
    return pa.Table.from_pandas(df[schema.names], schema=schema, preserve_index=False)


def write(path: Path | str, df: pd.DataFrame, schema: pa.Schema) -> None:
    """Write ``df`` atomically with exactly ``schema``'s columns and types."""
    write_parquet(path, _table(path, df, schema))


@contextlib.contextmanager
def writer(path: Path | str, schema: pa.Schema, atomic: bool = True) -> Iterator[Callable[[pd.DataFrame], None]]:
    """Write a Parquet artifact piece by piece: ``add(df)`` appends a row group. The file appears at
    ``path`` whole when the block ends, or not at all (``atomic=False``: written in place, for a scratch
    file); with no piece added it holds no rows. One piece gives the same bytes as ``write``."""
    with atomic_path(path) if atomic else contextlib.nullcontext(Path(path)) as tmp:
        out: pq.ParquetWriter | None = None

        def add(df: pd.DataFrame) -> None:
            nonlocal out
            table = _table(path, df, schema)
            if out is None:
                out = pq.ParquetWriter(tmp, table.schema, compression="zstd")
            out.write_table(table, row_group_size=ROW_GROUP)

        try:
            yield add
            if out is None:
                add(pd.DataFrame(columns=schema.names))
        finally:
            if out is not None:
                out.close()
