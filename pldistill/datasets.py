"""Readers for the named datasets (demo, STS Benchmark, SICK-R, MRPC, QQP) and for any table given by path.

Each reader returns a :class:`Loaded`: the three splits as frames with columns sentence1, sentence2,
score (scores scaled to [0, 1]) and the count of malformed rows dropped, by reason. A table without a split
column has its copies of a pair merged before it is split (``merge_copies``), so no pair is on both sides.
"""

from __future__ import annotations

import bz2
import csv
import gzip
import io
import itertools
import json
import lzma
import math
import tarfile
import urllib.error
import urllib.request
import zipfile
import zlib
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from pldistill.cleaning import in_train, pair_keys, sentence_key
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
EXAMPLES = 3  # dropped rows kept per reason, to show in an error
MIN_PAIRS = 2  # per split: a correlation or an AUC needs two pairs with different scores at the very least


class DataError(ValueError):
    """A data source cannot be used at all (missing, wrong format, no valid rows)."""


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


def _short(value: object, width: int = 40) -> str:
    text = str(value)
    return repr(text if len(text) <= width else text[:width] + "…")


def _row_examples(rows: pd.DataFrame) -> Iterable[str]:
    """``row 7: sentence1='…', sentence2='…', score='…'`` for each row (its index + 1: the row under the header)."""
    for i, row in rows.iterrows():
        yield f"row {i + 1}: " + ", ".join(f"{c}={_short(row[c])}" for c in ("sentence1", "sentence2", "score"))


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


def _clean_rows(df: pd.DataFrame, lo: float, hi: float, where: str, dropped: Drops,
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
            dropped.note(f"{where}:{reason}", int(mask.sum()), _row_examples(df[mask]))
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


# What a file named .csv / .tsv / .jsonl / .txt may really be, by its first bytes. The compressions are read
# through (a note says so); the other formats are named, with what to do.
COMPRESSED = {b"\x1f\x8b": ("gzip", gzip.decompress), b"BZh": ("bz2", bz2.decompress),
              b"\xfd7zXZ\x00": ("xz", lzma.decompress), b"PK\x03\x04": ("zip", None)}
NOT_TEXT = {b"PAR1": "a Parquet file: name it .parquet",
            b"\x28\xb5\x2f\xfd": "zstd-compressed: decompress it first (zstd -d), or save it with gzip",
            b"\xd0\xcf\x11\xe0": "an old Excel (.xls) or other Office file: export the sheet as CSV (UTF-8)"}
UTF16 = (b"\xff\xfe", b"\xfe\xff")


def _unzip(data: bytes, where: str | Path) -> bytes:
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        names = [n for n in z.namelist() if not n.endswith("/")]
        if "[Content_Types].xml" in names:
            raise DataError(f"{where}: an Excel workbook (.xlsx), not text; export the sheet as CSV (UTF-8)")
        if len(names) != 1:
            raise DataError(f"{where}: a zip archive holding {len(names)} files ({names[:5]}); expected one table: "
                            f"unzip it and point data.dataset at the table")
        return z.read(names[0])


def _decompress(data: bytes, where: str | Path) -> bytes:
    """``data`` itself, or, when its first bytes say it is gzip, bz2, xz or zip (one member), what it holds."""
    for magic, what in NOT_TEXT.items():
        if data.startswith(magic):
            raise DataError(f"{where}: this is {what}")
    kind, unpack = next((v for magic, v in COMPRESSED.items()
                         if data.startswith(magic) and (magic != b"BZh" or data[3:4].isdigit())), (None, None))
    if kind is None:
        return data
    try:
        out = _unzip(data, where) if kind == "zip" else unpack(data)
    except DataError:
        raise
    except (OSError, EOFError, ValueError, lzma.LZMAError, zipfile.BadZipFile, zlib.error) as err:
        raise DataError(f"{where}: {kind}-compressed (its first bytes say so) but it does not decompress ({err}); "
                        f"it may be truncated: copy or compress it again, or save it uncompressed") from None
    print(f"note: {where} is {kind}-compressed; read what it holds ({len(out):,} bytes)")
    return out


def _read_text(path: Path) -> str:
    """A text file as UTF-8 (or UTF-16 with its byte-order mark), read through gzip, bz2, xz or zip."""
    data = _decompress(path.read_bytes(), path)
    if data.startswith(UTF16):  # unambiguous with its mark; without one it fails as not UTF-8
        try:
            text = data.decode("utf-16")
        except UnicodeDecodeError as err:
            raise DataError(f"{path}: starts with a UTF-16 byte-order mark but is not UTF-16 ({err}); save the file "
                            f"as UTF-8") from None
        print(f"note: {path} is UTF-16; read it as such")
        return text
    return _decode(data, path)


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


def _tab_rows(text: str, where: str, need: list[str], dropped: Drops) -> list[dict[str, str]]:
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
    for lineno, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) < len(header):
            dropped.note(f"{where}:too_few_fields", 1, [f"line {lineno}: {_short(line)}"])
            continue
        rows.append({c: fields[i] for c, i in zip(need, pos)})
    return rows


# --------------------------------------------------------------------------- SICK-R
SICK_SPLITS = {"TRAIN": "train", "TRIAL": "dev", "TEST": "test"}


def parse_sick(text: str, where: str, dropped: Drops) -> dict[str, pd.DataFrame]:
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
    dropped = Drops()
    splits = parse_sick(text, "SICK.txt", dropped)
    return Loaded(splits, dropped, str(path), _note_digest(path, SICK_SHA256))


# --------------------------------------------------------------------------- MRPC
MRPC_COLUMNS = ["Quality", "#1 ID", "#2 ID", "#1 String", "#2 String"]


def parse_mrpc(text: str, where: str, dropped: Drops) -> pd.DataFrame:
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
    dropped = Drops()
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
def parse_qqp(path: Path, dropped: Drops) -> pd.DataFrame:
    """quora_duplicate_questions.tsv: id, qid1, qid2, question1, question2, is_duplicate; fields may be
    quoted and hold newlines or tabs, which become spaces."""
    bad_lines: list[str] = []
    try:
        df, bad = read_delimited(path, "\t", csv.QUOTE_MINIMAL, bad_lines)
    except OSError as err:
        raise DataError(f"{path}: could not read as Quora's tsv ({err})") from None
    need = ["question1", "question2", "is_duplicate"]
    if any(c not in df.columns for c in need):
        raise DataError(f"{path}: expected columns {need}; found {list(df.columns)}")
    if bad:
        dropped.note(f"{path.name}:unparseable_line", bad, bad_lines)
    flat = {c: df[c].str.replace(r"[\r\n\t]+", " ", regex=True) for c in ("question1", "question2")}
    return _clean_rows(pd.DataFrame({"sentence1": flat["question1"], "sentence2": flat["question2"],
                                     "score": df["is_duplicate"]}), 0.0, 1.0, path.name, dropped)


def load_qqp(params: DataParams, rng: np.random.Generator) -> Loaded:
    """QQP has no official split: train/dev/test are drawn by seed with data.split's fractions."""
    source = _source(params)
    path = _find(source, "quora_duplicate_questions.tsv", "Quora's quora_duplicate_questions.tsv") if source \
        else _fetch(QQP_URL, QQP_SHA256)
    dropped = Drops()
    pairs, duplicates = merge_copies(parse_qqp(path, dropped), path.name, dropped)
    return Loaded(_split_randomly(pairs, params, rng), dropped, str(path), _note_digest(path, QQP_SHA256),
                  duplicates)



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


def parse_stsb(text: str, where: str, dropped: Drops) -> pd.DataFrame:
    """Parse one sts-*.csv: tab-separated genre, file, year, id, score, sentence1, sentence2[, ...]."""
    rows = []
    for lineno, line in enumerate(io.StringIO(text), start=1):
        fields = line.rstrip("\n").split("\t")
        if len(fields) < 7:
            dropped.note(f"{where}:too_few_fields", 1, [f"line {lineno}: {_short(line.rstrip())}"])
            continue
        rows.append((fields[5], fields[6], fields[4]))
    df = pd.DataFrame(rows, columns=["sentence1", "sentence2", "score"])
    return _clean_rows(df, 0.0, 5.0, where, dropped)


def load_stsb(params: DataParams) -> Loaded:
    source = _source(params) or _fetch(STSB_URL, STSB_SHA256)
    digest = _note_digest(source, STSB_SHA256) if source.is_file() else None
    dropped = Drops()
    texts = _stsb_texts(source)
    splits = {s: parse_stsb(texts[s], f"sts-{s}.csv", dropped) for s in SPLITS}
    return Loaded(splits, dropped, str(source), digest)


# --------------------------------------------------------------------------- tables by path
def _keep(examples: list[str] | None, text: str) -> None:
    if examples is not None and len(examples) < EXAMPLES:
        examples.append(text)


def read_delimited(path: Path, sep: str, quoting: int,
                   bad_lines: list[str] | None = None) -> tuple[pd.DataFrame, int]:
    """A delimited UTF-8 text file (header on its first line; names stripped of spaces) as strings, and how many
    records were skipped because they had the wrong number of fields or did not parse (for the caller to count;
    the first few go to ``bad_lines``, as ``line N: ...``).

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
                _keep(bad_lines, f"line {first}: {err}")
                continue
            if not fields:  # a blank line
                continue
            if not header:
                header = [name.strip() for name in fields]
            elif len(fields) == len(header):
                rows.append(fields)
            else:
                bad += 1
                _keep(bad_lines, f"line {first}: {len(fields)} fields, the header has {len(header)}: "
                                 f"{_short(sep.join(fields))}")
    finally:
        csv.field_size_limit(limit)
    twice = sorted({c for c in header if header.count(c) > 1})
    if twice:
        raise DataError(f"{path}: the header names {twice} more than once; expected each column once")
    return pd.DataFrame(rows, columns=header, dtype=str), bad


def read_table(path: Path, bad_lines: list[str] | None = None) -> tuple[pd.DataFrame, int]:
    """The table and how many of its lines could not be parsed (skipped, to be counted by the caller; the
    first few described in ``bad_lines``)."""
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
            for lineno, line in enumerate(_read_text(path).split("\n"), start=1):  # not splitlines: JSON
                if not line.strip():                                                 # strings may hold U+2028
                    continue
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError:
                    rec = None
                if isinstance(rec, dict):
                    records.append(rec)
                else:
                    bad += 1
                    _keep(bad_lines, f"line {lineno}: not a JSON object: {_short(line)}")
            return pd.DataFrame.from_records(records), bad
        # QUOTE_NONE for tsv: sentences contain stray quotes that must not open a quoted field.
        if suffix == ".tsv":
            return read_delimited(path, "\t", csv.QUOTE_NONE, bad_lines)
        return read_delimited(path, ",", csv.QUOTE_MINIMAL, bad_lines)
    except DataError:
        raise
    except (ValueError, OSError) as err:  # pyarrow's errors are ValueErrors (ArrowInvalid) or OSErrors
        raise DataError(f"{path}: could not read as {suffix[1:]} ({err}); check it is a complete {suffix[1:]} "
                        f"file, or save the table again") from None


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
            dropped.note(f"{where}:duplicate_conflict", int(tie.sum()), _row_examples(out[tie]))
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


def _split_randomly(df: pd.DataFrame, params: DataParams, rng: np.random.Generator) -> dict[str, pd.DataFrame]:
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


def load_table(path: Path, params: DataParams, rng: np.random.Generator,
               score_range: tuple[float, float] | None) -> Loaded:
    if not path.exists():
        raise DataError(f"{path}: file not found")
    bad_lines: list[str] = []
    df, unparseable = read_table(path, bad_lines)
    if df.empty:
        seen = f": {'; '.join(bad_lines)}" if bad_lines else ""
        form = ("one JSON object per line (JSON Lines, not one JSON array)" if path.suffix.lower() == ".jsonl"
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
        splits = {s: _clean_rows(df[canon == s], *score_range, f"{path.name}[{s}]", dropped) for s in SPLITS}
    else:
        clean, duplicates = merge_copies(_clean_rows(df, *score_range, path.name, dropped), path.name, dropped)
        splits = _split_randomly(clean, params, rng)
        return Loaded(splits, dropped, str(path), sha256_file(path), duplicates)
    return Loaded(splits, dropped, str(path), sha256_file(path))


def _one_column_hint(columns: list[str], path: Path) -> str:
    """A header read as one column holding another delimiter: the file's separator is not its suffix's."""
    if len(columns) != 1:
        return ""
    for sep, name, fix in ((";", "semicolons", "with commas as .csv"), ("\t", "tabs", "as .tsv"),
                           (",", "commas", "as .csv"), ("|", "bars", "with commas as .csv")):
        if sep in columns[0]:
            return f". The header is one column holding {name}: save the file {fix} (it is read as {path.suffix})"
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


def gold_dir(params: Params, clean: Path) -> Path:
    """Where the gold pairs that train and select models are: the source domain's (``clean/source``) under
    domain adaptation, else the task's own (``clean``). Evaluation always reads the task's own."""
    return clean / SOURCE_DIR if params.adapt.dataset else clean
