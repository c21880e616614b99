"""What both engines (pldistill.loop, pldistill.st_trainer) share: what a started training run offers (``Run``)
and gives back (``FitResult``, dev curves), the rows it takes, the steps dev is scored at, the precision it trains
under, and when it stops early. What a run trains is a torch module by a
loss over its batches' text columns (pldistill.losses)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import numpy as np
import torch

from pldistill.batching import Columns
from pldistill.config import ConfigError, StepParams
from pldistill.device import bf16_auto
from pldistill.io import write_csv_rows


def eval_steps(per_epoch: int, params: StepParams) -> set[int]:
    """The steps dev is scored at (besides step 0): ``params.evals_per_epoch`` times an epoch, the last step too."""
    total = per_epoch * params.epochs
    return {min(total, round(per_epoch * (e + f / params.evals_per_epoch)))
            for e in range(params.epochs) for f in range(1, params.evals_per_epoch + 1)}


def check_rows(texts: Columns, target: np.ndarray, desc: str) -> None:
    """A training run's rows, as either engine takes them: a tuple of text columns, each one row per target."""
    n = len(target)
    if n == 0:
        raise ValueError(f"{desc}: no training rows")
    if not isinstance(texts, tuple) or any(isinstance(c, str) for c in texts):
        raise TypeError(f"{desc}: texts is a tuple of text columns, e.g. (s1, s2) or (sentences,); found "
                        f"{type(texts).__name__}")
    if not texts or any(len(c) != n for c in texts):
        raise ValueError(f"{desc}: every text column needs one row per target ({n}); got columns of "
                         f"{[len(c) for c in texts]}")


def precision(params: StepParams, desc: str) -> str:
    """The autocast a run trains under: fp32 | bf16 | fp16 (``params.amp``'s auto resolved for this machine)."""
    amp, cuda = params.amp, torch.cuda.is_available()
    if amp == "auto":  # the older bf16: auto never meant fp16, so it keeps meaning bf16-or-fp32
        amp = "bf16" if bf16_auto() else "fp16" if cuda and params.precision == "auto" else "fp32"
    if amp == "fp16" and not cuda:
        raise ConfigError(f"{desc}: precision fp16 needs a CUDA GPU (its loss scaling, torch.amp.GradScaler, is "
                          f"CUDA's) and none was found; set this section's precision to bf16 or fp32")
    return amp


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
