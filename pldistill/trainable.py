"""What the training loop needs of a model, at the bottom of the import graph: a torch ``module`` and the
``batch_loss`` it learns by. pldistill.models' classes have these without importing the loop, so the stages
that only encode or score (augment, sample, cut) do not depend on training code; pldistill.training and
pldistill.loop train them."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import torch

BatchLoss = Callable[[list[str], list[str], torch.Tensor], torch.Tensor]  # (s1, s2, target) -> scalar loss
# a model's ``prefetch``: tokenise ahead, in the workers, what its batch_loss asks for on these (s1, s2) micro-batches
Prefetch = Callable[[ThreadPoolExecutor, list[tuple[list[str], list[str]]]], None]


class Trainable:
    """The models that learn (bi-encoder, cross-encoder, DSE student): their torch ``module``, the ``batch_loss``
    they learn by default, and a ``prefetch`` where they can tokenise ahead. Trained by pldistill.loop.fit
    (``fit(model.module, model.batch_loss, ..., prefetch=model.prefetch)``) or pldistill.training."""

    module: torch.nn.Module
    batch_loss: BatchLoss
    prefetch: Prefetch | None = None
