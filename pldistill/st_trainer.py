"""Training on sentence-transformers' trainers (``trainer: sentence-transformers`` in a teacher or student section):
``SentenceTransformerTrainer`` + ``CosineSimilarityLoss`` for a bi-encoder, ``CrossEncoderTrainer`` +
``BinaryCrossEntropyLoss`` (soft labels) for a cross-encoder; the maths of our cosine MSE and soft BCE.

What the rest of the pipeline relies on is kept: the same params mean the same training (epochs, batch, lr,
linear warm-up and decay, weight decay, clipping at 1.0, AdamW kernel, precision, accumulation), dev is scored
by our scorer, the start counts as a checkpoint (dev selection never ends below it), mid-run checkpoints resume
a killed run (the Trainer's own, in the run's fingerprinted folder, loaded with ``weights_only``), curves go to
DVCLive through our log, and the result is a ``FitResult``. Several processes (``processes``, our launcher):
the Trainer's own DDP on the process group the stage joined, each rank taking ``batch_size / processes`` rows
of every batch. What it cannot do: seed optimisation (it pauses runs inside our loop), refused by name.
"""

from __future__ import annotations

import math
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from pldistill import checkpoints, distributed, tracking
from pldistill.config import ConfigError, TrainParams
from pldistill.loop import FitResult, eval_steps
from pldistill.models import BiEncoder, CrossModel

OPTIM = {"adamw": "adamw_torch", "adamw-fused": "adamw_torch_fused"}  # ours -> transformers' names
METRIC = "eval_dev_spearman"


def refuse(params: TrainParams, world: int, desc: str) -> None:
    """What this trainer cannot do, named before any work."""
    if params.seeds > 1:
        raise ConfigError(f"{desc}: seed optimisation (seeds {params.seeds}) pauses runs inside our loop; set "
                          f"trainer: ours, or seeds: 1")
    if params.batch_size % (params.accumulate * world):
        raise ConfigError(f"{desc}: trainer sentence-transformers splits batch_size {params.batch_size} into "
                          f"accumulate {params.accumulate} x processes {world} equal micro-batches; make it a "
                          f"multiple")


def _evaluator(model: BiEncoder | CrossModel, score: Callable[[], float]):
    from sentence_transformers.base.evaluation.evaluator import BaseEvaluator

    class DevSpearman(BaseEvaluator):
        """Our dev score (Spearman x100 of ``model.score``), as the Trainer's metric ``eval_dev_spearman``."""

        def __init__(self) -> None:
            super().__init__()
            self.primary_metric = "dev_spearman"

        def __call__(self, st_model, output_path=None, epoch: float = -1, steps: int = -1) -> dict:
            was = model.module.training
            value = score()
            model.module.train(was)
            return {"dev_spearman": value}

    return DevSpearman()


def _callback(eval_steps: set[int], log: tracking.RunLog | None):
    from transformers import TrainerCallback

    class Schedule(TrainerCallback):
        """Dev scoring (and a Trainer checkpoint) at our loop's steps, the last one included; each step's loss
        and learning rate, and each dev score, to our DVCLive log."""

        def on_step_end(self, args, state, control, **kwargs):
            if state.global_step in eval_steps:
                control.should_evaluate = control.should_save = True
            return control

        def on_log(self, args, state, control, logs=None, **kwargs) -> None:
            if log and logs and "loss" in logs:
                log.train(state.global_step, float(logs["loss"]), logs.get("learning_rate"))
            if log and logs and METRIC in logs:
                log.dev(state.global_step, float(logs[METRIC]))

    return Schedule()


def _bar_only():
    from transformers.trainer_callback import ProgressCallback

    class Bar(ProgressCallback):
        """The Trainer's progress bar without its log lines (losses go to DVCLive; stdout keeps the report)."""

        def on_log(self, args, state, control, logs=None, **kwargs) -> None:
            pass

    return Bar()


def train(model: BiEncoder | CrossModel, params: TrainParams, s1: list[str], s2: list[str], target: np.ndarray,
          dev_score: Callable[[], float], seed: int, desc: str, amp: str) -> FitResult:
    """Train ``model`` (seeded and loaded by the caller) on (s1, s2, target); leave it at the checkpoint
    ``params.select`` keeps, by ``dev_score`` (as our loop's ``fit``); return the run's ``FitResult``."""
    from datasets import Dataset
    from sentence_transformers import SentenceTransformerTrainer, SentenceTransformerTrainingArguments
    from sentence_transformers.cross_encoder import CrossEncoderTrainer, CrossEncoderTrainingArguments
    from sentence_transformers.cross_encoder.losses import BinaryCrossEntropyLoss
    from sentence_transformers.sentence_transformer.losses import CoSENTLoss, CosineSimilarityLoss
    from transformers.trainer_callback import ProgressCallback

    t0 = time.perf_counter()
    per_epoch = math.ceil(len(target) / params.batch_size)
    total = per_epoch * params.epochs
    scored_at = eval_steps(per_epoch, params)  # as our loop's
    evaluator = _evaluator(model, dev_score)
    start = {k: v.detach().clone() for k, v in model.module.state_dict().items()}
    dev0 = evaluator(model.model)["dev_spearman"]  # the start is a checkpoint too
    folder = checkpoints.path_for(checkpoints.fingerprint({
        "trainer": "sentence-transformers", "params": params.model_dump(mode="json", exclude={"checkpoint_every"}),
        "desc": desc, "s1": "\0".join(s1), "s2": "\0".join(s2), "y": torch.as_tensor(np.asarray(target)),
        "weights": start, "seed": seed, "dev0": dev0, "amp": amp}))
    with tempfile.TemporaryDirectory(prefix="st-trainer-") as tmp:
        out = Path(folder or tmp)  # checkpoints off: the Trainer's still go somewhere (the best is loaded back)
        never = total + 1  # the Trainer's own schedule never fires: Schedule decides
        args = dict(
            output_dir=str(out), num_train_epochs=params.epochs, seed=seed, data_seed=seed,
            per_device_train_batch_size=params.batch_size // (params.accumulate * distributed.world()),
            gradient_accumulation_steps=params.accumulate, learning_rate=params.lr,
            warmup_steps=params.warmup,  # under 1: a ratio of the steps (transformers 5)
            weight_decay=params.weight_decay, max_grad_norm=1.0, lr_scheduler_type="linear",
            optim=OPTIM[params.optimizer], bf16=amp == "bf16", fp16=amp == "fp16",
            use_cpu=not torch.cuda.is_available(), eval_strategy="steps", eval_steps=never,
            save_strategy="steps", save_steps=never, save_total_limit=2,
            load_best_model_at_end=params.select == "dev", metric_for_best_model=METRIC, greater_is_better=True,
            logging_steps=1, report_to="none", dataloader_num_workers=0)
        ds = Dataset.from_dict({"sentence1": list(s1), "sentence2": list(s2), "score": [float(v) for v in target]})
        callbacks = [_callback(scored_at, tracking.run_log(total))]
        if isinstance(model, BiEncoder):
            trainer = SentenceTransformerTrainer(
                model=model.model, args=SentenceTransformerTrainingArguments(**args), train_dataset=ds,
                loss=(CoSENTLoss if params.loss == "cosent" else CosineSimilarityLoss)(model.model),
                evaluator=evaluator, callbacks=callbacks)
        else:
            trainer = CrossEncoderTrainer(
                model=model.model, args=CrossEncoderTrainingArguments(**args), train_dataset=ds,
                loss=BinaryCrossEntropyLoss(model.model), evaluator=evaluator, callbacks=callbacks)
        trainer.remove_callback(ProgressCallback)  # it prints every step's log line to stdout
        trainer.add_callback(_bar_only())
        resume = folder is not None and any(out.glob("checkpoint-*"))
        trainer.train(resume_from_checkpoint=True if resume else None)
    steps = trainer.state.global_step
    curve = [{"step": 0, "epoch": 0.0, "loss": None, "dev": dev0}] + [
        {"step": h["step"], "epoch": round(h["epoch"], 3), "loss": None, "dev": h[METRIC]}
        for h in trainer.state.log_history if METRIC in h]  # kept across a resume
    best = max(curve, key=lambda r: r["dev"]) if params.select == "dev" else curve[-1]  # a tie keeps the earlier
    if best["step"] == 0 and params.select == "dev":
        model.module.load_state_dict(start)  # nothing beat the start on dev (the Trainer loaded its best)
    model.module.eval()
    return FitResult(best_dev=best["dev"], best_step=best["step"], steps=steps, seconds=time.perf_counter() - t0,
                     curve=curve, precision=amp)
