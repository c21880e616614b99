"""Readers for the named datasets (demo, STS Benchmark, SICK-R, MRPC, QQP) and for any table given by path.

Each reader returns a :class:`Loaded`: the three splits as frames with columns sentence1, sentence2,
score (scores scaled to [0, 1]) and the count of malformed rows dropped, by reason.
"""

from __future__ import annotations

import csv
import io
import json
import math
import tarfile
import urllib.error
import urllib.request
import zipfile
import zlib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from pldistill.config import DataParams, Params
from pldistill.io import atomic_path, sha256_file

SPLITS = ("train", "dev", "test")
SOURCE_DIR = "source"  # domain adaptation: data/raw/source/<name>/ and data/clean/source/ hold the source domain
DEMO_PATH = Path("data/demo/pairs.tsv")
DOWNLOAD_DIR = Path("data/downloads")

# The official STS Benchmark archive (STS wiki, Cer et al. 2017) and its sha256.
STSB_URL = "https://ixa2.si.ehu.eus/stswiki/images/4/48/Stsbenchmark.tar.gz"
STSB_SHA256 = "557a86abbd2b76ee6768d8b5103b659601a9d26b797898c7467812f303b21280"
# SICK (Marelli et al. 2014), the full SICK.txt in its zip as the SICK page links it (sha256: HF datasets' sick).
SICK_URL = "https://zenodo.org/record/2787612/files/SICK.zip?download=1"
SICK_SHA256 = "da272af924399fc2de4889ed55383e38822c10d16c4a949a89d597d09a0b7912"
# MRPC (Dolan & Brockett 2005) as SentEval mirrors Microsoft's files, and GLUE's dev-pair ids
# (sha256: TFDS url_checksums/glue.txt and HF datasets' glue agree).
MRPC_FILES = {
    "train": ("https://dl.fbaipublicfiles.com/senteval/senteval_data/msr_paraphrase_train.txt",
              "60a9b09084528f0673eedee2b69cb941920f0b8cd0eeccefc464a98768457f89"),
    "test": ("https://dl.fbaipublicfiles.com/senteval/senteval_data/msr_paraphrase_test.txt",
             "a04e271090879aaba6423d65b94950c089298587d9c084bf9cd7439bd785f784"),
    "dev_ids": ("https://dl.fbaipublicfiles.com/glue/data/mrpc_dev_ids.tsv",
                "971d7767d81b997fd9060ade0ec23c4fc31cbb226a55d1bd4a1bac474eb81dc7"),
}
# Quora Question Pairs, Quora's first release (sha256: HF datasets' quora; torchtext pins md5 b6d5672b…).
QQP_URL = "http://qim.fs.quoracdn.net/quora_duplicate_questions.tsv"
QQP_SHA256 = "b3350dbb1d98db1f5abca85d736ba514bf4da253fae53939303d79fe921ec7c8"
TASK_OF = {"stsb": "regression", "sickr": "regression", "mrpc": "classification", "qqp": "classification"}
_SPLIT_ALIASES = {"train": "train", "dev": "dev", "validation": "dev", "val": "dev", "test": "test"}
# A sentence longer than this is dropped and counted as too_long: no model reads past a few hundred
# tokens, and a cell this long is usually a parsing accident (text pasted whole, a quote left open).
MAX_CHARS = 10_000


class DataError(ValueError):
    """A data source cannot be used at all (missing, wrong format, no valid rows)."""


@dataclass
class Loaded:
    splits: dict[str, pd.DataFrame]
    dropped: Counter = field(default_factory=Counter)
    source: str = ""
    sha256: str | None = None


def _clean_rows(df: pd.DataFrame, lo: float, hi: float, where: str, dropped: Counter,
                keep: tuple[str, ...] = ()) -> pd.DataFrame:
    """Keep rows with two non-empty sentences of at most MAX_CHARS and a finite score in [lo, hi]; scale
    scores to [0, 1]. Columns named in ``keep`` ride along unchanged."""
    s1 = df["sentence1"].astype("string").str.strip()
    s2 = df["sentence2"].astype("string").str.strip()
    score = pd.to_numeric(df["score"], errors="coerce")
    reasons = {
        "missing_sentence": s1.isna() | s2.isna() | (s1 == "") | (s2 == ""),
        "too_long": (s1.str.len() > MAX_CHARS) | (s2.str.len() > MAX_CHARS),
        "score_not_a_number": score.isna() | ~np.isfinite(score.fillna(0)),
        "score_out_of_range": (score < lo) | (score > hi),
    }
    bad = pd.Series(False, index=df.index)
    for reason, found in reasons.items():
        mask = found.fillna(False) & ~bad  # count each row once, under its first reason
        if mask.any():
            dropped[f"{where}:{reason}"] += int(mask.sum())
        bad |= mask
    out = pd.DataFrame(
        {"sentence1": s1[~bad].astype(str), "sentence2": s2[~bad].astype(str),
         "score": ((score[~bad] - lo) / (hi - lo)).astype(float), **{c: df.loc[~bad, c] for c in keep}}
    )
    return out.reset_index(drop=True)


def _decode(data: bytes, where: str | Path) -> str:
    """UTF-8 text (a leading byte-order mark dropped), or a DataError naming the first line that is not UTF-8."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        for lineno, line in enumerate(data.splitlines(), start=1):
            try:
                line.decode("utf-8")
            except UnicodeDecodeError as err:
                raise DataError(f"{where}: line {lineno} is not UTF-8 (byte 0x{line[err.start]:02x} at column "
                                f"{err.start + 1}); save the file as UTF-8 (e.g. iconv -f latin1 -t utf-8)") from None
        raise DataError(f"{where}: not UTF-8; save the file as UTF-8") from None


def _read_text(path: Path) -> str:
    return _decode(path.read_bytes(), path)


# --------------------------------------------------------------------------- STS Benchmark
def _fetch(url: str, sha256: str) -> Path:
    """Download ``url`` once into data/downloads/, checking its sha256."""
    dest = DOWNLOAD_DIR / url.rsplit("/", 1)[-1].split("?", 1)[0]
    cached = dest.is_file()
    if not cached or sha256_file(dest) != sha256:
        # A cached copy that fails the check (tampered, half-written by hand) is never read.
        stale = f"; the copy in {dest} does not match the pinned sha256 either, so it was not used" if cached else ""
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
                raise DataError(f"{url}: downloaded file has sha256 {got}, expected the pinned {sha256}; it was "
                                f"not kept. Try again later, or point data.source at a copy you trust")
        except OSError as err:
            raise DataError(
                f"could not download {url}: {err}{stale}. Offline? Point data.source at a local copy "
                f"(e.g. -S data.source=../shared/data/Stsbenchmark.tar.gz)"
            ) from None
    return dest


def _source(params: DataParams) -> Path | None:
    """``data.source`` as an existing path, or None for the official download."""
    if not params.source:
        return None
    source = Path(params.source)
    if not source.exists():
        raise DataError(f"data.source {source}: not found")
    return source


def _find(source: Path, name: str, what: str) -> Path:
    """``source`` itself when it is a file, else the first ``name`` inside the directory."""
    if source.is_file():
        return source
    hits = sorted(source.rglob(name))
    if not hits:
        raise DataError(f"{source}: no {name} inside (expected {what})")
    return hits[0]


def _note_digest(path: Path, expected: str) -> str:
    digest = sha256_file(path)
    if digest != expected:
        print(f"note: {path} sha256 {digest[:12]}… differs from the official file's {expected[:12]}…")
    return digest


def _tab_rows(text: str, where: str, need: list[str], dropped: Counter) -> list[dict[str, str]]:
    """Rows of a tab-separated text with a header line, as dicts of the ``need`` columns; rows with
    fewer fields than the header are dropped and counted. Quotes are text (no CSV quoting)."""
    lines = text.lstrip("\ufeff").splitlines()
    if not lines:
        raise DataError(f"{where}: empty file")
    header = [h.strip() for h in lines[0].split("\t")]
    missing = [c for c in need if c not in header]
    if missing:
        raise DataError(f"{where}: header lacks {missing}; found {header}")
    pos = [header.index(c) for c in need]
    rows = []
    for line in lines[1:]:
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) < len(header):
            dropped[f"{where}:too_few_fields"] += 1
            continue
        rows.append({c: fields[i] for c, i in zip(need, pos)})
    return rows


# --------------------------------------------------------------------------- SICK-R
SICK_SPLITS = {"TRAIN": "train", "TRIAL": "dev", "TEST": "test"}


def parse_sick(text: str, where: str, dropped: Counter) -> dict[str, pd.DataFrame]:
    """SICK.txt: tab-separated with a header; relatedness_score in [1, 5]; SemEval_set TRAIN/TRIAL/TEST
    (TRIAL is the dev split, as SentEval and the SemEval task use it)."""
    need = ["sentence_A", "sentence_B", "relatedness_score", "SemEval_set"]
    df = pd.DataFrame(_tab_rows(text, where, need, dropped), columns=need).rename(
        columns={"sentence_A": "sentence1", "sentence_B": "sentence2", "relatedness_score": "score"})
    split = df["SemEval_set"].str.strip().map(SICK_SPLITS)
    if split.isna().any():
        dropped[f"{where}:unknown_SemEval_set"] += int(split.isna().sum())
    return {s: _clean_rows(df[split == s], 1.0, 5.0, f"{where}[{s}]", dropped) for s in SPLITS}


def load_sickr(params: DataParams) -> Loaded:
    """SICK relatedness: SICK.zip (official), SICK.txt, or a directory holding either."""
    source = _source(params) or _fetch(SICK_URL, SICK_SHA256)
    zips = sorted(source.rglob("SICK.zip")) if source.is_dir() else []
    path = zips[0] if zips else _find(source, "SICK.txt", "SICK.zip or SICK.txt")
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as z:
            names = [n for n in z.namelist() if Path(n).name == "SICK.txt"]
            if not names:
                raise DataError(f"{path}: zip has no SICK.txt (found {z.namelist()[:5]})")
            text = _decode(z.read(names[0]), f"{path}:{names[0]}")
    else:
        text = _read_text(path)
    dropped: Counter = Counter()
    splits = parse_sick(text, "SICK.txt", dropped)
    return Loaded(splits, dropped, str(path), _note_digest(path, SICK_SHA256))


# --------------------------------------------------------------------------- MRPC
MRPC_COLUMNS = ["Quality", "#1 ID", "#2 ID", "#1 String", "#2 String"]


def parse_mrpc(text: str, where: str, dropped: Counter) -> pd.DataFrame:
    """msr_paraphrase_*.txt: tab-separated, header Quality, #1 ID, #2 ID, #1 String, #2 String; quotes
    are text; the train file starts with a byte-order mark. Keeps the ids (to find GLUE's dev pairs)."""
    df = pd.DataFrame(_tab_rows(text, where, MRPC_COLUMNS, dropped), columns=MRPC_COLUMNS)
    df = pd.DataFrame({"sentence1": df["#1 String"], "sentence2": df["#2 String"], "score": df["Quality"],
                       "ids": df["#1 ID"].str.strip() + "\t" + df["#2 ID"].str.strip()})
    return _clean_rows(df, 0.0, 1.0, where, dropped, keep=("ids",))


def load_mrpc(params: DataParams) -> Loaded:
    """MRPC: train and test as published, dev = the train pairs GLUE lists in mrpc_dev_ids.tsv."""
    source = _source(params)
    paths = {}
    for key, (url, sha) in MRPC_FILES.items():
        name = url.rsplit("/", 1)[-1]
        paths[key] = _find(source, name, "the MRPC files msr_paraphrase_{train,test}.txt and GLUE's "
                           "mrpc_dev_ids.tsv") if source else _fetch(url, sha)
    dropped: Counter = Counter()
    train = parse_mrpc(_read_text(paths["train"]), paths["train"].name, dropped)
    test = parse_mrpc(_read_text(paths["test"]), paths["test"].name, dropped)
    dev_ids = {"\t".join(p.strip() for p in line.split("\t")[:2])
               for line in _read_text(paths["dev_ids"]).splitlines() if line.strip()}
    in_dev = train["ids"].isin(dev_ids)
    splits = {"train": train[~in_dev], "dev": train[in_dev], "test": test}
    splits = {s: df.drop(columns="ids").reset_index(drop=True) for s, df in splits.items()}
    digests = {k: _note_digest(p, MRPC_FILES[k][1]) for k, p in paths.items()}
    return Loaded(splits, dropped, str(source or paths["train"].parent), digests["train"])


# --------------------------------------------------------------------------- QQP
def parse_qqp(path: Path, dropped: Counter) -> pd.DataFrame:
    """quora_duplicate_questions.tsv: id, qid1, qid2, question1, question2, is_duplicate; fields may be
    quoted and hold newlines or tabs, which become spaces."""
    try:
        df, bad = read_delimited(path, "\t", csv.QUOTE_MINIMAL)
    except OSError as err:
        raise DataError(f"{path}: could not read as Quora's tsv ({err})") from None
    need = ["question1", "question2", "is_duplicate"]
    if any(c not in df.columns for c in need):
        raise DataError(f"{path}: expected columns {need}; found {list(df.columns)}")
    if bad:
        dropped[f"{path.name}:unparseable_line"] += bad
    flat = {c: df[c].str.replace(r"[\r\n\t]+", " ", regex=True) for c in ("question1", "question2")}
    return _clean_rows(pd.DataFrame({"sentence1": flat["question1"], "sentence2": flat["question2"],
                                     "score": df["is_duplicate"]}), 0.0, 1.0, path.name, dropped)


def load_qqp(params: DataParams, rng: np.random.Generator) -> Loaded:
    """QQP has no official split: train/dev/test are drawn by seed with data.split's fractions."""
    source = _source(params)
    path = _find(source, "quora_duplicate_questions.tsv", "Quora's quora_duplicate_questions.tsv") if source \
        else _fetch(QQP_URL, QQP_SHA256)
    dropped: Counter = Counter()
    pairs = parse_qqp(path, dropped)
    return Loaded(_split_randomly(pairs, params, rng), dropped, str(path), _note_digest(path, QQP_SHA256))


def _stsb_texts(source: Path) -> dict[str, str]:
    """The three sts-*.csv texts from the official archive or an unpacked directory."""
    names = {s: f"sts-{s}.csv" for s in SPLITS}
    if source.is_dir():
        found = {}
        for split, name in names.items():
            hits = sorted(source.rglob(name))
            if not hits:
                raise DataError(f"{source}: no {name} inside (expected the unpacked stsbenchmark/ folder)")
            found[split] = _read_text(hits[0])
        return found
    try:  # members are read into memory, never extracted to disk
        with tarfile.open(source, "r:*") as tar:
            members = tar.getmembers()
            unsafe = [m.name for m in members if m.name.startswith("/") or ".." in PurePosixPath(m.name).parts]
            if unsafe:
                raise DataError(f"{source}: archive member {unsafe[0]!r} points outside the archive's folder (an "
                                f"absolute path or '..'); refusing the archive. Use the official one, whose members "
                                f"are stsbenchmark/sts-{{train,dev,test}}.csv")
            files = {PurePosixPath(m.name).name: m for m in members if m.isfile()}
            out = {}
            for split, name in names.items():
                if name not in files:
                    raise DataError(f"{source}: archive has no {name} (found {sorted(files)})")
                out[split] = _decode(tar.extractfile(files[name]).read(), f"{source}:{files[name].name}")
            return out
    except (tarfile.TarError, EOFError, zlib.error, OSError) as err:  # truncated or corrupt
        raise DataError(f"{source}: not a readable tar archive ({err}); it may be truncated or corrupt: fetch it "
                        f"again, or point data.source at the unpacked folder") from None


def parse_stsb(text: str, where: str, dropped: Counter) -> pd.DataFrame:
    """Parse one sts-*.csv: tab-separated genre, file, year, id, score, sentence1, sentence2[, ...]."""
    rows = []
    for line in io.StringIO(text):
        fields = line.rstrip("\n").split("\t")
        if len(fields) < 7:
            dropped[f"{where}:too_few_fields"] += 1
            continue
        rows.append((fields[5], fields[6], fields[4]))
    df = pd.DataFrame(rows, columns=["sentence1", "sentence2", "score"])
    return _clean_rows(df, 0.0, 5.0, where, dropped)


def load_stsb(params: DataParams) -> Loaded:
    source = _source(params) or _fetch(STSB_URL, STSB_SHA256)
    digest = _note_digest(source, STSB_SHA256) if source.is_file() else None
    dropped: Counter = Counter()
    texts = _stsb_texts(source)
    splits = {s: parse_stsb(texts[s], f"sts-{s}.csv", dropped) for s in SPLITS}
    return Loaded(splits, dropped, str(source), digest)


# --------------------------------------------------------------------------- tables by path
def read_delimited(path: Path, sep: str, quoting: int) -> tuple[pd.DataFrame, int]:
    """A delimited UTF-8 text file (header on its first line) as strings, and how many records were skipped
    because they had the wrong number of fields or did not parse (for the caller to count).

    The csv module, not pandas: pandas' python engine skips the records the csv module rejects (a field
    over its size limit, a quote open until the end of the file) without reporting them.
    """
    reader = csv.reader(io.StringIO(_read_text(path), newline=""), delimiter=sep, quoting=quoting, strict=True)
    header: list[str] = []
    rows, bad = [], 0
    limit = csv.field_size_limit(2**31 - 1)  # read long fields whole; MAX_CHARS drops them, counted
    try:
        while True:
            first = reader.line_num + 1  # the line this record starts on
            try:
                fields = next(reader)
            except StopIteration:
                break
            except csv.Error as err:
                if "end of data" in str(err):  # every line after the quote would be one field
                    raise DataError(f"{path}: the record starting on line {first} opens a quote that is never "
                                    f"closed; close it (a quote inside a quoted field is written twice: "
                                    f"\"\")") from None
                bad += 1
                continue
            if not fields:  # a blank line
                continue
            if not header:
                header = fields
            elif len(fields) == len(header):
                rows.append(fields)
            else:
                bad += 1
    finally:
        csv.field_size_limit(limit)
    twice = sorted({c for c in header if header.count(c) > 1})
    if twice:
        raise DataError(f"{path}: the header names {twice} more than once; expected each column once")
    return pd.DataFrame(rows, columns=header, dtype=str), bad


def read_table(path: Path) -> tuple[pd.DataFrame, int]:
    """The table and how many of its lines could not be parsed (skipped, to be counted by the caller)."""
    suffix = path.suffix.lower()
    if path.is_dir():
        raise DataError(f"{path}: is a directory; expected one table file (.csv, .tsv, .jsonl or .parquet)")
    if path.is_file() and path.stat().st_size == 0:
        raise DataError(f"{path}: empty file (0 bytes); expected a table of sentence pairs")
    try:
        if suffix == ".parquet":
            return pd.read_parquet(path), 0
        if suffix == ".jsonl":
            records, bad = [], 0
            for line in _read_text(path).split("\n"):  # not splitlines: JSON strings may hold U+2028
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
        # QUOTE_NONE for tsv: sentences contain stray quotes that must not open a quoted field.
        if suffix == ".tsv":
            return read_delimited(path, "\t", csv.QUOTE_NONE)
        return read_delimited(path, ",", csv.QUOTE_MINIMAL)
    except DataError:
        raise
    except (ValueError, OSError) as err:  # pyarrow's errors are ValueErrors (ArrowInvalid) or OSErrors
        raise DataError(f"{path}: could not read as {suffix[1:]} ({err}); check it is a complete {suffix[1:]} "
                        f"file, or save the table again") from None


def _split_randomly(df: pd.DataFrame, params: DataParams, rng: np.random.Generator) -> dict[str, pd.DataFrame]:
    order = rng.permutation(len(df))
    n_dev = max(1, math.floor(len(df) * params.split.dev))
    n_test = max(1, math.floor(len(df) * params.split.test))
    parts = {"dev": order[:n_dev], "test": order[n_dev : n_dev + n_test], "train": order[n_dev + n_test :]}
    return {s: df.iloc[np.sort(parts[s])].reset_index(drop=True) for s in SPLITS}


def load_table(path: Path, params: DataParams, rng: np.random.Generator,
               score_range: tuple[float, float] | None) -> Loaded:
    if not path.exists():
        raise DataError(f"{path}: file not found")
    df, unparseable = read_table(path)
    if df.empty:
        raise DataError(f"{path}: no rows to read (columns {list(df.columns)}; {unparseable} line(s) that did not "
                        f"parse); expected a header line and one row per sentence pair")
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
    for split, df in loaded.splits.items():
        if df.empty:
            sizes = {s: len(d) for s, d in loaded.splits.items()}
            raise DataError(
                f"{loaded.source}: no valid rows left in split {split!r} (rows per split: {sizes}; dropped: "
                f"{dict(loaded.dropped) or 'none'}); expected at least one pair in each of train, dev and test: "
                f"add rows, or fix the ones dropped"
            )
    return loaded


def infer_task(train: pd.DataFrame) -> str:
    """classification when every score is exactly 0 or 1, else regression."""
    return "classification" if train["score"].isin([0.0, 1.0]).all() else "regression"


def task_of(params: DataParams, pairs: pd.DataFrame) -> str:
    """data.task if set, else the named dataset's task, else inferred from ``pairs``' scores."""
    return params.task or TASK_OF.get(params.dataset) or infer_task(pairs)


def gold_dir(params: Params, clean: Path) -> Path:
    """Where the gold pairs that train and select models are: the source domain's (``clean/source``) under
    domain adaptation, else the task's own (``clean``). Evaluation always reads the task's own."""
    return clean / SOURCE_DIR if params.adapt.dataset else clean
