"""One training loop for every model: AdamW, linear warm-up/decay, dev-score checkpoint selection."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from tqdm.auto import tqdm
from transformers import get_linear_schedule_with_warmup

import pandas as pd

from pldistill.config import EvaluateParams, StepParams, TrainParams
from pldistill.io import write_csv_rows
from pldistill.metrics import correlation
from pldistill.models import BiEncoder, CrossModel, at_length, autocast

# (sentence1 batch, sentence2 batch, target batch) -> scalar loss
BatchLoss = Callable[[list[str], list[str], torch.Tensor], torch.Tensor]


@dataclass
class FitResult:
    best_dev: float
    best_step: int
    steps: int
    seconds: float
    curve: list[dict] = field(default_factory=list)  # one row per dev evaluation

    def write_curve(self, path: Path | str) -> None:
        """The dev curve as a CSV for `dvc plots` (x: step, y: dev_spearman)."""
        write_csv_rows(path, ["step", "epoch", "dev_spearman"], [[r["step"], r["epoch"], r["dev"]] for r in self.curve])

    def summary(self) -> dict:
        return {"best_dev": self.best_dev, "best_step": self.best_step, "steps": self.steps,
                "train_seconds": round(self.seconds, 1)}


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
    n = len(target)
    if n == 0:
        raise ValueError(f"{desc}: no training pairs")
    y = torch.as_tensor(np.asarray(target, dtype=np.float32))
    per_epoch = math.ceil(n / params.batch_size)
    total = per_epoch * params.epochs
    eval_steps = {min(total, round(per_epoch * (e + f / params.evals_per_epoch)))
                  for e in range(params.epochs) for f in range(1, params.evals_per_epoch + 1)}
    opt = _optimizer(module, params, lr_by_prefix or {})
    dev = next(module.parameters()).device
    sched = get_linear_schedule_with_warmup(opt, int(params.warmup * total), total)

    t0 = time.perf_counter()
    curve: list[dict] = []
    best = {"dev": -math.inf, "step": 0, "state": None}
    running: list[float] = []

    def evaluate(step: int) -> None:
        module.eval()
        dev = float(dev_score())
        curve.append({"step": step, "epoch": round(step / per_epoch, 3),
                      "loss": round(float(np.mean(running)), 5) if running else None, "dev": dev})
        running.clear()
        if params.select == "last":
            best.update(dev=dev, step=step)
        elif dev > best["dev"]:
            best.update(dev=dev, step=step, state={k: v.detach().clone() for k, v in module.state_dict().items()})

    evaluate(0)
    step = 0
    bar = tqdm(total=total, desc=desc, unit="step", mininterval=2)
    for _ in range(params.epochs):
        order = torch.randperm(n, generator=generator).tolist()
        for i in range(per_epoch):
            idx = order[i * params.batch_size : (i + 1) * params.batch_size]
            module.train()
            with autocast(params.bf16):
                loss = batch_loss([s1[j] for j in idx], [s2[j] for j in idx], y[idx].to(dev))
            loss.backward()
            torch.nn.utils.clip_grad_norm_(module.parameters(), 1.0)
            opt.step()
            sched.step()
            opt.zero_grad(set_to_none=True)
            running.append(loss.item())
            step += 1
            bar.update(1)
            bar.set_postfix(loss=f"{loss.item():.4f}", best_dev=f"{best['dev']:.2f}", refresh=False)
            if step in eval_steps:
                evaluate(step)
    bar.close()
    if params.select == "dev":
        module.load_state_dict(best["state"])
    module.eval()
    return FitResult(best_dev=best["dev"], best_step=best["step"], steps=step,
                     seconds=time.perf_counter() - t0, curve=curve)


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


def train_bi_encoder(
    params: TrainParams, eval_params: EvaluateParams, s1: list[str], s2: list[str], target: list[float],
    dev: pd.DataFrame, generator: torch.Generator, desc: str,
) -> tuple[BiEncoder, FitResult]:
    """Load ``params.model`` and train it as a bi-encoder (cosine MSE), selected on dev Spearman."""
    model = BiEncoder.load(params.model, params.max_length, params.trust_remote_code)
    res = fit(model.module, model.cosine_mse_loss, s1, s2, target, dev_spearman(model, dev, eval_params), params,
              generator, desc=desc)
    return model, res
