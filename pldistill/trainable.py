"""What a started training run offers (``Run``) and gives back (``FitResult``, dev curves), and when it stops
early, shared by both engines (pldistill.loop, pldistill.st_trainer). What a run trains is a torch module by a
loss over its batches' text columns (pldistill.losses)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import torch

from pldistill.io import write_csv_rows


@dataclass
class FitResult:
    best_dev: float
    best_step: int
    steps: int
    seconds: float
    curve: list[dict] = field(default_factory=list)  # one row per dev evaluation
    seeds: dict | None = None  # seed optimisation: each seed's dev score where it was stopped
    soup: dict | None = None  # a soup: each seed's dev score, the average's, and which was kept (pldistill.soup)
    wise: dict | None = None  # WiSE-FT: each mix with the start scored on dev, and the share kept (pldistill.soup)
    precision: str = "fp32"  # the autocast it trained under (``precision: auto`` resolves per machine)
    stopped: str | None = None  # why it stopped before its last step (early stopping: params ``patience``)

    def write_curve(self, path: Path | str) -> None:
        """The dev curve as a CSV for `dvc plots` (x: step, y: dev_spearman)."""
        write_csv_rows(path, ["step", "epoch", "dev_spearman"], [[r["step"], r["epoch"], r["dev"]] for r in self.curve])

    def summary(self) -> dict:
        out = {"best_dev": self.best_dev, "best_step": self.best_step, "steps": self.steps,
               "train_seconds": round(self.seconds, 1)}
        if self.precision != "fp32":  # fp32 unsaid: reports of runs that predate the key stay as they were
            out["precision"] = self.precision
        if self.stopped:
            out["stopped_early"] = self.stopped
        return {**out, **({"seed_optimisation": self.seeds} if self.seeds else {}),
                **({"soup": self.soup} if self.soup else {}), **({"wise": self.wise} if self.wise else {})}


def out_of_patience(step: int, total: int, best: tuple[float, int], per_epoch: int, patience: float | None,
                    select: str) -> str | None:
    """Why a run stops early at the dev evaluation of ``step`` (of ``total``): its ``best`` (dev score, step) is more
    than ``patience`` epochs old, under ``select`` dev; None where it goes on. Both engines (pldistill.loop, st_trainer)
    decide by it, and from the curve alone, so a resumed run stops where the uninterrupted one did."""
    if patience is None or select != "dev" or step >= total or step - best[1] <= patience * per_epoch:
        return None
    return (f"at step {step} of {total}: dev has not passed {best[0]:.2f} (step {best[1]}) for "
            f"{(step - best[1]) / per_epoch:.2f} epochs, more than patience {patience:g}")


def write_curves(curve: Path | str, curves: list[tuple[str, list[dict], int]]) -> None:
    """Several runs' dev curves (name, curve, steps) laid end to end in one plot (column ``member`` when
    there are several)."""
    rows, offset = [], 0
    for name, c, steps in curves:
        rows += [[offset + r["step"], r["epoch"], r["dev"], *([name] if len(curves) > 1 else [])] for r in c]
        offset += steps + 1  # the next run's step 0 gets an x of its own
    write_csv_rows(curve, ["step", "epoch", "dev_spearman", *(["member"] if len(curves) > 1 else [])], rows)


class Run(Protocol):
    """A started training run, as pldistill.training's ``start`` gives it on either engine: ``finish`` trains to the
    end and leaves ``module`` at the kept checkpoint; ``advance(step)`` pauses at a step (our loop's; the other
    engine refuses it by name); ``close`` drops a paused run. ``total``, ``seconds`` and ``curve`` (one row per dev
    evaluation) describe it so far; ``dev_score`` scores ``module`` on dev."""

    module: torch.nn.Module
    dev_score: Callable[[], float]
    total: int
    seconds: float
    curve: list[dict]

    def advance(self, until: int) -> float: ...

    def finish(self) -> FitResult: ...

    def close(self) -> None: ...
