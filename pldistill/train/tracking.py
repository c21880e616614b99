"""Training curves and system metrics through DVCLive, for `dvc plots show` / `dvc plots diff`.

A stage's command line opens one log (``logging_to(dir)``; dvc.yaml names the folder, a cached output,
git-ignored); every training run inside it logs through transformers' DVCLive integration
(pldistill.train.trainer_parts.Curves): ``train/loss`` and ``train/learning_rate`` each step and ``eval/dev_spearman``
at each dev evaluation. A stage that trains several runs (teacher members, seed
optimisation, trans-encoder cycles) lays them end to end: each run gets its own step range, as in the
dev-curve CSVs.

DVCLive's system monitor (CPU, RAM, disk and GPU use under ``system/``, timestamped) is off: it records the
machine, not the run, and would make every run's outputs differ. ``PLDISTILL_SYSTEM_METRICS=1`` turns it on
for a run you profile (its log then differs from run to run, and so does dvc.lock).

DVCLive is told to stay a logger: no dvc.yaml of its own (dvc.yaml declares the plots), no experiment
saved, no report; its metrics.json is not a DVC metric, so metrics/eval.json stays the one metrics file.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

SYSTEM_METRICS = "PLDISTILL_SYSTEM_METRICS"  # set to 1: DVCLive's system monitor on (off by default)
_live = None  # the open dvclive.Live, or None: logging off (library calls, tests)
_next_offset = 0


@contextlib.contextmanager
def logging_to(directory: Path | str) -> Iterator[None]:
    """Log the training runs inside the block to a DVCLive folder at ``directory`` (emptied first)."""
    global _live, _next_offset  # noqa: PLW0603 -- module state on purpose: the log open for the block
    import torch
    from dvclive import Live, monitor_system  # imported here: only stage command lines log

    live = Live(dir=str(directory), resume=False, report=None, save_dvc_exp=False, dvcyaml=False,
                monitor_system=False)
    if os.environ.get(SYSTEM_METRICS) == "1":
        # DVCLive asks NVML for GPUs whenever pynvml imports; on a machine without an NVIDIA driver that logs
        # an error with a traceback. Ask only where torch sees a GPU.
        monitor_system.GPU_AVAILABLE = monitor_system.GPU_AVAILABLE and torch.cuda.is_available()
        # DVCLive's slowest sampling (0.1 s, 29 samples averaged; it warns at 30): a row each ~3 s keeps files small
        live.monitor_system(interval=0.1, num_samples=29)
    _live, _next_offset = live, 0
    try:
        yield
    finally:
        _live = None
        live.end()


class RunLog:
    """One training run's place in the open log: the log, and the step its step 0 lands on."""

    def __init__(self, live: object, offset: int):
        self.live, self.offset = live, offset


def run_log(total: int) -> RunLog | None:
    """A log for a run of ``total`` steps (its steps 0 .. total get a range of their own), or None when
    no log is open."""
    global _next_offset  # noqa: PLW0603 -- each run's steps follow the last run's
    if _live is None:
        return None
    log = RunLog(_live, _next_offset)
    _next_offset += total + 1
    return log
