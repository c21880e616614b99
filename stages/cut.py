"""cut: which transformer layers the student keeps (pldistill.cut). With ``student.layers: auto``, every cut of
``student.keep`` layers of ``student.model`` is scored untrained on the dev pairs and the best kept; the ranking is
``models/cut/cut.json``, read by stages gold, embed, distill and evaluate. With layers given (or null) it only
records them."""

from __future__ import annotations

from pathlib import Path

from pldistill import cut as cutting
from pldistill import schemas
from pldistill.config import Params
from pldistill.datasets import gold_dir
from pldistill.io import atomic_dir, write_json, write_report
from pldistill.runtime import run_stage


def cut(params: Params, clean: Path, out: Path, report: Path) -> dict:
    """Choose the student's layers into ``out`` (``cut.json``); return the report (the ranking's top five)."""
    dev = schemas.read(gold_dir(params, clean) / "dev.parquet", schemas.PAIRS)
    choice = cutting.choose(params, dev)
    with atomic_dir(out) as tmp:
        write_json(tmp / cutting.CUT_FILE, choice)
    result = {k: v for k, v in choice.items() if k != "ranking"}
    if "ranking" in choice:
        result |= {"cuts": len(choice["ranking"]), "top": choice["ranking"][:5]}
        print(f"cut: layers {choice['layers']} of {choice['of']}, the best of {len(choice['ranking'])} cuts of "
              f"{choice['keep']} on dev untrained ({choice['dev']}; the whole model {choice['whole_dev']})")
    write_report(report, result)
    return result


if __name__ == "__main__":
    run_stage(cut, ["clean", "out", "report"])
