"""The tree stays clean under ruff, with the rules and line length pyproject.toml sets (issue 14)."""

import importlib.util
import subprocess
import sys

import pytest

from tests.conftest import ROOT


def test_ruff_finds_nothing_in_the_tree():
    if importlib.util.find_spec("ruff") is None:
        pytest.skip("ruff is not installed: pip install -e '.[dev]' (it pins ruff)")
    # --no-cache: a test run leaves no .ruff_cache behind in the checkout
    done = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "."], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, check=False)
    found = f"{done.stdout}{done.stderr}"
    assert done.returncode == 0, f"ruff check . found problems (`ruff check --fix .` fixes the safe ones):\n{found}"
