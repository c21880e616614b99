"""The public datasets data.dataset names (stsb, sickr, mrpc, qqp): their official sources, pinned by sha256, or
a local copy (data.source), parsed into rows (pldistill.data.rows). The demo and tables by path:
pldistill.data.datasets."""

from __future__ import annotations

import csv
import io
import tarfile
import urllib.error
import urllib.request
import zipfile
import zlib
from pathlib import Path, PurePosixPath

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from pldistill.base.errors import DataError
from pldistill.base.io import atomic_path, sha256_file
from pldistill.data.reading import decode, read_delimited, read_text, short
from pldistill.data.rows import SPLITS, Drops, Loaded, clean_rows, merge_copies, split_randomly
from pldistill.params.data import DataParams

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

# --------------------------------------------------------------------------- STS Benchmark
def _fetch(url: str, sha256: str, local: str | None = None) -> Path:
    """Download ``url`` once into data/downloads/, checking its sha256. Offline, the error names the file to copy
    and the key that points at a copy (``local``: what that key takes, when not the file itself)."""
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
                f"could not download {url}: {err}{stale}. Offline? Copy {dest.name} (the file at that address) onto "
                f"this machine and point data.source at it (adapt.source for adapt.dataset): "
                f"-S data.source={local or 'path/to/' + dest.name}"
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
            dropped.note(f"{where}:too_few_fields", 1, [f"line {lineno}: {short(line)}"])
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
    return {s: clean_rows(df[split == s], 1.0, 5.0, f"{where}[{s}]", dropped) for s in SPLITS}


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
            text = decode(z.read(names[0]), f"{path}:{names[0]}")
    else:
        text = read_text(path)
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
    return clean_rows(df, 0.0, 1.0, where, dropped, keep=("ids",))


def load_mrpc(params: DataParams) -> Loaded:
    """MRPC: train and test as published, dev = the train pairs GLUE lists in mrpc_dev_ids.tsv."""
    source = _source(params)
    paths = {}
    for key, (url, sha) in MRPC_FILES.items():
        name = url.rsplit("/", 1)[-1]
        paths[key] = _find(source, name, "the MRPC files msr_paraphrase_{train,test}.txt and GLUE's "
                           "mrpc_dev_ids.tsv") if source else _fetch(url, sha, "path/to/mrpc-folder")
    dropped = Drops()
    train = parse_mrpc(read_text(paths["train"]), paths["train"].name, dropped)
    test = parse_mrpc(read_text(paths["test"]), paths["test"].name, dropped)
    dev_ids = {"\t".join(p.strip() for p in line.split("\t")[:2])
               for line in read_text(paths["dev_ids"]).splitlines() if line.strip()}
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
    return clean_rows(pd.DataFrame({"sentence1": flat["question1"], "sentence2": flat["question2"],
                                     "score": df["is_duplicate"]}), 0.0, 1.0, path.name, dropped)


def load_qqp(params: DataParams, rng: np.random.Generator) -> Loaded:
    """QQP has no official split: train/dev/test are drawn by seed with data.split's fractions."""
    source = _source(params)
    path = _find(source, "quora_duplicate_questions.tsv", "Quora's quora_duplicate_questions.tsv") if source \
        else _fetch(QQP_URL, QQP_SHA256)
    dropped = Drops()
    pairs, duplicates = merge_copies(parse_qqp(path, dropped), path.name, dropped)
    return Loaded(split_randomly(pairs, params, rng), dropped, str(path), _note_digest(path, QQP_SHA256),
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
            found[split] = read_text(hits[0])
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
                out[split] = decode(tar.extractfile(files[name]).read(), f"{source}:{files[name].name}")
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
            dropped.note(f"{where}:too_few_fields", 1, [f"line {lineno}: {short(line.rstrip())}"])
            continue
        rows.append((fields[5], fields[6], fields[4]))
    df = pd.DataFrame(rows, columns=["sentence1", "sentence2", "score"])
    return clean_rows(df, 0.0, 5.0, where, dropped)


def load_stsb(params: DataParams) -> Loaded:
    source = _source(params) or _fetch(STSB_URL, STSB_SHA256)
    digest = _note_digest(source, STSB_SHA256) if source.is_file() else None
    dropped = Drops()
    texts = _stsb_texts(source)
    splits = {s: parse_stsb(texts[s], f"sts-{s}.csv", dropped) for s in SPLITS}
    return Loaded(splits, dropped, str(source), digest)
