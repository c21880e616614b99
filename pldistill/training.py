"""The two ways in to training, each on either engine, our loop (pldistill.loop) or sentence-transformers' trainers
(pldistill.st_trainer, a section's ``trainer: sentence-transformers``): ``train_model`` loads a model by its params
and trains it on pairs, with ``seeds`` > 1 seed-optimised (our loop); ``fit_at`` trains a model one holds (an
embedding step's student, a sub-model, a DSE student, a Trans-Encoder side) with the loss it is given, on as many
text columns as that loss reads (sentences, pairs, triplets). Both select on dev Spearman; also the dev scorer
every run is selected by.

Our loop's names (``Fit``, ``fit``, ``fit_seeds``, ``FitResult``, ...) are importable from here too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import numpy as np
import pandas as pd
import torch

from pldistill import distributed, pair_losses, st_trainer
from pldistill.batching import Arrange, BatchLoss, Columns, Prefetch, by_length
from pldistill.config import EvaluateParams, StepParams, TrainParams
from pldistill.loop import (  # noqa: F401  (re-exported: our loop's names, as before the split)
    Fit,
    eval_steps,
    fit,
    fit_seeds,
    precision,
)
from pldistill.metrics import correlation
from pldistill.models import BiEncoder, CrossModel, at_length, is_static
from pldistill.seeding import seed_all
from pldistill.soup import fit_soup, mix_with_start
from pldistill.trainable import FitResult, write_curves  # noqa: F401  (write_curves: re-exported)

M = TypeVar("M")  # whatever model object a training run belongs to


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


def fit_at(
    model: BiEncoder | CrossModel, batch_loss: BatchLoss, texts: Columns, target: np.ndarray, dev: pd.DataFrame,
    params: StepParams, eval_params: EvaluateParams,
    generator: torch.Generator, desc: str, prefetch: Prefetch | None = None,
    lr_by_prefix: dict[str, float] | None = None, arrange: Arrange | None = None,
) -> FitResult:
    """Train a model one holds (``fit`` on its module; a DSE student too, which trains and scores as these do),
    truncating inputs at ``params.max_length`` (e.g. 32 for speed) while dev is scored at the model's own length,
    as evaluation will score it. ``texts``: the rows' text columns, as ``batch_loss`` reads them ((sentence,) for
    the embedding step, (s1, s2) for pairs). ``prefetch``, ``lr_by_prefix``, ``arrange``: as ``Fit``'s.
    ``params.trainer`` sentence-transformers: on its trainer (``st_trainer.fit``), seeded from ``generator``; no
    prefetch and no ``arrange`` there (its sampler cuts the batches)."""
    full = model.max_length
    score = dev_spearman(model, dev, eval_params)

    def dev_score() -> float:
        with at_length(model, full):
            return score()

    with at_length(model, params.max_length):
        if params.trainer == "sentence-transformers":
            st_trainer.refuse(params, 1, desc)
            seed = int(torch.randint(2**31 - 1, (1,), generator=generator))  # the Trainer's sampler and dropout
            return st_trainer.fit(model.module, batch_loss, texts, target, dev_score, params, seed, desc,
                                  precision(params, desc), lr_by_prefix)
        return fit(model.module, batch_loss, texts, target, dev_score, params, generator, desc=desc,
                   lr_by_prefix=lr_by_prefix, prefetch=prefetch, arrange=arrange)


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


def pair_loss(kind: str, loss: str) -> Callable[[BiEncoder | CrossModel], BatchLoss]:
    """The loss a model of ``kind`` learns pairs by: a cross-encoder soft BCE; a bi-encoder ``loss`` (cosine:
    MSE of the cosine to the score; cosent: the order of the scores in the batch)."""
    if kind == "cross":
        return pair_losses.soft_bce
    return pair_losses.cosent if loss == "cosent" else pair_losses.cosine_mse


def _train(
    load: Callable[[], M], loss: Callable[[M], BatchLoss], params: TrainParams, eval_params: EvaluateParams,
    s1: list[str], s2: list[str], target: list[float], dev: pd.DataFrame, seed: int, desc: str,
) -> tuple[M, FitResult]:
    if params.trainer == "sentence-transformers":
        st_trainer.refuse(params, distributed.world(), desc)
        seed_all(seed)  # before loading: a new head's init is drawn from it
        model = load()
        return model, st_trainer.train(model, params, s1, s2, np.asarray(target), dev_spearman(model, dev, eval_params),
                                       seed, desc, precision(params, desc))

    def start(s: int) -> tuple[M, Fit]:
        _, gen = seed_all(s)  # before loading: a new head's init is drawn from it
        model = load()
        arrange = by_length(pair_lengths(model, s1, s2), params.batch_size, gen) if grouped(model, params) else None
        return model, Fit(model.module, loss(model), (s1, s2), target, dev_spearman(model, dev, eval_params), params,
                          gen, desc=desc if params.seeds == 1 else f"{desc}, seed {s}", prefetch=model.prefetch,
                          arrange=arrange)

    if params.soup:
        return fit_soup(start, seeds_of(params, seed))
    return fit_seeds(start, seeds_of(params, seed), params.seed_stop)


LOADERS = {"bi": BiEncoder.load, "cross": CrossModel.load}  # a model's kind -> how it loads


def train_model(
    params: TrainParams, eval_params: EvaluateParams, s1: list[str], s2: list[str], target: list[float],
    dev: pd.DataFrame, seed: int, desc: str, kind: str = "bi", wise: bool = False,
) -> tuple[BiEncoder | CrossModel, FitResult]:
    """Load ``params.model`` as a bi-encoder (``kind`` bi: ``params.loss``) or a cross-encoder (cross: soft BCE on
    scores in [0, 1]) and train it on ``params.trainer``'s engine, selected on dev Spearman; with ``params.seeds``
    > 1, seed-optimised (``fit_seeds``). ``wise``: then mixed with its start's weights where dev prefers a mix
    (WiSE-FT, pldistill.soup; a bi-encoder: its start loads again the same, where a new head's draw would not).
    A model one already holds trains through ``fit_at``."""
    if wise and kind != "bi":
        raise ValueError(f"{desc}: WiSE mixes a bi-encoder with its start, which loads the same twice; a {kind} "
                         f"model's new head is drawn at load")
    load = LOADERS[kind]

    def start() -> BiEncoder | CrossModel:
        return load(params.model, params.max_length, params.trust_remote_code, params.layers)

    model, res = _train(start, pair_loss(kind, params.loss), params, eval_params, s1, s2, target, dev, seed, desc)
    if wise:
        res.wise = mix_with_start(model.module, start().module.state_dict(), dev_spearman(model, dev, eval_params),
                                  res.best_dev)
        res.best_dev = res.wise["best_dev"]
    return model, res
