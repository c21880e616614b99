#!/usr/bin/env python3
"""The parameter reference of docs/parameters.md, generated from params.yaml: every key, its default as
params.yaml writes it, and its comment (a comment on the key's line, the comment lines under it, and a comment
block right above it). params.yaml is the one place a default lives; this keeps the reference from drifting.

    python scripts/params_doc.py           # rewrite the generated part of docs/parameters.md
    python scripts/params_doc.py --check   # exit 1 if it is out of date (tests/test_params_yaml.py checks it too)
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "parameters.md"
BEGIN = "<!-- generated from params.yaml by scripts/params_doc.py: edit params.yaml, then run it -->"
END = "<!-- end of the generated reference -->"
_KEY = re.compile(r"^(?P<indent> *)(?P<key>[A-Za-z_]\w*):(?P<rest>.*)$")


@dataclass
class Key:
    path: str  # dotted, as `dvc exp run -S` takes it
    value: str  # as params.yaml writes it; empty for a section
    comment: str
    indent: int


def keys(text: str) -> list[Key]:
    """Every key of params.yaml's text, in order, with its value and comment."""
    out: list[Key] = []
    stack: list[tuple[int, str]] = []
    above: list[str] = []  # a comment block right above the next key
    for line in text.splitlines():
        if not line.strip():
            above = []
            continue
        if line.lstrip().startswith("#"):
            note = line.strip().lstrip("#").strip()
            if out and not line.startswith("#") and len(line) - len(line.lstrip()) > out[-1].indent:
                out[-1].comment = f"{out[-1].comment} {note}".strip()  # a continuation of the last key's comment
            else:
                above.append(note)
            continue
        m = _KEY.match(line)
        if not m:
            continue
        indent = len(m["indent"])
        while stack and stack[-1][0] >= indent:
            stack.pop()
        value, _, comment = m["rest"].partition(" #")
        stack.append((indent, m["key"]))
        out.append(Key(".".join(k for _, k in stack), value.strip(), " ".join([*above, comment.strip()]).strip(),
                       indent))
        above = []
    return out


def table(text: str) -> str:
    """The reference as a markdown table."""
    rows = ["| key | default | what it is |", "|---|---|---|"]
    for k in keys(text):
        value = f"`{k.value}`" if k.value else ""
        rows.append(f"| `{k.path}` | {value} | {k.comment.replace('|', chr(92) + '|')} |")
    return "\n".join(rows) + "\n"


def render(doc: str, params: str) -> str:
    """``doc`` with its generated part (between BEGIN and END) made from ``params``."""
    head, _, rest = doc.partition(BEGIN)
    _, _, tail = rest.partition(END)
    return f"{head}{BEGIN}\n\n{table(params)}\n{END}{tail}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if docs/parameters.md is out of date")
    args = ap.parse_args(argv)
    doc, params = DOC.read_text(), (ROOT / "params.yaml").read_text()
    if BEGIN not in doc or END not in doc:
        print(f"{DOC}: the markers {BEGIN!r} and {END!r} are missing")
        return 1
    new = render(doc, params)
    if args.check:
        if new != doc:
            print(f"{DOC.relative_to(ROOT)} is out of date: python scripts/params_doc.py")
            return 1
        return 0
    DOC.write_text(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
