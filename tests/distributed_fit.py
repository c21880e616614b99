"""What the default tier runs under torchrun (tests/test_distributed.py): ``Fit`` training a tiny linear model
data-parallel, and ``shard_apply`` labelling a frame, on the ranks started; each rank writes what it saw to
``<out dir>/rank-<rank>.json``. Run in one process (``fit_linear``), the same training is the reference.

    python -m torch.distributed.run --standalone --nproc-per-node 2 -m tests.distributed_fit <out dir>
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from pldistill import distributed
from pldistill.config import StepParams
from pldistill.training import Fit

ROWS = 45  # batches of 8: the last one 5, split 2 + 3 on two ranks


def fit_linear() -> tuple[torch.nn.Module, dict]:
    """A linear model learning y = x . w on ROWS rows, 2 epochs, dev scored at each evaluation; returns it
    and what this rank saw (dev scores it computed itself, the curve, the final weights)."""
    torch.manual_seed(3)
    x = torch.randn(ROWS + 10, 4)
    y = x @ torch.tensor([0.5, -1.0, 2.0, 0.0])
    model = torch.nn.Linear(4, 1)
    rows = [str(i) for i in range(ROWS)]  # Fit hands sentences to the loss: here, row numbers
    computed: list[float] = []

    def loss(s1: list[str], s2: list[str], target: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.mse_loss(model(x[[int(i) for i in s1]]).squeeze(-1), target)

    def dev() -> float:
        with torch.no_grad():
            computed.append(-float(torch.nn.functional.mse_loss(model(x[ROWS:]).squeeze(-1), y[ROWS:])))
        return computed[-1]

    params = StepParams(epochs=2, batch_size=8, lr=0.05, evals_per_epoch=2, warmup=0.0)
    res = Fit(model, loss, rows, rows, y[:ROWS].numpy(), dev, params, torch.Generator().manual_seed(5)).finish()
    return model, {"dev_computed": len(computed), "curve": [(r["step"], r["loss"], r["dev"]) for r in res.curve],
                   "best_step": res.best_step, "weight": model.weight.detach().tolist()[0],
                   "bias": model.bias.item()}


def main(out: Path) -> None:
    distributed.join(int(__import__("os").environ["WORLD_SIZE"]))
    _, seen = fit_linear()
    frame = pd.DataFrame({"row": np.arange(5)})
    labelled = distributed.shard_apply(lambda part: part.assign(rank=distributed.rank()), frame)
    seen["sharded"] = None if labelled is None else labelled.to_dict("list")
    (out / f"rank-{distributed.rank()}.json").write_text(json.dumps(seen))
    distributed.leave()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
