"""Run a stage in as many processes as params.yaml's ``processes`` says: dvc.yaml's command for the stages
that can run on several (gold, teacher, label, distill).

    python -m pldistill.run.launch stages.label --clean data/clean ...   # the stage's own options follow

One process: the stage runs here, as ``python -m stages.label ...`` would. More: torchrun starts them on
this machine (``--standalone --nproc-per-node N``) and this process becomes torchrun, so DVC's signals
reach it; the stage joins their group (pldistill.run.distributed.join).
"""

from __future__ import annotations

import argparse
import os
import runpy
import sys

from pldistill.run.environment import prepare

prepare()  # first: this Python has the project's packages, before config imports them; under make run, hand over

from pldistill.base.errors import ConfigError  # noqa: E402
from pldistill.params.config import load_params  # noqa: E402
from pldistill.run.handover import die_with_parent  # noqa: E402

USAGE = "python -m pldistill.run.launch stages.<name> [--params params.yaml] <the stage's options>"



def command(module: str, args: list[str], processes: int) -> list[str]:
    """The command that runs ``module`` with ``args`` on ``processes`` processes (more than one: torchrun)."""
    if processes == 1:
        return [sys.executable, "-m", module, *args]
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={processes}",
            "-m", module, *args]


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or not argv[0].startswith("stages."):
        sys.exit(f"usage: {USAGE}; found {' '.join(argv) or 'no arguments'}")
    module, args = argv[0], argv[1:]
    ap = argparse.ArgumentParser(add_help=False)
    ap.add_argument("--params", default="params.yaml")
    known, _ = ap.parse_known_args(args)
    try:
        processes = load_params(known.params).processes
    except ConfigError as err:
        sys.exit(f"error: {err}")
    if processes == 1:  # no second interpreter: the stage runs in this one
        sys.argv = [module, *args]
        runpy.run_module(module, run_name="__main__", alter_sys=True)
        return
    cmd = command(module, args, processes)
    die_with_parent()  # torchrun stops its workers when dvc is gone; each worker's run_stage also watches
    os.execv(cmd[0], cmd)



if __name__ == "__main__":
    main()
