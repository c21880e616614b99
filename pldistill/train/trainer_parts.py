"""The pieces by which pldistill.train.training extends sentence-transformers' trainers, as the library means them to be
extended: the ``TrainingArguments`` our params map onto (``arguments``), our dev scorer as an evaluator, a batch
sampler (random, or rows of similar length), one callback (``Hooks``: dev at our steps, checkpoints when due, a
pause, early stopping, the best weights kept, curves to DVCLive) and a trainer subclass whose checkpoints hold all
that the loss trains (a DSE head's weights with the model's), in safetensors."""

from __future__ import annotations

import contextlib
import gc
import json
import math
import os
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch
from safetensors.torch import load_file, save_file
from transformers import TrainerCallback
from transformers.integrations import DVCLiveCallback

from pldistill.base.batching import Columns, by_length
from pldistill.params.train import StepParams
from pldistill.run import distributed
from pldistill.train import resume, tracking

OPTIM = {"adamw": "adamw_torch", "adamw-fused": "adamw_torch_fused"}  # ours -> transformers' names
METRIC = "eval_dev_spearman"
CURVES = ("loss", "learning_rate", METRIC)  # to DVCLive: train/loss, train/learning_rate, eval/dev_spearman
MODULE = "module.safetensors"  # in a checkpoint: all the loss trains (the model, and a DSE head)
BEST = "best.safetensors"  # in a checkpoint: the best-on-dev weights so far (resume.CURVE: the curve, written last)


def arguments(params: StepParams, out: Path, seed: int, amp: str, per_device: int, cuda: bool, world: int = 1) -> dict:
    """The Trainer's arguments for a training section's params: the same schedule (linear warm-up and decay),
    kernel, precision, batch and clipping. The Trainer's own evaluation and saving never fire: ``Hooks`` decides.
    ``world``: processes (DDP over nccl on GPUs, gloo on CPUs, in the group pldistill.run.distributed joined)."""
    never = 10**9
    return dict(
        output_dir=str(out), num_train_epochs=params.epochs, seed=seed, data_seed=seed,
        per_device_train_batch_size=per_device, gradient_accumulation_steps=params.accumulate,
        learning_rate=params.lr, warmup_steps=params.warmup,  # under 1: a ratio of the steps (transformers 5)
        weight_decay=params.weight_decay, max_grad_norm=1.0, lr_scheduler_type="linear", optim=OPTIM[params.optimizer],
        bf16=amp == "bf16", fp16=amp == "fp16", use_cpu=not cuda,
        **({"ddp_backend": "nccl" if cuda else "gloo"} if world > 1 else {}),
        eval_strategy="steps", eval_steps=never, save_strategy="no", save_total_limit=2,
        logging_steps=1, report_to="none", dataloader_num_workers=0, disable_tqdm=False)


def unwrapped(model: torch.nn.Module) -> torch.nn.Module:
    """The library model inside a DDP wrapper (the Trainer puts the wrapped model into the loss)."""
    return getattr(model, "module", model) if isinstance(model, torch.nn.parallel.DistributedDataParallel) else model


def trainable(loss: torch.nn.Module) -> dict[str, torch.Tensor]:
    """All that ``loss`` trains, by name: its model's state (``model.…``, unwrapped) and any module of its own."""
    out = {f"model.{k}": v for k, v in unwrapped(loss.model).state_dict().items()}
    for name, child in loss.named_children():
        if name != "model":
            out.update({f"{name}.{k}": v for k, v in child.state_dict().items()})
    return out


def load_trainable(loss: torch.nn.Module, state: dict[str, torch.Tensor]) -> None:
    """The inverse of ``trainable``."""
    parts: dict[str, dict[str, torch.Tensor]] = {}
    for key, v in state.items():
        name, rest = key.split(".", 1)
        parts.setdefault(name, {})[rest] = v
    unwrapped(loss.model).load_state_dict(parts.pop("model"))
    for name, sub in parts.items():
        getattr(loss, name).load_state_dict(sub)


def _tensors(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    # safetensors refuses tensors sharing memory (tied weights); a copy each is what loading restores anyway
    return {k: v.detach().cpu().contiguous().clone() for k, v in state.items()}


def trainer_class(model: torch.nn.Module) -> tuple[type, type]:
    """The library's trainer for ``model`` (a CrossEncoder's, else a SentenceTransformer's) and its arguments'
    class, the trainer subclassed so its checkpoints hold all the loss trains, as safetensors."""
    from sentence_transformers import SentenceTransformerTrainer, SentenceTransformerTrainingArguments
    from sentence_transformers.cross_encoder import CrossEncoder, CrossEncoderTrainer, CrossEncoderTrainingArguments

    cross = isinstance(unwrapped(model), CrossEncoder)
    base = CrossEncoderTrainer if cross else SentenceTransformerTrainer

    class Trainer(base):
        def _save(self, output_dir: str | None = None, state_dict=None) -> None:
            out = Path(output_dir or self.args.output_dir)
            out.mkdir(parents=True, exist_ok=True)
            save_file(_tensors(trainable(self.loss)), str(out / MODULE))

        def _load_from_checkpoint(self, resume_from_checkpoint: str, model=None) -> None:
            load_trainable(self.loss, load_file(str(Path(resume_from_checkpoint) / MODULE)))

        def train(self, *args, **kwargs):
            # what lives now (the data, the models) is not garbage: frozen, the full gc.collect the Trainer runs as
            # it starts skips it (0.2 s of a 10 s run of 40 steps on 2 CPU cores)
            gc.freeze()
            try:
                return super().train(*args, **kwargs)
            finally:
                gc.unfreeze()

        def evaluate(self, *args, **kwargs):
            # an evaluation draws nothing from training's random stream (dropout; the Trainer's eval loader draws a
            # seed): an evaluation more, at a pause between two of ours, leaves the steps after it as they were
            gpus = list(range(torch.cuda.device_count())) if torch.cuda.is_available() else []
            with torch.random.fork_rng(devices=gpus):
                return super().evaluate(*args, **kwargs)

    return Trainer, CrossEncoderTrainingArguments if cross else SentenceTransformerTrainingArguments


def batches(lengths: list[int] | None) -> type:
    """A batch sampler for the Trainer: each epoch a fresh random order (from the Trainer's seed and the epoch, so a
    resumed run cuts the same batches), cut in turn, or, given ``lengths`` (tokens per row), into batches of rows of
    similar length taken in random order (pldistill.base.batching.by_length)."""
    from sentence_transformers.base.sampler import DefaultBatchSampler

    class Batches(DefaultBatchSampler):
        def __init__(self, dataset, batch_size: int, drop_last: bool, valid_label_columns=None, generator=None,
                     seed: int = 0) -> None:
            super().__init__(dataset, batch_size=batch_size, drop_last=drop_last,
                             valid_label_columns=valid_label_columns, generator=generator, seed=seed)
            self.rows = len(dataset)

        def __iter__(self):
            gen = torch.Generator().manual_seed(self.seed + self.epoch)
            order = torch.randperm(self.rows, generator=gen).tolist()
            if lengths is not None:
                order = by_length(lengths, self.batch_size, gen)(order)
            for i in range(len(self)):
                yield order[i * self.batch_size : (i + 1) * self.batch_size]

        def __len__(self) -> int:
            return self.rows // self.batch_size if self.drop_last else math.ceil(self.rows / self.batch_size)

    return Batches


@contextlib.contextmanager
def at_length(model: torch.nn.Module, max_length: int) -> Iterator[None]:
    """``model`` (a library model, or a DDP wrapper of one) truncating its inputs at ``max_length`` inside the block
    (training short, e.g. at 32 tokens); a static model reads every token and has no length to set."""
    model = getattr(model, "module", model)
    attr = "max_seq_length" if hasattr(model, "max_seq_length") else "max_length"
    before = getattr(model, attr, None)
    try:
        setattr(model, attr, max_length)
    except AttributeError:
        yield
        return
    try:
        yield
    finally:
        setattr(model, attr, before)


def dev_evaluator(loss: torch.nn.Module, score: Callable[[], float]):
    """Our dev score (Spearman x100 of the model's ``score``), as the Trainer's metric ``eval_dev_spearman``, at
    the length the model reads outside training (``score`` is called at the length it has now); the library calls
    an evaluator on rank 0 alone and sends its metrics to the other ranks."""
    from sentence_transformers.base.evaluation.evaluator import BaseEvaluator

    model = unwrapped(loss.model)
    full = getattr(model, "max_seq_length", getattr(model, "max_length", None))

    class DevSpearman(BaseEvaluator):
        def __init__(self) -> None:
            super().__init__()
            self.primary_metric = "dev_spearman"

        def __call__(self, model, output_path=None, epoch: float = -1, steps: int = -1) -> dict:
            was = loss.training
            with at_length(loss.model, full):  # training may read fewer tokens (params max_length)
                value = float(score())  # several processes: the library runs its evaluator on rank 0 alone
            loss.train(was)
            return {"dev_spearman": value}

    return DevSpearman()


COLUMNS = {1: ("sentence",), 2: ("sentence1", "sentence2")}  # the dataset's text columns, by how many there are


def build(run, texts: Columns, y: np.ndarray, seed: int, lrs: dict[str, float], lengths: list[int] | None) -> None:
    """Give ``run`` (a pldistill.train.training.Run, its dev score at the start taken) the library's Trainer on
    ``texts`` and targets ``y``, with our parts: the arguments, the batch sampler, our dev evaluator, the hooks and the
    curves; checkpoints in a folder named by the run's fingerprint (pldistill.train.resume; a temporary folder where
    checkpoints are off), and where a killed run left one there, its curve and best weights (the Trainer restores the
    rest)."""
    from datasets import Dataset
    from transformers.trainer_callback import ProgressCallback

    base, args_type = trainer_class(run.model)
    hooks = Hooks(run)
    curves = hooks.curves()
    evaluator = dev_evaluator(run.loss, run.dev_score)
    start_state = {k: v.detach().clone() for k, v in trainable(run.loss).items()}
    key = resume.fingerprint({
        "params": run.params.model_dump(mode="json", exclude=resume.SCHEDULE), "desc": run.desc,
        "y": torch.from_numpy(y), "texts": ["\0".join(column) for column in texts], "weights": start_state,
        "seed": seed, "dev0": run.dev0, "amp": run.amp, "world": run.world, "lrs": lrs, "lengths": lengths})
    kept = resume.folder(key)
    tmp = None if kept is not None else tempfile.TemporaryDirectory(prefix="pldistill-run-")
    folder = Path(kept or tmp.name)
    names = COLUMNS.get(len(texts), tuple(f"text{i}" for i in range(len(texts))))
    data = Dataset.from_dict({**{n: list(c) for n, c in zip(names, texts)},
                              "label": y.tolist() if y.ndim == 1 else list(y)})
    if y.ndim > 1:  # a row of numbers a label (an embedding; DSE's [logit, gold]): the collator stacks tensors
        data.set_format("torch", columns=["label"], output_all_columns=True)
    args = arguments(run.params, folder, seed, run.amp, run.per_device, torch.cuda.is_available(), run.world)
    args = args_type(**args, batch_sampler=batches(lengths),
                     learning_rate_mapping={rf"^{prefix}\.": lr for prefix, lr in lrs.items()})
    trainer = base(model=run.model, args=args, train_dataset=data, loss=run.loss, evaluator=evaluator,
                   callbacks=[hooks, *([curves] if curves else [])])
    trainer.remove_callback(ProgressCallback)  # it prints every step's log line to stdout
    trainer.add_callback(hooks.bar())
    run.trainer, run.hooks, run.curves = trainer, hooks, curves
    run.start_state, run.folder, run.tmp = start_state, folder, tmp
    last = resume.latest(folder) if kept is not None else None
    if last is not None:
        run.resume_from, (run.curve, best) = last, hooks.read(last)
        run.best = load_file(str(best)) if best is not None else None
        if curves is not None:
            curves.replay = True


class Hooks(TrainerCallback):
    """The run's callback (``run``: a pldistill.train.training.Run): dev scored at the run's steps, a checkpoint where
    one is due, a pause, early stopping; beside each Trainer checkpoint, the dev curve and the best weights so far (what
    selection needs after a resume). ``curves()``: the run's DVCLive callback, where the stage opened a log."""

    def __init__(self, run) -> None:
        self.run, self.saved = run, time.perf_counter()
        self._best_written: tuple[Path, int] | None = None  # the last best file written, and which weights

    def curves(self) -> Curves | None:
        """transformers' DVCLive callback for this run, writing into the stage's log (None: no log is open)."""
        log = tracking.run_log(self.run.total)
        if log is None:
            return None
        curves = Curves(log)
        curves.point(0, {METRIC: self.run.dev0})  # the start is a checkpoint too
        return curves

    def on_step_end(self, args, state, control, **kwargs):
        step = state.global_step
        if step in self.run.eval_at or step == self.run.pause_at:
            control.should_evaluate = True
        if self.run.save_due(step, self.saved):
            control.should_save = True
        if step == self.run.pause_at:
            control.should_training_stop = True
        return control

    def on_evaluate(self, args, state, control, metrics=None, **kwargs):
        dev = float(metrics[METRIC])
        if self.run.evaluated(state.global_step, state.epoch or 0.0, dev):
            control.should_training_stop = True
        return control

    def on_save(self, args, state, control, **kwargs):
        self.saved = time.perf_counter()
        if not distributed.is_main():
            return control
        out = Path(args.output_dir) / f"checkpoint-{state.global_step}"
        best = self.run.best
        if best is not None:
            if self._best_written and self._best_written[1] == id(best) and self._best_written[0].is_file():
                os.link(self._best_written[0], out / BEST)  # unchanged since the last checkpoint: linked
            else:
                save_file(_tensors(best), str(out / BEST))
            self._best_written = (out / BEST, id(best))
        (out / resume.CURVE).write_text(json.dumps(self.run.curve))  # last: it marks the checkpoint complete
        return control

    @staticmethod
    def read(checkpoint: Path) -> tuple[list[dict], Path | None]:
        """A checkpoint's dev curve and its best weights' file (None: the start was the best)."""
        best = checkpoint / BEST
        return json.loads((checkpoint / resume.CURVE).read_text()), best if best.is_file() else None

    @staticmethod
    def bar():
        """The Trainer's progress bar without its log lines (losses go to DVCLive; stdout keeps the report)."""
        from transformers.trainer_callback import ProgressCallback

        class Bar(ProgressCallback):
            def on_log(self, args, state, control, logs=None, **kwargs) -> None:
                pass

        return Bar()


class Curves(DVCLiveCallback):
    """transformers' DVCLive integration, writing into the stage's open log (pldistill.train.tracking) at this run's
    steps (``log.offset`` on: a stage's runs lie end to end). Only the curves (``CURVES``), none of the Trainer's
    timings: the log is a cached output, and a rerun writes the same bytes. dvc.yaml declares the params and the plots,
    so the callback logs no params of its own. ``replay``: a killed run's resume writes what its checkpoint
    remembers."""

    def __init__(self, log: tracking.RunLog) -> None:
        super().__init__(live=log.live)
        self.offset, self.replay = log.offset, False

    def setup(self, args, state, model) -> None:
        self._initialized = True

    def point(self, step: int, logs: dict) -> None:
        """``logs`` (the Trainer's names) at the run's ``step``, outside a Trainer call (the start's dev score)."""
        self.on_log(None, SimpleNamespace(is_world_process_zero=True, global_step=step), None, logs=logs)

    def on_train_begin(self, args, state, control, **kwargs):
        if self.replay:  # the log restarts empty with the stage
            for row in self.run_history(state):
                self.point(row["step"], row)
        self.replay = False

    @staticmethod
    def run_history(state) -> list[dict]:
        return [h for h in state.log_history if any(k in h for k in CURVES)]

    def on_log(self, args, state, control, model=None, logs=None, **kwargs):
        # the integration names eval_* eval/*, and train_* train/*: the step's loss is train/loss, as dvc.yaml plots
        kept = {k if k.startswith("eval_") else f"train_{k}": v for k, v in (logs or {}).items() if k in CURVES}
        if kept:
            self.live.step = self.offset + state.global_step
            super().on_log(args, state, control, model=model, logs=kept, **kwargs)

    def on_train_end(self, args, state, control, **kwargs):
        pass  # the stage ends the log; no model is logged as an artifact
