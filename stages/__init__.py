"""Pipeline stages: one module per stage, each a function (typed params + paths -> report) and a CLI.

Importing this package comes first when a stage runs (`python -m stages.<name>`, or pldistill.launch), so it
checks, before any import that would fail with a traceback, that this Python has the project's packages:
`.venv/bin/dvc repro` without the environment activated runs the stages with the system's `python`. Under
`python -m pldistill.warm dvc repro` (`make run`) it then hands the command to the warm interpreter, which runs
it with torch and the rest already imported, and exits with its code (pldistill.warm)."""

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


require_environment()
sys.excepthook = _interrupted_while_starting

from pldistill.handover import hand_over  # noqa: E402 -- after the check: it imports the standard library alone

hand_over()
