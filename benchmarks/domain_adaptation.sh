#!/usr/bin/env bash
# Domain adaptation both ways between STS Benchmark and the demo set, in a throwaway clone of HEAD:
#   STS-B -> demo: the teacher and the source-only bi-encoder learn STS-B; the student learns demo's
#                  training pairs as the teacher labels them;
#   demo -> STS-B: the other way round.
# Each direction is one `dvc exp run`; eval.json compares, on the target's test set, the adapted student
# (bi), the source-only student (baseline.gold), the teacher (cross) and the untrained start.
# Results go to benchmarks/results/domain_adaptation.jsonl in the clone.
#   STSB=data/downloads/Stsbenchmark.tar.gz benchmarks/domain_adaptation.sh [more -S for both runs]
# DIRECTIONS="stsb-to-demo demo-to-stsb" (the default) picks the runs.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
STSB=$(realpath "${STSB:-$ROOT/data/downloads/Stsbenchmark.tar.gz}")
WORK=${WORK:-$(mktemp -d /tmp/pldistill-da.XXXX)}
DIRECTIONS=${DIRECTIONS:-stsb-to-demo demo-to-stsb}
export PATH="$ROOT/.venv/bin:$PATH"

git clone -q "$ROOT" "$WORK/repo"
cd "$WORK/repo"
mkdir -p benchmarks/results

run() {  # name, then the -S options of that direction
  local name=$1; shift
  git checkout -q -- params.yaml  # exp run leaves the last run's params in the workspace
  t0=$(date +%s.%N)
  dvc exp run -n "$name" "$@" >"$WORK/$name.log" 2>&1
  t1=$(date +%s.%N)
  python - "$name" "$t0" "$t1" <<'PY' | tee -a benchmarks/results/domain_adaptation.jsonl
import json, sys
name, t0, t1 = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
m = lambda n: json.load(open(f"metrics/{n}.json"))
ev, dl, g, t, d = m("eval"), m("download"), m("gold"), m("teacher"), m("distill")
print(json.dumps({
    "run": name, "source": dl["adapt"]["dataset"], "target": dl["dataset"],
    "source_rows": dl["adapt"]["rows"], "target_rows": dl["rows"],
    "teacher": {k: t[k] for k in ("train_pairs", "best_dev", "best_step", "steps", "train_seconds")},
    "source_only": {k: g[k] for k in ("train_pairs", "best_dev", "best_step", "steps", "train_seconds")},
    "student": {k: d[k] for k in ("silver_pairs", "best_dev", "best_step", "steps", "train_seconds")},
    "test": {"adapted_student": ev["bi"]["test"], "source_only_student": ev["baseline"]["gold"]["test"],
             "teacher": ev["cross"]["test"], "start": ev["baseline"]["start"]["test"],
             "jaccard": ev["baseline"]["jaccard"]["test"]},
    "dev": {"adapted_student": ev["bi"]["dev"], "source_only_student": ev["baseline"]["gold"]["dev"]},
    "exp_run_wall_s": round(t1 - t0, 1),
}))
PY
}

for d in $DIRECTIONS; do
  case $d in
    stsb-to-demo) run "$d" -S adapt.dataset=stsb -S "adapt.source=$STSB" "$@" ;;
    demo-to-stsb) run "$d" -S data.dataset=stsb -S "data.source=$STSB" -S adapt.dataset=demo "$@" ;;
    *) echo "unknown direction $d" >&2; exit 2 ;;
  esac
done
echo "results: $WORK/repo/benchmarks/results/domain_adaptation.jsonl"
