"""One reader for every text input (issue 35): tables of pairs (.csv, .tsv, .jsonl, .parquet), the given pairs,
the archives' members and the embedding corpus (.txt): the same compressions read through (gzip, bz2, xz, zip
of one file), the same encodings (UTF-8 with or without its mark, UTF-16 with its mark), the same refusals
naming the file, the line and what to do. Rows are not judged here: pldistill.data.datasets cleans and counts them.
"""

from __future__ import annotations

import bz2
import csv
import gzip
import io
import json
import lzma
import zipfile
import zlib
from pathlib import Path

import pandas as pd

from pldistill.base.errors import DataError
from pldistill.params.names import COMPRESSED_SUFFIXES, format_suffix

EXAMPLES = 3  # dropped rows kept per reason, to show in an error


def short(value: object, width: int = 40) -> str:
    text = str(value)
    return repr(text if len(text) <= width else text[:width] + "…")



def decode(data: bytes, where: str | Path) -> str:
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
    if not str(where).lower().endswith(COMPRESSED_SUFFIXES):  # pairs.csv.gz says so itself
        print(f"note: {where} is {kind}-compressed; read what it holds ({len(out):,} bytes)")
    return out


def read_text(path: Path) -> str:
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
    return decode(data, path)


def keep_example(examples: list[str] | None, text: str) -> None:
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
    reader = csv.reader(io.StringIO(read_text(path), newline=""), delimiter=sep, quoting=quoting, strict=True)
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
                keep_example(bad_lines, f"line {first}: {err}")
                continue
            if not fields:  # a blank line
                continue
            if not header:
                header = [name.strip() for name in fields]
            elif len(fields) == len(header):
                rows.append(fields)
            else:
                bad += 1
                keep_example(bad_lines, f"line {first}: {len(fields)} fields, the header has {len(header)}: "
                                 f"{short(sep.join(fields))}")
    finally:
        csv.field_size_limit(limit)
    twice = sorted({c for c in header if header.count(c) > 1})
    if twice:
        raise DataError(f"{path}: the header names {twice} more than once; expected each column once")
    return pd.DataFrame(rows, columns=header, dtype=str), bad


def read_table(path: Path, bad_lines: list[str] | None = None) -> tuple[pd.DataFrame, int]:
    """The table and how many of its lines could not be parsed (skipped, to be counted by the caller; the
    first few described in ``bad_lines``). Its format is its name's, a compression's suffix set aside (pairs.csv.gz
    is a csv); the compression itself is told by the first bytes, whatever the name."""
    suffix = format_suffix(path.name)
    if path.is_dir():
        raise DataError(f"{path}: is a directory; expected one table file (.csv, .tsv, .jsonl or .parquet)")
    if path.is_file() and path.stat().st_size == 0:
        raise DataError(f"{path}: empty file (0 bytes); expected a table of sentence pairs")
    if suffix == ".parquet" and path.name.lower().endswith(COMPRESSED_SUFFIXES):
        raise DataError(f"{path}: a compressed Parquet file; Parquet compresses its own columns: give the .parquet "
                        f"file itself")
    try:
        if suffix == ".parquet":
            return pd.read_parquet(path), 0
        if suffix == ".jsonl":
            records, bad = [], 0
            for lineno, line in enumerate(read_text(path).split("\n"), start=1):  # not splitlines: JSON
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
                    keep_example(bad_lines, f"line {lineno}: not a JSON object: {short(line)}")
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


def read_lines(path: Path) -> list[str]:
    """A text file's lines (one sentence a line), read as ``read_text`` reads."""
    return read_text(path).splitlines()


def read_sentences(path: Path | str, key: str) -> list[str]:
    """A file of plain sentences, the param ``key`` names it (embed.corpus, augment.rtt.corpus): a .txt, one
    sentence a line (blank lines skipped), or a table with a ``sentence`` column; read as every table is."""
    path = Path(path)
    expected = "expected a .txt (one sentence a line) or a table with a sentence column"
    if not path.is_file():
        raise DataError(f"{path}: {key} not found; {expected}")
    if path.stat().st_size == 0:
        raise DataError(f"{path} ({key}): empty file (0 bytes), no sentence to read; {expected}, or set {key} to null")
    if format_suffix(path.name) == ".txt":
        sentences = [line for line in read_lines(path) if line.strip()]
    else:
        df, _ = read_table(path)
        if "sentence" not in df.columns:
            raise DataError(f"{path} ({key}): expected a column named sentence; found {list(df.columns)}; or give a "
                            f".txt file, one sentence a line")
        sentences = df["sentence"].astype(str).tolist()
    if not any(s.strip() for s in sentences):
        raise DataError(f"{path} ({key}): no sentence in it, only blank lines ({path.stat().st_size:,} bytes); "
                        f"{expected}, or set {key} to null")
    return sentences
