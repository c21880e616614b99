"""distill: train the recipe's student(s) (pldistill.recipes); writes data/pseudo (what was learned, per
cycle), models/bi, models/cross (the teacher's cross-encoder, or a note) and a score-per-cycle plot.
augsbert: a bi-encoder on gold + silver; dse: a DSE student on the teacher's logits and gold; rtt-ensemble:
a bi-encoder on the ensemble's embeddings; trans-encoder: `cycles` rounds of mutual labelling."""

from __future__ import annotations

from pathlib import Path

from pldistill.base.io import write_report
from pldistill.params.config import Params, load_params
from pldistill.recipes import registry
from pldistill.recipes.base import DistillDirs
from pldistill.run import distributed
from pldistill.run.runtime import main
from pldistill.students.cut import resolve
from pldistill.train.stage_training import TRAINING


def distill(params: Params, clean: Path, pairs: Path, silver: Path, teacher: Path, pseudo: Path, bi: Path,
            cross: Path, report: Path, curve: Path, cycles_plot: Path, embed: Path | None = None,
            cut: Path | None = None) -> dict:
    """Train the recipe's student(s) and write models/bi, models/cross and data/pseudo; return the report."""
    params = resolve(params, cut, trains="student")  # student.layers auto: the layers stage cut chose
    dirs = DistillDirs(clean, pairs, silver, teacher, pseudo, bi, cross, curve, cycles_plot, embed)
    distributed.join(params.processes)
    result = registry.get(params.recipe).distill(params, dirs)
    if distributed.is_main():  # the other ranks only shared the work
        write_report(report, result)
    return result


if __name__ == "__main__":
    main(distill, ["clean", "pairs", "silver", "teacher", "pseudo", "bi", "cross", "report", "curve",
                   "cycles_plot", "embed", "cut"], kind=TRAINING, load=load_params)
