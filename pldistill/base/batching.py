"""How rows are cut into batches, by their length in tokens (``token_counts``). Every batch is padded to its
longest row, so rows of similar length share one: for inference, longest first (``length_sorted_batches``); for
training, where the loop otherwise cuts a fresh random order each epoch in turn, ``by_length`` groups rows of
similar length into batches taken in random order (a random batch of the demo's sentences pads their 16.4 tokens
on average to about 23: a third of the arithmetic was padding).

Grouping changes which rows share a batch, not which rows an epoch sees; for a loss that is a mean over rows (the
embedding step's MSE) that changes the steps' noise, not what they aim at. A loss that compares the rows of a
batch with one another (in-batch cosines, CoSENT) would learn from other comparisons, so it is not grouped."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import torch

# A batch's text columns, row-aligned, as many as the data have (sentence-transformers' loss contract): (sentence,)
# for the embedding step and the RTT ensemble's student, (s1, s2) for pairs, (anchor, positive, negative) for
# triplets; row i of every column and of the target belong together.
Columns = tuple[list[str], ...]


def columns(texts: Columns, n: int, loss: str) -> Columns:
    """``texts`` if it has the ``n`` columns ``loss`` learns from; otherwise a ValueError naming both counts."""
    if len(texts) != n:
        raise ValueError(f"{loss} learns from {n} text column{'s' if n > 1 else ''} a row, got {len(texts)}")
    return texts


def token_counts(tokenizer: object, texts: Sequence[str], pairs: Sequence[str] | None, max_length: int) -> list[int]:
    """Tokens per input (pairs: ``texts[i]`` with ``pairs[i]``), truncated as the model truncates. Batches of
    similar token counts pad far less than batches of similar character counts (STS-B pairs: 30 real tokens per
    pair padded to 40 when sorted by characters, to 31 by tokens); without a tokenizer, characters."""
    if not callable(tokenizer):
        return [len(a) + len(b) for a, b in zip(texts, pairs)] if pairs is not None else [len(t) for t in texts]
    args = (list(texts),) if pairs is None else (list(texts), list(pairs))
    ids = tokenizer(*args, truncation=True, max_length=max_length, return_attention_mask=False,
                    return_token_type_ids=False)["input_ids"]
    return [len(i) for i in ids]


def length_sorted_batches(lengths: Sequence[int], batch_size: int) -> list[np.ndarray]:
    """Index batches of similar length (longest first): less padding, and OOM shows up at once."""
    order = np.argsort(-np.asarray(lengths), kind="stable")
    return [order[i : i + batch_size] for i in range(0, len(order), batch_size)]


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
