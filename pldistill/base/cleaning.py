"""Text cleaning: normalise every sentence; drop unusable training pairs, counted by reason.

One notion of "the same sentence" serves the whole pipeline (sentence_key: Unicode form NFKC, spacing, repeated
marks, invisible format characters and case): wherever copies are merged, repeats dropped, gold pairs kept out
of what is sampled, or evaluation sentences held out of what a model learns, two strings are compared by it."""

from __future__ import annotations

import functools
import re
import unicodedata
from collections import Counter
from collections.abc import Collection, Iterable

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


@functools.lru_cache(maxsize=1 << 16)  # the sentences of a table come back pair after pair
def sentence_key(text: str) -> str:
    """A sentence as duplicates are found: without invisible format characters (zero-width spaces, soft hyphens,
    direction marks), normalised (NFKC, spacing, repeated marks) and case-folded."""
    visible = "".join(c for c in text if unicodedata.category(c) != "Cf")
    return normalise(visible, "NFKC").casefold()


def pair_key(a: str, b: str) -> str:
    """One key per unordered pair: its two sentence keys in sorted order, so a pair, its swap and copies that
    differ only in case, spacing or Unicode form share it. Joined by NUL, which no normalised sentence holds."""
    ka, kb = sentence_key(a), sentence_key(b)
    return f"{ka}\0{kb}" if ka <= kb else f"{kb}\0{ka}"


def pair_keys(df: pd.DataFrame) -> list[str]:
    """``pair_key`` of every row of a pair table."""
    return [pair_key(a, b) for a, b in zip(df["sentence1"], df["sentence2"])]


def distinct(texts: Iterable[str], held: Collection[str] = ()) -> tuple[list[str], int]:
    """Each sentence once (by sentence_key; the first spelling seen is kept), in order, leaving out any whose key
    is in ``held`` (evaluation sentences' keys: pldistill.base.schemas.eval_keys). Returns the sentences and how many
    of ``texts`` were held out."""
    kept: dict[str, str] = {}
    held_out = 0
    for t in texts:
        k = sentence_key(t)
        if k in held:
            held_out += 1
        else:
            kept.setdefault(k, t)
    return list(kept.values()), held_out


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

    A repeated pair is the same two sentences (either order; pair_key) seen earlier; the first one is kept.
    Returns the kept rows and the number dropped per reason.
    """
    out = normalise_pairs(df, form)
    lengths = pd.concat([out["sentence1"].str.len(), out["sentence2"].str.len()], axis=1).min(axis=1)
    empty = lengths == 0
    short = (lengths < min_chars) & ~empty
    dup = pd.Series(pair_keys(out), index=out.index).duplicated(keep="first") & ~empty & ~short
    dropped = Counter({"empty": int(empty.sum()), "too_short": int(short.sum()), "duplicate": int(dup.sum())})
    keep = ~(empty | short | dup)
    return out[keep].reset_index(drop=True), dropped


_TOKEN = re.compile(r"\w+")


def tokenize(text: str) -> list[str]:
    """Lower-cased word tokens (BM25's, pldistill.pairs.bm25, and Jaccard's, pldistill.base.metrics); the same tokens
    are what rank-bm25 would be given."""
    return _TOKEN.findall(text.lower())
