#!/usr/bin/env bash
# The RTT ensemble in a throwaway clone of HEAD (the project's workspace is left alone): one
# `dvc exp run -S recipe=rtt-ensemble` per value of WEIGHTS (the sub-models are trained once: the
# second run changes only ensemble.weights, so DVC reruns label, distill and evaluate alone).
# Each run's wall time and metrics go to benchmarks/results/rtt_ensemble.jsonl in the clone.
#   WEIGHTS="mean softmax" benchmarks/rtt_ensemble.sh -S data.dataset=stsb -S data.source=... [more -S]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=${WORK:-$(mktemp -d /tmp/pldistill-rtt.XXXX)}
WEIGHTS=${WEIGHTS:-mean softmax}
export PATH="$ROOT/.venv/bin:$PATH"

git clone -q "$ROOT" "$WORK/repo"
cd "$WORK/repo"
mkdir -p benchmarks/results

for w in $WEIGHTS; do
  t0=$(date +%s.%N)
  dvc exp run -S recipe=rtt-ensemble -S "ensemble.weights=$w" "$@" >"$WORK/$w.log" 2>&1
  t1=$(date +%s.%N)
  python - "$w" "$t0" "$t1" <<'PY' | tee -a benchmarks/results/rtt_ensemble.jsonl
import json, sys
w, t0, t1 = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
m = lambda n: json.load(open(f"metrics/{n}.json"))
ev, t, lab, d = m("eval"), m("teacher"), m("label"), m("distill")
print(json.dumps({
    "weights": w, "positives": t["positives"], "members": t["members"], "ensemble_weights": lab["ensemble"]["weights"],
    "sentences": d["sentences"], "student_fit": {k: d[k] for k in ("best_dev", "best_step", "steps", "train_seconds")},
    "eval": {k: ev[k] for k in ("bi", "ensemble", "submodels")}, "baseline": ev["baseline"],
    "label_embed_s": lab["ensemble"]["embed_seconds"], "exp_run_wall_s": round(t1 - t0, 1),
}))
PY
done
echo "results: $WORK/repo/benchmarks/results"
