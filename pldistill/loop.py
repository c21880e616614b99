"""Our training loop, for every model: AdamW, linear warm-up/decay, dev-score checkpoint selection, mixed
precision (bf16, or fp16 with loss scaling), gradient accumulation, mid-run checkpoints (pldistill.checkpoints)
and DVCLive curves (pldistill.tracking); seed optimisation pauses several runs and finishes one.

It trains a torch module by a loss (pldistill.losses: a module bound to the model, called on a batch's text
columns and targets) and knows no model class. pldistill.training is the one way in, which starts a run here or
on sentence-transformers' trainers (pldistill.st_trainer); seed optimisation, the soup and WiSE wrap it
(pldistill.wrappers).
"""

from __future__ import annotations

import contextlib
import math
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from tqdm.auto import tqdm
from transformers import get_linear_schedule_with_warmup

from pldistill import ahead, checkpoints, distributed, tracking
from pldistill.batching import Arrange, Columns, Prefetch
from pldistill.config import StepParams
from pldistill.losses.base import Loss
from pldistill.trainable import FitResult, check_rows, eval_steps, out_of_patience, precision


def _optimizer(module: torch.nn.Module, params: StepParams, lr_by_prefix: dict[str, float]) -> torch.optim.Optimizer:
    """AdamW; no decay on biases and LayerNorm weights; parameters named ``<prefix>.…`` get their own lr."""
    groups: dict[tuple[float, bool], list] = {}
    for name, p in module.named_parameters():
        if p.requires_grad:
            lr = next((v for k, v in lr_by_prefix.items() if name.startswith(k + ".")), params.lr)
            groups.setdefault((lr, p.ndim >= 2), []).append(p)
    return torch.optim.AdamW([{"params": ps, "lr": lr, "weight_decay": params.weight_decay if decay else 0.0}
                              for (lr, decay), ps in groups.items()], lr=params.lr,
                             fused=params.optimizer == "adamw-fused" or None)


class Fit:
    """One training run that can pause after any step and resume where it stopped.

    ``advance(step)`` trains up to that step (scoring dev there), ``finish()`` trains to the end and
    leaves the module at the kept checkpoint. Seed optimisation pauses several runs and finishes one.
    torch's global RNG (dropout) is saved on pause and restored on resume, so a paused-and-resumed run
    is the run it would have been uninterrupted. Inside ``checkpoints.enabled`` the same holds across
    processes: a checkpoint is written every ``params.checkpoint_every`` steps (at each dev evaluation by
    default) once ``params.checkpoint_seconds`` have gone since the last, and at each pause; a rerun of the same
    run (same fingerprint) resumes from it.

    ``prefetch``: the model's (``BiEncoder.prefetch``, ``CrossModel.prefetch``) where the loss is a pair loss;
    the next step's micro-batches are then tokenised in a worker thread while this step computes
    (pldistill.ahead), with the same features, so the same weights.
    """

    def __init__(self, module: torch.nn.Module, loss: Loss, texts: Columns, target: np.ndarray,
                 dev_score: Callable[[], float], params: StepParams,
                 generator: torch.Generator, desc: str = "train", lr_by_prefix: dict[str, float] | None = None,
                 prefetch: Prefetch | None = None, arrange: Arrange | None = None):
        check_rows(texts, target, desc)
        self.module, self.loss, self.texts = module, loss, texts
        self.y = torch.as_tensor(np.asarray(target, dtype=np.float32))
        self.dev_score, self.params, self.generator = dev_score, params, generator
        self.per_epoch = math.ceil(len(self.y) / params.batch_size)
        self.total = self.per_epoch * params.epochs
        self.eval_steps = eval_steps(self.per_epoch, params)
        self.amp = precision(params, desc)
        self.opt = _optimizer(module, params, lr_by_prefix or {})
        self.sched = get_linear_schedule_with_warmup(self.opt, int(params.warmup * self.total), self.total)
        self.device = next(module.parameters()).device
        # fp16 gradients underflow without loss scaling; disabled, the scaler is a pass-through (opt.step())
        self.scaler = torch.amp.GradScaler(self.device.type, enabled=self.amp == "fp16")
        self.step, self.seconds, self.curve, self.running, self.losses, self.lrs = 0, 0.0, [], [], [], []
        self.best = {"dev": -math.inf, "step": 0, "state": None}
        self.stopped: str | None = None  # why training ended before its last step (params.patience)
        self.bar = tqdm(total=self.total, desc=desc, unit="step", mininterval=2, disable=not distributed.is_main())
        self._order: list[int] = []  # this epoch's row permutation (every rank draws the same: same generator)
        self._arrange = arrange  # how batches are cut from it (pldistill.batching); None: in turn
        self.prefetch, self._workers = prefetch, ahead.pool() if prefetch is not None else None
        distributed.broadcast_parameters(module)  # several processes: every rank starts from rank 0's weights
        distributed.own_dropout_stream()
        self._rng = _rng_state()  # as the caller seeded it: weight init done, dropout not yet drawn
        self.log = tracking.run_log(self.total)
        t0 = time.perf_counter()
        self._evaluate()  # the start is a checkpoint too
        self._ckpt, self._saved_step, self._best_saved = self._checkpoint_path(desc, lr_by_prefix), -1, None
        self._saved_at = time.perf_counter()  # a checkpoint's time: the next waits params.checkpoint_seconds
        if self._ckpt is not None:
            self._resume()
        self.seconds += time.perf_counter() - t0

    def _next_batch(self) -> list[int]:
        """The next batch of row indices: a fresh permutation each epoch, drawn only when the epoch starts."""
        i = self.step % self.per_epoch
        if i == 0:
            self._order = torch.randperm(len(self.y), generator=self.generator).tolist()
            self._order = self._arrange(self._order) if self._arrange is not None else self._order
        return self._order[i * self.params.batch_size : (i + 1) * self.params.batch_size]

    def _evaluate(self) -> float:
        self._settle()  # the next step's inputs are tokenised before dev scoring changes the model's settings
        self.module.eval()
        dev = float(distributed.on_main(self.dev_score))  # every rank keeps the checkpoint rank 0's score picks
        loss = round(float(np.mean(self.running)), 5) if self.running else None
        self.curve.append({"step": self.step, "epoch": round(self.step / self.per_epoch, 3), "loss": loss, "dev": dev})
        self.running.clear()
        if self.params.select == "last":
            self.best.update(dev=dev, step=self.step)
        elif dev > self.best["dev"]:
            state = {k: v.detach().clone() for k, v in self.module.state_dict().items()}
            self.best.update(dev=dev, step=self.step, state=state)
        if self.log:
            self.log.dev(self.step, dev)
        self.stopped = self._out_of_patience()
        return dev

    def _out_of_patience(self) -> str | None:
        return out_of_patience(self.step, self.total, (self.best["dev"], self.best["step"]), self.per_epoch,
                               self.params.patience, self.params.select)

    def _autocast(self) -> contextlib.AbstractContextManager:
        dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(self.amp)
        return torch.autocast(self.device.type, dtype=dtype, enabled=dtype is not None)

    def _micro_batches(self, idx: list[int]) -> list[list[int]]:
        """``idx`` in ``params.accumulate`` contiguous parts, as equal as can be (an empty one dropped)."""
        k, n = self.params.accumulate, len(idx)
        return [part for j in range(k) if (part := idx[j * n // k : (j + 1) * n // k])]

    def _parts(self, batch: list[int]) -> tuple[list[list[int]], float]:
        """This rank's micro-batches of ``batch`` and the rank's share of it."""
        idx, weight = distributed.share(batch)  # several processes: this rank's slice of the batch
        return self._micro_batches(idx), weight

    def _prefetch_next(self) -> None:
        """Tokenise the next step's micro-batches while this one computes; not across an epoch's end, whose
        permutation is drawn when the next epoch starts."""
        i = (self.step + 1) % self.per_epoch
        if self.prefetch is None or i == 0 or self.step + 1 >= self.total:
            return
        parts, _ = self._parts(self._order[i * self.params.batch_size : (i + 1) * self.params.batch_size])
        self.prefetch(self._workers, [self._texts(p) for p in parts])

    def _texts(self, rows: list[int]) -> Columns:
        """The rows' texts, column by column."""
        return tuple([column[j] for j in rows] for column in self.texts)

    def _settle(self) -> None:
        if self._workers is not None:  # one worker, first in first out: a no-op is done when all before it are
            self._workers.submit(lambda: None).result()

    def _train_step(self, batch: list[int]) -> None:
        self.module.train()
        parts, weight = self._parts(batch)
        idx = [j for part in parts for j in part]
        self._prefetch_next()
        loss = 0.0
        for part in parts:
            with self._autocast():
                micro = self.loss(self._texts(part), self.y[part].to(self.device))
            # each micro-batch's mean loss weighted by its share of the slice (and the slice's by its share of
            # the batch): the gradients sum to the gradient of the whole batch's mean loss, up to float rounding
            share = weight * len(part) / len(idx)
            micro = micro * share if share != 1.0 else micro
            self.scaler.scale(micro).backward()
            loss += micro.item()
        # several processes: one all-reduce per optimizer step, of the scaled gradients (every rank has the same
        # scale, so they unscale alike and skip an overflowed step together); one process: the loss as it is
        if distributed.world() > 1:
            loss = distributed.average_gradients(self.module, torch.tensor(loss))
        self.scaler.unscale_(self.opt)  # clip the true gradients, not the scaled ones
        torch.nn.utils.clip_grad_norm_(self.module.parameters(), 1.0)
        self.scaler.step(self.opt)  # skipped by the scaler when an fp16 gradient overflowed
        self.scaler.update()
        self.sched.step()
        self.opt.zero_grad(set_to_none=True)
        self.running.append(loss)
        self.losses.append(loss)
        self.lrs.append(self.sched.get_last_lr()[0])
        self.step += 1
        if self.log:
            self.log.train(self.step, loss, self.lrs[-1])
        self.bar.update(1)
        self.bar.set_postfix(loss=f"{loss:.4f}", best_dev=f"{self.best['dev']:.2f}", refresh=False)

    def advance(self, until: int) -> float:
        """Train up to step ``until`` (at most the last); return the dev score there."""
        until = min(until, self.total)
        if until < self.step:  # resumed from a checkpoint past the pause: the pause's score is in the curve
            return next(r["dev"] for r in self.curve if r["step"] == until)
        t0 = time.perf_counter()
        _set_rng_state(self._rng)
        while self.step < until and not self.stopped:
            self._train_step(self._next_batch())
            if self.step in self.eval_steps and self.step < until:
                self._evaluate()
            if self._checkpoint_due() and self.step < until:
                self._save()
        dev = self.curve[-1]["dev"] if self.curve[-1]["step"] == self.step else self._evaluate()
        self._rng = _rng_state()
        if self._checkpoint_due(pause=self.step < self.total and not self.stopped):
            self._save()  # at each pause, and at the end when due: a rerun of a finished run only reloads it
        self.seconds += time.perf_counter() - t0
        return dev

    # -- mid-run checkpoints (pldistill.checkpoints) ------------------------------------------------------

    def _checkpoint_path(self, desc: str, lr_by_prefix: dict[str, float] | None) -> Path | None:
        """Where this run checkpoints (None: checkpoints off), named by all it depends on. Taken after
        the step-0 evaluation, whose score stands in for the dev set and how it is scored. Several processes:
        rank 0's fingerprint (with its RNG and the number of processes) names the run for every rank."""
        if self.params.checkpoint_every == 0 or not checkpoints.active():
            return None
        world = {"world": distributed.world()} if distributed.world() > 1 else {}  # one process: keys as before
        key = distributed.on_main(lambda: checkpoints.fingerprint({
            "params": self.params.model_dump(mode="json", exclude=checkpoints.SCHEDULE), "desc": desc,
            "lr_by_prefix": lr_by_prefix or {}, "y": self.y,
            **{f"s{i + 1}": "\0".join(column) for i, column in enumerate(self.texts)},  # each text column
            "weights": self.module.state_dict(), "rng": self._rng, "generator": self.generator.get_state(),
            "dev0": self.curve[0]["dev"], "device": self.device.type, "amp": self.amp, **world}))
        return checkpoints.path_for(key)

    def _checkpoint_due(self, pause: bool = False) -> bool:
        """Checkpoints on: at a pause; else every checkpoint_every steps (null: each dev evaluation) and at the
        end, once params.checkpoint_seconds have gone since the last (a rerun loses at most that much training)."""
        every = self.params.checkpoint_every
        if self._ckpt is None or every == 0 or self._saved_step == self.step:
            return False
        due = self.step >= self.total or self.stopped or (
            self.step in self.eval_steps if every is None else self.step % every == 0)
        return pause or (due and distributed.on_main(  # rank 0's clock: every rank saves (a collective), or none
            lambda: time.perf_counter() - self._saved_at >= self.params.checkpoint_seconds))

    def _save(self) -> None:
        t0 = time.perf_counter()
        state = {"fingerprint": self._ckpt.name, "step": self.step, "seconds": self.seconds, "curve": self.curve,
                 "running": self.running, "losses": self.losses, "lrs": self.lrs, "order": self._order,
                 "best": {"dev": self.best["dev"], "step": self.best["step"]},
                 "scheduler": self.sched.state_dict(), "scaler": self.scaler.state_dict()}
        rng = {f"torch.{i}": t for i, t in enumerate(_rng_state())}
        rng["generator"] = self.generator.get_state()
        # several processes: everything but the RNG is the same on every rank (rank 0's weights, averaged
        # gradients), so rank 0 writes one checkpoint holding each rank's RNG (its own dropout masks)
        ranks = distributed.gather_on_main(_rng_state())
        if distributed.is_main():
            for r, states in enumerate(ranks[1:], start=1):
                rng.update({f"rank{r}.torch.{i}": t for i, t in enumerate(states)})
            checkpoints.save(self._ckpt, self.module.state_dict(), self.opt.state_dict(), rng, state,
                             self.best["state"], best_unchanged=self._best_saved == self.best["step"])
        self._saved_step, self._best_saved, self._saved_at = self.step, self.best["step"], time.perf_counter()
        self.seconds -= self._saved_at - t0  # train_seconds counts training, not checkpoint writes

    def _resume(self) -> None:
        ck = checkpoints.load(self._ckpt, self._ckpt.name)
        mine = "" if distributed.rank() == 0 else f"rank{distributed.rank()}."
        has_rng = ck is not None and f"{mine}torch.0" in ck["rng"]
        if not distributed.everywhere(has_rng):  # every rank resumes, or none does
            return
        st = ck["state"]
        self.module.load_state_dict(ck["model"])
        self.opt.load_state_dict(ck["optimizer"])
        self.sched.load_state_dict(st["scheduler"])
        self.scaler.load_state_dict(st["scaler"])
        self.step, self.curve, self.running, self.losses = st["step"], st["curve"], st["running"], st["losses"]
        self.seconds, self._order, self.lrs = st["seconds"], st["order"], st["lrs"]
        self.best.update(dev=st["best"]["dev"], step=st["best"]["step"])
        if ck["best"] is not None:
            self.best["state"] = ck["best"]
        self.stopped = self._out_of_patience() if self.curve[-1]["step"] == self.step else None
        self._rng = [ck["rng"][f"{mine}torch.{i}"] for i in range(len(self._rng))]
        self.generator.set_state(ck["rng"]["generator"])
        self._saved_step, self._best_saved = self.step, self.best["step"]
        self.bar.update(self.step)
        if distributed.is_main():
            print(f"{self.bar.desc}: resumed from the checkpoint at step {self.step} of {self.total} "
                  f"({self._ckpt})", file=sys.stderr)
        if self.log:  # the log restarts empty with the stage: replay what the checkpoint remembers
            for i, (loss, lr) in enumerate(zip(self.losses, self.lrs), start=1):
                self.log.train(i, loss, lr)
            for row in self.curve[1:]:
                self.log.dev(row["step"], row["dev"])

    def finish(self) -> FitResult:
        """Train to the end; leave the module at the kept checkpoint (best dev, or the last)."""
        self.advance(self.total)
        self.close()
        if self.stopped and distributed.is_main():
            print(f"{self.bar.desc}: stopped early {self.stopped}", file=sys.stderr)
        if self.params.select == "dev":
            self.module.load_state_dict(self.best["state"])
        self.module.eval()
        return FitResult(best_dev=self.best["dev"], best_step=self.best["step"], steps=self.step,
                         seconds=self.seconds, curve=self.curve, precision=self.amp, stopped=self.stopped)

    def close(self) -> None:
        self.bar.close()
        if self._workers is not None:
            self._workers.shutdown(cancel_futures=True)


def _rng_state() -> list[torch.Tensor]:
    return [torch.get_rng_state(), *(torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [])]


def _set_rng_state(state: list[torch.Tensor]) -> None:
    torch.set_rng_state(state[0])
    if torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state[1:])
