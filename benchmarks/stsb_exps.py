"""The README's STS Benchmark rows as DVC experiments: queue them (`dvc exp run --queue`), run the queue, tabulate.

Each row is the pipeline itself with `-S` settings: the data settings every row shares (STS-B, 1,000 gold training
pairs, the other training pairs given without their scores) and the row's own. Nothing here trains or caches
anything: DVC runs the experiments, and the table is read back from `dvc exp show --json`.

    python benchmarks/stsb_exps.py queue --rows default,gold-only --seeds 42,43,44  # then: dvc queue start
    python benchmarks/stsb_exps.py run --rows default-grouped --seeds 42  # one at a time (dvc exp run --temp)
    python benchmarks/stsb_exps.py run --rows serve --seeds 42,43,44  # the data settings only, today's default
    python benchmarks/stsb_exps.py run --rows corpus20k --seeds 42,43,44 --corpus /tmp/corpus.txt  # 20,000 of it
    python benchmarks/stsb_exps.py run --rows corpus --seeds 42 --corpus /tmp/corpus.txt  # benchmarks/corpus.py's
    python benchmarks/stsb_exps.py run --rows static,static-plain --seeds 42,43,44  # a static student
    python benchmarks/stsb_exps.py run --rows static-default,static-soup --seeds 42,43,44  # the default teacher choice
    python benchmarks/stsb_exps.py run --rows static-ft-soup --seeds 42,43,44  # the start: MiniLM tuned on gold
    python benchmarks/stsb_exps.py run --rows static-ft-wise --seeds 42,43,44  # and mixed with its start (WiSE-FT)
    python benchmarks/stsb_exps.py table                            # Markdown, mean over seeds
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ARCHIVE = ROOT.parent / "shared" / "data" / "Stsbenchmark.tar.gz"
# The data settings of every row (a queued experiment runs in a temporary copy: the archive's path is absolute).
DATA = {"data.dataset": "stsb", "data.max_train": 1000, "data.unscored": "rest"}
MPNET_FT = {"teacher.model": "bundled:all-mpnet-base-v2", "teacher.finetune": "true", "teacher.epochs": 4,
            "teacher.evals_per_epoch": 1, "embed.teacher": "bundled:all-MiniLM-L6-v2"}
# every row but the last three was measured before student.wise (true since): they pin it off, as they ran
BEFORE_WISE = {"student.wise": "false"}
# static rows measured before static.finetune (a start from the whole MiniLM as given) pin it to 0, as they ran
STATIC = {**BEFORE_WISE, "student.kind": "static", "static.finetune": 0, "teacher.model": "bundled:all-mpnet-base-v2",
          "teacher.candidates": "[]"}
CORPUS = "{corpus}"  # a row's placeholder for --corpus, an absolute path (a queued run is in a temporary copy)
ROWS: dict[str, dict[str, object]] = {
    "default": {**BEFORE_WISE},  # the data settings only, as they were before student.wise
    "gold-only": {**BEFORE_WISE, "sample.strategy": "none", "embed.epochs": 0},
    "embed-given": {**BEFORE_WISE, "sample.strategy": "given"},
    "embed-given-mpnet-ft": {**BEFORE_WISE, "sample.strategy": "given", **MPNET_FT},
    # the default with the 147,055-sentence corpus of benchmarks/corpus.py in the embedding step (--corpus): one pass
    # over its ~157k sentences is three times the steps of the default's five over the task's ~10k; four dev
    # evaluations in it keep the best point
    "corpus": {**BEFORE_WISE, "embed.corpus": CORPUS, "embed.epochs": 1, "embed.evals_per_epoch": 4},
    # student.kind static (docs/static-student.md): token vectors distilled from the whole MiniLM, taught by MPNet as
    # given (its labels of the given pairs; MPNet fine-tuned is not tried: its half hour would be most of the row)
    "static": STATIC,
    # the default recipe's teacher choice (MiniLM and MPNet as given, MPNet fine-tuned on gold, scored on dev) labelling
    # for a static student: the data settings and student.kind alone
    "static-default": {**BEFORE_WISE, "student.kind": "static", "static.finetune": 0},
    # and a soup of three student seeds (student.soup): each trains to its end, their average kept where it beats
    # the best seed on dev (else that seed); the gold-only baseline the same
    "static-soup": {**BEFORE_WISE, "student.kind": "static", "static.finetune": 0, "student.seeds": 3,
                    "student.soup": "true"},
    # and the start distilled from the whole MiniLM fine-tuned on the gold pairs first (static.finetune: 4 epochs, the
    # teacher section's step settings, the default since), whose embeddings stage embed learns
    "static-ft-soup": {**BEFORE_WISE, "student.kind": "static", "static.finetune": 4, "student.seeds": 3,
                       "student.soup": "true"},
    # the same, its embedding step on the task's sentences and the corpus's (--corpus): two passes, eight dev points
    "static-corpus": {**STATIC, "embed.corpus": CORPUS, "embed.epochs": 2, "embed.evals_per_epoch": 4},
    # the plain Model2Vec-style start: SIF weights from the vocabulary's order, no task sentence counted (its start
    # column); its student column is that start trained on the gold pairs alone
    "static-plain": {**BEFORE_WISE, "student.kind": "static", "static.finetune": 0, "static.weights": "zipf",
                     "teacher.candidates": "[]", "sample.strategy": "none", "embed.epochs": 0},
    # the cross-encoder benchmarks/label_throughput.py and prefetch.py time (models/teacher/member-00 of
    # `dvc exp apply cross-2000-s42`): MiniLM fine-tuned on 2,000 gold pairs, 1 epoch, lr 5e-5; nothing else runs
    "cross-2000": {**BEFORE_WISE, "data.max_train": 2000, "teacher.kind": "cross", "teacher.finetune": "true",
                   "teacher.epochs": 1, "teacher.lr": 5e-5, "teacher.evals_per_epoch": 1, "teacher.candidates": "[]",
                   "sample.strategy": "none", "embed.epochs": 0},
    # the data settings only since student.wise (its default: each bi-encoder mixed with its start where dev prefers a
    # mix): what a user gets
    "default-wise": {},
    # and the corpus, as row corpus (--corpus)
    "corpus-wise": {"embed.corpus": CORPUS, "embed.epochs": 1, "embed.evals_per_epoch": 4},
    # static-ft-soup with the student's weights mixed with its start's where dev prefers a mix (student.wise, the
    # default since: WiSE-FT), after the soup
    "static-ft-wise": {"student.kind": "static", "static.finetune": 4, "student.seeds": 3, "student.soup": "true"},
}


def pin_before(rows: dict[str, dict[str, object]], old: dict[str, object]) -> dict[str, dict[str, object]]:
    """Every row so far, ``old`` added where the row does not set the key itself: a default changed after they ran."""
    return {name: {**old, **row} for name, row in rows.items()}


# every row above was measured with random batches, before the embedding step (embed.group_by_length) and then the
# pair steps (teacher.group_by_length, student.group_by_length) cut batches of similar length: they pin them off, as
# they ran. default-grouped: the data settings only since (what a user gets)
RANDOM_BATCHES = {"embed.group_by_length": "false", "teacher.group_by_length": "false",
                  "student.group_by_length": "false"}
# every row above and default-grouped ran the embedding step at lr 2e-4 (embed.lr, 5e-4 since): they pin it, as they ran
EMBED_LR_BEFORE = {"embed.lr": "2e-4"}
ROWS = pin_before(ROWS, {**RANDOM_BATCHES, **EMBED_LR_BEFORE})
ROWS["default-grouped"] = EMBED_LR_BEFORE
# the data settings only since (what a user gets), the new rate spelled out
ROWS["embed-lr"] = {"embed.lr": "5e-4"}
# and 20,000 of the corpus's sentences (--corpus) in two passes of the embedding step, the demo's pairs a held-out set
# (evaluate.extra): a third of the corpus row's time
ROWS["corpus20k"] = {"embed.corpus": CORPUS, "embed.max_corpus": 20000, "embed.epochs": 2, "embed.evals_per_epoch": 2,
                     "evaluate.extra": "[{name: demo, data: {dataset: demo}}]"}
# every row above without its own embed.epochs ran the embedding step for 5 epochs (3 since): they pin it, as they ran
EMBED_EPOCHS_BEFORE = {"embed.epochs": 5}
ROWS = pin_before(ROWS, EMBED_EPOCHS_BEFORE)
# the data settings only since (what a user gets), the 3 epochs spelled out
ROWS["embed-e3"] = {"embed.epochs": 3}
# every row above without its own embed.lr ran the embedding step at 5e-4 (1e-3 since, in 2 epochs): they pin it
EMBED_LR_5E4 = {"embed.lr": "5e-4"}
ROWS = pin_before(ROWS, EMBED_LR_5E4)
# the data settings only since (what a user gets), the 2 epochs at lr 1e-3 spelled out
ROWS["embed-e2"] = {"embed.epochs": 2, "embed.lr": "1e-3"}
# every row above ran the embedding step on the sentences alone (embed.variants, auto since: 3 variants of each
# sentence below 20,000 sentences, in 1 epoch): they pin it off, as they ran
ROWS = pin_before(ROWS, {"embed.variants": 0})
# the data settings only since (what a user gets), the variants and the 1 epoch spelled out: auto was 3 variants
ROWS["embed-v3"] = {"embed.variants": 3, "embed.epochs": 1}
# the data settings only since (what a user gets): auto is 1 variant of each sentence (make run's time on a CPU
# without AVX-512), with the stages run by dvc exp run as ever
ROWS["embed-v1"] = {"embed.variants": "auto", "embed.epochs": 1}
# the data settings only, with stage export and the speed on one thread each (docs/serving.md): what a user gets
ROWS["serve"] = {}
# and a static student from -S student.kind=static alone: its Model2Vec exports (float32, float16, int8)
ROWS["serve-static"] = {"student.kind": "static"}
# The columns read back: eval.json keys (dotted) -> the table's header.
COLUMNS = {"bi.test.spearman": "student", "bi.dev.spearman": "dev", "bi.speed": "speed",
           "baseline.gold.test.spearman": "gold-only", "baseline.start.test.spearman": "start"}


def served(row: dict[str, object]) -> dict[str, object]:
    """The served export's columns: its form, test score and speed (rows made before stage export: none)."""
    chosen = row.get("export.chosen")
    if chosen is None:
        return {}
    at = "bi" if chosen == "torch" else f"export.{chosen}"
    return {"served": chosen, "served test": row.get(f"{at}.test.spearman"), "served speed": row.get(f"{at}.speed")}


def settings(row: str, seed: int, archive: Path, corpus: Path | None = None) -> list[str]:
    """The `-S` arguments of ``row`` at ``seed``."""
    own = dict(ROWS[row])
    for k, v in own.items():
        if v == CORPUS:
            if corpus is None or not corpus.is_file():
                raise SystemExit(f"row {row}: --corpus {corpus} is not a file; build it first: python "
                                 f"benchmarks/corpus.py --out /tmp/corpus.txt --stsb {archive}")
            own[k] = str(corpus.resolve())
    values = {**DATA, "data.source": str(archive.resolve()), **own, "seed": seed}
    return [arg for k, v in values.items() for arg in ("-S", f"{k}={v}")]


def exp_name(row: str, seed: int) -> str:
    return f"{row}-s{seed}"


def flat(d: dict, prefix: str = "") -> dict[str, object]:
    """Nested dicts as dotted keys."""
    out: dict[str, object] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        out.update(flat(v, f"{key}.") if isinstance(v, dict) else {key: v})
    return out


def experiments(shown: list[dict]) -> dict[str, dict[str, object]]:
    """Experiment name -> its flattened metrics/eval.json and teacher test score, from `dvc exp show --json`
    (baseline commits newest first: where a name ran on several, the newest commit's run is the one kept)."""
    found: dict[str, dict[str, object]] = {}

    def visit(node: dict) -> None:
        data = node.get("data") or {}
        metrics = (data.get("metrics") or {}).get("metrics/eval.json", {}).get("data")
        if node.get("name") and metrics:
            row = flat(metrics)
            teacher = next((k for k in ("cross", "teacher", "ensemble") if f"{k}.test.spearman" in row), None)
            row["teacher"] = row.get(f"{teacher}.test.spearman") if teacher else None
            found.setdefault(node["name"], row)  # the newest baseline's first: a row rerun on later code replaces it
        for child in node.get("experiments") or []:
            if child.get("executor"):  # queued or running: its data are still the baseline's
                continue
            for rev in child.get("revs") or [child]:
                visit(rev)

    for node in shown:
        visit(node)
    return found


def table(found: dict[str, dict[str, object]]) -> str:
    """One line per row: the mean over its seeds of each column, and the seeds it has."""
    header = ["row", "seeds", *COLUMNS.values(), "teacher", "served (per seed)"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in ROWS:
        runs = {name: r for name, r in found.items() if name.rsplit("-s", 1)[0] == row}
        if not runs:
            continue
        cells = []
        for key in [*COLUMNS, "teacher"]:
            vals = [float(r[key]) for r in runs.values() if isinstance(r.get(key), int | float)]
            cells.append(f"{statistics.mean(vals):.2f}" if vals else "—")
        seeds = ",".join(sorted(n.rsplit("-s", 1)[1] for n in runs))
        serve = [served(r) for r in runs.values() if served(r)]
        if serve:  # per seed: the form served, its test score and speed
            cells.append(" / ".join(f"{s['served']} {s['served test']} at {s['served speed']}x" for s in serve))
        lines.append(f"| {row} | {seeds} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("action", choices=["queue", "run", "table"])
    ap.add_argument("--rows", default=",".join(ROWS), help=f"some of {', '.join(ROWS)}")
    ap.add_argument("--seeds", default="42,43,44")
    ap.add_argument("--archive", type=Path, default=ARCHIVE, help="the official STS Benchmark archive")
    ap.add_argument("--corpus", type=Path, help="the sentences of row corpus (benchmarks/corpus.py --out)")
    a = ap.parse_args()
    if a.action == "table":
        # --all-commits: experiments made on earlier commits too (their names say the row and seed)
        shown = json.loads(subprocess.run(["dvc", "exp", "show", "--json", "--all-commits"], cwd=ROOT, check=True,
                                          capture_output=True, text=True).stdout)
        print(table(experiments(shown)))
        return
    for row in a.rows.split(","):
        if row not in ROWS:
            raise SystemExit(f"--rows: unknown row {row!r}; expected some of {', '.join(ROWS)}")
        for seed in map(int, a.seeds.split(",")):
            queue = ["--queue"] if a.action == "queue" else ["--temp"]  # --temp: the workspace stays as it is
            cmd = ["dvc", "exp", "run", *queue, "-n", exp_name(row, seed), *settings(row, seed, a.archive, a.corpus)]
            print(" ".join(cmd), flush=True)
            subprocess.run(cmd, cwd=ROOT, check=True)


if __name__ == "__main__":
    main()
