"""How an epoch's rows are cut into batches. By default (pldistill.loop) a fresh random order each epoch, cut in
turn. ``by_length`` groups rows of similar length instead: every batch is padded to its longest row, so a random
batch of the demo's sentences (16.4 tokens on average) pads to about 23 and a third of the arithmetic is padding.

Grouping changes which rows share a batch, not which rows an epoch sees; for a loss that is a mean over rows (the
embedding step's MSE) that changes the steps' noise, not what they aim at. A loss that compares the rows of a
batch with one another (in-batch cosines, CoSENT) would learn from other comparisons, so it is not grouped."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

Arrange = Callable[[list[int]], list[int]]  # an epoch's random order of row indices -> the order batches are cut from


def by_length(lengths: Sequence[int], batch_size: int, generator: torch.Generator) -> Arrange:
    """Batches of rows of similar length, in random order: the epoch's random order sorted by length (a stable
    sort, so rows of one length stay in random order), cut into batches, the full batches shuffled with
    ``generator``; the short one (the epoch's last rows, when ``batch_size`` does not divide them) stays last,
    where the loop cuts it."""

    def arrange(order: list[int]) -> list[int]:
        ranked = sorted(order, key=lambda j: lengths[j])
        full = len(ranked) // batch_size
        batches = [ranked[b * batch_size : (b + 1) * batch_size] for b in range(full)]
        shuffled = [batches[b] for b in torch.randperm(full, generator=generator).tolist()]
        return [j for batch in shuffled for j in batch] + ranked[full * batch_size :]

    return arrange
