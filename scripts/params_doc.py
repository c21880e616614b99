#!/usr/bin/env python3
"""What params.yaml generates, params.yaml being the one place a default lives:
- the parameter reference of docs/parameters.md: every key, its default as params.yaml writes it, and its comment
  (a comment on the key's line, the comment lines under it, and a comment block right above it), with a link to its
  entry in docs/choices.md (why the default is what it is) where it has one;
- the defaults the parameter models (pldistill/params/config.py and the modules it assembles) fill a key left out
  with: pldistill/params/defaults_data.py (seed, data, adapt: what stage download reads, so an edit to a training
  default leaves it cached) and pldistill/params/defaults.py (every other section). The models hold types and checks,
  no default.

    python scripts/params_doc.py           # rewrite them from params.yaml
    python scripts/params_doc.py --check   # exit 1 if one is out of date (tests/test_params_yaml.py checks it too),
                                           # or docs/choices.md names a key params.yaml lacks
"""

from __future__ import annotations

import argparse
import re
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "parameters.md"
CHOICES = ROOT / "docs" / "choices.md"  # a heading per section, a bullet per key: "- `sample.top_k`: ..."
BEGIN = "<!-- generated from params.yaml by scripts/params_doc.py: edit params.yaml, then run it -->"
END = "<!-- end of the generated reference -->"
# The sections stage download reads (pldistill.params.data.DataSections), generated apart from the others
DATA_SECTIONS = ("seed", "data", "adapt")
DEFAULTS = {  # generated module -> (its docstring, which of params.yaml's top-level keys it holds)
    ROOT / "pldistill" / "params" / "defaults_data.py": (
        "seed, data and adapt (the sections stage download reads)", lambda k: k in DATA_SECTIONS),
    ROOT / "pldistill" / "params" / "defaults.py": (
        "every section but seed, data and adapt (pldistill/params/defaults_data.py)", lambda k: k not in DATA_SECTIONS),
}
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
    depth = 0  # brackets a flow collection ({...}, [...]) has left open: its next lines hold no key
    for line in text.splitlines():
        if not line.strip():
            above = []
            continue
        code = "" if line.lstrip().startswith("#") else line.partition(" #")[0]
        inside, depth = depth > 0, depth + sum(map(code.count, "[{")) - sum(map(code.count, "]}"))
        if inside:
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


def _anchor(heading: str) -> str:
    """A markdown heading's anchor: lower-cased, punctuation but - dropped, spaces as -."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def reasons(choices: str) -> dict[str, str]:
    """The keys docs/choices.md has a bullet for (every `key` before the bullet's first colon), each with the anchor
    of the heading it sits under."""
    out, anchor = {}, ""
    for line in choices.splitlines():
        if line.startswith("#"):
            anchor = _anchor(line.lstrip("#"))
        elif line.startswith("- `"):
            out |= dict.fromkeys(re.findall(r"`([\w.]+)`", line.partition(": ")[0]), anchor)
    return out


def table(text: str, why: dict[str, str] | None = None) -> str:
    """The reference as a markdown table; a key in ``why`` links to its section of docs/choices.md."""
    why = why or {}
    rows = ["| key | default | what it is |", "|---|---|---|"]
    for k in keys(text):
        value = f"`{k.value}`" if k.value else ""
        link = f" ([why](choices.md#{why[k.path]}))" if k.path in why else ""
        rows.append(f"| `{k.path}` | {value} | {k.comment.replace('|', chr(92) + '|')}{link} |")
    return "\n".join(rows) + "\n"


def render(doc: str, params: str, choices: str | None = None) -> str:
    """``doc`` with its generated part (between BEGIN and END) made from ``params`` and ``choices`` (docs/choices.md's
    text; read from it when None)."""
    head, _, rest = doc.partition(BEGIN)
    _, _, tail = rest.partition(END)
    why = reasons(CHOICES.read_text() if choices is None else choices)
    return f"{head}{BEGIN}\n\n{table(params, why)}\n{END}{tail}"


def _literal(value: object, indent: int) -> str:
    """``value`` as Python source, in params.yaml's order: a section one key a line, unless short and flat; a list
    on one line where it fits, else one item a line; the rest as repr."""
    flat = repr(value)
    nested = isinstance(value, dict) and any(isinstance(v, dict) for v in value.values())
    if not isinstance(value, dict | list) or (len(flat) < 80 and not nested):
        return flat
    pad = " " * (indent + 4)
    if isinstance(value, list):
        items = "".join(f"{pad}{_literal(v, indent + 4)},\n" for v in value)
        return f"[\n{items}{' ' * indent}]"
    items = "".join(f"{pad}{k!r}: {_literal(v, indent + 4)},\n" for k, v in value.items())
    return f"{{\n{items}{' ' * indent}}}"


def defaults_module(params: str, what: str, holds) -> str:
    """The Python source of a generated defaults module: params.yaml's values of the top-level keys ``holds`` keeps."""
    values = {k: v for k, v in yaml.safe_load(params).items() if holds(k)}
    doc = textwrap.fill(f"The defaults of {what}, as params.yaml holds them: generated from params.yaml by `python "
                        f"scripts/params_doc.py`. Do not edit it: params.yaml is the one place a default lives, and "
                        f"tests/test_params_yaml.py fails when this file drifts from it.", 116)
    return f'"""{doc}"""\n\nDEFAULTS = {_literal(values, 0)}\n'


def generated(params: str, doc: str) -> dict[Path, str]:
    """Every file params.yaml generates, and what it should hold."""
    return {DOC: render(doc, params), **{path: defaults_module(params, what, holds)
                                         for path, (what, holds) in DEFAULTS.items()}}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if a generated file is out of date")
    args = ap.parse_args(argv)
    doc, params = DOC.read_text(), (ROOT / "params.yaml").read_text()
    if BEGIN not in doc or END not in doc:
        print(f"{DOC}: the markers {BEGIN!r} and {END!r} are missing")
        return 1
    unknown = sorted(set(reasons(CHOICES.read_text())) - {k.path for k in keys(params)})
    if unknown:
        print(f"{CHOICES.relative_to(ROOT)} has a bullet for keys params.yaml lacks: {unknown}")
        return 1
    stale = [path for path, text in generated(params, doc).items()
             if not path.is_file() or path.read_text() != text]
    for path in stale:
        if args.check:
            print(f"{path.relative_to(ROOT)} is out of date: python scripts/params_doc.py")
        else:
            path.write_text(generated(params, doc)[path])
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
