"""evaluate: score the student, the teacher and the baselines on dev and test (and on extra sets).

Regression: Spearman (primary) and Pearson x100; baselines: the untrained start, gold-only SBERT, word
overlap (Jaccard). Classification: AUC (primary), AUC(0.05), and F1 and accuracy at the threshold that
maximises F1 on dev (the same threshold applied to test); one more baseline, the majority label.
Speed: the student, its start, the gold-only baseline and the teacher score the same test pairs in turns with
the student's whole starting model (pldistill.ship.speed); each block gets ``speed``, the ratio to that model."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from pldistill.base import cleaning, schemas
from pldistill.base.bundled import resolve as resolve_spec
from pldistill.base.console import detail
from pldistill.base.device import cpu_flags
from pldistill.base.io import atomic_dir, machine_path, write_csv_rows, write_json, write_report
from pldistill.base.metrics import best_threshold, classification, correlation, jaccard, order_free, paired_gain
from pldistill.data import datasets
from pldistill.models.encoders import BiEncoder
from pldistill.params.config import Params, load_params
from pldistill.params.sections import EvaluateParams, ExtraSet
from pldistill.run.runtime import main
from pldistill.ship import speed
from pldistill.ship.export import MANIFEST
from pldistill.ship.served import Served, serve_copy
from pldistill.students.cut import resolve
from pldistill.teach import scoring


def _blocks(kind: scoring.TeacherKind, models: dict, splits: dict[str, pd.DataFrame], train: pd.DataFrame, task: str,
            ep: EvaluateParams, shuffles: int, seed: int) -> tuple[dict, dict, Callable[[str], dict]]:
    """eval.json's blocks for one dataset's dev and test splits, every model's predictions, and how a block is made
    from them (a model's name in the predictions -> its block). ``shuffles`` > 0: baseline.order_free, the teacher's
    scores with each pair's words shuffled that many times (their mean), the shuffles drawn from ``seed``."""
    preds = {name: {s: m.score(df["sentence1"], df["sentence2"], ep.batch_size, ep.bf16, progress=True)
                    for s, df in splits.items()} for name, m in models.items()}
    preds["jaccard"] = {s: jaccard(df["sentence1"], df["sentence2"]) for s, df in splits.items()}
    baselines = ["start", "gold", "jaccard"]
    if shuffles:
        rng = np.random.default_rng(seed)
        teacher = models["cross"]
        score = lambda a, b: teacher.score(a, b, ep.batch_size, ep.bf16)  # noqa: E731
        preds["order_free"] = {s: order_free(score, list(df["sentence1"]), list(df["sentence2"]), shuffles, rng)
                               for s, df in splits.items()}
        baselines.append("order_free")
    if task == "classification":  # every pair gets the training set's more frequent label
        majority = float(train["score"].mean() >= 0.5)
        preds["majority"] = {s: np.full(len(df), majority) for s, df in splits.items()}
        baselines.append("majority")

    def block(name: str) -> dict:
        if task == "regression":
            return {s: correlation(preds[name][s], df["score"]) for s, df in splits.items()}
        t = 0.5 if name == "majority" else best_threshold(preds[name]["dev"], splits["dev"]["score"])
        return {**{s: classification(preds[name][s], df["score"], t) for s, df in splits.items()},
                "threshold": round(t, 6)}

    return {"bi": block("bi"), **kind.blocks(models["cross"], block),
            "baseline": {b: block(b) for b in baselines}}, preds, block


GAINS = {"gold": "gold", "teacher": "cross"}  # eval.json gain.<name>: the student's lead over that model's predictions


def _gains(preds: dict, splits: dict[str, pd.DataFrame], task: str, rounds: int, seed: int) -> dict:
    """The student's lead over gold-only and over the teacher, per split, with its paired-bootstrap 95% interval."""
    rng = np.random.default_rng(seed)
    return {name: {s: paired_gain(preds["bi"][s], preds[model][s], df["score"], task, rounds, rng)
                   for s, df in splits.items()} for name, model in GAINS.items()}


def _extra_set(x: ExtraSet, params: Params) -> tuple[dict[str, pd.DataFrame], pd.DataFrame, str]:
    """An extra evaluation set's dev and test (normalised as stage augment normalises), train, task."""
    loaded = datasets.load(x.data, params.seed)
    form = params.augment.unicode_form
    splits = {s: cleaning.normalise_pairs(loaded.splits[s], form) for s in ("dev", "test")}
    datasets.check_splits(splits, f"evaluate.extra {x.name}: {loaded.source}", datasets.MEASURABLE)
    return splits, loaded.splits["train"], datasets.task_of(x.data, loaded.splits["train"])


# The models timed, by their name in ``models`` -> their block in eval.json (None: the teacher's, whatever the
# recipe names it: cross, teacher or ensemble)
TIMED = {"bi": ("bi",), "start": ("baseline", "start"), "gold": ("baseline", "gold"), "cross": None}
PLOT_NAMES = {"bi": "student", "start": "start", "gold": "gold-only", "cross": "teacher"}  # metrics/plots/speed/*.csv


def _twin(timing: dict) -> str:
    """" (as the student)" where a model was not timed: it does the same arithmetic as that one."""
    twin = timing.get("timed_as")
    return "" if twin is None else f" (as the {twin})"


def _place(result: dict, name: str) -> dict:
    """The block of eval.json that model ``name`` reports in (the teacher's, whatever the recipe names it)."""
    teacher_block = next(k for k in result if k not in ("bi", "baseline", "gain", "extra", "overlap", "export"))
    block = result
    for key in TIMED.get(name) or (teacher_block,):
        block = block[key]
    return block


def _speeds(params: Params, reference: str, models: dict, served: dict, result: dict, test: pd.DataFrame,
            plots: Path | None) -> dict:
    """Time the models and the exports (``served``) against ``reference`` whole in torch fp32 (evaluate.speed_*
    settings, pldistill.ship.speed): ``speed`` and its interval into each one's block of ``result``, a point per model
    (test score, speed) into ``plots`` for `dvc plots`; return the details for the machine report ({} when off)."""
    ep, sp = params.evaluate, params.student
    if ep.speed_pairs == 0:
        return {}
    pairs = test.iloc[: ep.speed_pairs]
    whole = BiEncoder.load(reference, sp.max_length, sp.trust_remote_code)
    whole.use_backend(ep.backend)  # as the student: torch for a timing's small calls, in fp32 (bf16 off below)
    static = sp.kind == "static"  # a static student, its start, gold-only and exports timed as their users encode
    everyone = {**{name: models[name] for name in TIMED}, **{f"export/{f}": m for f, m in served.items()}}
    sizes = {name: ep.static_batch_size for name in everyone if name != "cross"} if static else {}
    s1, s2 = list(pairs["sentence1"]), list(pairs["sentence2"])
    with speed.threads(ep.speed_threads):  # the exports' sessions take the threads they are made with
        timing = {**everyone, **{f"export/{f}": Served(m.folder, f) for f, m in served.items()}}
    timed = speed.ratios(whole, timing, s1, s2, ep.batch_size, False, ep.speed_rounds, ep.speed_min_seconds,
                         sizes, ep.speed_chunk, params.seed, ep.speed_threads)
    for t in timed.values():  # pldistill.ship.speed's twins, by the names of the plots
        if "timed_as" in t:
            t["timed_as"] = PLOT_NAMES.get(t["timed_as"], t["timed_as"] if t["timed_as"] in everyone else "reference")
    primary = "spearman" if "spearman" in result["bi"]["test"] else "auc"
    rows = {}
    for name in everyone:
        block = result["export"][name.split("/", 1)[1]] if name.startswith("export/") else _place(result, name)
        block.update({k: timed[name][k] for k in ("speed", "speed_low", "speed_high")})
        rows[name] = [timed[name]["speed"], block["test"][primary]]
    sentences = list(dict.fromkeys(s1))[:LATENCY_SENTENCES]
    lat = speed.latency({"reference": whole, "student": models["bi"], **{n: m for n, m in everyone.items()
                                                                        if n.startswith("export/")}},
                        sentences, False)
    at = f"; the static models in batches of {ep.static_batch_size}" if sizes else ""
    cores = "every core" if ep.speed_threads is None else f"{ep.speed_threads} thread(s)"
    detail(f"speed, as a ratio to {reference} whole in torch fp32 ({len(pairs)} test pairs in turns of "
          f"{ep.speed_chunk}, {ep.speed_rounds} rounds, batches of {ep.batch_size}{at}, {cores}; 95% intervals): "
          + ", ".join(f"{PLOT_NAMES.get(n, n)} {t['speed']} [{t['speed_low']}, {t['speed_high']}]{_twin(t)}"
                      for n, t in timed.items()))
    if plots is not None:
        with atomic_dir(plots) as tmp:
            for name, row in rows.items():
                if not name.startswith("export/"):
                    write_csv_rows(tmp / f"{PLOT_NAMES[name]}.csv", ["speed", "test"], [row])  # test: the primary
            write_csv_rows(tmp / "exports.csv", ["speed", "test", "format"],
                           [[*row, name.split("/", 1)[1]] for name, row in rows.items() if name.startswith("export/")])
    return {"speed": {"pairs": len(pairs), "rounds": ep.speed_rounds, "chunk": ep.speed_chunk,
                      "min_seconds": ep.speed_min_seconds, "batch_size": ep.batch_size,
                      **({"static_batch_size": ep.static_batch_size} if sizes else {}),
                      "reference": f"{reference} whole, torch fp32",
                      "threads": ep.speed_threads or torch.get_num_threads(), "cores": os.cpu_count(),
                      "tokenizers_parallelism": ep.speed_threads != 1, "cpu": cpu_flags(),
                      **{PLOT_NAMES.get(n, n): t for n, t in timed.items()}},
            "latency": {"batch_size": 1, "threads": torch.get_num_threads(), **lat},
            "bytes": {"student": _weights_bytes(Path(models["bi"].name)),
                      "reference": _weights_bytes(Path(resolve_spec(reference))),
                      **{f"export/{f}": m.bytes for f, m in served.items()}}}


LATENCY_SENTENCES = 64  # test sentences each served model encodes one at a time, in turns, for its latency


def _weights_bytes(folder: Path) -> int | None:
    """A torch model's safetensors bytes (every module's), or None where the folder is not local."""
    return sum(f.stat().st_size for f in folder.rglob("*.safetensors")) if folder.is_dir() else None


def _exports(params: Params, export: Path | None, preds: dict, splits: dict, task: str, block) -> tuple[dict, dict]:
    """Each export of models/export scored on dev and test (eval.json export.<format>), and the loaded ones."""
    if export is None or not (export / MANIFEST).is_file():
        return {}, {}
    manifest = json.loads((export / MANIFEST).read_text())
    out: dict = {"failed": dict(manifest["failed"]), "skipped": dict(manifest["skipped"])}
    served = {}
    for fmt, made in manifest["formats"].items():
        try:
            m = Served(export / fmt, fmt)
        except Exception as err:  # cannot run here (a runtime missing): said, never served
            out["failed"][fmt] = f"{type(err).__name__}: {str(err).strip().splitlines()[0] if str(err) else ''}"
            continue
        preds[f"export/{fmt}"] = {s: m.score(df["sentence1"], df["sentence2"], params.evaluate.batch_size,
                                             False, progress=True) for s, df in splits.items()}
        drift = correlation(preds[f"export/{fmt}"]["dev"], preds["bi"]["dev"])["spearman"] / 100
        out[fmt] = {**block(f"export/{fmt}"), "bytes": made["bytes"], "drift": round(drift, 5),
                    "gate": "passes" if drift >= params.export.gate else "fails"}
        served[fmt] = m
    return out, served


def _choose(params: Params, result: dict) -> str:
    """The fastest export that passes the drift gate and whose dev score is within export.max_drop of the student's;
    torch (the student as it is) where none is."""
    primary = "spearman" if "spearman" in result["bi"]["dev"] else "auc"
    floor = result["bi"]["dev"][primary] - params.export.max_drop
    ok = {f: b for f, b in result.get("export", {}).items() if isinstance(b, dict) and "dev" in b
          and b["gate"] == "passes" and b["dev"][primary] >= floor}
    return max(ok, key=lambda f: (ok[f].get("speed", 0.0), -ok[f]["bytes"])) if ok else "torch"


def evaluate(params: Params, clean: Path, bi: Path, cross: Path, teacher: Path, gold: Path, out: Path,
             predictions: Path, cut: Path | None = None, speed_plots: Path | None = None, export: Path | None = None,
             serve: Path | None = None) -> dict:
    """Write metrics/eval.json and test predictions for plots.

    eval.json: {"bi", "cross", "baseline": {"start", "gold", "jaccard"[, "majority"][, "order_free"]}}, each {"dev",
    "test"}; "gain": {"gold", "teacher"}, each {"dev", "test"}: the student's lead over that model in the primary
    metric, with "low" and "high", its paired-bootstrap 95% interval (evaluate.gain_rounds resamples of the pairs;
    low > 0: clearly ahead) (classification blocks add the dev-chosen "threshold"); baseline.start is the student's
    starting model untrained (pruned like the student), baseline.gold the bi-encoder trained on gold only (SBERT);
    baseline.order_free (a static student) the teacher with each pair's words shuffled (evaluate.order_free times).
    A teacher that is not one cross-encoder gets "teacher" (and "members", one block each) in place of
    "cross"; recipe rtt-ensemble's: "ensemble" (the teacher) and "submodels". Each set in
    evaluate.extra gets the same blocks under "extra": {name: ...}. "overlap": {"dev_in_train",
    "test_in_train"}: pairs also in train (either order, any case or spacing); 0 for a table we split.
    In the predictions plot, column `cross` is the teacher's score, whichever kind it is.
    """
    # the speed reference: student.model whole, the transformer a cut or static student stands in for; the same
    # whichever start or layers stage cut kept, so runs compare (resolve puts the start in student.model)
    reference = params.student.model
    params = resolve(params, cut)  # student.layers auto: the start is cut as stage cut chose
    ep = params.evaluate
    splits = {s: schemas.read(clean / f"{s}.parquet", schemas.PAIRS) for s in ("dev", "test")}
    train = schemas.read(clean / "train.parquet", schemas.PAIRS)
    datasets.check_splits(splits, str(clean), datasets.MEASURABLE)  # no metric from a split that has none
    extra = {x.name: _extra_set(x, params) for x in ep.extra}  # read first: a bad source fails fast
    kind = scoring.teacher_kind(params)
    models = {
        "bi": scoring.student(params, bi),
        "cross": kind.load(params, cross, teacher),
        "gold": BiEncoder.load(str(gold), params.student.max_length),
        "start": BiEncoder.load(params.student.model, params.student.max_length, params.student.trust_remote_code,
                                params.student.layers),
    }
    models.update(kind.parts(models["cross"]))  # an ensemble's members, each scored on its own too
    for model in models.values():
        model.use_backend(ep.backend)
    task = datasets.task_of(params.data, train)
    shuffles = ep.order_free if params.student.kind == "static" else 0  # what word order is worth to the teacher
    result, preds, block = _blocks(kind, models, splits, train, task, ep, shuffles, params.seed)
    exported, served = _exports(params, export, preds, splits, task, block)
    if exported:
        result["export"] = exported
    if ep.gain_rounds:
        result["gain"] = _gains(preds, splits, task, ep.gain_rounds, params.seed)
    if extra:
        result["extra"] = {name: _blocks(kind, models, x_splits, x_train, task, ep, shuffles, params.seed)[0]
                           for name, (x_splits, x_train, task) in extra.items()}
    result["overlap"] = datasets.overlap({"train": train, **splits})  # 0 and 0 for a table we split
    timing = _speeds(params, reference, models, served, result, splits["test"], speed_plots)
    if exported:
        result["export"]["chosen"] = _choose(params, result)
        if serve is not None:
            chosen = result["export"]["chosen"]
            serve_copy(chosen, bi if chosen == "torch" else export / chosen, serve, result, params.data.name)
    write_report(out, result)
    if timing:  # (after the report, which clears a machine file it has nothing for)
        write_json(machine_path(out), timing)

    test = splits["test"]
    write_csv_rows(predictions, ["gold", "bi", "cross", "start", "gold_bi"],
                   [[round(g, 4), *(round(float(preds[m]["test"][i]), 4) for m in ("bi", "cross", "start", "gold"))]
                    for i, g in enumerate(test["score"])])
    return result


if __name__ == "__main__":
    main(evaluate, ["clean", "bi", "cross", "teacher", "gold", "out", "predictions", "cut", "speed_plots", "export",
                    "serve"],
         load=load_params)
