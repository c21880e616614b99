"""Readers for the named datasets (demo, STS Benchmark) and for any table given by path.

Each reader returns a :class:`Loaded`: the three splits as frames with columns sentence1, sentence2,
score (scores scaled to [0, 1]) and the count of malformed rows dropped, by reason.
"""

from __future__ import annotations

import io
import json
import math
import tarfile
import urllib.error
import urllib.request
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from pldistill.config import DataParams
from pldistill.io import atomic_path, sha256_file

SPLITS = ("train", "dev", "test")
DEMO_PATH = Path("data/demo/pairs.tsv")
DOWNLOAD_DIR = Path("data/downloads")

# The official STS Benchmark archive (STS wiki, Cer et al. 2017) and its sha256.
STSB_URL = "https://ixa2.si.ehu.eus/stswiki/images/4/48/Stsbenchmark.tar.gz"
STSB_SHA256 = "557a86abbd2b76ee6768d8b5103b659601a9d26b797898c7467812f303b21280"
_SPLIT_ALIASES = {"train": "train", "dev": "dev", "validation": "dev", "val": "dev", "test": "test"}


class DataError(ValueError):
    """A data source cannot be used at all (missing, wrong format, no valid rows)."""


@dataclass
class Loaded:
    splits: dict[str, pd.DataFrame]
    dropped: Counter = field(default_factory=Counter)
    source: str = ""
    sha256: str | None = None


def _clean_rows(df: pd.DataFrame, lo: float, hi: float, where: str, dropped: Counter) -> pd.DataFrame:
    """Keep rows with two non-empty sentences and a finite score in [lo, hi]; scale scores to [0, 1]."""
    s1 = df["sentence1"].astype("string").str.strip()
    s2 = df["sentence2"].astype("string").str.strip()
    score = pd.to_numeric(df["score"], errors="coerce")
    reasons = {
        "missing_sentence": s1.isna() | s2.isna() | (s1 == "") | (s2 == ""),
        "score_not_a_number": score.isna() | ~np.isfinite(score.fillna(0)),
        "score_out_of_range": (score < lo) | (score > hi),
    }
    bad = pd.Series(False, index=df.index)
    for reason, mask in reasons.items():
        mask = mask.fillna(False) & ~bad  # count each row once, under its first reason
        if mask.any():
            dropped[f"{where}:{reason}"] += int(mask.sum())
        bad |= mask
    out = pd.DataFrame(
        {"sentence1": s1[~bad].astype(str), "sentence2": s2[~bad].astype(str),
         "score": ((score[~bad] - lo) / (hi - lo)).astype(float)}
    )
    return out.reset_index(drop=True)


# --------------------------------------------------------------------------- STS Benchmark
def _fetch(url: str, sha256: str) -> Path:
    """Download ``url`` once into data/downloads/, checking its sha256."""
    dest = DOWNLOAD_DIR / url.rsplit("/", 1)[-1]
    if not dest.is_file() or sha256_file(dest) != sha256:
        print(f"downloading {url} -> {dest}")
        try:
            with urllib.request.urlopen(url, timeout=60) as resp, atomic_path(dest) as tmp, tmp.open("wb") as out:
                total = int(resp.headers.get("Content-Length") or 0) or None
                with tqdm(total=total, unit="B", unit_scale=True, desc=dest.name) as bar:
                    while block := resp.read(1 << 16):
                        out.write(block)
                        bar.update(len(block))
            if (got := sha256_file(dest)) != sha256:
                dest.unlink()
                raise DataError(f"{url}: downloaded file has sha256 {got}, expected the pinned {sha256}")
        except OSError as err:
            raise DataError(
                f"could not download {url}: {err}. Offline? Point data.source at a local copy "
                f"(e.g. -S data.source=../shared/data/Stsbenchmark.tar.gz)"
            ) from None
    return dest


def _stsb_texts(source: Path) -> dict[str, str]:
    """The three sts-*.csv texts from the official archive or an unpacked directory."""
    names = {s: f"sts-{s}.csv" for s in SPLITS}
    if source.is_dir():
        found = {}
        for split, name in names.items():
            hits = sorted(source.rglob(name))
            if not hits:
                raise DataError(f"{source}: no {name} inside (expected the unpacked stsbenchmark/ folder)")
            found[split] = hits[0].read_text(encoding="utf-8")
        return found
    try:
        with tarfile.open(source, "r:*") as tar:
            members = {Path(m.name).name: m for m in tar.getmembers() if m.isfile()}
            out = {}
            for split, name in names.items():
                if name not in members:
                    raise DataError(f"{source}: archive has no {name} (found {sorted(members)})")
                out[split] = tar.extractfile(members[name]).read().decode("utf-8")
            return out
    except tarfile.TarError as err:
        raise DataError(f"{source}: not a readable tar archive ({err})") from None


def parse_stsb(text: str, where: str, dropped: Counter) -> pd.DataFrame:
    """Parse one sts-*.csv: tab-separated genre, file, year, id, score, sentence1, sentence2[, ...]."""
    rows = []
    for lineno, line in enumerate(io.StringIO(text), start=1):
        fields = line.rstrip("\n").split("\t")
        if len(fields) < 7:
            dropped[f"{where}:too_few_fields"] += 1
            continue
        rows.append((fields[5], fields[6], fields[4]))
    df = pd.DataFrame(rows, columns=["sentence1", "sentence2", "score"])
    return _clean_rows(df, 0.0, 5.0, where, dropped)


def load_stsb(params: DataParams) -> Loaded:
    if params.source:
        source = Path(params.source)
        if not source.exists():
            raise DataError(f"data.source {source}: not found")
    else:
        source = _fetch(STSB_URL, STSB_SHA256)
    digest = sha256_file(source) if source.is_file() else None
    if digest is not None and digest != STSB_SHA256:
        print(f"note: {source} sha256 {digest[:12]}… differs from the official archive's {STSB_SHA256[:12]}…")
    dropped: Counter = Counter()
    texts = _stsb_texts(source)
    splits = {s: parse_stsb(texts[s], f"sts-{s}.csv", dropped) for s in SPLITS}
    return Loaded(splits, dropped, str(source), digest)


# --------------------------------------------------------------------------- tables by path
def read_table(path: Path) -> tuple[pd.DataFrame, int]:
    """The table and how many of its lines could not be parsed (skipped, to be counted by the caller)."""
    suffix = path.suffix.lower()
    bad = 0

    def skip(_fields: list[str]) -> None:
        nonlocal bad
        bad += 1  # a row with the wrong number of fields

    try:
        if suffix == ".parquet":
            return pd.read_parquet(path), 0
        if suffix == ".jsonl":
            records = []
            with path.open(encoding="utf-8") as f:
                for line in f:
                    if not line.strip():
                        continue
                    try:
                        rec = json.loads(line)
                    except json.JSONDecodeError:
                        rec = None
                    if isinstance(rec, dict):
                        records.append(rec)
                    else:
                        bad += 1
            return pd.DataFrame.from_records(records), bad
        sep = "\t" if suffix == ".tsv" else ","
        # QUOTE_NONE for tsv: sentences contain stray quotes that must not open a quoted field.
        df = pd.read_csv(path, sep=sep, quoting=3 if sep == "\t" else 0, dtype=str, keep_default_na=False,
                         engine="python", on_bad_lines=skip)
        return df, bad
    except (ValueError, OSError, UnicodeDecodeError, pd.errors.ParserError) as err:
        raise DataError(f"{path}: could not read as {suffix[1:]} ({err})") from None


def _split_randomly(df: pd.DataFrame, params: DataParams, rng: np.random.Generator) -> dict[str, pd.DataFrame]:
    order = rng.permutation(len(df))
    n_dev = max(1, math.floor(len(df) * params.split.dev))
    n_test = max(1, math.floor(len(df) * params.split.test))
    parts = {"dev": order[:n_dev], "test": order[n_dev : n_dev + n_test], "train": order[n_dev + n_test :]}
    return {s: df.iloc[np.sort(parts[s])].reset_index(drop=True) for s in SPLITS}


def load_table(path: Path, params: DataParams, rng: np.random.Generator, score_range: tuple[float, float] | None) -> Loaded:
    if not path.is_file():
        raise DataError(f"{path}: file not found")
    df, unparseable = read_table(path)
    mapping = {"sentence1": "sentence1", "sentence2": "sentence2", "score": "score", "split": "split"}
    mapping.update(params.columns)
    need = [mapping[c] for c in ("sentence1", "sentence2", "score")]
    if any(c not in df.columns for c in need):
        raise DataError(
            f"{path}: expected columns {need}; found {list(df.columns)} — map yours with data.columns, "
            f"e.g. data.columns: {{sentence1: question1, sentence2: question2, score: label}}"
        )
    rename = {yours: ours for ours, yours in mapping.items() if yours in df.columns}
    # A column of yours that has one of our names but is not the one mapped to it is set aside.
    shadowed = [c for c in rename.values() if c in df.columns and c not in rename]
    df = df.drop(columns=shadowed).rename(columns=rename)
    scores = pd.to_numeric(df["score"], errors="coerce").dropna()
    if scores.empty:
        raise DataError(f"{path}: column {mapping['score']!r} has no numeric values")
    if score_range is None:
        if scores.min() < 0 or scores.max() > 1:
            raise DataError(
                f"{path}: scores range {scores.min():g}..{scores.max():g}, outside [0, 1]; say how to "
                f"scale them with data.score_range, e.g. data.score_range: [0, 5]"
            )
        score_range = (0.0, 1.0)
    dropped: Counter = Counter()
    if unparseable:
        dropped[f"{path.name}:unparseable_line"] = unparseable
    if "split" in df.columns:
        canon = df["split"].astype(str).str.strip().str.lower().map(_SPLIT_ALIASES)
        unknown = sorted(set(df.loc[canon.isna(), "split"].astype(str)))
        if unknown:
            raise DataError(f"{path}: split column has values {unknown[:5]}; expected train, dev (or validation), test")
        splits = {s: _clean_rows(df[canon == s], *score_range, f"{path.name}[{s}]", dropped) for s in SPLITS}
    else:
        clean = _clean_rows(df, *score_range, path.name, dropped)
        splits = _split_randomly(clean, params, rng)
    return Loaded(splits, dropped, str(path), sha256_file(path))


def load_demo(params: DataParams, rng: np.random.Generator) -> Loaded:
    path = Path(params.source) if params.source else DEMO_PATH
    return load_table(path, params.model_copy(update={"columns": {}}), rng, (0.0, 5.0))


def load(params: DataParams, rng: np.random.Generator | int) -> Loaded:
    """Load the dataset named by ``params.dataset``; every split must keep at least one row.

    ``rng`` (a generator, or a seed for one) splits a table that has no split column.
    """
    rng = np.random.default_rng(rng)  # returns a Generator as it is
    if params.dataset == "demo":
        loaded = load_demo(params, rng)
    elif params.dataset == "stsb":
        loaded = load_stsb(params)
    else:
        loaded = load_table(Path(params.dataset), params, rng, params.score_range)
    for split, df in loaded.splits.items():
        if df.empty:
            raise DataError(f"{loaded.source}: no valid rows left in split {split!r} (dropped: {dict(loaded.dropped)})")
    return loaded


def infer_task(train: pd.DataFrame) -> str:
    """classification when every score is exactly 0 or 1, else regression."""
    return "classification" if train["score"].isin([0.0, 1.0]).all() else "regression"
