"""What the default tier runs under torchrun (tests/test_distributed.py): ``Fit`` training a tiny linear model
data-parallel, and ``shard_apply`` labelling a frame, on the ranks started; each rank writes what it saw to
``<out dir>/rank-<rank>.json``. Run in one process (``fit_linear``), the same training is the reference.
With ``--checkpoints``, the model has dropout (each rank its own masks) and trains with mid-run checkpoints
there; ``--stop N`` ends every rank abruptly right after the checkpoint at step N (a kill).

    python -m torch.distributed.run --standalone --nproc-per-node 2 -m tests.distributed_fit <out dir>
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from pldistill import checkpoints, distributed
from pldistill.config import StudentParams
from pldistill.loop import Fit  # (not pldistill.training: it loads sentence-transformers, 5 s a rank)

ROWS = 45  # batches of 8: the last one 5, split 2 + 3 on two ranks


def fit_linear(dropout: float = 0.0) -> tuple[torch.nn.Module, dict]:
    """A linear model learning y = x . w on ROWS rows, 2 epochs, dev scored at each evaluation; returns it
    and what this rank saw (dev scores it computed itself, the curve, the final weights, the step it resumed
    at). ``dropout``: on its inputs."""
    torch.manual_seed(3)
    x = torch.randn(ROWS + 10, 4)
    y = x @ torch.tensor([0.5, -1.0, 2.0, 0.0])
    linear = torch.nn.Linear(4, 1)
    model = torch.nn.Sequential(torch.nn.Dropout(dropout), linear) if dropout else linear
    rows = [str(i) for i in range(ROWS)]  # Fit hands sentences to the loss: here, row numbers
    computed: list[float] = []

    def loss(texts: tuple[list[str], ...], target: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.mse_loss(model(x[[int(i) for i in texts[0]]]).squeeze(-1), target)

    def dev() -> float:
        with torch.no_grad():
            computed.append(-float(torch.nn.functional.mse_loss(model(x[ROWS:]).squeeze(-1), y[ROWS:])))
        return computed[-1]

    params = StudentParams(epochs=2, batch_size=8, lr=0.05, evals_per_epoch=2, warmup=0.0, checkpoint_seconds=0)
    run = Fit(model, loss, (rows,), y[:ROWS].numpy(), dev, params, torch.Generator().manual_seed(5))
    resumed_at = run.step
    res = run.finish()
    return model, {"dev_computed": len(computed), "curve": [(r["step"], r["loss"], r["dev"]) for r in res.curve],
                   "best_step": res.best_step, "weight": linear.weight.detach().tolist()[0],
                   "bias": linear.bias.item(), "resumed_at": resumed_at}


def stop_after(step: int) -> None:
    """End the process (no clean-up, as a kill would) right after the checkpoint at ``step``."""
    save = Fit._save

    def save_then_stop(self: Fit) -> None:
        save(self)
        if self.step >= step:
            os._exit(3)

    Fit._save = save_then_stop


class RankEncoder:
    """A bi-encoder stand-in: a sentence's embedding is a function of its text alone; it counts its chunks."""

    chunks = 0

    def encode(self, texts: list[str], batch_size: int, bf16: bool, progress: bool = False) -> np.ndarray:
        RankEncoder.chunks += 1
        return np.array([[len(t), t.count("e"), 1.0] for t in texts], np.float32)


def embed_shared(root: Path) -> dict:
    """The teacher embeddings of 5 sentences in chunks of 2 (3 chunks), the chunks shared out between the ranks
    through the store at ``root``: the matrix every rank got, and how many chunks this rank encoded."""
    from pldistill import embedding  # sentence-transformers' import: only for this part

    embedding.CHUNK = 2
    texts = ["one", "three", "seven sentences", "eleven", "twelve more"]
    emb = embedding.teacher_embeddings([RankEncoder()], "k", texts, 2, False, root=root)
    return {"matrix": emb.tolist(), "chunks": RankEncoder.chunks}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--checkpoints", type=Path, default=None)
    ap.add_argument("--stop", type=int, default=None)
    args = ap.parse_args()
    distributed.join(int(os.environ["WORLD_SIZE"]))
    if args.checkpoints:
        if args.stop:
            stop_after(args.stop)
        with checkpoints.enabled(args.checkpoints):
            _, seen = fit_linear(dropout=0.3)
    else:
        _, seen = fit_linear()
    frame = pd.DataFrame({"row": np.arange(5)})
    labelled = distributed.shard_apply(lambda part: part.assign(rank=distributed.rank()), frame)
    seen["sharded"] = None if labelled is None else labelled.to_dict("list")
    seen["embedded"] = embed_shared(args.out / "store")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"rank-{distributed.rank()}.json").write_text(json.dumps(seen))
    distributed.leave()


if __name__ == "__main__":
    main()
