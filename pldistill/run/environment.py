"""What runs first in a stage's process (`python -m stages.<name>`, or pldistill.run.launch), before any import that
would fail with a traceback: a check that this Python has the project's packages (`.venv/bin/dvc repro` without the
environment activated runs the stages with the system's `python`), one line for a Ctrl-C while starting, and, under
`python -m pldistill.warm dvc repro` (`make run`), the hand-over of the command to the warm interpreter, which runs
it with torch and the rest already imported (pldistill.run.handover). Standard library only."""

from __future__ import annotations

import importlib.util
import os
import sys

# The packages every stage imports (pyproject's dependencies), by import name.
NEEDED = ("numpy", "pandas", "pyarrow", "pydantic", "yaml", "torch", "transformers", "sentence_transformers")


def lacking() -> list[str]:
    """The NEEDED packages this Python cannot import (found without importing them)."""
    return [name for name in NEEDED if importlib.util.find_spec(name) is None]


def require_environment() -> None:
    """Exit with one line saying how to get the project's packages, if this Python lacks any."""
    missing = lacking()
    if missing:
        venv = " (. .venv/bin/activate)" if os.path.isdir(".venv") else ""
        sys.exit(f"error: {sys.executable} lacks the project's packages ({', '.join(missing)}); the stages run "
                 f"with the `python` first on PATH: activate the project's environment{venv} and run again, "
                 f"or run `make run`, which uses it")


def _interrupted_while_starting(kind: type[BaseException], err: BaseException, tb: object) -> None:
    """Ctrl-C while a stage is still importing (torch takes seconds): one line, exit code 130, no traceback.
    Any other exception goes to Python's own hook."""
    if not issubclass(kind, KeyboardInterrupt):
        sys.__excepthook__(kind, err, tb)
        return
    print("stage interrupted (Ctrl-C) while starting: nothing was written; `dvc repro` runs it again",
          file=sys.stderr, flush=True)
    os._exit(130)  # the code a shell gives a command stopped by Ctrl-C (128 + SIGINT)


def prepare() -> None:
    """The checks and the hand-over, in that order; returns when the stage runs in this process."""
    require_environment()
    sys.excepthook = _interrupted_while_starting
    from pldistill.run.handover import hand_over  # the standard library alone

    hand_over()
