"""Text cleaning: normalise every sentence; drop unusable training pairs, counted by reason."""

from __future__ import annotations

import re
import unicodedata
from collections import Counter

import pandas as pd

_SPACE = re.compile(r"\s+")
# A run of 2+ of the same punctuation mark. Periods keep an ellipsis ("...."→"..."), the rest
# collapse to one ("!!!"→"!"): repeated marks add no meaning but fragment BM25/wordpiece tokens.
_DOTS = re.compile(r"\.{4,}")
_REPEAT = re.compile(r"([!?,;:\-_*~=+#/\\|])\1+")


def normalise(text: str, form: str = "NFKC") -> str:
    text = unicodedata.normalize(form, text)
    text = "".join(" " if unicodedata.category(c) in ("Cc", "Cf", "Zs", "Zl", "Zp") else c for c in text)
    text = _DOTS.sub("...", text)
    text = _REPEAT.sub(r"\1", text)
    return _SPACE.sub(" ", text).strip()


def sentence_key(text: str) -> str:
    """A sentence as duplicates are found: without invisible format characters (zero-width spaces, soft hyphens,
    direction marks), normalised (NFKC, spacing, repeated marks) and case-folded."""
    visible = "".join(c for c in text if unicodedata.category(c) != "Cf")
    return normalise(visible, "NFKC").casefold()


def pair_keys(df: pd.DataFrame) -> list[str]:
    """One key per pair: its two sentence keys in sorted order, so a pair, its swap and copies that differ only
    in case, spacing or Unicode form share it. Joined by NUL, which no normalised sentence holds."""
    keys = {s: sentence_key(s) for s in {*df["sentence1"], *df["sentence2"]}}  # each sentence once
    return ["\0".join(sorted((keys[a], keys[b]))) for a, b in zip(df["sentence1"], df["sentence2"])]


def in_train(train: pd.DataFrame, other: pd.DataFrame) -> int:
    """How many pairs of ``other`` also occur in ``train`` (by pair key): test pairs a model may have memorised."""
    seen = set(pair_keys(train))
    return sum(k in seen for k in pair_keys(other))


def normalise_pairs(df: pd.DataFrame, form: str = "NFKC") -> pd.DataFrame:
    out = df.copy()
    for col in ("sentence1", "sentence2"):
        out[col] = [normalise(t, form) for t in out[col]]
    return out


def clean_train(df: pd.DataFrame, min_chars: int, form: str = "NFKC") -> tuple[pd.DataFrame, Counter]:
    """Normalise, then drop pairs with an empty or too-short sentence and repeated pairs.

    A repeated pair is the same two sentences (either order, case-insensitive) seen earlier; the first
    one is kept. Returns the kept rows and the number dropped per reason.
    """
    out = normalise_pairs(df, form)
    lengths = pd.concat([out["sentence1"].str.len(), out["sentence2"].str.len()], axis=1).min(axis=1)
    empty = lengths == 0
    short = (lengths < min_chars) & ~empty
    a = out["sentence1"].str.casefold()
    b = out["sentence2"].str.casefold()
    key = pd.Series([(x, y) if x <= y else (y, x) for x, y in zip(a, b)], index=out.index)
    dup = key.duplicated(keep="first") & ~empty & ~short
    dropped = Counter({"empty": int(empty.sum()), "too_short": int(short.sum()), "duplicate": int(dup.sum())})
    keep = ~(empty | short | dup)
    return out[keep].reset_index(drop=True), dropped
