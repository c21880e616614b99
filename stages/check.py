"""check: validate params.yaml as a whole, on every `dvc repro` / `dvc exp run` that changed it, before any
other stage runs: an unknown or misspelt key is an error naming it and the closest valid key, even while
every other stage is cached (each stage reads only its own keys, so DVC would run none of them)."""

from __future__ import annotations

from pathlib import Path

from pldistill.base.io import write_json
from pldistill.params.config import Params, load_params
from pldistill.run.runtime import main


def check(params: Params, report: Path) -> dict:
    """run_stage has loaded and validated ``params`` from params.yaml (it stops naming the keys at fault
    otherwise); record that."""
    result = {"params": "valid"}
    write_json(report, result)
    return result


if __name__ == "__main__":
    main(check, ["report"], load=load_params)
