"""Learned token weights for a static student (``static.token_weights``): after its pair training, each token
learns a weight that scales its vector, the vectors held, on the same pairs and loss; the weights are then folded
into the vectors, so the saved model is a plain ``StaticEmbedding`` and serves as before.

Model2Vec's fine-tuning learns a weight per token beside the vectors. Learned together they are one function
class (a weight only rescales a vector that trains anyway), and on STS-B a joint pass changed nothing; learned
alone, after the vectors, they moved dev and test by a few tenths (docs/results.md#token-weights). The pass
selects on dev with its start counted, so where dev prefers none the model is left as it was; a dev gain within
dev's noise is kept too (with MPNet's teacher: +0.02 dev, -0.20 test), as the soup and WiSE keep theirs."""

from __future__ import annotations

import pandas as pd
import torch
from torch.nn.utils import parametrize

from pldistill.base.seeding import seed_all
from pldistill.models.encoders import BiEncoder, is_static
from pldistill.params.sections import EvaluateParams
from pldistill.params.train import StaticParams, TrainParams
from pldistill.train.losses.pair import pair_loss
from pldistill.train.training import start


class TokenWeights(torch.nn.Module):
    """The (vocab, dims) table, row ``i`` times ``2 sigmoid(w_i)``: every weight starts at 1 and stays in (0, 2)."""

    def __init__(self, vocab: int) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(vocab))

    def forward(self, table: torch.Tensor) -> torch.Tensor:
        return table * (2 * torch.sigmoid(self.w))[:, None]


def learn(model: BiEncoder, s1: list[str], s2: list[str], target: list[float], dev: pd.DataFrame,
          trained: TrainParams, static: StaticParams, eval_params: EvaluateParams, seed: int) -> dict | None:
    """Learn ``static.token_weights`` epochs of token weights for ``model`` (trained with ``trained``: its loss,
    batch size and dev schedule) and fold them in; what it did, for the report; None for no static model or 0."""
    if not static.token_weights or not is_static(model.model):
        return None
    step = trained.model_copy(update={"epochs": static.token_weights, "lr": static.token_weights_lr,
                                      "seeds": 1, "soup": False, "wise": False})
    table = model.model[0].embedding
    table.weight.requires_grad_(False)  # the vectors held: only the weights learn
    parametrize.register_parametrization(table, "weight", TokenWeights(table.weight.shape[0]))
    loss = pair_loss(model, trained.loss)
    _, gen = seed_all(seed)
    try:
        res = start(model, loss, (s1, s2), target, dev, step, eval_params, gen, "token weights").finish()
    finally:  # folded: the table keeps the weighted vectors under its own name
        parametrize.remove_parametrizations(table, "weight", leave_parametrized=True)
    table.weight.requires_grad_(True)
    before = res.curve[0]["dev"] if res.curve else None
    return {"epochs": static.token_weights, "lr": static.token_weights_lr, "dev_before": before,
            "best_dev": res.best_dev, "kept": res.best_step > 0, "steps": res.steps,
            "train_seconds": round(res.seconds, 1)}
