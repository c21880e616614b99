"""The pair losses by name: what a training section's ``loss`` key names, for a bi-encoder or a cross-encoder."""

from __future__ import annotations

import torch

from pldistill.models.encoders import BiEncoder, CrossModel
from pldistill.train.losses.cosent import CoSENTLoss
from pldistill.train.losses.cosine_mse import CosineMSELoss
from pldistill.train.losses.soft_bce import SoftBCELoss

# params' ``loss`` -> the module
BI_PAIR_LOSSES: dict[str, type[torch.nn.Module]] = {"cosine": CosineMSELoss, "cosent": CoSENTLoss}


def pair_loss(model: object, loss: str = "cosine") -> torch.nn.Module:
    """The loss ``model`` learns pairs by: a cross-encoder soft BCE; a bi-encoder its section's ``loss`` (cosine:
    MSE of the cosine to the score; cosent: the order of the scores in the batch)."""
    if isinstance(model, CrossModel):
        return SoftBCELoss(model.model)
    if isinstance(model, BiEncoder):
        return BI_PAIR_LOSSES[loss](model.model)
    raise TypeError(f"{type(model).__name__} has a loss of its own (a DSE student: "
                    f"pldistill.train.losses.dse.DSELoss), not a pair loss")

