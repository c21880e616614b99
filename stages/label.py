"""label: the recipe's teacher labels what the student will learn (pldistill.recipes): the candidate pairs
into data/silver/silver.parquet, streamed chunk by chunk (pldistill.labelling; `kde` then keeps the pairs
that make the silver scores match the gold distribution); DSE also the gold pairs' logits; rtt-ensemble
the corpus sentences' embeddings (data/silver/ensemble.parquet) instead; trans-encoder nothing (its
cycles label inside stage distill). Writes the silver-vs-gold diagnostics."""

from __future__ import annotations

from pathlib import Path

from pldistill import distributed
from pldistill.config import Params
from pldistill.io import write_report
from pldistill.recipes import registry
from pldistill.runtime import main
from pldistill.stage_training import TRAINING
from pldistill.validate import load_params


def label(params: Params, clean: Path, pairs: Path, teacher: Path, silver_dir: Path, report: Path,
          density: Path) -> dict:
    """Label with the recipe's teacher into ``silver_dir``; the score density plot; return the report."""
    distributed.join(params.processes)
    result = registry.get(params.recipe).label(params, clean, pairs, teacher, silver_dir, density)
    if distributed.is_main():  # the other ranks only shared the work
        write_report(report, result)
    return result


if __name__ == "__main__":
    main(label, ["clean", "pairs", "teacher", "silver_dir", "report", "density"], kind=TRAINING,
         load=load_params)
