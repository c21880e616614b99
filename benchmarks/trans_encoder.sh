#!/usr/bin/env bash
# Trans-Encoder in a throwaway clone of HEAD (the project's workspace and store are left alone):
#   1. `dvc exp run -S recipe=trans-encoder -S cycles=$FIRST`            (cold)
#   2. `dvc exp run ... -S cycles=$SECOND`                               (resumes from the store)
#   3. the same cycles=$SECOND with an empty store, forced (`-f --downstream distill`: without it DVC's
#      run-cache restores step 2's identical result in seconds)               (cold, for the comparison)
# Each run's wall time and metrics go to benchmarks/results/trans_encoder.jsonl in the clone.
#   FIRST=3 SECOND=5 benchmarks/trans_encoder.sh [extra -S overrides...]
#   SECOND=0 skips steps 2 and 3.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=${WORK:-$(mktemp -d /tmp/pldistill-trans.XXXX)}
FIRST=${FIRST:-3}
SECOND=${SECOND:-5}
export PATH="$ROOT/.venv/bin:$PATH"

git clone -q "$ROOT" "$WORK/repo"
cd "$WORK/repo"
mkdir -p benchmarks/results

run() {  # run <label> <store> <cycles> [overrides...]
  local label=$1 store=$2 cycles=$3
  shift 3
  local t0 t1
  t0=$(date +%s.%N)
  PLDISTILL_STORE=$store dvc exp run -S recipe=trans-encoder -S "cycles=$cycles" "$@" >"$WORK/$label.log" 2>&1
  t1=$(date +%s.%N)
  python - "$label" "$t0" "$t1" <<'PY' | tee -a benchmarks/results/trans_encoder.jsonl
import json, sys
label, t0, t1 = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
m = lambda n: json.load(open(f"metrics/{n}.json"))
ev, d = m("eval"), m("distill")
print(json.dumps({
    "run": label, "cycles": d["cycles"], "init": d["init"], "pairs": d["pairs"],
    "start": d["start"], "per_cycle": d["per_cycle"], "selected": d["selected"],
    "eval": {k: ev[k] for k in ("bi", "cross")}, "baseline": ev["baseline"],
    "computed": d["steps"]["computed"], "reused": d["steps"]["reused"], "steps_s": d["steps"]["seconds"],
    "exp_run_wall_s": round(t1 - t0, 1),
}))
PY
  cp metrics/plots/cycles.csv "benchmarks/results/cycles-$label.csv"
}

run "cycles-$FIRST" "$WORK/store" "$FIRST" "$@"
if [ "$SECOND" != 0 ]; then
  run "cycles-$FIRST-then-$SECOND" "$WORK/store" "$SECOND" "$@"
  run "cold-cycles-$SECOND" "$WORK/cold-store" "$SECOND" -f --downstream distill "$@"
  echo "output hashes of the resumed and the cold run (equal when resuming changes nothing):"
  git for-each-ref --format='%(refname)' refs/exps | grep -v exec | while read -r ref; do
    echo "$ref $(git show "$ref:dvc.lock" | grep -A2 -E 'path: (models/bi|models/cross|data/pseudo)$' | grep md5 | sort -u | tr -d ' \n')"
  done
fi
echo "results: $WORK/repo/benchmarks/results"
