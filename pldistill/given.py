"""Given pairs (data.unscored): sentence pairs the user has without scores, for the teacher to label
(sample.strategy given). A table of pairs (any score column is never read), or ``rest``: the task's
training pairs that data.max_train left out. Stage download reads them, stage augment cleans them."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pandas as pd

from pldistill import cleaning, schemas
from pldistill.errors import DataError
from pldistill.params_data import DataParams
from pldistill.reading import read_table

EMPTY = pd.DataFrame({"sentence1": pd.Series(dtype=str), "sentence2": pd.Series(dtype=str)})


def read(data: DataParams, left_out: pd.DataFrame | None) -> tuple[pd.DataFrame, dict]:
    """The given pairs as (sentence1, sentence2), and where they came from. ``left_out``: the training
    pairs max_train did not keep (None when it kept them all)."""
    if data.unscored is None:
        return EMPTY, {"source": None, "rows": 0}
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


def clean(pairs: pd.DataFrame, scored: dict[str, pd.DataFrame], min_chars: int, form: str) -> tuple[pd.DataFrame, dict]:
    """Normalise as the gold pairs are; drop short and repeated pairs, and any pair that is already a gold
    pair of train, dev or test (its label would leak into, or be learned from, an evaluation split)."""
    if pairs.empty:
        return EMPTY, {"rows_in": 0, "rows_out": 0, "dropped": {}}
    out, dropped = cleaning.clean_train(pairs.assign(score=0.0), min_chars, form)
    gold = {k for df in scored.values() for k in cleaning.pair_keys(df)}  # either order; case, spacing aside
    is_gold = pd.Series([k in gold for k in cleaning.pair_keys(out)], dtype=bool)
    dropped = Counter(dropped)
    dropped["gold_pair"] = int(is_gold.sum())
    out = out[~is_gold.to_numpy()].reset_index(drop=True)
    return out[["sentence1", "sentence2"]], {"rows_in": len(pairs), "rows_out": len(out),
                                             "dropped": {k: v for k, v in sorted(dropped.items()) if v}}


def write(path: Path, pairs: pd.DataFrame) -> None:
    schemas.write(path, pairs, schemas.UNSCORED)
