"""One training loop for every model: AdamW, linear warm-up/decay, dev-score checkpoint selection."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import numpy as np
import torch
from tqdm.auto import tqdm
from transformers import get_linear_schedule_with_warmup

import pandas as pd

from pldistill import distributed
from pldistill.config import EvaluateParams, StepParams, TrainParams
from pldistill.io import write_csv_rows
from pldistill.metrics import correlation
from pldistill.models import BiEncoder, CrossModel, at_length, autocast
from pldistill.runtime import seed_all

M = TypeVar("M")  # whatever model object a training run belongs to

# (sentence1 batch, sentence2 batch, target batch) -> scalar loss
BatchLoss = Callable[[list[str], list[str], torch.Tensor], torch.Tensor]


@dataclass
class FitResult:
    best_dev: float
    best_step: int
    steps: int
    seconds: float
    curve: list[dict] = field(default_factory=list)  # one row per dev evaluation
    seeds: dict | None = None  # seed optimisation: each seed's dev score where it was stopped

    def write_curve(self, path: Path | str) -> None:
        """The dev curve as a CSV for `dvc plots` (x: step, y: dev_spearman)."""
        write_csv_rows(path, ["step", "epoch", "dev_spearman"], [[r["step"], r["epoch"], r["dev"]] for r in self.curve])

    def summary(self) -> dict:
        out = {"best_dev": self.best_dev, "best_step": self.best_step, "steps": self.steps,
               "train_seconds": round(self.seconds, 1)}
        return {**out, "seed_optimisation": self.seeds} if self.seeds else out


def write_curves(curve: Path | str, curves: list[tuple[str, list[dict], int]]) -> None:
    """Several runs' dev curves (name, curve, steps) laid end to end in one plot (column ``member`` when
    there are several)."""
    rows, offset = [], 0
    for name, c, steps in curves:
        rows += [[offset + r["step"], r["epoch"], r["dev"], *([name] if len(curves) > 1 else [])] for r in c]
        offset += steps + 1  # the next run's step 0 gets an x of its own
    write_csv_rows(curve, ["step", "epoch", "dev_spearman", *(["member"] if len(curves) > 1 else [])], rows)


def dev_spearman(model: BiEncoder | CrossModel, dev: pd.DataFrame, params: EvaluateParams) -> Callable[[], float]:
    """A checkpoint-selection score: the model's Spearman x100 on the dev pairs."""

    def score() -> float:
        pred = model.score(dev["sentence1"], dev["sentence2"], params.batch_size, params.bf16)
        return correlation(pred, dev["score"])["spearman"]

    return score


def split_scores(model: BiEncoder | CrossModel, splits: dict[str, pd.DataFrame], params: EvaluateParams) -> dict:
    """{split: {"spearman", "pearson"}} of the model's scores against each split's gold scores."""
    return {name: correlation(model.score(df["sentence1"], df["sentence2"], params.batch_size, params.bf16),
                              df["score"]) for name, df in splits.items()}


def _optimizer(module: torch.nn.Module, params: StepParams, lr_by_prefix: dict[str, float]) -> torch.optim.Optimizer:
    """AdamW; no decay on biases and LayerNorm weights; parameters named ``<prefix>.…`` get their own lr."""
    groups: dict[tuple[float, bool], list] = {}
    for name, p in module.named_parameters():
        if p.requires_grad:
            lr = next((v for k, v in lr_by_prefix.items() if name.startswith(k + ".")), params.lr)
            groups.setdefault((lr, p.ndim >= 2), []).append(p)
    return torch.optim.AdamW([{"params": ps, "lr": lr, "weight_decay": params.weight_decay if decay else 0.0}
                              for (lr, decay), ps in groups.items()], lr=params.lr)


class Fit:
    """One training run that can pause after any step and resume where it stopped.

    ``advance(step)`` trains up to that step (scoring dev there), ``finish()`` trains to the end and
    leaves the module at the kept checkpoint. Seed optimisation pauses several runs and finishes one.
    torch's global RNG (dropout) is saved on pause and restored on resume, so a paused-and-resumed run
    is the run it would have been uninterrupted.
    """

    def __init__(self, module: torch.nn.Module, batch_loss: BatchLoss, s1: list[str], s2: list[str],
                 target: np.ndarray, dev_score: Callable[[], float], params: StepParams,
                 generator: torch.Generator, desc: str = "train", lr_by_prefix: dict[str, float] | None = None):
        n = len(target)
        if n == 0:
            raise ValueError(f"{desc}: no training pairs")
        self.module, self.batch_loss, self.s1, self.s2 = module, batch_loss, s1, s2
        self.y = torch.as_tensor(np.asarray(target, dtype=np.float32))
        self.dev_score, self.params, self.generator = dev_score, params, generator
        self.per_epoch = math.ceil(n / params.batch_size)
        self.total = self.per_epoch * params.epochs
        self.eval_steps = {min(self.total, round(self.per_epoch * (e + f / params.evals_per_epoch)))
                           for e in range(params.epochs) for f in range(1, params.evals_per_epoch + 1)}
        self.opt = _optimizer(module, params, lr_by_prefix or {})
        self.sched = get_linear_schedule_with_warmup(self.opt, int(params.warmup * self.total), self.total)
        self.device = next(module.parameters()).device
        self.step, self.seconds, self.curve, self.running = 0, 0.0, [], []
        self.best = {"dev": -math.inf, "step": 0, "state": None}
        self.bar = tqdm(total=self.total, desc=desc, unit="step", mininterval=2, disable=not distributed.is_main())
        self._batches = self._schedule()  # several processes: every rank draws the same batches (same generator)
        distributed.broadcast_parameters(module)  # several processes: every rank starts from rank 0's weights
        distributed.own_dropout_stream()
        self._rng = _rng_state()  # as the caller seeded it: weight init done, dropout not yet drawn
        t0 = time.perf_counter()
        self._evaluate()  # the start is a checkpoint too
        self.seconds += time.perf_counter() - t0

    def _schedule(self) -> Iterator[list[int]]:
        """Batches of row indices: a fresh permutation each epoch, drawn only when the epoch starts."""
        for _ in range(self.params.epochs):
            order = torch.randperm(len(self.y), generator=self.generator).tolist()
            for i in range(self.per_epoch):
                yield order[i * self.params.batch_size : (i + 1) * self.params.batch_size]

    def _evaluate(self) -> float:
        self.module.eval()
        dev = float(distributed.on_main(self.dev_score))  # every rank keeps the checkpoint rank 0's score picks
        loss = round(float(np.mean(self.running)), 5) if self.running else None
        self.curve.append({"step": self.step, "epoch": round(self.step / self.per_epoch, 3), "loss": loss, "dev": dev})
        self.running.clear()
        if self.params.select == "last":
            self.best.update(dev=dev, step=self.step)
        elif dev > self.best["dev"]:
            state = {k: v.detach().clone() for k, v in self.module.state_dict().items()}
            self.best.update(dev=dev, step=self.step, state=state)
        return dev

    def _train_step(self, batch: list[int]) -> None:
        self.module.train()
        idx, weight = distributed.share(batch)  # several processes: this rank's slice of the batch
        with autocast(self.params.bf16):
            loss = self.batch_loss([self.s1[j] for j in idx], [self.s2[j] for j in idx], self.y[idx].to(self.device))
        if weight != 1.0:
            loss = loss * weight
        loss.backward()
        batch_loss = distributed.average_gradients(self.module, loss)  # one process: loss.item()
        torch.nn.utils.clip_grad_norm_(self.module.parameters(), 1.0)
        self.opt.step()
        self.sched.step()
        self.opt.zero_grad(set_to_none=True)
        self.running.append(batch_loss)
        self.step += 1
        self.bar.update(1)
        self.bar.set_postfix(loss=f"{batch_loss:.4f}", best_dev=f"{self.best['dev']:.2f}", refresh=False)

    def advance(self, until: int) -> float:
        """Train up to step ``until`` (at most the last); return the dev score there."""
        until = min(until, self.total)
        t0 = time.perf_counter()
        _set_rng_state(self._rng)
        while self.step < until:
            self._train_step(next(self._batches))
            if self.step in self.eval_steps and self.step < until:
                self._evaluate()
        dev = self.curve[-1]["dev"] if self.curve[-1]["step"] == self.step else self._evaluate()
        self._rng = _rng_state()
        self.seconds += time.perf_counter() - t0
        return dev

    def finish(self) -> FitResult:
        """Train to the end; leave the module at the kept checkpoint (best dev, or the last)."""
        self.advance(self.total)
        self.close()
        if self.params.select == "dev":
            self.module.load_state_dict(self.best["state"])
        self.module.eval()
        return FitResult(best_dev=self.best["dev"], best_step=self.best["step"], steps=self.step,
                         seconds=self.seconds, curve=self.curve)

    def close(self) -> None:
        self.bar.close()


def _rng_state() -> list[torch.Tensor]:
    return [torch.get_rng_state(), *(torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [])]


def _set_rng_state(state: list[torch.Tensor]) -> None:
    torch.set_rng_state(state[0])
    if torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state[1:])


def fit(
    module: torch.nn.Module,
    batch_loss: BatchLoss,
    s1: list[str],
    s2: list[str],
    target: np.ndarray,
    dev_score: Callable[[], float],
    params: StepParams,
    generator: torch.Generator,
    desc: str = "train",
    lr_by_prefix: dict[str, float] | None = None,
) -> FitResult:
    """Train ``module`` on (s1, s2, target) and leave it at the checkpoint with the best dev score
    (``params.select`` dev), or at the end of training (last).

    The dev score is taken before training (step 0), ``params.evals_per_epoch`` times per epoch and at
    the end; the start counts as a checkpoint, so dev selection can never keep something worse on dev.
    """
    return Fit(module, batch_loss, s1, s2, target, dev_score, params, generator, desc, lr_by_prefix).finish()


def fit_seeds(start: Callable[[int], tuple[M, Fit]], seeds: list[int], stop: float) -> tuple[M, FitResult]:
    """Seed optimisation (Augmented SBERT, after Dodge et al. 2020): start one run per seed, pause each
    at ``stop`` of its training steps, and finish only the one with the best dev score there.

    ``start(seed)`` seeds everything from ``seed`` and returns a fresh model and its ``Fit``. Only the best
    paused run is kept in memory. The result's ``seeds`` records each seed's dev score at the stop and its time.
    """
    if not seeds:
        raise ValueError("seed optimisation needs at least one seed")
    t0 = time.perf_counter()
    best: tuple[M, Fit] | None = None
    chosen, trials = seeds[0], []
    for seed in seeds:
        model, run = start(seed)
        if len(seeds) == 1:
            best = model, run
            break
        stop_step = max(1, round(stop * run.total))
        dev = run.advance(stop_step)
        trials.append({"seed": seed, "stop_step": stop_step, "dev_at_stop": dev, "seconds": round(run.seconds, 1)})
        if best is None or dev > best[1].curve[-1]["dev"]:  # a tie keeps the earlier seed
            if best is not None:
                best[1].close()
            best, chosen = (model, run), seed
        else:
            run.close()
    model, run = best
    res = run.finish()
    if trials:
        res.seeds = {"seeds": len(seeds), "stop": stop, "chosen": chosen, "trials": trials,
                     "seconds_all": round(time.perf_counter() - t0, 1)}
    return model, res


def fit_at(
    model: BiEncoder | CrossModel, batch_loss: BatchLoss, s1: list[str], s2: list[str], target: np.ndarray,
    dev: pd.DataFrame, params: StepParams, eval_params: EvaluateParams, generator: torch.Generator, desc: str,
) -> FitResult:
    """``fit`` truncating inputs at ``params.max_length`` (e.g. 32 for speed), while dev is scored at the
    model's own length, as evaluation will score it."""
    full = model.max_length
    score = dev_spearman(model, dev, eval_params)

    def dev_score() -> float:
        with at_length(model, full):
            return score()

    with at_length(model, params.max_length):
        return fit(model.module, batch_loss, s1, s2, target, dev_score, params, generator, desc=desc)


def seeds_of(params: TrainParams, seed: int) -> list[int]:
    """The seeds a training section runs: ``seed`` alone, or ``params.seeds`` of them from ``seed`` on."""
    return [seed + i for i in range(params.seeds)]


def _train(
    load: Callable[[], M], loss: Callable[[M], BatchLoss], params: TrainParams, eval_params: EvaluateParams,
    s1: list[str], s2: list[str], target: list[float], dev: pd.DataFrame, seed: int, desc: str,
) -> tuple[M, FitResult]:
    def start(s: int) -> tuple[M, Fit]:
        _, gen = seed_all(s)  # before loading: a new head's init is drawn from it
        model = load()
        return model, Fit(model.module, loss(model), s1, s2, target, dev_spearman(model, dev, eval_params), params,
                          gen, desc=desc if params.seeds == 1 else f"{desc}, seed {s}")

    return fit_seeds(start, seeds_of(params, seed), params.seed_stop)


def train_bi_encoder(
    params: TrainParams, eval_params: EvaluateParams, s1: list[str], s2: list[str], target: list[float],
    dev: pd.DataFrame, seed: int, desc: str,
) -> tuple[BiEncoder, FitResult]:
    """Load ``params.model`` and train it as a bi-encoder (cosine MSE), selected on dev Spearman; with
    ``params.seeds`` > 1, seed-optimised (``fit_seeds``)."""
    return _train(lambda: BiEncoder.load(params.model, params.max_length, params.trust_remote_code, params.layers),
                  lambda m: m.cosine_mse_loss, params, eval_params, s1, s2, target, dev, seed, desc)


def train_cross_encoder(
    params: TrainParams, eval_params: EvaluateParams, s1: list[str], s2: list[str], target: list[float],
    dev: pd.DataFrame, seed: int, desc: str,
) -> tuple[CrossModel, FitResult]:
    """Load ``params.model`` as a cross-encoder and train it with soft BCE on scores in [0, 1], selected on
    dev Spearman; with ``params.seeds`` > 1, seed-optimised (``fit_seeds``)."""
    return _train(lambda: CrossModel.load(params.model, params.max_length, params.trust_remote_code, params.layers),
                  lambda m: m.soft_bce_loss, params, eval_params, s1, s2, target, dev, seed, desc)
