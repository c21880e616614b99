"""label: the recipe's teacher labels what the student will learn, as the recipe's spec says
(pldistill.teach.labelling.label): the candidate pairs into data/silver/silver.parquet, streamed chunk by chunk (`kde`
then keeps the pairs that make the silver scores match the gold distribution); DSE also the gold pairs' logits;
rtt-ensemble the corpus sentences' embeddings (data/silver/ensemble.parquet) instead; trans-encoder nothing (its
cycles label inside stage distill). Writes the silver-vs-gold diagnostics. Imports no training code."""

from __future__ import annotations

from pathlib import Path

from pldistill.base.io import write_report
from pldistill.params.config import Params, load_params
from pldistill.run import distributed
from pldistill.run.runtime import main
from pldistill.teach import labelling


def label(params: Params, clean: Path, pairs: Path, teacher: Path, silver_dir: Path, report: Path,
          density: Path) -> dict:
    """Label with the recipe's teacher into ``silver_dir``; the score density plot; return the report."""
    distributed.join(params.processes)
    result = labelling.label(params, clean, pairs, teacher, silver_dir, density)
    if distributed.is_main():  # the other ranks only shared the work
        write_report(report, result)
    return result


if __name__ == "__main__":
    main(label, ["clean", "pairs", "teacher", "silver_dir", "report", "density"], kind=distributed.RANKS,
         load=load_params)
