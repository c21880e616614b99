"""The one way into training, on sentence-transformers' trainers: ``start`` takes a model, its loss (a module on the
library's contract, pldistill.train.losses), the data (text columns and a target per row), the dev pairs that select,
and one step-params type, and gives a started run (``Run``) of a ``SentenceTransformerTrainer`` or a
``CrossEncoderTrainer`` (as the loss's model is), with their ``TrainingArguments``; ``train`` is ``start`` then
``finish``. What the pipeline adds, as the Trainer means to be extended (pldistill.train.trainer_parts): our dev scorer
as its evaluator, at steps of ours; the start counted as a checkpoint (dev selection never ends below it); early
stopping by ``patience``; a pause at any step, which seed optimisation uses (pldistill.train.wrappers); batches of
similar length; checkpoints that resume a killed run, in a folder named by the run's fingerprint
(pldistill.train.resume); the loss's own weights (a DSE head) in each checkpoint; curves to the stage's DVCLive folder.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from pldistill.base.batching import Columns
from pldistill.base.device import bf16_auto
from pldistill.base.errors import ConfigError
from pldistill.base.io import write_csv_rows
from pldistill.base.metrics import dev_spearman
from pldistill.params.sections import EvaluateParams
from pldistill.params.train import StepParams
from pldistill.run import distributed
from pldistill.train.trainer_parts import at_length, build, load_trainable, trainable


def eval_steps(per_epoch: int, params: StepParams) -> set[int]:
    """The steps dev is scored at (besides step 0): ``params.evals_per_epoch`` times an epoch, the last step too."""
    total = per_epoch * params.epochs
    return {min(total, round(per_epoch * (e + f / params.evals_per_epoch)))
            for e in range(params.epochs) for f in range(1, params.evals_per_epoch + 1)}


def check_rows(texts: Columns, target: np.ndarray, desc: str) -> None:
    """A training run's rows: a tuple of text columns, each one row per target."""
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
        raise ConfigError(f"{desc}: precision fp16 needs a CUDA GPU (its loss scaling is CUDA's) and none was "
                          f"found; set this section's precision to bf16 or fp32")
    return amp


def out_of_patience(step: int, total: int, best: tuple[float, int], per_epoch: int, patience: float | None,
                    select: str) -> str | None:
    """Why a run stops early at the dev evaluation of ``step`` (of ``total``): its ``best`` (dev score, step) is more
    than ``patience`` epochs old, under ``select`` dev; None where it goes on. Decided from the curve alone, so a
    resumed run stops where the uninterrupted one did."""
    if patience is None or select != "dev" or step >= total or step - best[1] <= patience * per_epoch:
        return None
    return (f"at step {step} of {total}: dev has not passed {best[0]:.2f} (step {best[1]}) for "
            f"{(step - best[1]) / per_epoch:.2f} epochs, more than patience {patience:g}")


@dataclass
class FitResult:
    best_dev: float
    best_step: int
    steps: int
    seconds: float
    curve: list[dict] = field(default_factory=list)  # one row per dev evaluation
    seeds: dict | None = None  # seed optimisation: each seed's dev score where it was stopped
    # a soup: each seed's dev score, the average's, and which was kept (pldistill.train.wrappers)
    soup: dict | None = None
    # WiSE-FT: each mix with the start scored on dev, and the share kept (pldistill.train.wrappers)
    wise: dict | None = None
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


def write_curves(curve: Path | str, curves: list[tuple[str, list[dict], int]]) -> None:
    """Several runs' dev curves (name, curve, steps) laid end to end in one plot (column ``member`` when
    there are several)."""
    rows, offset = [], 0
    for name, c, steps in curves:
        rows += [[offset + r["step"], r["epoch"], r["dev"], *([name] if len(curves) > 1 else [])] for r in c]
        offset += steps + 1  # the next run's step 0 gets an x of its own
    write_csv_rows(curve, ["step", "epoch", "dev_spearman", *(["member"] if len(curves) > 1 else [])], rows)


class Run:
    """A training run started on the library's Trainer, trained when it advances or finishes: the loss's model (and
    any weights the loss holds, a DSE head) by ``loss`` on ``texts`` (its text columns) and ``target`` (a row each:
    a score, an embedding, [logit, gold]), selected by ``dev_score``. ``advance(step)`` trains up to a step and pauses
    there, checkpointed (seed optimisation); ``finish`` trains to the end and leaves the weights at the kept
    checkpoint; ``close`` drops a run. ``seed``: the Trainer's batch order and dropout. ``lengths``: tokens per row
    (batches of similar length), or None (random batches). ``lr_by_prefix``: parameters named ``<prefix>.…`` of the
    loss (e.g. ``head``) train at their own lr."""

    def __init__(self, loss: torch.nn.Module, texts: Columns, target: np.ndarray, dev_score: Callable[[], float],
                 params: StepParams, seed: int, desc: str, lr_by_prefix: dict[str, float] | None = None,
                 lengths: list[int] | None = None) -> None:
        check_rows(texts, target, desc)
        self.loss, self.model, self.params, self.desc, self.dev_score = loss, loss.model, params, desc, dev_score
        self.amp, self.world = precision(params, desc), distributed.world()
        if params.batch_size % (params.accumulate * self.world):
            raise ConfigError(f"{desc}: batch_size {params.batch_size} is cut into accumulate {params.accumulate} "
                              f"micro-batches on each of {self.world} process(es); make it a multiple of "
                              f"{params.accumulate * self.world}")
        self.per_device = params.batch_size // (params.accumulate * self.world)
        micro = math.ceil(len(target) / self.per_device)  # micro-batches an epoch, all processes together
        self.per_epoch = math.ceil(math.ceil(micro / self.world) / params.accumulate)
        self.total = self.per_epoch * params.epochs
        self.eval_at = eval_steps(self.per_epoch, params)
        t0 = time.perf_counter()
        self.dev0 = float(distributed.on_main(dev_score))  # the start is a checkpoint too
        self.curve = [{"step": 0, "epoch": 0.0, "loss": None, "dev": self.dev0}]
        self.best: dict[str, torch.Tensor] | None = None  # the best-on-dev weights since the start (None: the start)
        self.stopped: str | None = None
        self.pause_at: int | None = None
        self.resume_from: Path | None = None
        build(self, texts, np.asarray(target, dtype=np.float32), seed, lr_by_prefix or {}, lengths)  # the Trainer
        self.persistent = self.tmp is None
        self.seconds = time.perf_counter() - t0
        if self.resume_from is not None and distributed.is_main():
            print(f"{desc}: resumes from the checkpoint at step {self.resume_from.name.rsplit('-', 1)[1]} of "
                  f"{self.total} ({self.resume_from})", file=sys.stderr)

    # -- what the hooks report (pldistill.train.trainer_parts.Hooks)
    # -----------------------------------------------------
    def evaluated(self, step: int, epoch: float, dev: float) -> bool:
        """A dev score at ``step``: kept in the curve, the weights kept where they are the best so far; True where
        training should stop early (``params.patience``)."""
        best = self.best_row()
        self.curve.append({"step": step, "epoch": round(epoch, 3), "loss": None, "dev": dev})
        if self.params.select == "dev" and dev > best["dev"]:
            self.best = {k: v.detach().clone() for k, v in trainable(self.loss).items()}
        best = self.best_row()
        self.stopped = out_of_patience(step, self.total, (best["dev"], best["step"]), self.per_epoch,
                                       self.params.patience, self.params.select)
        return self.stopped is not None

    def best_row(self) -> dict:
        """The curve's row kept: the best dev score (a tie keeps the earlier), or the last (``select`` last)."""
        return max(self.curve, key=lambda r: r["dev"]) if self.params.select == "dev" else self.curve[-1]

    def save_due(self, step: int, last_save: float) -> bool:
        """Whether a checkpoint is written at ``step``: a pause always; in a kept folder every ``checkpoint_every``
        steps (null: at each dev evaluation) and at the end, once ``checkpoint_seconds`` have gone since the last."""
        every = self.params.checkpoint_every
        if step == self.pause_at:
            return True
        if not self.persistent or every == 0:
            return False
        due = step >= self.total or (step in self.eval_at if every is None else step % every == 0)
        return due and distributed.on_main(lambda: time.perf_counter() - last_save >= self.params.checkpoint_seconds)

    def _train(self) -> None:
        t0 = time.perf_counter()
        done = self.resume_from is not None and int(self.resume_from.name.rsplit("-", 1)[1]) >= (
            self.pause_at or self.total)
        if not done and not self.stopped:
            with at_length(self.loss.model, self.params.max_length):
                self.trainer.train(resume_from_checkpoint=str(self.resume_from) if self.resume_from else None)
            step = self.trainer.state.global_step
            self.resume_from = self.folder / f"checkpoint-{step}" if step == self.pause_at else None
        self.seconds += time.perf_counter() - t0

    def advance(self, until: int) -> float:
        """Train up to step ``until`` (at most the last) and pause there; the dev score there."""
        self.pause_at = min(until, self.total)
        self._train()
        return next(r["dev"] for r in self.curve if r["step"] == self.pause_at) if any(
            r["step"] == self.pause_at for r in self.curve) else self.curve[-1]["dev"]

    def finish(self) -> FitResult:
        """Train to the end; leave the weights at the kept checkpoint (best dev, the start counted, or the last)."""
        self.pause_at = None
        self._train()
        best = self.best_row()
        if self.params.select == "dev":
            load_trainable(self.loss, self.start_state if best["step"] == 0 or self.best is None else self.best)
        self.loss.eval()
        if self.stopped and distributed.is_main():
            print(f"{self.desc}: stopped early {self.stopped}", file=sys.stderr)
        steps = self.trainer.state.global_step or max(r["step"] for r in self.curve)
        self.close()
        return FitResult(best_dev=best["dev"], best_step=best["step"], steps=steps, seconds=self.seconds,
                         curve=self.curve, precision=self.amp, stopped=self.stopped)

    def close(self) -> None:
        """Drop the Trainer (its optimizer's memory) and a temporary folder."""
        self.trainer = None
        self.best = None if self.params.select == "dev" and self.tmp is None else self.best
        if self.tmp is not None:
            self.tmp.cleanup()
            self.tmp = None

    @property
    def module(self) -> torch.nn.Module:
        """What trains: the loss, holding the model (and any weights of its own)."""
        return self.loss


def start(
    model, loss: torch.nn.Module, texts: Columns, target: np.ndarray, dev: pd.DataFrame, params: StepParams,
    eval_params: EvaluateParams, generator: torch.Generator, desc: str, lr_by_prefix: dict[str, float] | None = None,
    lengths: list[int] | None = None,
) -> Run:
    """Start training ``model`` (a bi- or cross-encoder, a DSE student: what scores dev) by ``loss`` (which holds
    the library model inside it) on ``texts`` (the rows' text columns: (sentence,) for the embedding step, (s1, s2)
    for pairs) and ``target``, selected on ``dev`` Spearman; nothing trains until the run advances or finishes.
    ``generator``: where the Trainer's seed is drawn from (batch order, dropout). ``lengths``: tokens per row, for
    batches of similar length."""
    seed = int(torch.randint(2**31 - 1, (1,), generator=generator))
    return Run(loss, texts, target, dev_spearman(model, dev, eval_params), params, seed, desc, lr_by_prefix, lengths)


def train(
    model, loss: torch.nn.Module, texts: Columns, target: np.ndarray, dev: pd.DataFrame, params: StepParams,
    eval_params: EvaluateParams, generator: torch.Generator, desc: str, lr_by_prefix: dict[str, float] | None = None,
    lengths: list[int] | None = None,
) -> FitResult:
    """``start`` then ``finish``: train a model one holds and leave it at the checkpoint ``params.select`` keeps."""
    return start(model, loss, texts, target, dev, params, eval_params, generator, desc, lr_by_prefix,
                 lengths).finish()


