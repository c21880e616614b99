"""The rows every loader yields and how a bad one is dropped: each pair kept with two sentences and a finite
score in range, scaled to [0, 1]; each row dropped counted by ``<where>:<reason>`` with a few examples
(``Drops``), for the report and for the message that stops a run when a setting does not fit the file."""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from pldistill.base.cleaning import pair_keys, sentence_key
from pldistill.data.reading import EXAMPLES, short
from pldistill.params.data import DataParams

SPLITS = ("train", "dev", "test")
# A sentence longer than this is dropped and counted as too_long: no model reads past a few hundred
# tokens, and a cell this long is usually a parsing accident (text pasted whole, a quote left open).
MAX_CHARS = 10_000


def reason_of(key: str) -> str:
    """``pairs.csv[train]:too_long`` -> ``too_long``."""
    return key.rsplit(":", 1)[-1]


class Drops(Counter):
    """Rows dropped, counted by ``<where>:<reason>``; the first few of each reason are kept as examples
    (``row 7: sentence1='…', …``) and the finite scores' span is noted, for the message that stops a run."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.examples: dict[str, list[str]] = {}
        self.span: tuple[float, float] | None = None

    def note(self, key: str, n: int, examples: Iterable[str] = ()) -> None:
        self[key] += n
        kept = self.examples.setdefault(reason_of(key), [])
        kept.extend(itertools.islice(examples, max(0, EXAMPLES - len(kept))))

    def see_scores(self, scores: pd.Series) -> None:
        finite = scores[np.isfinite(scores)]
        if not finite.empty:
            lo, hi = float(finite.min()), float(finite.max())
            self.span = (lo, hi) if self.span is None else (min(lo, self.span[0]), max(hi, self.span[1]))


def row_examples(rows: pd.DataFrame) -> Iterable[str]:
    """``row 7: sentence1='…', sentence2='…', score='…'`` for each row (its index + 1: the row under the header)."""
    for i, row in rows.iterrows():
        yield f"row {i + 1}: " + ", ".join(f"{c}={short(row[c])}" for c in ("sentence1", "sentence2", "score"))


@dataclass
class Loaded:
    splits: dict[str, pd.DataFrame]
    dropped: Drops = field(default_factory=Drops)
    source: str = ""
    sha256: str | None = None
    duplicates: dict = field(default_factory=dict)  # what merge_copies merged (a table we split)


def _not_text(col: pd.Series) -> pd.Series:
    """Cells holding a list, a dict or another container (JSON Lines): not a sentence, whatever str() makes of it."""
    return col.map(lambda v: isinstance(v, (list, dict, tuple, set, np.ndarray))).astype(bool)  # bool when empty


def clean_rows(df: pd.DataFrame, lo: float, hi: float, where: str, dropped: Drops,
                keep: tuple[str, ...] = ()) -> pd.DataFrame:
    """Keep rows with two non-empty sentences of at most MAX_CHARS and a finite score in [lo, hi]; scale
    scores to [0, 1]. Columns named in ``keep`` ride along unchanged."""
    s1 = df["sentence1"].astype("string").str.strip()
    s2 = df["sentence2"].astype("string").str.strip()
    score = pd.to_numeric(df["score"], errors="coerce")
    dropped.see_scores(score)
    reasons = {
        "sentence_not_text": _not_text(df["sentence1"]) | _not_text(df["sentence2"]),
        "missing_sentence": s1.isna() | s2.isna() | (s1 == "") | (s2 == ""),
        "too_long": (s1.str.len() > MAX_CHARS) | (s2.str.len() > MAX_CHARS),
        "score_not_a_number": score.isna() | ~np.isfinite(score.fillna(0)),
        "score_out_of_range": (score < lo) | (score > hi),
    }
    bad = pd.Series(False, index=df.index)
    for reason, found in reasons.items():
        mask = found.fillna(False).astype(bool) & ~bad  # count each row once, under its first reason
        if mask.any():
            dropped.note(f"{where}:{reason}", int(mask.sum()), row_examples(df[mask]))
        bad |= mask
    out = pd.DataFrame(
        {"sentence1": s1[~bad].astype(str), "sentence2": s2[~bad].astype(str),
         "score": ((score[~bad] - lo) / (hi - lo)).astype(float), **{c: df.loc[~bad, c] for c in keep}}
    )
    return out.reset_index(drop=True)


def merge_copies(df: pd.DataFrame, where: str, dropped: Drops) -> tuple[pd.DataFrame, dict]:
    """One row per pair, before a table is split: copies of a pair (the same two sentences, in either order,
    after normalising Unicode (NFKC), spacing and case: cleaning.pair_keys) become their first row, with the
    copies' mean score; in a table of 0/1 labels, their majority label, and a pair whose copies tie is dropped
    (``duplicate_conflict``). Each copy merged is counted as ``duplicate``. Returns the rows and a summary."""
    keys = pd.Series(pair_keys(df), index=df.index)
    first = ~keys.duplicated()
    summary = {"copies_merged": int((~first).sum()), "pairs_with_copies": int(keys[~first].nunique()),
               "scores_disagreed": 0, "score_rule": "mean"}
    if not summary["copies_merged"]:
        return df, summary
    by_pair = df["score"].groupby(keys, sort=False)
    summary["scores_disagreed"] = int((by_pair.nunique() > 1).sum())
    out = df[first].assign(score=by_pair.transform("mean")[first])
    dropped.note(f"{where}:duplicate", summary["copies_merged"])
    if df["score"].isin([0.0, 1.0]).all():  # labels: a mean of 0.5 is no label
        summary["score_rule"] = "majority label"
        tie = out["score"] == 0.5
        if tie.any():
            dropped.note(f"{where}:duplicate_conflict", int(tie.sum()), row_examples(out[tie]))
        out = out[~tie].assign(score=lambda d: (d["score"] > 0.5).astype(float))
    return out.reset_index(drop=True), summary


def sentence_groups(df: pd.DataFrame) -> np.ndarray:
    """Each row's group: the pairs linked to it through shared sentences (normalised as pair keys are), found
    with a union-find over sentences; numbered in order of first row."""
    key = {s: sentence_key(s) for s in {*df["sentence1"], *df["sentence2"]}}
    parent: dict[str, str] = {}

    def root(x: str) -> str:
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]  # path halving: trees stay shallow
            x = parent[x]
        return x

    for a, b in zip(df["sentence1"], df["sentence2"]):
        ra, rb = root(key[a]), root(key[b])
        if ra != rb:
            parent[ra] = rb
    return pd.factorize(pd.Series([root(key[a]) for a in df["sentence1"]]))[0]


def split_randomly(df: pd.DataFrame, params: DataParams, rng: np.random.Generator) -> dict[str, pd.DataFrame]:
    """dev, then test, take whole groups in a seeded order until each holds its fraction of the rows; train
    the rest. A group is one pair (data.split_by: pair; its copies were merged before) or every pair linked
    to it through shared sentences (sentence), so no sentence is on two sides."""
    if df.empty:
        return {s: df for s in SPLITS}
    groups = sentence_groups(df) if params.split_by == "sentence" else np.arange(len(df))
    order = rng.permutation(groups.max() + 1)
    taken = np.cumsum(np.bincount(groups)[order])  # rows taken once each group in order is
    n_dev = max(1, math.floor(len(df) * params.split.dev))
    n_test = max(1, math.floor(len(df) * params.split.test))
    dev_end = min(int(np.searchsorted(taken, n_dev)) + 1, len(order))
    test_end = min(int(np.searchsorted(taken, taken[dev_end - 1] + n_test)) + 1, len(order))
    parts = {"dev": order[:dev_end], "test": order[dev_end:test_end], "train": order[test_end:]}
    return {s: df.iloc[np.flatnonzero(np.isin(groups, parts[s]))].reset_index(drop=True) for s in SPLITS}
