"""The bad-input matrix (issue 16): what a user sees when a table, params file, artifact, model or archive is bad.

Every case ends in one of four ways, named by its ``expect``:
- ``error``: one of our own exceptions, whose message matches each of the case's ``must`` patterns (the
  file, the row or key, what was expected or what to do);
- ``drop``: the bad rows dropped and counted by reason in the stage reports (``must``: ``reason=count``),
  every good row read unchanged and every row accounted for (kept + dropped = rows in the file);
- ``warn``: the data read, with a warning the stage printed (``must``: patterns of what it said);
- ``ok``: the data read correctly (byte-order mark, CRLF line endings, a compressed file: a note says so).
Anything else, a raw pandas / pyarrow / torch traceback or silent acceptance, is a failure. A table we split
must come out with no dev or test pair also in train. Issue 26's cases and thirty more follow issue 16's;
docs/bad-input.md lists them all with what the user sees, and the stopped-stage cases (Ctrl-C, a killed dvc,
a second stage, a Python without our packages) that tests/test_runtime.py and tests/test_check.py run.
``python benchmarks/bad_input_matrix.py`` runs the same cases and prints them as a table.
"""

from __future__ import annotations

import bz2
import contextlib
import errno
import gzip
import io
import json
import lzma
import re
import shutil
import tarfile
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

import huggingface_hub.constants
import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
import yaml

from pldistill.base import bundled, cleaning, schemas
from pldistill.base.errors import ConfigError
from pldistill.base.io import WriteError
from pldistill.base.schemas import SchemaError
from pldistill.data import datasets, public_sets
from pldistill.data.datasets import DataError
from pldistill.models.encoders import BiEncoder, CrossModel, ModelError
from pldistill.params.config import load_params, parse_params
from stages.augment import augment
from stages.download import download

ROOT = Path(__file__).resolve().parents[1]
OUR_ERRORS = (DataError, ConfigError, SchemaError, ModelError, WriteError)


@dataclass
class Seen:
    """What a run that went through left: the drops counted, by report and reason (every row accounted for),
    and the notes and warnings the stages printed."""

    dropped: dict[str, int]
    said: list[str] = field(default_factory=list)


# A run returns what it saw, or None when it has nothing to check (it should have refused the input).
Run = Callable[[Path, pytest.MonkeyPatch], Seen | None]


class Broken(Exception):
    """A run that did not raise but lost, changed or took too long over something."""


@dataclass(frozen=True)
class Case:
    name: str
    expect: str  # "error" | "drop" | "warn" | "ok"
    run: Run
    must: tuple[str, ...] = ()  # error, warn, ok: regexes the message must match; drop: "reason=count"
    gap: str = ""  # a known failure, and the change that fixes it (the test is xfail until then)


# --------------------------------------------------------------------------- user tables
# 20 good rows with a split column (so a bad row's split, and so whether augment may drop it, is fixed).
GOOD = pd.DataFrame({
    "sentence1": [f"the cat number {i} sat on the mat" for i in range(20)],
    "sentence2": [f"a dog number {i} ran to the park" for i in range(20)],
    "score": [(i % 5) / 4 for i in range(20)],
    "split": ["train"] * 16 + ["dev"] * 2 + ["test"] * 2,
})
# Writes a table into the folder; returns it, its number of rows and the rows that must come through unchanged.
Make = Callable[[Path], tuple[Path, int, pd.DataFrame]]


def table(suffix: str, *bad: dict, extra: bytes = b"", extra_rows: int = 0, bom: bool = False,
          crlf: bool = False) -> Make:
    """pairs<suffix>: GOOD, then the ``bad`` rows (split train), then ``extra`` raw bytes holding ``extra_rows``."""
    def make(tmp: Path) -> tuple[Path, int, pd.DataFrame]:
        df = pd.concat([GOOD, pd.DataFrame([{"split": "train", **row} for row in bad])], ignore_index=True)
        path = tmp / f"pairs{suffix}"
        if suffix == ".parquet":
            df.to_parquet(path)
        else:
            text = {".csv": lambda: df.to_csv(index=False), ".tsv": lambda: df.to_csv(sep="\t", index=False),
                    ".jsonl": lambda: df.to_json(orient="records", lines=True)}[suffix]()
            data = text.encode() + extra
            data = data.replace(b"\n", b"\r\n") if crlf else data
            path.write_bytes(b"\xef\xbb\xbf" * bom + data)
        return path, len(df) + extra_rows, GOOD
    return make


def raw_file(name: str, data: bytes, rows: int = 0) -> Make:
    def make(tmp: Path) -> tuple[Path, int, pd.DataFrame]:
        (tmp / name).write_bytes(data)
        return tmp / name, rows, GOOD.iloc[:0]
    return make


def directory(tmp: Path) -> tuple[Path, int, pd.DataFrame]:
    (tmp / "d.csv").mkdir()
    return tmp / "d.csv", 0, GOOD.iloc[:0]


def staged(make: Make, verify: Callable[[dict[str, pd.DataFrame]], None] | None = None, **data: object) -> Run:
    """Write the table, run stages download and augment on it, and check that every row is accounted for, that
    a table we split has no dev or test pair in train, and ``verify`` on the splits written."""
    def run(tmp: Path, mp: pytest.MonkeyPatch) -> Seen | None:
        path, rows, good = make(tmp)
        params = parse_params({"data": {"dataset": str(path), **data}})
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            download(params, tmp / "raw", tmp / "download.json")
            augment(params, tmp / "raw", tmp / "clean", tmp / "augment.json")
        said = [line for line in printed.getvalue().splitlines() if line.startswith(("note:", "warning:"))]
        down, aug = (json.loads((tmp / f"{s}.json").read_text()) for s in ("download", "augment"))
        if down["duplicates"] and any(down["overlap"].values()):  # duplicates: filled for a table we split
            raise Broken(f"a table we split has pairs on both sides: {down['overlap']}")
        dropped = {**{f"download.json {k}": v for k, v in down["dropped"].items()},
                   **{f"augment.json {k}": v for k, v in aug["dropped"].items() if v}}
        kept = sum(aug["rows_out"].values())
        if kept + sum(dropped.values()) != rows:
            raise Broken(f"{rows} rows in, {kept} kept, {sum(dropped.values())} counted as dropped: rows lost silently")
        read = pd.concat([schemas.read(tmp / "raw" / params.data.name / f"{s}.parquet", schemas.PAIRS)
                          for s in ("train", "dev", "test")])  # the splits (unscored.parquet: given pairs, none here)
        got = set(zip(read["sentence1"], read["sentence2"], read["score"].round(6)))
        lost = [r for r in zip(good["sentence1"], good["sentence2"], good["score"].round(6)) if r not in got]
        if lost:
            raise Broken(f"{len(lost)} good row(s) lost or changed, e.g. {lost[0]}")
        if read[["sentence1", "sentence2"]].apply(lambda c: c.str.contains("[\r\ufeff]")).any().any():
            raise Broken("a byte-order mark or carriage return was read into the text")
        if verify is not None:
            verify({s: schemas.read(tmp / "raw" / params.data.name / f"{s}.parquet", schemas.PAIRS)
                    for s in datasets.SPLITS})
        return Seen(dropped, said)
    return run


def pair(sentence1: object = "a b c", sentence2: object = "d e f", score: object = 0.5) -> dict:
    return {"sentence1": sentence1, "sentence2": sentence2, "score": score}


HEADER = b"sentence1,sentence2,score\n"
TABLES = [
    Case("csv: a missing sentence", "drop", staged(table(".csv", pair(""))), ("missing_sentence=1",)),
    Case("jsonl: a sentence key absent / null", "drop", staged(table(".jsonl", extra_rows=2, extra=(
        b'{"sentence2": "a b c", "score": 0.5, "split": "train"}\n'
        b'{"sentence1": null, "sentence2": "a b c", "score": 0.5, "split": "train"}\n')), max_drop_share=0.1),
         ("missing_sentence=2",)),  # 2 of 22 rows: 9%, over the default 5% (issue 26's stop)
    Case("tsv: an empty (whitespace) sentence", "drop", staged(table(".tsv", pair("   "))), ("missing_sentence=1",)),
    Case("csv: NaN score", "drop", staged(table(".csv", pair(score="nan"))), ("score_not_a_number=1",)),
    Case("parquet: NaN score", "drop", staged(table(".parquet", pair(score=np.nan))), ("score_not_a_number=1",)),
    Case("csv: infinite score", "drop", staged(table(".csv", pair(score="inf"))), ("score_not_a_number=1",)),
    Case("csv: score out of data.score_range", "drop", staged(table(".csv", pair(score=7)), score_range=[0, 1]),
         ("score_out_of_range=1",)),
    Case("csv: score outside [0, 1], no data.score_range", "error", staged(table(".csv", pair(score=7))),
         (r"pairs\.csv", r"0\.\.7, outside \[0, 1\]", r"data\.score_range")),
    Case("csv: a 200,000-character sentence", "drop", staged(table(".csv", pair("word " * 40_000))), ("too_long=1",)),
    Case("csv: a duplicate pair (swapped, other case)", "drop",
         staged(table(".csv", pair("A DOG number 3 ran to the park", "the cat number 3 sat on the mat"))),
         ("duplicate=1",)),
    Case("csv: a row with too many fields", "drop",
         staged(table(".csv", extra=b"a b c,d e f,0.5,train,EXTRA\n", extra_rows=1)), ("unparseable_line=1",)),
    Case("tsv: a row with too many fields", "drop",
         staged(table(".tsv", extra=b"a b c\td e f\t0.5\ttrain\tEXTRA\n", extra_rows=1)), ("unparseable_line=1",)),
    Case("csv: a quote never closed", "error",
         staged(table(".csv", extra=b'"a b c,d e f,0.5,train\ng h i,j k l,0.5,train\n')),
         (r"pairs\.csv", "line 22", "never closed", "close it")),
    Case("csv: non-UTF-8 bytes (latin-1)", "error",
         staged(table(".csv", extra="café,d e f,0.5,train\n".encode("latin-1"))),
         (r"pairs\.csv", "line 22 is not UTF-8", "byte 0xe9", "save the file as UTF-8")),
    Case("jsonl: non-UTF-8 bytes (latin-1)", "error",
         staged(table(".jsonl", extra='{"sentence1": "café"}\n'.encode("latin-1"))),
         (r"pairs\.jsonl", "line 21 is not UTF-8", "save the file as UTF-8")),
    Case("csv: UTF-8 byte-order mark", "ok", staged(table(".csv", bom=True))),
    Case("jsonl: UTF-8 byte-order mark", "ok", staged(table(".jsonl", bom=True))),
    Case("csv: CRLF line endings", "ok", staged(table(".csv", crlf=True))),
    Case("tsv: byte-order mark and CRLF", "ok", staged(table(".tsv", bom=True, crlf=True))),
    Case("csv: only one row", "error", staged(raw_file("one.csv", HEADER + b"a b c,d e f,0.5\n", 1)),
         (r"one\.csv", "no valid rows left in split", "expected at least one pair in each of train, dev and test")),
    Case("csv: every row malformed", "error",
         staged(raw_file("bad.csv", HEADER + b"".join(b",d e f %d,0.5\n" % i for i in range(20)), 20)),
         (r"bad\.csv: 20 of 20 rows \(100\.0%\) were dropped as missing_sentence", r"row 1: sentence1=''",
          "Map the columns that hold the two sentences with data.columns")),
    Case("csv: empty file", "error", staged(raw_file("empty.csv", b"")), (r"empty\.csv", r"empty file \(0 bytes\)")),
    Case("csv: header only", "error", staged(raw_file("header.csv", HEADER)),
         (r"header\.csv", "no rows to read", "expected a header line and one row per sentence pair")),
    Case("parquet: not a Parquet file", "error", staged(raw_file("junk.parquet", np.random.default_rng(0).bytes(512))),
         (r"junk\.parquet", "could not read as parquet", "save the table again")),
    Case("a directory as the table path", "error", staged(directory),
         (r"d\.csv", "is a directory", r"expected one table file")),
    Case("csv: wrong column names, no data.columns", "error",
         staged(raw_file("cols.csv", b"text_a,text_b,label\n" + b"a b c,d e f,0.5\n" * 20, 20)),
         (r"cols\.csv", r"expected columns \['sentence1', 'sentence2', 'score'\]",
          r"found \['text_a', 'text_b', 'label'\]", "map yours with data.columns")),
    Case("csv: a column named twice in the header", "error",
         staged(raw_file("twice.csv", b"sentence1,sentence2,score,score\n" + b"a b c,d e f,0.5,0.2\n" * 20, 20)),
         (r"twice\.csv", r"names \['score'\] more than once")),
]


# --------------------------------------------------------------------------- params
def params_file(text: str) -> Run:
    def run(tmp: Path, mp: pytest.MonkeyPatch) -> Seen | None:
        (tmp / "params.yaml").write_text(text)
        load_params(tmp / "params.yaml")
        return None
    return run


def bad_param(key: str, value: object, must: str, also: dict | None = None, gap: str = "") -> Case:
    """params.yaml setting the dotted ``key`` to ``value`` (beside the keys in ``also``); the message must name
    the file and match ``<key>: <must>``."""
    raw: dict = dict(also or {})
    *parents, last = key.split(".")
    node = raw
    for part in parents:
        node = node.setdefault(part, {})
    node[last] = value
    return Case(f"params: {key}: {value!r}", "error", params_file(yaml.safe_dump(raw)),
                (r"params\.yaml", rf"{re.escape(key)}: {must}"), gap)


AT_LEAST_1 = "Input should be greater than or equal to 1"
PARAMS = [
    bad_param("epochs", 3, r"unknown key \(did you mean teacher\.epochs or student\.epochs.*\); allowed here: seed"),
    bad_param("sample.topk", 5, r"unknown key \(did you mean sample\.top_k\?\); allowed here: .*top_k"),  # misspelled

    bad_param("sample.top_k", "three", "Input should be a valid integer.*found 'three'"),
    bad_param("teacher.lr", "fast", "Input should be a valid number.*found 'fast'"),
    bad_param("data.columns", "q1", "Input should be a valid dictionary.*found 'q1'"),
    bad_param("sample.top_k", True, "expected a number; found True"),
    bad_param("sample.top_k", 0, f"{AT_LEAST_1} .found 0"),
    bad_param("sample.top_k", -2, f"{AT_LEAST_1} .found -2"),
    bad_param("teacher.lr", 0, "Input should be greater than 0 .found 0"),
    bad_param("student.epochs", 0, f"{AT_LEAST_1} .found 0"),
    bad_param("cycles", 0, f"{AT_LEAST_1} .found 0"),
    bad_param("cycles", -1, f"{AT_LEAST_1} .found -1", also={"recipe": "trans-encoder"}),
    Case("params: not YAML (a tab)", "error", params_file("sample:\n  top_k: 3\n\tstrategy: bm25\n"),
         (r"params\.yaml", "not valid YAML", "line 3")),
]


# --------------------------------------------------------------------------- artifacts between stages
CANDIDATES = pd.DataFrame({"sentence1": ["a b c"] * 50, "sentence2": ["d e f"] * 50, "strategy": ["bm25"] * 50})
SILVER = CANDIDATES.assign(score=0.5, logit=0.0, labeller="cross", cycle=1)


def artifact(rel: str, schema: object, corrupt: Callable[[Path], None]) -> Run:
    """A corrupt file where dvc.yaml puts ``rel``, read as the next stage reads it (from the project root)."""
    def run(tmp: Path, mp: pytest.MonkeyPatch) -> Seen | None:
        shutil.copy(ROOT / "dvc.yaml", tmp / "dvc.yaml")
        mp.chdir(tmp)
        Path(rel).parent.mkdir(parents=True)
        corrupt(Path(rel))
        schemas.read(rel, schema)
        return None
    return run


def random_bytes(path: Path) -> None:
    path.write_bytes(np.random.default_rng(0).bytes(4096))


def truncated(frame: pd.DataFrame, schema: object) -> Callable[[Path], None]:
    def corrupt(path: Path) -> None:
        schemas.write(path, frame, schema)
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    return corrupt


def wrong_columns(path: Path) -> None:
    pd.DataFrame({"text": ["a b c"], "label": [1]}).to_parquet(path)


ARTIFACTS = [
    Case(f"{rel}: {what}", "error", artifact(rel, schema, corrupt), (re.escape(rel), why, f"dvc repro -f -s {stage}"))
    for rel, schema, frame, stage in [("data/pairs/candidates.parquet", schemas.CANDIDATES, CANDIDATES, "sample"),
                                      ("data/silver/silver.parquet", schemas.PSEUDO, SILVER, "label")]
    for what, corrupt, why in [("random bytes", random_bytes, "not a readable Parquet file"),
                               ("truncated", truncated(frame, schema), "not a readable Parquet file"),
                               ("wrong columns", wrong_columns, r"expected columns .* missing")]
]


# --------------------------------------------------------------------------- models
def pickled_only(tmp: Path, mp: pytest.MonkeyPatch) -> Seen | None:
    (tmp / "my-model").mkdir()
    (tmp / "my-model/config.json").write_text("{}")
    (tmp / "my-model/pytorch_model.bin").write_bytes(b"\x80\x04not loaded")
    bundled.resolve(str(tmp / "my-model"))
    return None


def hub_offline(cls: type[BiEncoder | CrossModel]) -> Run:
    def run(tmp: Path, mp: pytest.MonkeyPatch) -> Seen | None:
        mp.setenv("HF_HUB_OFFLINE", "1")
        mp.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)  # the hub reads the variable once, at import
        start = time.monotonic()
        try:
            cls.load("someorg/somemodel")
        finally:
            if (took := time.monotonic() - start) > 5:
                raise Broken(f"took {took:.0f} s to fail")
        return None
    return run


HUB_MUST = ("someorg/somemodel", "could not load this hub id offline", "local directory", "bundled:")
MODELS = [
    Case("model dir with only pytorch_model.bin", "error", pickled_only,
         (r"my-model", r"no \*\.safetensors weights \(found \['config.json', 'pytorch_model.bin'\]\)",
          "safe_serialization=True")),
    Case("hub id while offline: BiEncoder.load", "error", hub_offline(BiEncoder), HUB_MUST),
    Case("hub id while offline: CrossModel.load", "error", hub_offline(CrossModel), HUB_MUST),
]


# --------------------------------------------------------------------------- the STS Benchmark archive
def stsb_members(**replace: bytes) -> dict[str, bytes]:
    """The official layout: stsbenchmark/sts-{train,dev,test}.csv, tab-separated genre .. score, s1, s2."""
    row = b"main-captions\tMSRvid\t2012test\t%04d\t%.1f\tA man plays flute %d.\tA man is playing a flute %d.\n"
    rows = b"".join(row % (i, i % 6, i, i) for i in range(10))
    return {f"stsbenchmark/sts-{s}.csv": rows for s in datasets.SPLITS} | replace


def tar_gz(members: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def load_stsb(data: bytes | None, escape: str = "") -> Run:
    """Load stsb from an archive holding ``data`` (None: the official download, offline in data/downloads/);
    a member named ``escape`` must not appear outside the folder the archive is in."""
    def run(tmp: Path, mp: pytest.MonkeyPatch) -> Seen | None:
        (tmp / "in").mkdir()
        source = None
        if data is not None:
            source = tmp / "in/Stsbenchmark.tar.gz"
            source.write_bytes(data)
        mp.chdir(tmp / "in")
        try:
            datasets.load(parse_params({"data": {"dataset": "stsb", "source": source and str(source)}}).data, 0)
        finally:
            if escape and (tmp / "in" / escape).resolve().exists():  # an absolute name replaces the folder
                raise Broken(f"{escape} was written outside the folder")
        return None
    return run


class _Response(io.BytesIO):
    headers: ClassVar[dict[str, None]] = {"Content-Length": None}


def downloaded(payload: bytes | None, cached: bytes | None = None) -> Run:
    """The official download with the network faked: ``payload`` served (None: unreachable); ``cached`` a
    copy already in data/downloads/."""
    def run(tmp: Path, mp: pytest.MonkeyPatch) -> Seen | None:
        def urlopen(url: str, timeout: float) -> io.BytesIO:

            if payload is None:
                raise public_sets.urllib.error.URLError("no route to host")
            return _Response(payload)
        mp.setattr(public_sets.urllib.request, "urlopen", urlopen)
        if cached is not None:
            (tmp / "in" / public_sets.DOWNLOAD_DIR).mkdir(parents=True)
            (tmp / "in" / public_sets.DOWNLOAD_DIR / "Stsbenchmark.tar.gz").write_bytes(cached)
        else:
            (tmp / "in").mkdir()
        mp.chdir(tmp / "in")
        datasets.load(parse_params({"data": {"dataset": "stsb"}}).data, 0)
        return None
    return run


ARCHIVE = tar_gz(stsb_members())
ARCHIVES = [
    Case("stsb archive truncated", "error", load_stsb(ARCHIVE[: len(ARCHIVE) // 2]),
         (r"Stsbenchmark\.tar\.gz", "not a readable tar archive", "truncated or corrupt", "data.source")),
    Case("stsb download tampered (sha256 mismatch)", "error", downloaded(ARCHIVE),
         (re.escape(public_sets.STSB_URL), "expected the pinned", "not kept", "data.source")),
    Case("stsb cached copy tampered, offline", "error", downloaded(None, cached=ARCHIVE),
         ("could not download", r"data/downloads/Stsbenchmark\.tar\.gz does not match the pinned sha256",
          r"Copy Stsbenchmark\.tar\.gz .* data\.source", r"-S data\.source=path/to/Stsbenchmark\.tar\.gz$")),
    Case("stsb archive member with ..", "error",
         load_stsb(tar_gz(stsb_members() | {"../../sts-train.csv": b"escaped\n"}), escape="../../sts-train.csv"),
         (r"Stsbenchmark\.tar\.gz", r"member '\.\./\.\./sts-train\.csv' points outside", "refusing the archive")),
    Case("stsb archive member with an absolute path", "error",
         load_stsb(tar_gz(stsb_members() | {"/tmp/pldistill-escaped-sts.csv": b"escaped\n"}),
                   escape="/tmp/pldistill-escaped-sts.csv"),
         (r"member '/tmp/pldistill-escaped-sts\.csv' points outside", "refusing the archive")),
    Case("stsb archive member not UTF-8", "error",
         load_stsb(tar_gz(stsb_members(**{"stsbenchmark/sts-dev.csv": "g\tf\ty\t1\t2\tcafé\tb\n".encode("cp1252")}))),
         (r"sts-dev\.csv: line 1 is not UTF-8", "save the file as UTF-8")),
]


# --------------------------------------------------------------------------- issue 26: the cases it names
def csv_of(df: pd.DataFrame, good: pd.DataFrame | None = None, name: str = "pairs.csv") -> Make:
    """``df`` as a csv table (without a split column: we split it); ``good``: the rows that must come through
    unchanged (every row of ``df`` by default)."""
    def make(tmp: Path) -> tuple[Path, int, pd.DataFrame]:
        df.to_csv(tmp / name, index=False)
        return tmp / name, len(df), df if good is None else good
    return make


def numbered(n: int, start: int = 0, score: Callable[[int], float] = lambda i: (i % 5) / 4) -> pd.DataFrame:
    return pd.DataFrame({"sentence1": [f"the cat number {i} sat on the mat" for i in range(start, start + n)],
                         "sentence2": [f"a dog number {i} ran to the park" for i in range(start, start + n)],
                         "score": [score(i) for i in range(start, start + n)]})


def copies(df: pd.DataFrame) -> pd.DataFrame:
    """A copy of each row as users' logs repeat them: exact, swapped, other case, other spacing, in turn."""
    out = df.copy()
    turn = np.arange(len(df)) % 4
    s1, s2 = out["sentence1"].copy(), out["sentence2"].copy()
    out.loc[turn == 1, ["sentence1", "sentence2"]] = np.c_[s2[turn == 1], s1[turn == 1]]
    out.loc[turn == 2, "sentence1"] = s1[turn == 2].str.upper()
    out.loc[turn == 3, "sentence2"] = "  " + s2[turn == 3].str.replace(" ", "   ") + " "
    return out


def zip_of(members: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        for name, data in members.items():
            z.writestr(name, data)
    return out.getvalue()


def compressed(make: Make, kind: str) -> Make:
    """The file ``make`` writes, compressed with ``kind`` under its own (plain-text) name."""
    pack = {"gzip": gzip.compress, "bz2": bz2.compress, "xz": lzma.compress}

    def wrap(tmp: Path) -> tuple[Path, int, pd.DataFrame]:
        path, rows, good = make(tmp)
        data = path.read_bytes()
        path.write_bytes(zip_of({path.name: data}) if kind == "zip" else pack[kind](data))
        return path, rows, good
    return wrap


def renamed(make: Make, name: str) -> Make:
    """The file ``make`` writes, under ``name`` (pairs.csv.gz: a name that says its compression)."""
    def wrap(tmp: Path) -> tuple[Path, int, pd.DataFrame]:
        path, rows, good = make(tmp)
        return path.rename(tmp / name), rows, good
    return wrap


def no_sentence_on_two_sides(splits: dict[str, pd.DataFrame]) -> None:
    def keys(df: pd.DataFrame) -> set[str]:
        return {cleaning.sentence_key(s) for s in (*df["sentence1"], *df["sentence2"])}
    for split in ("dev", "test"):
        if shared := keys(splits[split]) & keys(splits["train"]):
            raise Broken(f"{len(shared)} {split} sentences also in train, e.g. {sorted(shared)[0]!r}")


def merged_to(s1: str, score: float) -> Callable[[dict[str, pd.DataFrame]], None]:
    def verify(splits: dict[str, pd.DataFrame]) -> None:
        rows = pd.concat(splits.values())
        got = rows.loc[(rows["sentence1"] == s1) | (rows["sentence2"] == s1), "score"].tolist()
        if got != [pytest.approx(score)]:
            raise Broken(f"the copies of {s1!r} became {got}, expected one row scored {score}")
    return verify


def sharing(groups: int) -> pd.DataFrame:
    """Groups of four pairs around one base sentence, as paraphrase data comes (and the demo is built)."""
    rows = [(f"base sentence {g} about topic {g % 7}", f"variant {v} of sentence {g}", v / 3)
            for g in range(groups) for v in range(4)]
    return pd.DataFrame(rows, columns=["sentence1", "sentence2", "score"])


DUPS = numbered(100)
ISSUE26 = [
    Case("csv, no split column: 80 of 100 pairs twice (exact, swapped, other case, other spacing)", "drop",
         staged(csv_of(pd.concat([DUPS, copies(DUPS.iloc[:80])], ignore_index=True), good=DUPS)),
         ("duplicate=80",)),
    Case("csv, no split column: two copies of a pair scored 0 and 0.75", "drop",
         staged(csv_of(pd.concat([numbered(40), numbered(1, score=lambda i: 0.75)], ignore_index=True),
                        good=numbered(40).iloc[1:]), verify=merged_to("the cat number 0 sat on the mat", 0.375)),
         ("duplicate=1",)),
    Case("csv, no split column, data.split_by: sentence: groups of pairs sharing a sentence", "ok",
         staged(csv_of(sharing(30)), verify=no_sentence_on_two_sides, split_by="sentence")),
    Case("csv with a split column: 3 test pairs also in train (swapped, other case)", "warn",
         staged(table(".csv", *[{**pair(f"A DOG number {i} ran to the park", f"the cat number {i} sat on the mat",
                                        (i % 5) / 4), "split": "test"} for i in range(3)])),
         (r"warning: pairs\.csv: 3 of 5 test pairs also occur in train", "remove them from train",
          "drop the split column")),
    Case("csv: data.score_range [0, 1] for scores on 0..5 (2 rows in 3 dropped)", "error",
         staged(csv_of(numbered(90, score=lambda i: i % 6)), score_range=[0, 1]),
         (r"pairs\.csv: 60 of 90 rows \(66\.7%\) were dropped as score_out_of_range, more than data\.max_drop_share "
          r"\(5%\)", r"e\.g\. row 3: sentence1='the cat number 2 sat on the mat', .*score='2'",
          r"The scores span 0\.\.5 and data\.score_range is \[0, 1\]", r"data\.score_range=\[0,5\]",
          r"raise data\.max_drop_share")),
    Case("csv: data.columns maps score to a column that is mostly text", "error",
         staged(csv_of(numbered(40).assign(votes=["n/a"] * 30 + ["0.5"] * 10)), columns={"score": "votes"}),
         (r"30 of 40 rows \(75\.0%\) were dropped as score_not_a_number", r"score='n/a'",
          r"Is 'votes' the column that holds the scores\? Map yours with data\.columns")),
    Case("csv: a fifth of the rows without a second sentence", "error",
         staged(csv_of(numbered(50).assign(sentence2=lambda d: d["sentence2"].where(d.index % 5 > 0, "")))),
         (r"10 of 50 rows \(20\.0%\) were dropped as missing_sentence", r"row 1: sentence1='the cat number 0",
          r"Map the columns that hold the two sentences with data\.columns")),
    Case("csv: a table of 3 rows", "error", staged(csv_of(numbered(3))),
         (r"pairs\.csv: split 'train' has 1 pair; split 'dev' has 1 pair; split 'test' has 1 pair",
          r"at least 2 pairs with different scores", r"data\.split sets the dev and test fractions")),
    Case("csv: every score the same", "error", staged(csv_of(numbered(40, score=lambda i: 0.5))),
         (r"split 'train' has 32 pairs that all score 0\.5", "a correlation or an AUC over one value is undefined")),
    Case("csv (0/1 labels) with a split column: test holds label 1 only", "error",
         staged(csv_of(GOOD.assign(score=[*(i % 2 for i in range(18)), 1, 1]), name="labels.csv")),
         (r"labels\.csv: split 'test' has only label 1, in all 2 pairs", r"for classification: both labels, 0 and 1")),
    bad_param("studnet", {"lr": 1e-4}, r"unknown key \(did you mean student\?\); allowed here: seed"),
    bad_param("student.lrr", 1e-4, r"unknown key \(did you mean student\.lr\?\)"),
    *(Case(f"csv: {kind}-compressed, named .csv", "ok", staged(compressed(table(".csv"), kind)),
           (rf"note: pairs\.csv is {kind}-compressed; read what it holds",)) for kind in ("gzip", "bz2", "xz", "zip")),
    # the name may say the compression too: read alike, no note (issue 77: pairs.csv.gz was refused by its name)
    *(Case(f"{fmt}: {kind}-compressed, named .{fmt}{ext}", "ok",
           staged(renamed(compressed(table(f".{fmt}"), kind), f"pairs.{fmt}{ext}")), (r"^(?!.*note:)",))
      for fmt, kind, ext in (("csv", "gzip", ".gz"), ("tsv", "bz2", ".bz2"), ("jsonl", "xz", ".xz"))),
    Case("csv: gzip-compressed, named .csv, truncated", "error",
         staged(raw_file("cut.csv", gzip.compress(HEADER + b"a b c,d e f,0.5\n" * 500)[:60], 500)),
         (r"cut\.csv: gzip-compressed \(its first bytes say so\) but it does not decompress", "may be truncated")),
    Case("csv: a zip holding two tables, named .csv", "error",
         staged(raw_file("two.csv", zip_of({"a.csv": HEADER, "b.csv": HEADER}))),
         (r"two\.csv: a zip archive holding 2 files \(\['a\.csv', 'b\.csv'\]\); expected one table",)),
]



# --------------------------------------------------------------------------- issue 26: thirty more of our own
def jsonl_rows(*rows: str) -> bytes:
    """Extra JSON Lines rows (split train), written as given (NaN, Infinity, lists: what json.dumps will not)."""
    return b"".join(b'{"split": "train", ' + r.encode() + b"}\n" for r in rows)


def disk_full(failing: str, error: OSError) -> Run:
    """Run download once, then again with ``error`` raised while writing the file named ``failing`` (its
    temporary, ``.<name>.<pid>...``): the error must name it, and every file of the first run stay as it was,
    with no temporary left beside it."""
    def run(tmp: Path, mp: pytest.MonkeyPatch) -> Seen | None:
        path, _, _ = table(".csv")(tmp)
        params = parse_params({"data": {"dataset": str(path)}})
        with contextlib.redirect_stdout(io.StringIO()):
            download(params, tmp / "raw", tmp / "download.json")
        before = {p: p.read_bytes() for p in tmp.rglob("*") if p.is_file()}
        write_table, write_text = pq.write_table, Path.write_text

        def parquet(table: object, where: object, **kwargs: object) -> None:
            if Path(str(where)).name.startswith(f".{failing}."):
                raise error
            write_table(table, where, **kwargs)

        def text(self: Path, data: str, *args: object, **kwargs: object) -> int:
            if self.name.startswith(f".{failing}."):
                raise error
            return write_text(self, data, *args, **kwargs)

        mp.setattr(pq, "write_table", parquet)
        mp.setattr(Path, "write_text", text)
        try:
            download(params, tmp / "raw", tmp / "download.json")
        finally:
            after = {p: p.read_bytes() for p in tmp.rglob("*") if p.is_file()}
            if after != before:
                raise Broken(f"the failed write changed or left files: {sorted(set(after) ^ set(before))}")
        return None
    return run


NAMED = "pairs-\udce9.csv"  # a latin-1 byte in the file name (os.fsdecode's surrogate): not UTF-8
MORE = [
    Case("csv: UTF-16 with its byte-order mark (Excel's 'Unicode text')", "ok",
         staged(lambda tmp: (_utf16(table(".csv")(tmp)))), (r"note: pairs\.csv is UTF-16; read it as such",)),
    Case("csv: mixed encodings (UTF-8, then a cp1252 line)", "error",
         staged(table(".csv", pair("café crème au lait", "a b c"), extra="naïve,d e f,0.5,train\n".encode("cp1252"))),
         (r"pairs\.csv: line 23 is not UTF-8 \(byte 0xef at column 3\)", "save the file as UTF-8")),
    Case("csv: two files joined (the second's byte-order mark and header mid-file)", "error",
         staged(table(".csv", extra="\ufeffsentence1,sentence2,score,split\n".encode(), extra_rows=1)),
         (r"split column has values \['split'\] \(a header line inside the file\? two files joined\?\)",)),
    Case("csv, no split column: two files joined (a header line mid-file)", "drop",
         staged(lambda tmp: _rewrite(csv_of(numbered(40))(tmp), lambda b: b + "\ufeff".encode() + HEADER, 1)),
         ("score_not_a_number=1",)),
    Case("csv: a row with too few fields", "drop",
         staged(table(".csv", extra=b"a b c,d e f\n", extra_rows=1)), ("unparseable_line=1",)),
    Case("tsv: a row with too few fields", "drop",
         staged(table(".tsv", extra=b"a b c\td e f\n", extra_rows=1)), ("unparseable_line=1",)),
    Case("jsonl: NaN score (a bare NaN)", "drop",
         staged(table(".jsonl", extra=jsonl_rows('"sentence1": "a b c", "sentence2": "d e f", "score": NaN'),
                      extra_rows=1)), ("score_not_a_number=1",)),
    Case("jsonl: Infinity score", "drop",
         staged(table(".jsonl", extra=jsonl_rows('"sentence1": "a b c", "sentence2": "d e f", "score": -Infinity'),
                      extra_rows=1)), ("score_not_a_number=1",)),
    Case("csv: -inf score", "drop", staged(table(".csv", pair(score="-inf"))), ("score_not_a_number=1",)),
    Case("csv: an empty score cell", "drop", staged(table(".csv", pair(score=""))), ("score_not_a_number=1",)),
    Case("csv: a score of 1e400 (beyond float)", "drop", staged(table(".csv", pair(score="1e400"))),
         ("score_not_a_number=1",)),
    Case("tsv: a decimal comma (0,5)", "drop", staged(table(".tsv", pair(score="0,5"))), ("score_not_a_number=1",)),
    Case("jsonl: a sentence that is a list", "drop",
         staged(table(".jsonl", extra=jsonl_rows('"sentence1": ["a", "b"], "sentence2": "d e f", "score": 0.5'),
                      extra_rows=1)), ("sentence_not_text=1",)),
    Case("jsonl: a score written as a string", "ok",
         staged(table(".jsonl", extra=jsonl_rows('"sentence1": "a b c", "sentence2": "d e f", "score": "0.5"'),
                      extra_rows=1))),
    Case("jsonl: a sentence that is a number", "ok",
         staged(table(".jsonl", extra=jsonl_rows('"sentence1": 2024, "sentence2": "the year it was", "score": 0.5'),
                      extra_rows=1))),
    Case("parquet: a 1,000,000-character cell", "drop", staged(table(".parquet", pair("x" * 1_000_000))),
         ("too_long=1",)),
    Case("tsv: a 100,000-character cell", "drop", staged(table(".tsv", pair(sentence2="word " * 20_000))),
         ("too_long=1",)),
    Case("csv: a NUL byte inside a sentence (kept; augment turns it into a space)", "ok",
         staged(table(".csv", pair("a b\x00c")))),
    Case("csv: separated by semicolons", "error",
         staged(raw_file("semi.csv", HEADER.replace(b",", b";") + b"a b c;d e f;0.5\n" * 20, 20)),
         (r"found \['sentence1;sentence2;score'\]", r"one column holding semicolons: save the file with commas")),
    Case("csv: separated by tabs (a .tsv named .csv)", "error",
         staged(raw_file("tabs.csv", HEADER.replace(b",", b"\t") + b"a b c\td e f\t0.5\n" * 20, 20)),
         (r"one column holding tabs: save the file as \.tsv \(it is read as \.csv\)",)),
    Case("csv: header names padded with spaces", "ok",
         staged(lambda tmp: _rewrite(table(".csv")(tmp), lambda b: b.replace(b"sentence1,", b" sentence1 ,", 1)))),
    Case("csv: header names capitalised", "error",
         staged(raw_file("caps.csv", b"Sentence1,Sentence2,Score\n" + b"a b c,d e f,0.5\n" * 20, 20)),
         (r"expected columns \['sentence1', 'sentence2', 'score'\]; found \['Sentence1', 'Sentence2', 'Score'\]",
          "map yours with data.columns")),
    Case("csv: a Parquet file named .csv", "error",
         staged(lambda tmp: (GOOD.to_parquet(tmp / "p.csv"), (tmp / "p.csv", 20, GOOD))[1]),
         (r"p\.csv: this is a Parquet file: name it \.parquet",)),
    Case("csv: an Excel workbook named .csv", "error",
         staged(raw_file("book.csv", zip_of({"[Content_Types].xml": b"<x/>", "xl/workbook.xml": b"<x/>"}))),
         (r"book\.csv: an Excel workbook \(\.xlsx\), not text; export the sheet as CSV",)),
    Case("csv: zstd-compressed, named .csv", "error",
         staged(raw_file("z.csv", b"\x28\xb5\x2f\xfd" + bytes(40))), (r"z\.csv: this is zstd-compressed",)),
    Case("jsonl: one JSON array, not JSON Lines", "error",
         staged(raw_file("array.jsonl", json.dumps(GOOD.to_dict("records")).encode(), 20)),
         (r"array\.jsonl: no rows to read", r"line 1: not a JSON object: '\[\{", "one JSON object per line")),
    Case("csv: a file name that is not UTF-8 (a latin-1 byte)", "ok",
         staged(lambda tmp: _renamed(table(".csv")(tmp), NAMED))),
    Case("csv: a UTF-8 folder and file name (données/paires.csv)", "ok",
         staged(lambda tmp: _renamed(table(".csv")(tmp), "données/paires.csv"))),
    Case("csv: a split column with no dev row", "error",
         staged(csv_of(GOOD.assign(split=["train"] * 18 + ["test"] * 2))),
         (r"no valid rows left in split 'dev'", r"'dev': 0")),
    Case("csv: split names in other cases and spacing (Train, ' TEST ', validation)", "ok",
         staged(csv_of(GOOD.assign(split=["Train"] * 16 + ["validation"] * 2 + [" TEST "] * 2)))),
    Case("csv: a split column with empty cells", "error",
         staged(csv_of(GOOD.assign(split=["train"] * 15 + [""] + ["dev"] * 2 + ["test"] * 2))),
         (r"split column has values \[''\]; expected train, dev \(or validation\), test",)),
    Case("disk full while writing a Parquet (pyarrow's error)", "error",
         disk_full("train.parquet", OSError("Error writing bytes to file. Detail: [errno 28] No space left on device")),
         (r"raw/pairs/train\.parquet: could not write it: No space left on device", "Nothing was put in its place",
          r"free space there \(df -h")),
    Case("disk full while writing download.json (errno ENOSPC)", "error",
         disk_full("download.json", OSError(errno.ENOSPC, "No space left on device")),
         (r"download\.json: could not write it: No space left on device",)),
    Case("a read-only file system under data/raw", "error",
         disk_full("dev.parquet", OSError(errno.EROFS, "Read-only file system")),
         (r"dev\.parquet: could not write it: Read-only file system", "make it writable")),
    Case("params: a key given twice", "error", params_file("seed: 1\ndata:\n  dataset: demo\nseed: 2\n"),
         (r"params\.yaml: not valid YAML: key 'seed' is given twice \(first on line 1\); keep one", "line 4")),
    Case("params: an empty file", "error", params_file("# all keys commented out\n"),
         (r"params\.yaml: empty \(no keys at all\)", "git checkout params.yaml")),
    bad_param("data.max_drop_share", 1.5, "Input should be less than or equal to 1"),
    bad_param("data.split_by", "group", "Input should be 'pair' or 'sentence'"),
    bad_param("data.dataset", "pairs.gz", r"expected one of demo.*name what it holds before the compression, e\.g\. "
              r"pairs\.csv\.gz"),
    bad_param("lr", 1e-4, r"unknown key \(did you mean teacher\.lr or student\.lr"),
    Case("csv, no split column: one pair written 40 times", "error",
         staged(csv_of(numbered(1).loc[[0] * 40], good=GOOD.iloc[:0])),
         (r"no valid rows left in split 'train' \(rows per split: \{'train': 0, 'dev': 1, 'test': 0\}",
          r"duplicate': 39")),
    Case("csv (0/1 labels), no split column: copies of a pair labelled 0 and 1", "drop",
         staged(csv_of(pd.concat([numbered(40, score=lambda i: i % 2), numbered(1, score=lambda i: 1)]),
                       good=numbered(40, score=lambda i: i % 2).iloc[1:])),
         ("duplicate=1", "duplicate_conflict=1")),
    Case("csv, no split column: copies differing in Unicode form (full-width letters, no-break and zero-width "
         "spaces)", "drop",
         staged(csv_of(pd.concat([numbered(40), numbered(3).assign(
             sentence1=lambda d: d["sentence1"].str.replace("cat", "\uff43\uff41\uff54"),
             sentence2=lambda d: d["sentence2"].str.replace(" ", "\u00a0").str.replace("dog", "d\u200bog"))]),
             good=numbered(40))), ("duplicate=3",)),
    Case("csv: old Mac line endings (CR only)", "ok",
         staged(lambda tmp: _rewrite(table(".csv")(tmp), lambda b: b.replace(b"\n", b"\r")))),
]


def _utf16(made: tuple[Path, int, pd.DataFrame]) -> tuple[Path, int, pd.DataFrame]:
    path = made[0]
    path.write_bytes(path.read_bytes().decode("utf-8").encode("utf-16"))  # Python's utf-16 writes the mark
    return made


def _rewrite(made: tuple[Path, int, pd.DataFrame], change: Callable[[bytes], bytes],
             rows_added: int = 0) -> tuple[Path, int, pd.DataFrame]:
    made[0].write_bytes(change(made[0].read_bytes()))
    return made[0], made[1] + rows_added, made[2]


def _renamed(made: tuple[Path, int, pd.DataFrame], name: str) -> tuple[Path, int, pd.DataFrame]:
    path = made[0].parent / name
    path.parent.mkdir(parents=True, exist_ok=True)
    made[0].rename(path)
    return path, *made[1:]

# docs/bad-input.md shows them in these groups (benchmarks/bad_input_matrix.py prints one table each)
GROUPS: dict[str, list[Case]] = {
    "Issue 16: tables, params, artifacts, models, archives": TABLES + PARAMS + ARTIFACTS + MODELS + ARCHIVES,
    "Issue 26: the cases it names": ISSUE26,
    "Issue 26: thirty-odd more of our own": MORE,
}
CASES: list[Case] = [c for group in GROUPS.values() for c in group]


# --------------------------------------------------------------------------- judging a case
def _judged(result: Seen | None) -> tuple[str, str]:
    """The kind of a run that went through, and what the user saw."""
    if result is None:
        return "ok", "accepted silently"
    said = " / ".join(result.said)
    if any(line.startswith("warning:") for line in result.said):
        kind, seen = "warn", said
    elif result.dropped:
        kind, seen = "drop", "dropped and counted: " + ", ".join(f"{k} = {v}" for k, v in result.dropped.items())
    else:
        kind, seen = "ok", "read correctly: every row kept, unchanged"
    if said and kind != "warn":
        seen += f" (said: {said})"
    return kind, seen


def outcome(case: Case, tmp: Path, mp: pytest.MonkeyPatch) -> tuple[str, str]:
    """What happened — "error", "drop", "warn", "ok" when it is what ``case`` expects and passes its checks,
    else "failure" — and what the user sees (the error message on one line, the drops counted, what was said)."""
    result: Seen | None = None
    try:
        result = case.run(tmp, mp)
    except OUR_ERRORS as err:
        kind, seen = "error", " / ".join(line.strip() for line in str(err).splitlines())
    except Broken as err:
        return "failure", f"FAILURE: {err}"
    except Exception as err:  # the raw traceback a user would get
        return "failure", f"FAILURE: raw {type(err).__name__}: {(str(err).strip() or '-').splitlines()[0]}"
    else:
        kind, seen = _judged(result)
    seen = seen.replace(f"{tmp}/in/", "").replace(f"{tmp}/", "").replace(str(tmp), ".")
    if kind != case.expect:
        return "failure", f"FAILURE: expected {case.expect}, got {kind}: {seen}"
    for want in case.must:
        if re.fullmatch(r"\w+=\d+", want):  # a count: reason=n, summed over the reports
            reason, count = want.split("=")
            n = sum(v for k, v in (result.dropped if result else {}).items()
                    if k.split()[-1].split(":")[-1] == reason)
            if n != int(count):
                return "failure", f"FAILURE: expected {reason} = {count} counted, got {n}: {seen}"
        elif not re.search(want, seen):
            return "failure", f"FAILURE: message lacks /{want}/: {seen}"
    return kind, seen


@pytest.mark.parametrize("case", [
    pytest.param(c, id=c.name, marks=[pytest.mark.xfail(strict=True, reason=c.gap)] if c.gap else [])
    for c in CASES])
def test_bad_input_ends_in_a_clear_error_or_a_counted_drop(case: Case, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    kind, seen = outcome(case, tmp_path, monkeypatch)
    assert kind == case.expect, seen


def test_the_matrix_covers_every_outcome():
    assert {c.expect for c in CASES} == {"error", "drop", "warn", "ok"}

    assert len({c.name for c in CASES}) == len(CASES)
