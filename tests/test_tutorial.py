"""docs/tutorial.md followed as written (slow tier): its bash blocks, in order, in one shell, on a fresh clone of
this commit with an empty DVC cache; the environment is this one (linked as the clone's .venv, so `make env` finds
it made). What they printed is kept in the test's folder (tutorial.log) and its end shown on failure."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "tutorial.md"


def commands(text: str) -> list[str]:
    """The page's ```bash blocks, in order."""
    return re.findall(r"```bash\n(.*?)```", text, flags=re.S)


def test_the_tutorial_has_its_steps():
    blocks = commands(PAGE.read_text())
    assert any("make env" in b for b in blocks) and any("dvc exp run" in b for b in blocks)
    assert any("pldistill.score models/serve" in b for b in blocks)


@pytest.mark.slow
def test_the_tutorial_runs_as_written(tmp_path):
    venv = ROOT / ".venv"
    if not (venv / ".installed").is_file():
        pytest.skip("no environment made (make env)")
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    (clone / ".venv").symlink_to(venv)
    os.utime(clone / "pyproject.toml", (0, 0))  # older than .venv/.installed: `make env` has nothing to do
    script = "set -euo pipefail\n" + "\n".join(commands((clone / "docs" / "tutorial.md").read_text()))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTEST"))}
    env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep) if not p.startswith(str(venv)))
    done = subprocess.run(["bash", "-c", script], cwd=clone, env=env, capture_output=True, text=True, check=False)
    log = done.stdout + done.stderr
    (tmp_path / "tutorial.log").write_text(log)
    assert done.returncode == 0, log[-4000:]
    assert "the student against a model trained on the gold pairs alone" in log
    assert (clone / "models" / "serve" / "README.md").is_file()
    scored = pd.read_csv(clone / "scored.csv")
    assert list(scored.columns) == ["question", "answer", "similarity"] and scored["similarity"].between(-1, 1).all()
