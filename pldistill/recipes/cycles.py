"""The one engine and the one N-cycle loop of the recipes that run in cycles (augsbert with ``cycles`` > 1:
pldistill.recipes.rounds; Trans-Encoder: pldistill.recipes.trans_encoder): ``Engine.run`` runs what comes before
cycle 1 (``begin``) and then each cycle's steps (``cycle``), one after another, on ``store.Steps``; a recipe says
only what its steps are, and what the stage writes from them.

A step is named ``c<cycle>-<role>[-<member>]`` (c02-mine, c01-cross-0). Its key chains the run's fingerprint,
its name and the step before it, so a stored step is reused and a killed run resumes where it stopped. The
fingerprint is what stage distill tracks in dvc.yaml -- the values of its params keys, ``cycles`` left out
(growing it reuses the finished cycles), and its code -- with the data files and starting models the run
reads, the library versions and the device: read from the one list DVC reads, never a second one kept by hand.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path

import yaml
from pydantic import BaseModel

from pldistill.base.io import write_csv_rows
from pldistill.base.keys import environment, weights_digest
from pldistill.base.store import Steps, Store, fingerprint, portable
from pldistill.models.encoders import PairModel
from pldistill.params.config import Params
from pldistill.recipes.base import CYCLE_COLUMNS
from pldistill.train.training import FitResult

ROOT = Path(__file__).resolve().parents[2]  # the project: dvc.yaml, stages/, pldistill/
STAGE = "distill"  # the stage the cycles run in
MODEL = "model"  # a training step's model directory


class TrackingError(RuntimeError):
    """dvc.yaml does not say what stage distill tracks."""


def tracked(stage: str = STAGE, dvc_yaml: Path = ROOT / "dvc.yaml") -> tuple[list[str], list[Path]]:
    """The params keys (dotted) and the code files (its .py deps) dvc.yaml's ``stage`` tracks."""
    try:
        spec = yaml.safe_load(dvc_yaml.read_text())["stages"][stage]
    except (OSError, KeyError, TypeError) as err:
        raise TrackingError(f"{dvc_yaml}: expected stage {stage} with its deps and params ({err!r}); the stored "
                            f"cycles are keyed by what that stage tracks") from None
    keys = [k for k in spec.get("params", []) if isinstance(k, str)]  # params.yaml's keys (no other params file)
    code = [ROOT / d for d in spec.get("deps", []) if d.endswith(".py")]
    return keys, code


def values(params: Params, keys: Collection[str], leave_out: Collection[str] = ()) -> dict:
    """``{key: value}`` of the dotted ``keys`` in ``params``, but those in ``leave_out``; a section as plain data.
    Only those keys are read."""
    out = {}
    for key in keys:
        if key in leave_out:
            continue
        value = params
        for part in key.split("."):
            if not isinstance(value, BaseModel) or part not in type(value).model_fields:
                raise TrackingError(f"dvc.yaml: stage {STAGE} tracks params key {key}, which params.yaml's sections do "
                                    f"not have (at {part!r}); fix the key in dvc.yaml")
            value = getattr(value, part)
        out[key] = value.model_dump(mode="json") if isinstance(value, BaseModel) else json_value(value)
    return out


def json_value(value: object) -> object:
    """A params value as JSON holds it (a tuple as a list)."""
    return list(value) if isinstance(value, tuple) else value


def run_fingerprint(params: Params, files: list[Path], models: list[str], leave_out: Collection[str] = (),
                    packages: tuple[str, ...] = ()) -> str:
    """What every stored step of a run depends on: stage distill's tracked params but ``cycles`` and
    ``leave_out``, its code, ``files`` (the data read), ``models`` (their weights), library versions and device."""
    keys, code = tracked()
    used = values(params, keys, {"cycles", *leave_out})
    extra = {"models": {portable(m): weights_digest(str(m)) for m in models}, **environment(packages)}
    return fingerprint([*files, *code], used, extra)


@dataclass(frozen=True)
class Step:
    """A step the engine reused or computed: ``store.Entry`` with where it sits in the cycles."""

    name: str  # c02-mine, c01-cross-0, c00-start
    cycle: int
    role: str  # rounds: bi | mine | label; Trans-Encoder: start | label-bi | cross | label-cross | bi
    member: int | None  # Trans-Encoder's model pair that trained it; None otherwise
    key: str
    path: Path
    meta: dict
    computed: bool
    seconds: float

    @property
    def model(self) -> Path:
        return self.path / MODEL


class Engine:
    """The steps of one run, in order: ``step`` reuses a stored one or computes it; ``run(n)`` is the N-cycle loop.

    A recipe's engine names itself (``name``, its log lines' prefix), says which params sections its fingerprint
    leaves out (``leave_out``: sections whose keys enter only later steps' keys) and which libraries' versions it
    adds (``packages``), and gives ``begin`` and ``cycle``. ``files``: the data the run reads; ``models``: the
    starting models it loads (their weights enter the fingerprint)."""

    name = "cycles"
    leave_out: tuple[str, ...] = ()
    packages: tuple[str, ...] = ()

    def __init__(self, params: Params, store: Store, files: list[Path], models: list[str]):
        self.p, self.store = params, store
        self.base = run_fingerprint(params, files, models, self.leave_out, self.packages)
        self.chain = Steps(store, self.base, params.seed, self.log)
        self.steps: list[Step] = []

    def log(self, msg: str) -> None:
        print(f"[{self.name}] {msg}", file=sys.stderr, flush=True)

    def begin(self) -> object:
        """The steps before cycle 1 (none by default); returns what cycle 1 starts from."""
        return None

    def cycle(self, c: int, state: object) -> object:
        """Cycle ``c``'s steps, from ``state`` (what the cycle before left); returns what the next starts from."""
        raise NotImplementedError

    def run(self, n: int) -> list[Step]:
        """Run (or reuse) every step of ``n`` cycles; return the steps in order."""
        state = self.begin()
        for c in range(1, n + 1):
            state = self.cycle(c, state)
        return self.steps

    def step(self, cycle: int, role: str, compute: Callable[[Path, dict], None], member: int | None = None,
             salt: str = "") -> Step:
        """Reuse the stored step, or compute it into the store (``Steps.run``); ``salt``: what else its key
        depends on."""
        name = f"c{cycle:02d}-{role}" + ("" if member is None else f"-{member}")
        e = self.chain.run(name, compute, salt)
        step = Step(e.name, cycle, role, member, e.key, e.path, e.meta, e.computed, e.seconds)
        self.steps.append(step)
        return step

    @staticmethod
    def keep(tmp: Path, meta: dict, model: PairModel, res: FitResult, **facts: object) -> None:
        """A training step's outputs: the model, its fit and dev curve, and ``facts`` (its scores)."""
        model.save(tmp / MODEL)
        meta.update(fit=res.summary(), curve=res.curve, **facts)


def best(steps: list[Step]) -> Step:
    """Highest dev Spearman; the earliest wins a tie."""
    return max(steps, key=lambda s: (s.meta["dev"]["spearman"], -steps.index(s)))


def write_plots(cycles_plot: Path, curve: Path, rows: list[list],
                parts: list[tuple[list[dict], int, Callable[[float], float]]]) -> None:
    """The stage's two cycle plots: the score per cycle (``rows``, cycle_row's) and a student's dev curve with the
    cycles laid end to end. ``parts``: each cycle's (curve, steps trained, its epochs as the x axis shows them)."""
    write_csv_rows(cycles_plot, CYCLE_COLUMNS, rows)
    out, offset = [], 0
    for points, steps, epoch in parts:
        out += [[offset + r["step"], round(epoch(r["epoch"]), 3), r["dev"]] for r in points]
        offset += steps
    write_csv_rows(curve, ["step", "epoch", "dev_spearman"], out)


def steps_report(steps: list[Step]) -> dict:
    """Which steps were computed and which reused from the store."""
    return {"computed": [s.name for s in steps if s.computed], "reused": [s.name for s in steps if not s.computed]}
