#!/usr/bin/env python3
"""How long the docs are, at a commit or in the working tree: the README's words, its longest prose line, its
prose lines over 120 characters and its lines of any kind over 300; each docs page's words; params.yaml's comment
characters and lines.

Prose is a line outside code fences that is not a table row. Words are `wc -w`'s (runs of non-space).

    python scripts/doc_stats.py                  # the working tree
    python scripts/doc_stats.py --rev 7e51377    # a commit: the before of a docs change
"""

from __future__ import annotations

import argparse
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def prose(text: str) -> list[str]:
    """The lines of a markdown text outside ``` fences that are not table rows."""
    out, fenced = [], False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced and not line.lstrip().startswith("|"):
            out.append(line)
    return out


def comment_chars(params: str) -> tuple[int, int]:
    """params.yaml's comment characters (from each `#` on) and its lines."""
    chars = 0
    for line in params.splitlines():
        _, sep, comment = line.partition("#")
        if sep:  # no key of params.yaml holds a '#'
            chars += len(sep + comment)
    return chars, len(params.splitlines())


def read(rev: str | None, path: str) -> str:
    if rev is None:
        return (ROOT / path).read_text()
    return subprocess.run(["git", "show", f"{rev}:{path}"], cwd=ROOT, capture_output=True, text=True,
                          check=True).stdout


def pages(rev: str | None) -> list[str]:
    if rev is None:
        return sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").rglob("*.md"))
    names = subprocess.run(["git", "ls-tree", "-r", "--name-only", rev, "docs/"], cwd=ROOT, capture_output=True,
                           text=True, check=True).stdout.split()
    return sorted(n for n in names if n.endswith(".md"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rev", help="a commit (default: the working tree)")
    args = ap.parse_args()
    readme = read(args.rev, "README.md")
    lines = prose(readme)
    print(f"{args.rev or 'working tree'}")
    print(f"README.md: {len(readme.split()):,} words, {len(readme.splitlines())} lines, longest prose line "
          f"{max(map(len, lines))} characters, {sum(len(x) > 120 for x in lines)} prose lines over 120, "
          f"{sum(len(x) > 300 for x in readme.splitlines())} lines of any kind over 300")
    total = 0
    print("| page | words | longest prose line |\n|---|---|---|")
    for name in pages(args.rev):
        text = read(args.rev, name)
        total += len(text.split())
        print(f"| {name} | {len(text.split()):,} | {max(map(len, prose(text)), default=0)} |")
    print(f"| **docs/ in all** | **{total:,}** | |")
    chars, n = comment_chars(read(args.rev, "params.yaml"))
    print(f"params.yaml: {n} lines, {chars:,} comment characters")


if __name__ == "__main__":
    main()
