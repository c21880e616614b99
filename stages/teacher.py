"""teacher: the model(s) that label pairs for the student, as the recipe makes them (pldistill.recipes).
Augmented SBERT and DSE: teacher members fine-tuned on the gold pairs or used as given, each calibrated
onto the gold scale on dev (pldistill.teach.teachers); rtt-ensemble: its contrastive sub-models;
trans-encoder: none (a note)."""

from __future__ import annotations

from pathlib import Path

from pldistill.base.io import write_report
from pldistill.params.config import Params, load_params
from pldistill.recipes import registry
from pldistill.run import distributed
from pldistill.run.runtime import main
from pldistill.train.stage_training import TRAINING


def teacher(params: Params, clean: Path, out: Path, report: Path, curve: Path) -> dict:
    """Make the recipe's teacher into ``out``; its dev curve(s) into ``curve``; return the report."""
    distributed.join(params.processes)
    result = registry.get(params.recipe).teacher(params, clean, out, curve)
    if distributed.is_main():  # the other ranks only shared the work
        write_report(report, result)
    return result


if __name__ == "__main__":
    main(teacher, ["clean", "out", "report", "curve"], kind=TRAINING, load=load_params)
