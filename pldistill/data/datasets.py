"""data.dataset loaded: the demo, a table given by path, or a public dataset (pldistill.data.public_sets), each
registered in ``LOADERS``; then the checks that stop a run (too many rows dropped for one reason, a split too
small to measure) and the task inferred; and the pairs given without scores (data.unscored), read and cleaned.

Each loader returns a :class:`Loaded` (pldistill.data.rows): the three splits as frames with columns sentence1,
sentence2, score (scores scaled to [0, 1]) and the count of malformed rows dropped, by reason. A table without a
split column has its copies of a pair merged before it is split (``merge_copies``), so no pair is on both
sides. Files are read by pldistill.data.reading, the one reader of every text input.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

from pldistill.base import cleaning, schemas
from pldistill.base.cleaning import in_train
from pldistill.base.errors import DataError
from pldistill.base.io import sha256_file
from pldistill.data.public_sets import load_mrpc, load_qqp, load_sickr, load_stsb
from pldistill.data.reading import read_table
from pldistill.data.rows import (  # noqa: F401  (re-exported: their old home)
    MAX_CHARS,
    SPLITS,
    Drops,
    Loaded,
    clean_rows,
    merge_copies,
    reason_of,
    sentence_groups,
    split_randomly,
)
from pldistill.params.data import DEMO_PAIRS, DataParams, DataSections
from pldistill.params.names import format_suffix

SOURCE_DIR = "source"  # domain adaptation: data/raw/source/<name>/ and data/clean/source/ hold the source domain
DEMO_PATH = Path(DEMO_PAIRS)

TASK_OF = {"stsb": "regression", "sickr": "regression", "mrpc": "classification", "qqp": "classification"}
_SPLIT_ALIASES = {"train": "train", "dev": "dev", "validation": "dev", "val": "dev", "test": "test"}
MIN_PAIRS = 2  # per split: a correlation or an AUC needs two pairs with different scores at the very least


# --------------------------------------------------------------------------- tables by path
def load_table(path: Path, params: DataParams, rng: np.random.Generator,
               score_range: tuple[float, float] | None) -> Loaded:
    if not path.exists():
        raise DataError(f"{path}: file not found")
    bad_lines: list[str] = []
    df, unparseable = read_table(path, bad_lines)
    if df.empty:
        seen = f": {'; '.join(bad_lines)}" if bad_lines else ""
        form = ("one JSON object per line (JSON Lines, not one JSON array)" if format_suffix(path.name) == ".jsonl"
                else "a header line and one row per sentence pair")
        raise DataError(f"{path}: no rows to read (columns {list(df.columns)}; {unparseable} line(s) that did not "
                        f"parse{seen}); expected {form}{_one_column_hint(list(df.columns), path)}")
    mapping = {"sentence1": "sentence1", "sentence2": "sentence2", "score": "score", "split": "split"}
    mapping.update(params.columns)
    need = [mapping[c] for c in ("sentence1", "sentence2", "score")]
    if any(c not in df.columns for c in need):
        raise DataError(
            f"{path}: expected columns {need}; found {list(df.columns)} — map yours with data.columns, "
            f"e.g. data.columns: {{sentence1: question1, sentence2: question2, score: label}}"
            f"{_one_column_hint(list(df.columns), path)}"
        )
    rename = {yours: ours for ours, yours in mapping.items() if yours in df.columns}
    # A column of yours that has one of our names but is not the one mapped to it is set aside.
    shadowed = [c for c in rename.values() if c in df.columns and c not in rename]
    df = df.drop(columns=shadowed).rename(columns=rename)
    scores = pd.to_numeric(df["score"], errors="coerce")
    scores = scores[np.isfinite(scores)]  # NaN and inf rows are dropped below, counted as score_not_a_number
    if scores.empty:
        raise DataError(f"{path}: column {mapping['score']!r} has no numeric values (found e.g. "
                        f"{df['score'].head(3).tolist()}); expected numbers such as 0.5 or 3.8")
    if score_range is None:
        if scores.min() < 0 or scores.max() > 1:
            raise DataError(
                f"{path}: scores range {scores.min():g}..{scores.max():g}, outside [0, 1]; say how to "
                f"scale them with data.score_range, e.g. data.score_range: [0, 5]"
            )
        score_range = (0.0, 1.0)
    dropped = Drops()
    if unparseable:
        dropped.note(f"{path.name}:unparseable_line", unparseable, bad_lines)
    if "split" in df.columns:
        canon = df["split"].astype(str).str.strip().str.lower().map(_SPLIT_ALIASES)
        unknown = sorted(set(df.loc[canon.isna(), "split"].astype(str)))
        if unknown:
            header = " (a header line inside the file? two files joined?)" if mapping["split"] in unknown else ""
            raise DataError(f"{path}: split column has values {unknown[:5]}{header}; expected train, dev (or "
                            f"validation), test")
        splits = {s: clean_rows(df[canon == s], *score_range, f"{path.name}[{s}]", dropped) for s in SPLITS}
    else:
        clean, duplicates = merge_copies(clean_rows(df, *score_range, path.name, dropped), path.name, dropped)
        splits = split_randomly(clean, params, rng)
        return Loaded(splits, dropped, str(path), sha256_file(path), duplicates)
    return Loaded(splits, dropped, str(path), sha256_file(path))


def _one_column_hint(columns: list[str], path: Path) -> str:
    """A header read as one column holding another delimiter: the file's separator is not its suffix's."""
    if len(columns) != 1:
        return ""
    for sep, name, fix in ((";", "semicolons", "with commas as .csv"), ("\t", "tabs", "as .tsv"),
                           (",", "commas", "as .csv"), ("|", "bars", "with commas as .csv")):
        if sep in columns[0]:
            return (f". The header is one column holding {name}: save the file {fix} (it is read as "
                    f"{format_suffix(path.name)})")
    return ""


def load_demo(params: DataParams, rng: np.random.Generator) -> Loaded:
    path = Path(params.source) if params.source else DEMO_PATH
    return load_table(path, params.model_copy(update={"columns": {}}), rng, (0.0, 5.0))


# The datasets read by name (data.dataset); anything else is a table's path. validate hands config these names.
LOADERS: dict[str, Callable[[DataParams, np.random.Generator], Loaded]] = {
    "demo": load_demo,
    "stsb": lambda params, rng: load_stsb(params),
    "sickr": lambda params, rng: load_sickr(params),
    "mrpc": lambda params, rng: load_mrpc(params),
    "qqp": load_qqp,
}


def load(params: DataParams, rng: np.random.Generator | int) -> Loaded:
    """Load the dataset named by ``params.dataset``; every split must keep at least one row.

    ``rng`` (a generator, or a seed for one) splits a table that has no split column.
    """
    rng = np.random.default_rng(rng)  # returns a Generator as it is
    if params.dataset in LOADERS:
        loaded = LOADERS[params.dataset](params, rng)
    else:
        loaded = load_table(Path(params.dataset), params, rng, params.score_range)
    check_drops(loaded, params)
    for split, df in loaded.splits.items():
        if df.empty:
            sizes = {s: len(d) for s, d in loaded.splits.items()}
            linked = (" With data.split_by: sentence, pairs linked by shared sentences stay together, and one large "
                      "group can take a whole split: try data.split_by: pair." if params.split_by == "sentence" else "")
            raise DataError(
                f"{loaded.source}: no valid rows left in split {split!r} (rows per split: {sizes}; dropped: "
                f"{dict(loaded.dropped) or 'none'}); expected at least one pair in each of train, dev and test: "
                f"add rows, or fix the ones dropped.{linked}"
            )
    return loaded


# Drops that are not losses: a copy merged into its pair (its score counted in the pair's) is not held
# against data.max_drop_share.
MERGED = ("duplicate",)


def _fix(reason: str, dropped: Drops, params: DataParams) -> str:
    """What to change when ``reason`` dropped too many rows."""
    if reason == "score_out_of_range" and dropped.span:
        lo, hi = dropped.span
        stated = "[{:g}, {:g}]".format(*params.score_range) if params.score_range else "fixed for this dataset"
        return (f"The scores span {lo:g}..{hi:g} and data.score_range is {stated}: set data.score_range to the "
                f"scale they are on (e.g. -S 'data.score_range=[{math.floor(lo)},{math.ceil(hi)}]')")
    column = params.columns.get("score", "score")
    return {
        "score_not_a_number": f"Is {column!r} the column that holds the scores? Map yours with data.columns "
                              f"(e.g. data.columns: {{score: label}}), or fix those values",
        "missing_sentence": "Map the columns that hold the two sentences with data.columns (e.g. data.columns: "
                            "{sentence1: question1, sentence2: question2}), or fill those cells",
        "sentence_not_text": "Each sentence must be a string, not a list or an object",
        "too_long": f"A sentence over {MAX_CHARS:,} characters is usually a quote left open or a document pasted "
                    f"whole: check those rows",
        "unparseable_line": "Those lines do not split into the header's fields: check the delimiter (.csv: commas, "
                            ".tsv: tabs) and the quoting",
        "too_few_fields": "Those lines have fewer fields than the format has: check the file is the official one",
        "duplicate_conflict": "Copies of one pair carry both labels: give them one",
    }.get(reason, "Check those rows in the file")


def check_drops(loaded: Loaded, params: DataParams) -> None:
    """Stop when one reason dropped more than data.max_drop_share of the rows read: so large a share is a
    setting that does not fit the file (data.score_range, data.columns), not a few bad rows."""
    limit = params.max_drop_share
    total = sum(len(df) for df in loaded.splits.values()) + sum(loaded.dropped.values())
    by_reason: Counter = Counter()
    for key, n in loaded.dropped.items():
        by_reason[reason_of(key)] += n
    for reason, n in by_reason.most_common():
        share = n / total
        if reason in MERGED or share <= limit:
            continue
        shown = "; ".join(loaded.dropped.examples.get(reason, [])) or "none kept"
        raise DataError(
            f"{loaded.source}: {n} of {total} rows ({share:.1%}) were dropped as {reason}, more than "
            f"data.max_drop_share ({limit:.0%}) allows; e.g. {shown}. "
            f"{_fix(reason, loaded.dropped, params)}; or, to run without those rows, raise data.max_drop_share "
            f"(e.g. -S data.max_drop_share={math.ceil(share * 100) / 100:g})"
        )


def _degenerate(scores: pd.Series) -> str:
    """What makes a split unusable for training or measuring on, or ''."""
    if len(scores) < MIN_PAIRS:
        return f"has {len(scores)} pair{'' if len(scores) == 1 else 's'}"
    values = scores.unique()
    if len(values) > 1:
        return ""
    if values[0] in (0.0, 1.0):
        return f"has only label {values[0]:g}, in all {len(scores)} pairs"
    return f"has {len(scores)} pairs that all score {values[0]:g}"


MEASURABLE = "Give the set more pairs, with both labels or varied scores"


def check_splits(splits: dict[str, pd.DataFrame], where: str, fix: str) -> None:
    """Refuse splits no model can learn from or be measured on, before any training: fewer than MIN_PAIRS
    pairs, or scores all equal (one label only). ``fix`` says what to change."""
    problems = [f"split {s!r} {p}" for s, df in splits.items() if (p := _degenerate(df["score"]))]
    if problems:
        sizes = {s: len(df) for s, df in splits.items()}
        raise DataError(
            f"{where}: {'; '.join(problems)} (pairs per split: {sizes}). Each split needs at least {MIN_PAIRS} "
            f"pairs with different scores (for classification: both labels, 0 and 1): models learn from and are "
            f"measured on them, and a correlation or an AUC over one value is undefined. {fix}"
        )


def overlap(splits: dict[str, pd.DataFrame]) -> dict[str, int]:
    """How many dev and test pairs also occur in train (cleaning.pair_keys: either order, any case or spacing)."""
    return {f"{s}_in_train": in_train(splits["train"], splits[s]) for s in ("dev", "test")}


def infer_task(train: pd.DataFrame) -> str:
    """classification when every score is exactly 0 or 1, else regression."""
    return "classification" if train["score"].isin([0.0, 1.0]).all() else "regression"


def task_of(params: DataParams, pairs: pd.DataFrame) -> str:
    """data.task if set, else the named dataset's task, else inferred from ``pairs``' scores."""
    return params.task or TASK_OF.get(params.dataset) or infer_task(pairs)


def gold_dir(params: DataSections, clean: Path) -> Path:
    """Where the gold pairs that train and select models are: the source domain's (``clean/source``) under
    domain adaptation, else the task's own (``clean``). Evaluation always reads the task's own. ``params``: a
    Params, or the sections a data stage reads."""
    return clean / SOURCE_DIR if params.adapt.dataset else clean

# -- given pairs (data.unscored): sentence pairs the user has without scores, for the teacher to label
# (sample.strategy given). A table of pairs (any score column is never read), or ``rest``: the task's training
# pairs that data.max_train left out. Stage download reads them, stage augment cleans them.

NO_GIVEN = pd.DataFrame({"sentence1": pd.Series(dtype=str), "sentence2": pd.Series(dtype=str)})


def read_given(data: DataParams, left_out: pd.DataFrame | None) -> tuple[pd.DataFrame, dict]:
    """The given pairs as (sentence1, sentence2), and where they came from. ``left_out``: the training
    pairs max_train did not keep (None when it kept them all)."""
    if data.unscored is None:
        return NO_GIVEN, {"source": None, "rows": 0}
    if data.unscored == "rest":
        if left_out is None:
            raise DataError("data.unscored rest: the training pairs data.max_train leaves out, but max_train is "
                            "null (or at least the training set), so there are none; set data.max_train, or give "
                            "a table of pairs as data.unscored")
        return left_out[["sentence1", "sentence2"]].reset_index(drop=True), {"source": "rest", "rows": len(left_out)}
    path = Path(data.unscored)
    if not path.exists():
        raise DataError(f"{path}: data.unscored file not found; expected a table of sentence pairs")
    df, unparseable = read_table(path)
    names = {c: data.columns.get(c, c) for c in ("sentence1", "sentence2")}
    missing = [yours for yours in names.values() if yours not in df.columns]
    if missing:
        raise DataError(f"{path} (data.unscored): expected columns {list(names.values())}; found {list(df.columns)} "
                        f"— map yours with data.columns, e.g. {{sentence1: question1, sentence2: question2}}")
    pairs = df[list(names.values())].set_axis(["sentence1", "sentence2"], axis=1)
    text = pairs.map(lambda v: isinstance(v, str) and bool(v.strip())).all(axis=1)
    dropped = {"unparseable_line": unparseable, "empty_or_not_text": int((~text).sum())}
    return pairs[text].reset_index(drop=True), {"source": str(path), "rows": int(text.sum()),
                                                 "dropped": {k: v for k, v in dropped.items() if v}}


def clean_given(pairs: pd.DataFrame, scored: dict[str, pd.DataFrame], min_chars: int,
                form: str) -> tuple[pd.DataFrame, dict]:
    """Normalise as the gold pairs are; drop short and repeated pairs, and any pair that is already a gold
    pair of train, dev or test (its label would leak into, or be learned from, an evaluation split)."""
    if pairs.empty:
        return NO_GIVEN, {"rows_in": 0, "rows_out": 0, "dropped": {}}
    out, dropped = cleaning.clean_train(pairs.assign(score=0.0), min_chars, form)
    gold = {k for df in scored.values() for k in cleaning.pair_keys(df)}  # either order; case, spacing aside
    is_gold = pd.Series([k in gold for k in cleaning.pair_keys(out)], dtype=bool)
    dropped = Counter(dropped)
    dropped["gold_pair"] = int(is_gold.sum())
    out = out[~is_gold.to_numpy()].reset_index(drop=True)
    return out[["sentence1", "sentence2"]], {"rows_in": len(pairs), "rows_out": len(out),
                                             "dropped": {k: v for k, v in sorted(dropped.items()) if v}}


def write_given(path: Path, pairs: pd.DataFrame) -> None:
    schemas.write(path, pairs, schemas.UNSCORED)
