"""What every stage does the same way: the command line, params validated whole (pldistill.validate), clear
errors instead of tracebacks. The top of the import graph: nothing of ours imports it but the stages."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path

from pldistill import checkpoints, distributed, tracking
from pldistill.config import ConfigError, Params
from pldistill.datasets import DataError
from pldistill.diagnostics import SelectionError
from pldistill.models import ModelError
from pldistill.rtt import RTTError
from pldistill.schemas import SchemaError
from pldistill.seeding import seed_all  # noqa: F401  (re-exported: stages seeded from here before it moved)
from pldistill.store import default_root
from pldistill.validate import load_params

USER_ERRORS = (ConfigError, DataError, ModelError, RTTError, SchemaError, SelectionError, FileNotFoundError)


def run_stage(fn: Callable[..., dict], paths: list[str], argv: list[str] | None = None) -> dict:
    """Parse ``--params`` and one ``--<path>`` option per name in ``paths``, run ``fn``, print its report."""
    ap = argparse.ArgumentParser(description=(fn.__doc__ or "").strip().splitlines()[0])
    ap.add_argument("--params", default="params.yaml", type=Path)
    for name in paths:
        ap.add_argument(f"--{name.replace('_', '-')}", required=True, type=Path, dest=name)
    ap.add_argument("--live", type=Path, default=None, help="a DVCLive folder for training curves and system metrics")
    args = ap.parse_args(argv)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    try:
        params: Params = load_params(args.params)
        with contextlib.ExitStack() as stack:
            # A stage killed mid-training resumes from its runs' checkpoints, kept outside DVC's outputs
            # (DVC removes those before a rerun); they are removed when the stage succeeds.
            stack.enter_context(checkpoints.enabled(default_root() / "checkpoints"))
            if args.live is not None and distributed.is_main():
                stack.enter_context(tracking.logging_to(args.live))
            report = fn(params, **{name: getattr(args, name) for name in paths})
        if distributed.is_main():  # several processes: rank 0 has the report (the others return {})
            print(json.dumps(report, indent=2))
    except USER_ERRORS as err:
        sys.exit(f"error: {err}")
    finally:
        distributed.leave()
    return report
