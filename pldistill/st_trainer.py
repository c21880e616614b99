"""Training on sentence-transformers' trainers (``trainer: sentence-transformers`` in any training section), the
second engine beside our loop (pldistill.loop) for every training in the project:

- ``train``: a model loaded by its params learning pairs (``training.train_model``): ``SentenceTransformerTrainer`` +
  ``CosineSimilarityLoss`` / ``CoSENTLoss`` for a bi-encoder, ``CrossEncoderTrainer`` + ``BinaryCrossEntropyLoss``
  (soft labels) for a cross-encoder; the maths of our cosine MSE, CoSENT and soft BCE, in their own losses.
- ``fit``: a model one holds learning by the loss it is given (``training.fit_at``: the embedding step, DSE's
  student and head, Trans-Encoder's two sides, the RTT ensemble's sub-models and student) on as many text
  columns as that loss reads. The Trainer draws the batches (row indices; a collator hands the loss the rows'
  texts untokenised, as our loop does) and steps the optimizer over every parameter of the module the loss
  holds, a DSE head's too (``lr_by_prefix`` as the Trainer's ``learning_rate_mapping``); its checkpoints hold
  that whole module (``module.safetensors``), so a kept or resumed checkpoint restores the head with the encoder.

What the rest of the pipeline relies on is kept: the same params mean the same training (epochs, batch, lr,
linear warm-up and decay, weight decay, clipping at 1.0, AdamW kernel, precision, accumulation), dev is scored
by our scorer, the start counts as a checkpoint (dev selection never ends below it), mid-run checkpoints resume
a killed run (the Trainer's own, in the run's fingerprinted folder, loaded with ``weights_only``), curves go to
DVCLive through our log, and the result is a ``FitResult``. Several processes (``processes``, our launcher):
the Trainer's own DDP on the process group the stage joined, each rank taking ``batch_size / processes`` rows
of every batch (``train``; ``fit``'s losses call the module past the Trainer's DDP wrapper, so ``fit`` runs on
one process). What it cannot do: seed optimisation (it pauses runs inside our loop), refused by name.
"""

from __future__ import annotations

import math
import re
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file, save_file

from pldistill import checkpoints, distributed, tracking
from pldistill.batching import BatchLoss, Columns
from pldistill.config import ConfigError, StepParams, TrainParams
from pldistill.loop import check_rows, eval_steps
from pldistill.models import BiEncoder, CrossModel
from pldistill.trainable import FitResult, out_of_patience

OPTIM = {"adamw": "adamw_torch", "adamw-fused": "adamw_torch_fused"}  # ours -> transformers' names
METRIC = "eval_dev_spearman"
MODULE = "module.safetensors"  # fit's checkpoints: the whole module the loss trains (a DSE head with its encoder)


def refuse(params: StepParams, world: int, desc: str) -> None:
    """What this trainer cannot do, named before any work."""
    if getattr(params, "seeds", 1) > 1:
        raise ConfigError(f"{desc}: seed optimisation (seeds {params.seeds}) pauses runs inside our loop; set "
                          f"trainer: ours, or seeds: 1")
    if getattr(params, "group_by_length", "auto") is True:
        raise ConfigError(f"{desc}: group_by_length true groups batches in our loop; sentence-transformers' trainer "
                          f"cuts its own (random): set trainer: ours, or group_by_length: auto")
    if params.batch_size % (params.accumulate * world):
        raise ConfigError(f"{desc}: trainer sentence-transformers splits batch_size {params.batch_size} into "
                          f"accumulate {params.accumulate} x processes {world} equal micro-batches; make it a "
                          f"multiple")


def _evaluator(module: torch.nn.Module, score: Callable[[], float]):
    from sentence_transformers.base.evaluation.evaluator import BaseEvaluator

    class DevSpearman(BaseEvaluator):
        """Our dev score (Spearman x100 of ``model.score``), as the Trainer's metric ``eval_dev_spearman``."""

        def __init__(self) -> None:
            super().__init__()
            self.primary_metric = "dev_spearman"

        def __call__(self, st_model, output_path=None, epoch: float = -1, steps: int = -1) -> dict:
            was = module.training
            value = score()
            module.train(was)
            return {"dev_spearman": value}

    return DevSpearman()


def _callback(eval_steps: set[int], log: tracking.RunLog | None, dev0: float, params: StepParams, per_epoch: int):
    from transformers import TrainerCallback

    class Schedule(TrainerCallback):
        """Dev scoring (and a Trainer checkpoint) at our loop's steps, the last one included; each step's loss
        and learning rate, and each dev score, to our DVCLive log. Training ends early where our loop's would
        (``out_of_patience``; the start's dev score, ``dev0``, counts)."""

        def on_step_end(self, args, state, control, **kwargs):
            if state.global_step in eval_steps:
                control.should_evaluate = control.should_save = True
            return control

        def on_evaluate(self, args, state, control, metrics=None, **kwargs):
            # from the logged history, not a count kept here: a resumed run decides as the uninterrupted one did
            curve = [(dev0, 0)] + [(h[METRIC], h["step"]) for h in state.log_history if METRIC in h]
            best = max(curve, key=lambda r: r[0])  # a tie keeps the earlier
            if out_of_patience(state.global_step, state.max_steps, best, per_epoch, params.patience, params.select):
                control.should_training_stop = True
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


def _args(params: StepParams, out: Path, seed: int, amp: str, total: int) -> dict:
    """The Trainer's arguments for our params: the same schedule, kernel, precision and batch; its own evaluation
    and saving never fire (our Schedule callback decides)."""
    never = total + 1
    return dict(
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


def _run(module: torch.nn.Module, make: Callable[[dict, object, list], object], params: StepParams, rows: int,
         dev_score: Callable[[], float], seed: int, desc: str, amp: str, key: dict) -> FitResult:
    """One run on the Trainer ``make(args, evaluator, callbacks)`` builds: dev scored at our loop's steps (the start
    counts), mid-run checkpoints in the run's fingerprinted folder (``key``: what the data and loss are), resumed
    when a killed run left one; ``module`` left at the checkpoint ``params.select`` keeps."""
    from transformers.trainer_callback import ProgressCallback

    t0 = time.perf_counter()
    per_epoch = math.ceil(rows / params.batch_size)
    total = per_epoch * params.epochs
    evaluator = _evaluator(module, dev_score)
    start = {k: v.detach().clone() for k, v in module.state_dict().items()}
    dev0 = evaluator(None)["dev_spearman"]  # the start is a checkpoint too
    folder = checkpoints.path_for(checkpoints.fingerprint({
        "trainer": "sentence-transformers", "params": params.model_dump(mode="json", exclude=checkpoints.SCHEDULE),
        "desc": desc, **key, "weights": start, "seed": seed, "dev0": dev0, "amp": amp}))
    with tempfile.TemporaryDirectory(prefix="st-trainer-") as tmp:
        out = Path(folder or tmp)  # checkpoints off: the Trainer's still go somewhere (the best is loaded back)
        trainer = make(_args(params, out, seed, amp, total), evaluator,
                       [_callback(eval_steps(per_epoch, params), tracking.run_log(total), dev0, params, per_epoch)])
        trainer.remove_callback(ProgressCallback)  # it prints every step's log line to stdout
        trainer.add_callback(_bar_only())
        resume = folder is not None and any(out.glob("checkpoint-*"))
        trainer.train(resume_from_checkpoint=True if resume else None)
    curve = [{"step": 0, "epoch": 0.0, "loss": None, "dev": dev0}] + [
        {"step": h["step"], "epoch": round(h["epoch"], 3), "loss": None, "dev": h[METRIC]}
        for h in trainer.state.log_history if METRIC in h]  # kept across a resume
    best = max(curve, key=lambda r: r["dev"]) if params.select == "dev" else curve[-1]  # a tie keeps the earlier
    if best["step"] == 0 and params.select == "dev":
        module.load_state_dict(start)  # nothing beat the start on dev (the Trainer loaded its best)
    module.eval()
    steps = trainer.state.global_step
    stopped = out_of_patience(steps, total, (best["dev"], best["step"]), per_epoch, params.patience, params.select)
    return FitResult(best_dev=best["dev"], best_step=best["step"], steps=steps,
                     seconds=time.perf_counter() - t0, curve=curve, precision=amp, stopped=stopped)


def train(model: BiEncoder | CrossModel, params: TrainParams, s1: list[str], s2: list[str], target: np.ndarray,
          dev_score: Callable[[], float], seed: int, desc: str, amp: str) -> FitResult:
    """Train ``model`` (seeded and loaded by the caller) on (s1, s2, target) with sentence-transformers' own pair
    losses; leave it at the checkpoint ``params.select`` keeps, by ``dev_score`` (as our loop's ``fit``); return the
    run's ``FitResult``."""
    from datasets import Dataset
    from sentence_transformers import SentenceTransformerTrainer, SentenceTransformerTrainingArguments
    from sentence_transformers.cross_encoder import CrossEncoderTrainer, CrossEncoderTrainingArguments
    from sentence_transformers.cross_encoder.losses import BinaryCrossEntropyLoss
    from sentence_transformers.sentence_transformer.losses import CoSENTLoss, CosineSimilarityLoss

    ds = Dataset.from_dict({"sentence1": list(s1), "sentence2": list(s2), "score": [float(v) for v in target]})

    def make(args: dict, evaluator, callbacks: list):
        if isinstance(model, BiEncoder):
            return SentenceTransformerTrainer(
                model=model.model, args=SentenceTransformerTrainingArguments(**args), train_dataset=ds,
                loss=(CoSENTLoss if params.loss == "cosent" else CosineSimilarityLoss)(model.model),
                evaluator=evaluator, callbacks=callbacks)
        return CrossEncoderTrainer(
            model=model.model, args=CrossEncoderTrainingArguments(**args), train_dataset=ds,
            loss=BinaryCrossEntropyLoss(model.model), evaluator=evaluator, callbacks=callbacks)

    key = {"s1": "\0".join(s1), "s2": "\0".join(s2), "y": torch.as_tensor(np.asarray(target))}
    return _run(model.module, make, params, len(target), dev_score, seed, desc, amp, key)


class _Rows:
    """The collator of ``fit``: a batch of row indices -> the rows' text columns, untokenised (the loss tokenises,
    as in our loop), and their targets as the ``label``."""

    valid_label_columns = ("label",)  # what the Trainer's batch sampler asks of a collator

    def __init__(self, texts: Columns, target: torch.Tensor) -> None:
        self.texts, self.target = texts, target

    def __call__(self, rows: list[dict]) -> dict:
        idx = [r["row"] for r in rows]
        return {"texts": tuple([column[i] for i in idx] for column in self.texts), "label": self.target[idx]}


class _Loss(torch.nn.Module):
    """A ``BatchLoss`` as the module sentence-transformers' Trainer holds for a loss: it holds what it trains
    (``module``; the Trainer's optimizer takes every parameter of a loss, a head's too), called here on the batch's
    text columns rather than on features tokenised by the Trainer's collator."""

    def __init__(self, module: torch.nn.Module, batch_loss: BatchLoss) -> None:
        super().__init__()
        self.module, self._batch_loss = module, batch_loss

    def forward(self, texts: Columns, target: torch.Tensor) -> torch.Tensor:
        return self._batch_loss(texts, target)


def _on_texts(base: type) -> type:
    """``base`` (a sentence-transformers Trainer class) computing the loss on untokenised columns and
    checkpointing the loss's whole module."""

    class OnTexts(base):
        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            loss = self.loss(inputs["texts"], inputs["label"])
            return (loss, {}) if return_outputs else loss

        def _save(self, output_dir: str | None = None, state_dict=None) -> None:
            out = Path(output_dir or self.args.output_dir)
            out.mkdir(parents=True, exist_ok=True)
            save_file(checkpoints.tensors(self.loss.module.state_dict()), out / MODULE)

        def _load_from_checkpoint(self, checkpoint_path: str, model=None) -> None:
            self.loss.module.load_state_dict(load_file(Path(checkpoint_path) / MODULE))

    return OnTexts


def fit(module: torch.nn.Module, batch_loss: BatchLoss, texts: Columns, target: np.ndarray,
        dev_score: Callable[[], float], params: StepParams, seed: int, desc: str, amp: str,
        lr_by_prefix: dict[str, float] | None = None) -> FitResult:
    """Train ``module`` by ``batch_loss`` on ``texts`` (its text columns) and ``target`` (a row each: a score, or an
    embedding) on sentence-transformers' trainer; leave it at the checkpoint ``params.select`` keeps, by
    ``dev_score``. ``lr_by_prefix``: parameters named ``<prefix>.…`` train at their own lr (as our loop's)."""
    from datasets import Dataset
    from sentence_transformers import SentenceTransformerTrainer, SentenceTransformerTrainingArguments
    from sentence_transformers.base.model import BaseModel
    from sentence_transformers.cross_encoder import CrossEncoder, CrossEncoderTrainer, CrossEncoderTrainingArguments

    if distributed.world() > 1:
        raise ConfigError(f"{desc}: trainer sentence-transformers runs this training on one process (its loss calls "
                          f"the model past the Trainer's DDP wrapper, which would leave the gradients unsynced); "
                          f"found processes {distributed.world()}: set this section's trainer to ours, or processes "
                          f"to 1")
    check_rows(texts, target, desc)
    st = next((m for m in module.modules() if isinstance(m, BaseModel)), None)
    if st is None:
        raise ConfigError(f"{desc}: trainer sentence-transformers trains a sentence-transformers model; "
                          f"{type(module).__name__} holds none: set this section's trainer to ours")
    y = torch.as_tensor(np.asarray(target, dtype=np.float32))
    ds = Dataset.from_dict({"row": list(range(len(y)))})
    loss = _Loss(module, batch_loss)
    lrs = {rf"^module\.{re.escape(prefix)}\.": lr for prefix, lr in (lr_by_prefix or {}).items()}
    base, arguments = ((CrossEncoderTrainer, CrossEncoderTrainingArguments) if isinstance(st, CrossEncoder)
                       else (SentenceTransformerTrainer, SentenceTransformerTrainingArguments))

    def make(args: dict, evaluator, callbacks: list):
        return _on_texts(base)(model=st, args=arguments(**args, learning_rate_mapping=lrs), train_dataset=ds,
                               loss=loss, evaluator=evaluator, callbacks=callbacks, data_collator=_Rows(texts, y))

    key = {"texts": ["\0".join(column) for column in texts], "y": y, "lrs": lrs}
    return _run(module, make, params, len(y), dev_score, seed, desc, amp, key)
