"""What wraps the one way into training (pldistill.train.training's ``start``, a run on sentence-transformers' Trainer):
each takes runs already started and decides which to finish or what to keep, never a branch inside a run. Selection
stays on dev throughout. ``train_model`` is the composition a training section's params describe.

- seed optimisation (Augmented SBERT, after Dodge et al. 2020): one run per seed, each paused at a share of its
  steps (the run's callback stops the Trainer there and checkpoints it); only the best on dev there is finished,
  resumed from its checkpoint (``seed_optimised``);

Weight-space averages of runs that share a start, each kept only where it beats what it averages on dev:

- a model soup (Wortsman et al., 2022, "Model soups"): one training run per seed, each to its end from the same
  start, and their weights averaged. Runs fine-tuned from one start stay in one basin, so their average is a model
  too, often better than any of them (``soup``; figures: docs/results.md#soup);
- WiSE-FT (Wortsman et al., 2022, "Robust fine-tuning of zero-shot models"): the trained model's weights mixed with
  its start's, ``(1 - a) * trained + a * start``, ``a`` on a grid chosen on dev. Fine-tuning on a few pairs pulls a
  model away from what its start knew more broadly; part of the way back often keeps both (``mix_with_start``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

import pandas as pd
import torch

from pldistill.base.metrics import dev_spearman
from pldistill.base.seeding import seed_all
from pldistill.models.encoders import LOADERS, BiEncoder, CrossModel, is_static
from pldistill.params.sections import EvaluateParams
from pldistill.params.train import TrainParams
from pldistill.run import distributed
from pldistill.train.losses.pair import pair_loss
from pldistill.train.training import FitResult, Run, start

M = TypeVar("M")


def _combine(states: list[dict[str, torch.Tensor]],
             fn: Callable[[list[torch.Tensor]], torch.Tensor]) -> dict[str, torch.Tensor]:
    """Several state dicts of one architecture made one, key by key: ``fn`` of their float weights (as float32, cast
    back to the first's dtype); integer buffers (token ids, position ids) are the first's, which every run shares."""
    return {k: fn([s[k].float() for s in states]).to(v.dtype) if v.is_floating_point() else v
            for k, v in states[0].items()}


def average(states: list[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """The element-wise mean of several state dicts of one architecture."""
    return _combine(states, lambda ts: torch.stack(ts).mean(0))


WISE_GRID = tuple(i / 10 for i in range(1, 10))  # the start's share a, tried in turn (0 is the trained model)


def interpolate(trained: dict[str, torch.Tensor], start: dict[str, torch.Tensor], a: float) -> dict[str, torch.Tensor]:
    """``(1 - a) * trained + a * start``, key by key; integer buffers are the trained model's."""
    return _combine([trained, start], lambda ts: (1 - a) * ts[0] + a * ts[1])


def mix_with_start(module: torch.nn.Module, start: dict[str, torch.Tensor], dev_score: Callable[[], float],
                   trained_dev: float) -> dict:
    """Mix ``module``'s trained weights with ``start`` (the state dict it trained from) at each share of
    ``WISE_GRID``, score each mix on dev, and leave ``module`` holding the best: a mix only where it beats the trained
    model's ``trained_dev`` (a tie keeps the trained model). What was tried and kept, for the report."""
    t0 = time.perf_counter()
    trained = {k: v.detach().clone() for k, v in module.state_dict().items()}
    if trained.keys() != start.keys():
        raise ValueError(f"WiSE mixes a model with its start; their weights differ in name: "
                         f"{sorted(trained.keys() ^ start.keys())[:5]}")
    devs, kept, best = {}, 0.0, trained_dev
    for a in WISE_GRID:
        module.load_state_dict(interpolate(trained, start, a))
        module.eval()
        devs[a] = float(distributed.on_main(dev_score))
        if devs[a] > best:
            kept, best = a, devs[a]
    module.load_state_dict(interpolate(trained, start, kept) if kept else trained)
    module.eval()
    return {"trained_dev": trained_dev, "dev": {f"{a:.1f}": d for a, d in devs.items()}, "kept": kept,
            "best_dev": best, "seconds": round(time.perf_counter() - t0, 1)}


def seed_optimised(start: Callable[[int], tuple[M, Run]], seeds: list[int], stop: float) -> tuple[M, FitResult]:
    """Start one run per seed, pause each at ``stop`` of its training steps, and finish only the one with the best
    dev score there (one seed: it is simply finished).

    ``start(seed)`` seeds everything from ``seed`` and returns a fresh model and its started run. Only the best
    paused run is kept in memory. The result's ``seeds`` records each seed's dev score at the stop and its time.
    """
    if not seeds:
        raise ValueError("seed optimisation needs at least one seed")
    t0 = time.perf_counter()
    best: tuple[M, Run] | None = None
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


def soup(start: Callable[[int], tuple[M, Run]], seeds: list[int]) -> tuple[M, FitResult]:
    """Train one run per seed to its end (each kept at its own checkpoint, as ``params.select`` says), average
    their weights, and keep the average if its dev score beats the best run's; else the best run.

    ``start(seed)``: as ``seed_optimised``'s. Holds one state dict per seed in memory (a copy of the weights each).
    The result is the best run's, its ``soup`` each seed's dev score, the soup's and what was kept.
    """
    if len(seeds) < 2:
        raise ValueError(f"a soup averages the runs of two seeds or more; got {len(seeds)}")
    t0 = time.perf_counter()
    states, trials, best = [], [], None
    for seed in seeds:
        model, run = start(seed)
        res = run.finish()
        states.append({k: v.detach().clone() for k, v in run.module.state_dict().items()})
        trials.append({"seed": seed, "best_dev": res.best_dev, "best_step": res.best_step,
                       "seconds": round(res.seconds, 1)})
        if best is None or res.best_dev > best[1].best_dev:  # a tie keeps the earlier seed
            best = len(states) - 1, res
    # the last run's module takes the soup: its dev scorer scores that module
    run.module.load_state_dict(average(states))
    run.module.eval()
    soup_dev = float(distributed.on_main(run.dev_score))
    i, res = best
    kept = "soup" if soup_dev > res.best_dev else f"seed {seeds[i]}"
    if kept == "soup":
        res.best_dev = soup_dev
    else:
        run.module.load_state_dict(states[i])
        run.module.eval()
    res.soup = {"seeds": len(seeds), "trials": trials, "soup_dev": soup_dev, "kept": kept,
                "seconds_all": round(time.perf_counter() - t0, 1)}
    return model, res


def seeds_of(params: TrainParams, seed: int) -> list[int]:
    """The seeds a training section runs: ``seed`` alone, or ``params.seeds`` of them from ``seed`` on."""
    return [seed + i for i in range(params.seeds)]


def grouped(model: BiEncoder | CrossModel, params: TrainParams) -> bool:
    """Whether ``model``'s pair training cuts batches of similar length (``params.group_by_length``)."""
    return params.grouped(padded=not (isinstance(model, BiEncoder) and is_static(model.model)))


def pair_lengths(model: BiEncoder | CrossModel, s1: list[str], s2: list[str]) -> list[int]:
    """The tokens each pair's batch pads to, at the length the model truncates: a cross-encoder reads a pair as
    one input; a bi-encoder embeds each column of a batch padded to its longest sentence."""
    if isinstance(model, CrossModel):
        return model.lengths(s1, s2)
    return [max(a, b) for a, b in zip(model.lengths(s1), model.lengths(s2))]


def train_model(
    params: TrainParams, eval_params: EvaluateParams, s1: list[str], s2: list[str], target: list[float],
    dev: pd.DataFrame, seed: int, desc: str, kind: str = "bi", wise: bool = False,
) -> tuple[BiEncoder | CrossModel, FitResult]:
    """A training section's pair training, composed: load ``params.model`` as a bi-encoder (``kind`` bi: its
    ``params.loss``) or a cross-encoder (cross: soft BCE on scores in [0, 1]), ``start`` one run per seed of
    ``params.seeds`` (each seeded before loading: a new head's init is drawn from it), and finish the best at the
    stop (``seed_optimised``) or all of them averaged (``params.soup``); ``wise``: then mixed with its start's
    weights where dev prefers a mix (WiSE-FT; a bi-encoder: its start loads again the same, where a new head's draw
    would not)."""
    if wise and kind != "bi":
        raise ValueError(f"{desc}: WiSE mixes a bi-encoder with its start, which loads the same twice; a {kind} "
                         f"model's new head is drawn at load")
    load = LOADERS[kind]

    def loaded() -> BiEncoder | CrossModel:
        return load(params.model, params.max_length, params.trust_remote_code, params.layers)

    def started(s: int) -> tuple[BiEncoder | CrossModel, Run]:
        _, gen = seed_all(s)
        model = loaded()
        lengths = pair_lengths(model, s1, s2) if grouped(model, params) else None
        name = desc if params.seeds == 1 else f"{desc}, seed {s}"
        loss = pair_loss(model, params.loss)
        return model, start(model, loss, (s1, s2), target, dev, params, eval_params, gen, name, lengths=lengths)

    seeds = seeds_of(params, seed)
    model, res = soup(started, seeds) if params.soup else seed_optimised(started, seeds, params.seed_stop)
    if wise:
        res.wise = mix_with_start(model.module, loaded().module.state_dict(), dev_spearman(model, dev, eval_params),
                                  res.best_dev)
        res.best_dev = res.wise["best_dev"]
    return model, res
