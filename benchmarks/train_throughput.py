"""Our training loop (pldistill.loop.Fit) against sentence-transformers' trainers, same CPU, one run.

    OMP_NUM_THREADS=1 python benchmarks/train_throughput.py --stsb data/downloads/Stsbenchmark.tar.gz --threads 1

Same model (the bundled MiniLM), same first ``--train`` STS-B training pairs (scores in [0, 1]), same
settings (1 epoch, batch 16, lr 2e-5, 10% linear warm-up, weight decay 0.01 off biases and LayerNorm,
gradient clipping at 1, length 128), same seed, and the same AdamW kernel (``--optim``):
- bi-encoder, MSE of the cosine to the score: ``Fit`` with ``pair_losses.cosine_mse(BiEncoder)`` vs
  ``SentenceTransformerTrainer`` with ``CosineSimilarityLoss``;
- cross-encoder, BCE of sigmoid(logit) to the soft score: ``Fit`` with ``pair_losses.soft_bce(CrossModel)`` vs
  ``CrossEncoderTrainer`` with ``BinaryCrossEntropyLoss``.
The timed part is training alone, as wall and as CPU seconds (the process's: on a machine shared with
other jobs CPU time is the steadier measure, with one thread it is the time the work took on a core)
(no dev evaluation, no save: ours gets a constant dev score); each model is then scored on the whole
STS-B dev set by the same scorer (``split_scores``). Runs alternate ours / theirs ``--repeats`` times, so a
machine shared with other jobs slows both alike. Prints threads, CPU flags and versions, steps/s, the ratio
and dev Spearman; appends a JSON line to benchmarks/results/.
``--optim``: adamw_torch (the default) runs both on torch's for-loop AdamW, the one ``Fit`` uses on a CPU;
adamw_torch_fused runs both on the fused CPU kernel (the transformers Trainer's own default with torch >= 2.8,
several times faster per optimizer step on a CPU, equal to the for-loop one up to float rounding, not bit for bit;
``Fit`` is switched to it here only, by its param groups). Left to its default, the Trainer alone would get the
fused kernel, and a cross-encoder's step would read ~1.2x slower for ours.
Needs ``pip install 'pldistill[bench]'`` (accelerate and datasets, for the transformers Trainer).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import torch

from pldistill import datasets, pair_losses
from pldistill.bundled import resolve
from pldistill.config import DataParams, EvaluateParams, StudentParams, TrainParams
from pldistill.device import cpu_flags
from pldistill.models import BiEncoder, CrossModel
from pldistill.training import Fit, split_scores

MODEL = "bundled:all-MiniLM-L6-v2"
OPTIMS = ("adamw_torch", "adamw_torch_fused")  # transformers' names: for-loop (Fit's on a CPU) / fused AdamW


def ours(kind: str, data: dict, tp: TrainParams, seed: int,
         optim: str) -> tuple[BiEncoder | CrossModel, tuple[float, float], int]:
    torch.manual_seed(seed)  # a cross-encoder's new head is drawn here, as in theirs()
    model = (BiEncoder if kind == "bi" else CrossModel).load(MODEL, tp.max_length)
    loss = pair_losses.cosine_mse(model) if kind == "bi" else pair_losses.soft_bce(model)
    tr = data["train"]
    run = Fit(model.module, loss, (list(tr["sentence1"]), list(tr["sentence2"])), tr["score"].to_numpy(),
              lambda: 0.0, tp, torch.Generator().manual_seed(seed), desc=f"ours {kind}")
    for group in run.opt.param_groups:  # no step taken yet: AdamW reads the flags at each step
        group["fused"] = optim == "adamw_torch_fused" or None
    t0, c0 = time.perf_counter(), time.process_time()
    run.advance(run.total)
    seconds = (time.perf_counter() - t0, time.process_time() - c0)
    run.close()
    model.module.eval()
    return model, seconds, run.total


def theirs(kind: str, data: dict, tp: TrainParams, seed: int,
           optim: str) -> tuple[BiEncoder | CrossModel, tuple[float, float], int]:
    from datasets import Dataset
    from sentence_transformers import (
        CrossEncoder,
        SentenceTransformer,
        SentenceTransformerTrainer,
        SentenceTransformerTrainingArguments,
    )
    from sentence_transformers.cross_encoder import CrossEncoderTrainer, CrossEncoderTrainingArguments
    from sentence_transformers.cross_encoder.losses import BinaryCrossEntropyLoss
    from sentence_transformers.sentence_transformer.losses import CosineSimilarityLoss

    torch.manual_seed(seed)
    tr = data["train"]
    ds = Dataset.from_dict({"sentence1": list(tr["sentence1"]), "sentence2": list(tr["sentence2"]),
                            "score": [float(s) for s in tr["score"]]})
    # warmup_steps < 1 is a ratio of the steps in transformers 5 (warmup_ratio is deprecated there)
    common = dict(num_train_epochs=1, per_device_train_batch_size=tp.batch_size, learning_rate=tp.lr,
                  warmup_steps=tp.warmup, weight_decay=tp.weight_decay, max_grad_norm=1.0, lr_scheduler_type="linear",
                  eval_strategy="no", save_strategy="no", report_to="none", seed=seed, data_seed=seed,
                  logging_strategy="no", optim=optim, use_cpu=True, dataloader_num_workers=0, disable_tqdm=True)
    with tempfile.TemporaryDirectory() as out:
        if kind == "bi":
            st = SentenceTransformer(resolve(MODEL), device="cpu")
            st.max_seq_length = tp.max_length
            trainer = SentenceTransformerTrainer(model=st, args=SentenceTransformerTrainingArguments(out, **common),
                                                 train_dataset=ds, loss=CosineSimilarityLoss(st))
            wrapped: BiEncoder | CrossModel = BiEncoder(st, MODEL)
        else:
            ce = CrossEncoder(resolve(MODEL), num_labels=1, max_length=tp.max_length, device="cpu")
            trainer = CrossEncoderTrainer(model=ce, args=CrossEncoderTrainingArguments(out, **common),
                                          train_dataset=ds, loss=BinaryCrossEntropyLoss(ce))
            wrapped = CrossModel(ce, MODEL)
        t0, c0 = time.perf_counter(), time.process_time()
        result = trainer.train()
        seconds = (time.perf_counter() - t0, time.process_time() - c0)
    wrapped.module.eval()
    return wrapped, seconds, result.global_step


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stsb", required=True)
    ap.add_argument("--train", type=int, default=1000, help="training pairs (the first ones of STS-B train)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--kinds", default="bi,cross")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--optim", choices=OPTIMS, default=OPTIMS[0],
                    help="the AdamW kernel both loops run on (the Trainer's names)")
    ap.add_argument("--out", default="benchmarks/results/train_throughput.jsonl")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    loaded = datasets.load(DataParams(dataset="stsb", source=args.stsb), args.seed)
    data = {"train": loaded.splits["train"].head(args.train).reset_index(drop=True), "dev": loaded.splits["dev"]}
    tp = StudentParams(model="bundled:all-MiniLM-L6-v2", layers=None, epochs=1, batch_size=16, lr=2e-5, warmup=0.1,
                       weight_decay=0.01, max_length=128, evals_per_epoch=1, select="last")
    ep = EvaluateParams(batch_size=64, bf16=False)
    import sentence_transformers
    import transformers

    print(f"threads: torch {torch.get_num_threads()}; CPU: {cpu_flags()}; AdamW: {args.optim} for both")
    print(f"torch {torch.__version__}, transformers {transformers.__version__}, "
          f"sentence-transformers {sentence_transformers.__version__}; {len(data['train'])} train pairs, "
          f"{len(data['dev'])} dev pairs")
    rows = []
    for kind in args.kinds.split(","):
        times: dict[str, list[tuple[float, float]]] = {"ours": [], "theirs": []}
        dev: dict[str, float] = {}
        steps: dict[str, int] = {}
        for r in range(args.repeats):
            order = ("ours", "theirs") if r % 2 == 0 else ("theirs", "ours")
            for who in order:
                model, seconds, n = (ours if who == "ours" else theirs)(kind, data, tp, args.seed, args.optim)
                times[who].append(seconds)
                steps[who] = n
                if r == 0:  # same seed, same run: scored once
                    dev[who] = split_scores(model, {"dev": data["dev"]}, ep)["dev"]["spearman"]
                print(f"{kind} {who}: {n} steps in {seconds[0]:.1f} s wall, {seconds[1]:.1f} s CPU "
                      f"({n / seconds[1]:.2f} steps per CPU second); load average {os.getloadavg()[0]:.1f}", flush=True)
        best = {w: min(c for _, c in t) for w, t in times.items()}  # CPU seconds, the fastest repeat
        row = {"kind": kind, "steps": steps, "seconds_wall_cpu": times,
               "steps_per_cpu_s": {w: steps[w] / best[w] for w in best},
               "speed_ours_over_theirs": round(best["theirs"] / best["ours"], 3),
               "dev_spearman": {w: round(v, 2) for w, v in dev.items()}, "optim": args.optim,
               "threads": torch.get_num_threads(),
               "cpu": cpu_flags(), "train_pairs": len(data["train"]), "torch": torch.__version__,
               "sentence_transformers": sentence_transformers.__version__}
        print(f"{kind}: ours {row['steps_per_cpu_s']['ours']:.2f} steps/CPU-s, theirs "
              f"{row['steps_per_cpu_s']['theirs']:.2f}, ours/theirs speed {row['speed_ours_over_theirs']}x; "
              f"dev Spearman ours "
              f"{dev['ours']:.2f}, theirs {dev['theirs']:.2f}", flush=True)
        rows.append(row)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("a") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
