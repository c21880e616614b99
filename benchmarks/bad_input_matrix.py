"""The bad-input matrix (issues 16 and 26) as Markdown tables, one per group: every case of
tests/test_bad_input.py, what a user sees, and the counts (docs/bad-input.md shows the output).

    python benchmarks/bad_input_matrix.py

A case ends in a clear error (our own exception naming the file and the row or key, saying what to do), a
drop counted by reason in the stage reports, a warning, or the data read correctly; anything else is a failure.
"""

from __future__ import annotations

import contextlib
import io
import sys
import tempfile
from collections import Counter
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.test_bad_input import CASES, GROUPS, outcome  # the case table lives in one place

LABELS = {"error": "clear errors", "drop": "counted drops", "warn": "warnings", "ok": "read correctly",
          "failure": "failures"}


def main() -> int:
    counts: Counter = Counter()
    for title, cases in GROUPS.items():
        print(f"### {title}\n\n| case | expected | what the user sees |\n|---|---|---|")
        for case in cases:
            with (tempfile.TemporaryDirectory() as tmp, pytest.MonkeyPatch.context() as mp,
                  contextlib.redirect_stdout(io.StringIO())):  # the stages' progress notes stay out of the table
                kind, seen = outcome(case, Path(tmp), mp)
            counts[kind] += 1
            if case.gap and kind == "failure":
                seen += f" (known: {case.gap})"
            print(f"| {case.name} | {case.expect} | {seen.replace('|', chr(92) + '|')} |")
        print()
    print(f"{len(CASES)} cases tried: " + ", ".join(f"{counts[k]} {label}" for k, label in LABELS.items()))
    return 1 if counts["failure"] else 0

if __name__ == "__main__":
    sys.exit(main())
