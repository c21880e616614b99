"""What a stage that trains, or runs on several processes, adds around pldistill.run.runtime.run_stage: mid-run
checkpoints (pldistill.train.resume) it resumes from, DVCLive curves (``--live``) and torch.distributed's ranks.
Kept out of runtime so a data stage's command does not depend on them: the stages that train pass ``TRAINING``."""

from __future__ import annotations

import contextlib
from pathlib import Path

from pldistill.base.io import default_root
from pldistill.run import distributed
from pldistill.train import resume, tracking


class Training(distributed.Ranks):
    """The hooks run_stage calls for a training stage (a plain stage: ``runtime.PLAIN``, which does nothing): a stage
    on several processes (``distributed.Ranks``: rank 0 reports, every rank leaves the group) that also checkpoints
    and logs curves."""

    live = True  # the stage takes --live (a DVCLive folder)

    def enter(self, stack: contextlib.ExitStack, live: Path | None) -> None:
        # A stage killed mid-training resumes from its runs' checkpoints, kept outside DVC's outputs
        # (DVC removes those before a rerun); they are removed when the stage succeeds.
        stack.enter_context(resume.enabled(default_root() / "checkpoints"))
        if live is not None and distributed.is_main():
            stack.enter_context(tracking.logging_to(live))

    def kept(self) -> list[tuple[Path, int]]:
        return resume.kept()


TRAINING = Training()
