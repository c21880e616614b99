"""What a run prints (issue 77): one line a stage when it ends, what it chose and its figure (``line``, read from the
report it wrote; pldistill.run.runtime prints it); the whole report stays in metrics/<stage>.json and is printed too
with ``PLDISTILL_REPORTS=1`` (`make run REPORTS=1`), with the lines behind a choice (each cut tried, each export
made: ``detail``); progress bars, ours and the libraries', only on a terminal; each hint once. Standard library
only (tqdm when its bars are turned off): a data stage imports it."""

from __future__ import annotations

import contextlib
import io
import os
import sys
from collections.abc import Callable, Iterator

REPORTS_ENV = "PLDISTILL_REPORTS"  # 1: print each stage's report and the lines behind its choice
_HINTED: set[str] = set()  # hints already given in this process


def reports() -> bool:
    """Whether the whole reports and the detail lines are printed (``PLDISTILL_REPORTS=1``)."""
    return os.environ.get(REPORTS_ENV, "").strip().lower() not in ("", "0", "false", "no")


def detail(message: str) -> None:
    """A line behind a stage's choice (each cut tried, each export made): printed with PLDISTILL_REPORTS=1 only."""
    if reports():
        print(message, flush=True)


def hint(key: str, message: str) -> None:
    """``message`` once in this process, however many times the same ``key`` comes (a model two candidates need)."""
    if key not in _HINTED:
        _HINTED.add(key)
        print(message, flush=True)


def on_terminal() -> bool:
    """Whether a person watches this process's output (stderr, where bars go, is a terminal)."""
    with contextlib.suppress(AttributeError, ValueError):
        return sys.stderr.isatty()
    return False


def bars_on_terminal_only() -> None:
    """Send every tqdm bar (ours, transformers' loading bars, the hub's) to nowhere when stderr is not a terminal:
    in a log a bar is one line of its updates joined by carriage returns, hundreds of characters no one reads.
    The bar is still made whole (code reads its ``desc``, which a disabled bar lacks), only not drawn; forced, not
    a default, as some callers pass their own ``file`` or ``disable=False``."""
    if on_terminal():
        return
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # read by libraries imported after this
    import tqdm

    init = tqdm.tqdm.__init__
    if getattr(init, "_off_terminal", False):
        return

    def quiet_init(self, *args, **kwargs) -> None:
        kwargs["file"] = _NOWHERE
        init(self, *args, **kwargs)

    quiet_init._off_terminal = True  # type: ignore[attr-defined]
    tqdm.tqdm.__init__ = quiet_init  # type: ignore[method-assign]


class _Nowhere(io.TextIOBase):
    """A text stream that keeps nothing (a bar drawn here is not drawn)."""

    def write(self, text: str) -> int:
        return len(text)


_NOWHERE = _Nowhere()


@contextlib.contextmanager
def library_output_off_terminal() -> Iterator[None]:
    """A library's own progress display on stdout (NNCF's rich bars while it quantises) kept off a log; on a
    terminal it shows as the library draws it."""
    if on_terminal() or reports():
        yield
        return
    with contextlib.redirect_stdout(io.StringIO()):
        yield


# -- the one line a stage prints: plain data in, a string out. A report of a shape a line does not know (another
# recipe's) still gets a line: the stage's name and where its report is.
def _n(x: object) -> str:
    return f"{x:,}" if isinstance(x, int) else str(x)


def _splits(rows: dict) -> str:
    return " / ".join(f"{_n(rows[s])} {s}" for s in ("train", "dev", "test") if s in rows)


def check(r: dict) -> str:
    return f"params.yaml {r['params']}"


def download(r: dict) -> str:
    drop = r.get("dropped_total", 0)
    return f"{r['dataset']} ({r['task']}): {_splits(r['rows'])} pairs, {_n(drop)} rows dropped"


def augment(r: dict) -> str:
    dropped = sum(v for v in r.get("dropped", {}).values() if isinstance(v, int))
    rtt = r.get("rtt", {}).get("backend", "none")
    return (f"{_splits(r['rows_out'])} pairs kept, {_n(dropped)} dropped"
            + (f"; round-trip paraphrases by {rtt}" if rtt != "none" else ""))


def cut(r: dict) -> str:
    if r.get("kind") == "static":
        return f"a static start from {r.get('from', '?')}, {r.get('dims', '?')} dims: dev {r.get('dev')} untrained"
    if r.get("layers") is None:
        return "no cut: the student keeps every layer"
    if r.get("chosen_by") != "dev":
        return f"layers {r['layers']}, as student.layers gives"
    return (f"layers {r['layers']} of {r['of']}, the best of {r['cuts']} cuts on dev: {r['dev']} untrained "
            f"(the whole model {r['whole_dev']})")


def gold(r: dict) -> str:
    return f"the gold-only baseline on {_n(r['train_pairs'])} gold pairs: dev {r['best_dev']}"


def sample(r: dict) -> str:
    return f"{r['strategy']}: {_n(r['candidates'])} pairs for the teacher to label"


def teacher(r: dict) -> str:
    cands = r.get("candidates") or []
    skipped = sum("skipped" in c for c in cands)
    how = "fine-tuned on gold" if r.get("finetuned") else "as given"
    of = f", the best on dev of {len(cands) - skipped} tried" if len(cands) - skipped > 1 else ""
    return (f"{r['model']} {how}: dev {r['dev']['spearman' if 'spearman' in r['dev'] else 'auc']}{of}"
            + (f" ({skipped} not installed)" if skipped else ""))


def embed(r: dict) -> str:
    if not r.get("epochs"):
        return "off (embed.epochs 0)"
    start, after = r["start"]["dev"], r["after"]["dev"]
    metric = next(iter(after))
    return f"{_n(r['sentences'])} sentences learnt from the teacher: dev {start[metric]} -> {after[metric]}"


def label(r: dict) -> str:
    return (f"{_n(r['silver_pairs'])} silver pairs labelled by the teacher, mean score {r['silver_score_mean']} "
            f"(gold's {r['gold_score_mean']})")


def distill(r: dict) -> str:
    pairs = " + ".join(f"{_n(r[k])} {k.split('_')[0]}" for k in ("gold_pairs", "silver_pairs") if k in r)
    return f"the student ({r['recipe']}) on {pairs} pairs: dev {r['best_dev']}"


def export(r: dict) -> str:
    made = list(r.get("formats", {}))
    failed = list(r.get("failed", {}))
    return (f"{len(made)} forms: {', '.join(made) or 'none'}" + (f"; failed: {', '.join(failed)}" if failed else ""))


def evaluate(r: dict) -> str:
    metric = next(iter(r["bi"]["test"]))
    served = r.get("export", {}).get("chosen")
    speed = f", {r['bi']['speed']}x as fast as its whole start" if "speed" in r["bi"] else ""
    return f"the student: test {metric} {r['bi']['test'][metric]}{speed}" + (f"; serves {served}" if served else "")


LINES: dict[str, Callable[[dict], str]] = {f.__name__: f for f in (
    check, download, augment, cut, gold, sample, teacher, embed, label, distill, export, evaluate)}


def line(stage: str, report: dict, seconds: float | None = None, where: str | None = None) -> str:
    """``stage``'s line: its name, what it chose and its figure, its seconds; ``where``: its report's file, named
    when the report is of a shape the line does not know."""
    try:
        said = LINES[stage](report)
    except (KeyError, TypeError, IndexError, StopIteration, AttributeError):
        said = f"done; report in {where}" if where else "done"
    took = f" ({seconds:.0f} s)" if seconds is not None else ""
    return f"{stage}: {said}{took}"
