"""What the default tier runs under torchrun (tests/test_distributed.py): a tiny bi-encoder trained data-parallel by
sentence-transformers' Trainer (pldistill.train.training's ``Run``), and ``shard_apply`` labelling a frame, on the ranks
started; each rank writes what it saw to ``<out dir>/rank-<rank>.json`` and its weights beside it. Run in one
process (``fit_tiny``), the same training is the reference. With ``--checkpoints``, it trains with mid-run
checkpoints there; ``--stop N`` ends every rank abruptly right after the checkpoint at step N (a kill).

    python -m torch.distributed.run --standalone --nproc-per-node 2 -m tests.distributed_fit <out dir> --model <dir>
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from safetensors.torch import save_file

from pldistill.params.train import StudentParams
from pldistill.run import distributed
from pldistill.train import resume

ROWS = 48  # batches of 8: 4 a rank on two ranks, the same 8 rows a step as one process takes


def fit_tiny(model_dir: str | Path) -> tuple[dict[str, torch.Tensor], dict]:
    """The tiny BERT at ``model_dir`` learning ROWS toy pairs by cosine MSE, 2 epochs, dev scored at each
    evaluation; its final weights and what this rank saw (dev scores it computed itself, the curve, the step it
    resumed at)."""
    from pldistill.base.metrics import dev_spearman
    from pldistill.models.encoders import BiEncoder
    from pldistill.params.config import parse_params
    from pldistill.train.losses.cosine_mse import CosineMSELoss
    from pldistill.train.training import Run
    from tests.conftest import make_pairs

    torch.manual_seed(3)
    bi = BiEncoder.load(str(model_dir), max_length=32)
    train, dev = make_pairs(ROWS), make_pairs(16, offset=100)
    score = dev_spearman(bi, dev, parse_params({"evaluate": {"bf16": False}}).evaluate)
    computed: list[float] = []

    def dev_score() -> float:
        computed.append(score())
        return computed[-1]

    params = StudentParams(epochs=2, batch_size=8, lr=2e-3, evals_per_epoch=2, warmup=0.0, checkpoint_seconds=0,
                           max_length=32)
    run = Run(CosineMSELoss(bi.model), (list(train["sentence1"]), list(train["sentence2"])),
              train["score"].to_numpy(), dev_score, params, 5, "fit")
    resumed_at = 0 if run.resume_from is None else int(run.resume_from.name.rsplit("-", 1)[1])
    res = run.finish()
    weights = {k: v.detach().clone().contiguous() for k, v in bi.model.state_dict().items()}
    return weights, {"dev_computed": len(computed), "curve": [(r["step"], r["dev"]) for r in res.curve],
                     "best_step": res.best_step, "steps": res.steps, "resumed_at": resumed_at}


def stop_after(step: int) -> None:
    """End the process (no clean-up, as a kill would) right after the checkpoint at ``step``."""
    from pldistill.train.trainer_parts import Hooks

    on_save = Hooks.on_save

    def save_then_stop(self, args, state, control, **kwargs):
        on_save(self, args, state, control, **kwargs)
        if state.global_step >= step:
            distributed.on_main(lambda: None)  # every rank has saved its part
            os._exit(3)

    Hooks.on_save = save_then_stop


class RankEncoder:
    """A bi-encoder stand-in: a sentence's embedding is a function of its text alone; it counts its chunks."""

    chunks = 0

    def encode(self, texts: list[str], batch_size: int, bf16: bool, progress: bool = False) -> np.ndarray:
        RankEncoder.chunks += 1
        return np.array([[len(t), t.count("e"), 1.0] for t in texts], np.float32)


def embed_shared(root: Path) -> dict:
    """The teacher embeddings of 5 sentences in chunks of 2 (3 chunks), the chunks shared out between the ranks
    through the store at ``root``: the matrix every rank got, and how many chunks this rank encoded."""
    from pldistill.students import embedding  # sentence-transformers' import: only for this part

    embedding.CHUNK = 2
    texts = ["one", "three", "seven sentences", "eleven", "twelve more"]
    emb = embedding.teacher_embeddings([RankEncoder()], "k", texts, 2, False, root=root)
    return {"matrix": emb.tolist(), "chunks": RankEncoder.chunks}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--model", type=Path, required=True)
    ap.add_argument("--checkpoints", type=Path, default=None)
    ap.add_argument("--stop", type=int, default=None)
    args = ap.parse_args()
    distributed.join(int(os.environ["WORLD_SIZE"]))
    if args.checkpoints:
        if args.stop:
            stop_after(args.stop)
        with resume.enabled(args.checkpoints):
            weights, seen = fit_tiny(args.model)
    else:
        weights, seen = fit_tiny(args.model)
    frame = pd.DataFrame({"row": np.arange(5)})
    labelled = distributed.shard_apply(lambda part: part.assign(rank=distributed.rank()), frame)
    seen["sharded"] = None if labelled is None else labelled.to_dict("list")
    seen["embedded"] = embed_shared(args.out / "store")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"rank-{distributed.rank()}.json").write_text(json.dumps(seen))
    save_file(weights, str(args.out / f"rank-{distributed.rank()}.safetensors"))
    distributed.leave()


if __name__ == "__main__":
    main()
