"""The bad-input matrix (issue 16): what a user sees when a table, params file, artifact, model or archive is bad.

Every case ends in one of three ways, named by its ``expect``:
- ``error``: one of our own exceptions, whose message matches each of the case's ``must`` patterns (the
  file, the row or key, what was expected or what to do);
- ``drop``: the bad rows dropped and counted by reason in the stage reports (``must``: ``reason=count``),
  every good row read unchanged and every row accounted for (kept + dropped = rows in the file);
- ``ok``: the data read correctly (byte-order mark, CRLF line endings).
Anything else, a raw pandas / pyarrow / torch traceback or silent acceptance, is a failure.
``python benchmarks/bad_input_matrix.py`` runs the same cases and prints them as a table.
"""

from __future__ import annotations

import io
import json
import re
import shutil
import tarfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import huggingface_hub.constants
import numpy as np
import pandas as pd
import pytest
import yaml

from pldistill import datasets, models, schemas
from pldistill.config import ConfigError
from pldistill.datasets import DataError
from pldistill.models import BiEncoder, CrossModel, ModelError
from pldistill.schemas import SchemaError
from pldistill.validate import load_params, parse_params
from stages.augment import augment
from stages.download import download

ROOT = Path(__file__).resolve().parents[1]
OUR_ERRORS = (DataError, ConfigError, SchemaError, ModelError)
# A run returns the drops counted, by report and reason, after checking every row is accounted for; or
# None when it has nothing to check (it should have refused the input).
Run = Callable[[Path, pytest.MonkeyPatch], dict[str, int] | None]


class Broken(Exception):
    """A run that did not raise but lost, changed or took too long over something."""


@dataclass(frozen=True)
class Case:
    name: str
    expect: str  # "error" | "drop" | "ok"
    run: Run
    must: tuple[str, ...] = ()  # error: regexes the message must match; drop: "reason=count"
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


def staged(make: Make, **data: object) -> Run:
    """Write the table, run stages download and augment on it, and check that every row is accounted for."""
    def run(tmp: Path, mp: pytest.MonkeyPatch) -> dict[str, int] | None:
        path, rows, good = make(tmp)
        params = parse_params({"data": {"dataset": str(path), **data}})
        download(params, tmp / "raw", tmp / "download.json")
        augment(params, tmp / "raw", tmp / "clean", tmp / "augment.json")
        down, aug = (json.loads((tmp / f"{s}.json").read_text()) for s in ("download", "augment"))
        dropped = {**{f"download.json {k}": v for k, v in down["dropped"].items()},
                   **{f"augment.json {k}": v for k, v in aug["dropped"].items() if v}}
        kept = sum(aug["rows_out"].values())
        if kept + sum(dropped.values()) != rows:
            raise Broken(f"{rows} rows in, {kept} kept, {sum(dropped.values())} counted as dropped: rows lost silently")
        read = pd.concat([schemas.read(p, schemas.PAIRS) for p in (tmp / "raw" / params.data.name).glob("*.parquet")])
        got = set(zip(read["sentence1"], read["sentence2"], read["score"].round(6)))
        lost = [r for r in zip(good["sentence1"], good["sentence2"], good["score"].round(6)) if r not in got]
        if lost:
            raise Broken(f"{len(lost)} good row(s) lost or changed, e.g. {lost[0]}")
        if read[["sentence1", "sentence2"]].apply(lambda c: c.str.contains("[\r\ufeff]")).any().any():
            raise Broken("a byte-order mark or carriage return was read into the text")
        return dropped
    return run


def pair(sentence1: object = "a b c", sentence2: object = "d e f", score: object = 0.5) -> dict:
    return {"sentence1": sentence1, "sentence2": sentence2, "score": score}


HEADER = b"sentence1,sentence2,score\n"
TABLES = [
    Case("csv: a missing sentence", "drop", staged(table(".csv", pair(""))), ("missing_sentence=1",)),
    Case("jsonl: a sentence key absent / null", "drop", staged(table(".jsonl", extra_rows=2, extra=(
        b'{"sentence2": "a b c", "score": 0.5, "split": "train"}\n'
        b'{"sentence1": null, "sentence2": "a b c", "score": 0.5, "split": "train"}\n'))), ("missing_sentence=2",)),
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
         (r"bad\.csv", r"missing_sentence': 20", "fix the ones dropped")),
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
    def run(tmp: Path, mp: pytest.MonkeyPatch) -> dict[str, int] | None:
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
    bad_param("epochs", 3, "unknown key; allowed here: seed, cycles"),
    bad_param("sample.topk", 5, "unknown key; allowed here: .*top_k"),  # misspelled
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
    def run(tmp: Path, mp: pytest.MonkeyPatch) -> dict[str, int] | None:
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
def pickled_only(tmp: Path, mp: pytest.MonkeyPatch) -> dict[str, int] | None:
    (tmp / "my-model").mkdir()
    (tmp / "my-model/config.json").write_text("{}")
    (tmp / "my-model/pytorch_model.bin").write_bytes(b"\x80\x04not loaded")
    models.resolve(str(tmp / "my-model"))
    return None


def hub_offline(cls: type[BiEncoder | CrossModel]) -> Run:
    def run(tmp: Path, mp: pytest.MonkeyPatch) -> dict[str, int] | None:
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
    def run(tmp: Path, mp: pytest.MonkeyPatch) -> dict[str, int] | None:
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
    def run(tmp: Path, mp: pytest.MonkeyPatch) -> dict[str, int] | None:
        def urlopen(url: str, timeout: float) -> io.BytesIO:
            if payload is None:
                raise datasets.urllib.error.URLError("no route to host")
            return _Response(payload)
        mp.setattr(datasets.urllib.request, "urlopen", urlopen)
        if cached is not None:
            (tmp / "in" / datasets.DOWNLOAD_DIR).mkdir(parents=True)
            (tmp / "in" / datasets.DOWNLOAD_DIR / "Stsbenchmark.tar.gz").write_bytes(cached)
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
         (re.escape(datasets.STSB_URL), "expected the pinned", "not kept", "data.source")),
    Case("stsb cached copy tampered, offline", "error", downloaded(None, cached=ARCHIVE),
         ("could not download", r"data/downloads/Stsbenchmark\.tar\.gz does not match the pinned sha256",
          "data.source")),
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

CASES: list[Case] = TABLES + PARAMS + ARTIFACTS + MODELS + ARCHIVES


# --------------------------------------------------------------------------- judging a case
def outcome(case: Case, tmp: Path, mp: pytest.MonkeyPatch) -> tuple[str, str]:
    """What happened — "error", "drop", "ok" when it is what ``case`` expects and passes its checks, else
    "failure" — and what the user sees (the error message on one line, or the drops counted)."""
    dropped: dict[str, int] | None = None
    try:
        dropped = case.run(tmp, mp)
    except OUR_ERRORS as err:
        kind, seen = "error", " / ".join(line.strip() for line in str(err).splitlines())
    except Broken as err:
        return "failure", f"FAILURE: {err}"
    except Exception as err:  # the raw traceback a user would get
        return "failure", f"FAILURE: raw {type(err).__name__}: {(str(err).strip() or '-').splitlines()[0]}"
    else:
        if dropped is None:
            kind, seen = "ok", "accepted silently"
        elif dropped:
            kind, seen = "drop", "dropped and counted: " + ", ".join(f"{k} = {v}" for k, v in dropped.items())
        else:
            kind, seen = "ok", "read correctly: every row kept, unchanged"
    seen = seen.replace(f"{tmp}/in/", "").replace(f"{tmp}/", "")
    if kind != case.expect:
        return "failure", f"FAILURE: expected {case.expect}, got {kind}: {seen}"
    for want in case.must:
        if kind == "drop":
            reason, count = want.split("=")
            n = sum(v for k, v in (dropped or {}).items() if k.split()[-1].split(":")[-1] == reason)
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
    assert {c.expect for c in CASES} == {"error", "drop", "ok"}
    assert len({c.name for c in CASES}) == len(CASES)
