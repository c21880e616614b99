"""The one way into training: ``start`` takes a model, its loss (pldistill.losses), the data (text columns and a
target per row, and the dev pairs that select) and one step-params type, and gives a started run on the engine the
params name: our loop (pldistill.loop, the default) or sentence-transformers' trainers (pldistill.st_trainer).
``train`` is ``start`` then ``finish``. Seed optimisation, the soup and WiSE wrap started runs
(pldistill.wrappers); ``train_model`` is the composition a training section's params describe: load the model,
bind its pair loss, start one run per seed and wrap them.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd
import torch

from pldistill import st_trainer
from pldistill.batching import Arrange, Columns, by_length
from pldistill.config import EvaluateParams, StepParams, TrainParams
from pldistill.loop import Fit
from pldistill.losses import pair_loss
from pldistill.losses.base import Loss
from pldistill.metrics import correlation
from pldistill.models import BiEncoder, CrossModel, at_length, is_static
from pldistill.seeding import seed_all
from pldistill.trainable import FitResult, Run
from pldistill.wrappers import mix_with_start, seed_optimised, soup


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


class _AtLength:
    """A started run that trains with inputs truncated at ``length`` (e.g. 32 for speed) while its dev score reads
    them at the model's own length, as evaluation will; the rest is the engine's run."""

    def __init__(self, run: Fit | st_trainer.TrainerRun, model: BiEncoder | CrossModel, length: int) -> None:
        self._run, self._model, self._length = run, model, length

    def __getattr__(self, name: str):
        return getattr(self._run, name)

    def advance(self, until: int) -> float:
        with at_length(self._model, self._length):
            return self._run.advance(until)

    def finish(self) -> FitResult:
        with at_length(self._model, self._length):
            return self._run.finish()


def start(
    model: BiEncoder | CrossModel, loss: Loss, texts: Columns, target: np.ndarray, dev: pd.DataFrame,
    params: StepParams, eval_params: EvaluateParams, generator: torch.Generator, desc: str,
    lr_by_prefix: dict[str, float] | None = None, arrange: Arrange | None = None,
) -> Run:
    """Start training ``model`` (a bi- or cross-encoder, a DSE student) by ``loss`` on ``texts`` (the rows' text
    columns, as the loss reads them: (sentence,) for the embedding step, (s1, s2) for pairs) and ``target``,
    selected on ``dev`` Spearman, on ``params.trainer``'s engine; nothing trains until the run advances or
    finishes. ``generator``: the batch order (ours) or the Trainer's seed. ``lr_by_prefix``: parameters named
    ``<prefix>.…`` train at their own lr. ``arrange``: how our loop cuts batches (pldistill.batching)."""
    full = model.max_length
    score = dev_spearman(model, dev, eval_params)

    def dev_score() -> float:
        with at_length(model, full):
            return score()

    if params.trainer == "sentence-transformers":
        seed = int(torch.randint(2**31 - 1, (1,), generator=generator))  # the Trainer's sampler and dropout
        run = st_trainer.TrainerRun(loss, texts, target, dev_score, params, seed, desc, lr_by_prefix)
    else:
        prefetch = model.prefetch if loss.prefetch else None
        with at_length(model, params.max_length):  # the start's dev score is taken here
            run = Fit(model.module, loss, texts, target, dev_score, params, generator, desc, lr_by_prefix, prefetch,
                      arrange)
    return _AtLength(run, model, params.max_length)


def train(
    model: BiEncoder | CrossModel, loss: Loss, texts: Columns, target: np.ndarray, dev: pd.DataFrame,
    params: StepParams, eval_params: EvaluateParams, generator: torch.Generator, desc: str,
    lr_by_prefix: dict[str, float] | None = None, arrange: Arrange | None = None,
) -> FitResult:
    """``start`` then ``finish``: train a model one holds and leave it at the checkpoint ``params.select`` keeps."""
    return start(model, loss, texts, target, dev, params, eval_params, generator, desc, lr_by_prefix,
                 arrange).finish()


def seeds_of(params: TrainParams, seed: int) -> list[int]:
    """The seeds a training section runs: ``seed`` alone, or ``params.seeds`` of them from ``seed`` on."""
    return [seed + i for i in range(params.seeds)]


def grouped(model: BiEncoder | CrossModel, params: TrainParams) -> bool:
    """Whether ``model``'s pair training cuts batches of similar length (``params.group_by_length``)."""
    return params.grouped(padded=not (isinstance(model, BiEncoder) and is_static(model.model)))


def pair_lengths(model: BiEncoder | CrossModel, s1: list[str], s2: list[str]) -> list[int]:
    """The tokens each pair's batch pads to, at the length the model truncates: a cross-encoder reads a pair as
    one input; a bi-encoder embeds both columns of a batch in one forward, padded to its longest sentence."""
    if isinstance(model, CrossModel):
        return model.lengths(s1, s2)
    return [max(a, b) for a, b in zip(model.lengths(s1), model.lengths(s2))]


LOADERS = {"bi": BiEncoder.load, "cross": CrossModel.load}  # a model's kind -> how it loads


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
        arrange = by_length(pair_lengths(model, s1, s2), params.batch_size, gen) if grouped(model, params) else None
        name = desc if params.seeds == 1 else f"{desc}, seed {s}"
        return model, start(model, pair_loss(model, params.loss), (s1, s2), target, dev, params, eval_params, gen,
                            name, arrange=arrange)

    seeds = seeds_of(params, seed)
    model, res = soup(started, seeds) if params.soup else seed_optimised(started, seeds, params.seed_stop)
    if wise:
        res.wise = mix_with_start(model.module, loaded().module.state_dict(), dev_spearman(model, dev, eval_params),
                                  res.best_dev)
        res.best_dev = res.wise["best_dev"]
    return model, res
