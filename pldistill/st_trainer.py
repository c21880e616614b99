"""Sentence-transformers' trainers (``trainer: sentence-transformers`` in any training section), the second engine
beside our loop (pldistill.loop), behind the same one way in (pldistill.training's ``start``) and running the same
loss modules (pldistill.losses): ``TrainerRun`` trains a model's module by its loss on as many text columns as that
loss reads. The Trainer draws the batches (row indices; a collator hands the loss the rows' texts untokenised, as
our loop does) and steps the optimizer over every parameter of the module the loss holds, a DSE head's too
(``lr_by_prefix`` as the Trainer's ``learning_rate_mapping``); its checkpoints hold that whole module
(``module.safetensors``), so a kept or resumed checkpoint restores the head with the encoder.

What the rest of the pipeline relies on is kept: the same params mean the same training (epochs, batch, lr,
linear warm-up and decay, weight decay, clipping at 1.0, AdamW kernel, precision, accumulation), dev is scored
by our scorer, the start counts as a checkpoint (dev selection never ends below it), mid-run checkpoints resume
a killed run (the Trainer's own, in the run's fingerprinted folder, loaded with ``weights_only``), curves go to
DVCLive through our log, and the result is a ``FitResult``. What it cannot do, refused by name: pause a run (so
no seed optimisation, which pauses runs inside our loop), and several processes (the loss calls the model past
the Trainer's DDP wrapper, which would leave the gradients unsynced).
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
from pldistill.batching import Columns
from pldistill.config import ConfigError, StepParams
from pldistill.losses.base import Loss
from pldistill.trainable import FitResult, check_rows, eval_steps, out_of_patience, precision

OPTIM = {"adamw": "adamw_torch", "adamw-fused": "adamw_torch_fused"}  # ours -> transformers' names
METRIC = "eval_dev_spearman"
MODULE = "module.safetensors"  # its checkpoints: the whole module the loss trains (a DSE head with its encoder)


def refuse(params: StepParams, desc: str) -> None:
    """What this trainer cannot do, named before any work (pausing a run, for seed optimisation: ``advance``)."""
    world = distributed.world()
    if world > 1:
        raise ConfigError(f"{desc}: trainer sentence-transformers runs on one process (its loss calls the model "
                          f"past the Trainer's DDP wrapper, which would leave the gradients unsynced); found "
                          f"processes {world}: set this section's trainer to ours, or processes to 1")
    if getattr(params, "group_by_length", "auto") is True:
        raise ConfigError(f"{desc}: group_by_length true groups batches in our loop; sentence-transformers' trainer "
                          f"cuts its own (random): set trainer: ours, or group_by_length: auto")
    if params.batch_size % params.accumulate:
        raise ConfigError(f"{desc}: trainer sentence-transformers splits batch_size {params.batch_size} into "
                          f"accumulate {params.accumulate} equal micro-batches; make it a multiple")


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
        per_device_train_batch_size=params.batch_size // params.accumulate,
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


class _Rows:
    """The collator of ``TrainerRun``: a batch of row indices -> the rows' text columns, untokenised (the loss
    tokenises, as in our loop), and their targets as the ``label``."""

    valid_label_columns = ("label",)  # what the Trainer's batch sampler asks of a collator

    def __init__(self, texts: Columns, target: torch.Tensor) -> None:
        self.texts, self.target = texts, target

    def __call__(self, rows: list[dict]) -> dict:
        idx = [r["row"] for r in rows]
        return {"texts": tuple([column[i] for i in idx] for column in self.texts), "label": self.target[idx]}


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


class TrainerRun:
    """A run started on the Trainer, trained when ``finish`` is called: ``module`` by ``loss`` (which holds it) on
    ``texts`` (its text columns) and ``target`` (a row each: a score, or an embedding), left at the checkpoint
    ``params.select`` keeps, by ``dev_score``. ``lr_by_prefix``: parameters named ``<prefix>.…`` train at their own
    lr (as our loop's). ``seed``: the Trainer's sampler and dropout."""

    def __init__(self, loss: Loss, texts: Columns, target: np.ndarray, dev_score: Callable[[], float],
                 params: StepParams, seed: int, desc: str, lr_by_prefix: dict[str, float] | None = None):
        refuse(params, desc)
        check_rows(texts, target, desc)
        self.module, self.loss, self.texts, self.dev_score = loss.module, loss, texts, dev_score
        self.params, self.seed, self.desc, self.lr_by_prefix = params, seed, desc, lr_by_prefix
        self.amp = precision(params, desc)
        self.total = math.ceil(len(target) / params.batch_size) * params.epochs
        self.y = torch.as_tensor(np.asarray(target, dtype=np.float32))
        self.seconds, self.curve = 0.0, []

    def advance(self, until: int) -> float:
        raise ConfigError(f"{self.desc}: seed optimisation pauses each seed's run, which only our loop can do; set "
                          f"trainer: ours, or soup: true (every seed to its end), or seeds: 1")

    def close(self) -> None:
        pass

    def finish(self) -> FitResult:
        from datasets import Dataset
        from sentence_transformers import SentenceTransformerTrainer, SentenceTransformerTrainingArguments
        from sentence_transformers.base.model import BaseModel
        from sentence_transformers.cross_encoder import CrossEncoder, CrossEncoderTrainer, CrossEncoderTrainingArguments

        st = next((m for m in self.module.modules() if isinstance(m, BaseModel)), None)
        if st is None:
            raise ConfigError(f"{self.desc}: trainer sentence-transformers trains a sentence-transformers model; "
                              f"{type(self.module).__name__} holds none: set this section's trainer to ours")
        ds = Dataset.from_dict({"row": list(range(len(self.y)))})
        lrs = {rf"^module\.{re.escape(prefix)}\.": lr for prefix, lr in (self.lr_by_prefix or {}).items()}
        base, arguments = ((CrossEncoderTrainer, CrossEncoderTrainingArguments) if isinstance(st, CrossEncoder)
                           else (SentenceTransformerTrainer, SentenceTransformerTrainingArguments))

        def make(args: dict, evaluator, callbacks: list):
            return _on_texts(base)(model=st, args=arguments(**args, learning_rate_mapping=lrs), train_dataset=ds,
                                   loss=self.loss, evaluator=evaluator, callbacks=callbacks,
                                   data_collator=_Rows(self.texts, self.y))

        key = {"texts": ["\0".join(column) for column in self.texts], "y": self.y, "lrs": lrs}
        res = _run(self.module, make, self.params, len(self.y), self.dev_score, self.seed, self.desc, self.amp, key)
        self.seconds, self.curve = res.seconds, res.curve
        return res
