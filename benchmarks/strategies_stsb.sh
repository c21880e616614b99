#!/usr/bin/env bash
# Every sampling strategy on STS Benchmark with the bundled MiniLM, one `dvc exp run` each, in a
# throwaway clone of HEAD (the project's own workspace is left alone). Prints one JSON line per
# strategy and writes benchmarks/results/strategies_stsb.jsonl in the clone.
#   benchmarks/strategies_stsb.sh [extra -S overrides...]
# Shared across strategies (cached by DVC after the first run): download, augment, gold, teacher.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
ARCHIVE=${ARCHIVE:-$ROOT/data/downloads/Stsbenchmark.tar.gz}
WORK=${WORK:-$(mktemp -d /tmp/pldistill-strategies.XXXX)}
STRATEGIES=${STRATEGIES:-"none bm25 kde semantic bm25+semantic random"}
export PATH="$ROOT/.venv/bin:$PATH"

git clone -q "$ROOT" "$WORK/repo"
cd "$WORK/repo"
mkdir -p benchmarks/results
for s in $STRATEGIES; do
  t0=$(date +%s.%N)
  dvc exp run -q -S data.dataset=stsb -S "data.source=$ARCHIVE" -S "sample.strategy=$s" "$@" >"$WORK/$s.log" 2>&1
  t1=$(date +%s.%N)
  python - "$s" "$t0" "$t1" <<'PY' | tee -a benchmarks/results/strategies_stsb.jsonl
import json, sys
s, t0, t1 = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
m = lambda n: json.load(open(f"metrics/{n}.json"))
ev, lab, smp, dst = m("eval"), m("label"), m("sample"), m("distill")
print(json.dumps({
    "strategy": s, "silver": lab["silver_pairs"], "kl_gold_silver": lab["kl_gold_silver"],
    "kde": lab.get("kde"), "found_by": smp["found_by"],
    "bi_test_spearman": ev["bi"]["test"]["spearman"], "bi_dev_spearman": ev["bi"]["dev"]["spearman"],
    "gold_only_test_spearman": ev["baseline"]["gold"]["test"]["spearman"],
    "teacher_test_spearman": ev["cross"]["test"]["spearman"],
    "sample_s": smp["seconds"], "label_s": lab["label_seconds"], "train_s": dst["train_seconds"],
    "exp_run_wall_s": round(t1 - t0, 1),
}))
PY
  cp metrics/plots/score-density.csv "benchmarks/results/score-density-${s/+/-}.csv"
done
echo "results: $WORK/repo/benchmarks/results"
