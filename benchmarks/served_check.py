"""The served student (models/serve) loaded in another Python environment, one without pldistill, and scored on the
test pairs: its test Spearman against the one metrics/eval.json reports for it.

Make the environment fresh, with only what the card names (`pip install torch==2.13.0` first here, where a plain
torch would pull CUDA), then point --python at it:

    python3 -m venv /tmp/serve-env && /tmp/serve-env/bin/pip install torch==2.13.0 "sentence-transformers[openvino]"
    python benchmarks/served_check.py --python /tmp/serve-env/bin/python       # the served form, as the card says
    python3 -m venv /tmp/m2v-env && /tmp/m2v-env/bin/pip install model2vec    # a static student: Model2Vec only
    python benchmarks/served_check.py --python /tmp/m2v-env/bin/python --serve models/export/model2vec-int8

The environment's script imports sentence-transformers (with the backend's file and options the card gives) or
model2vec, and numpy; the Spearman correlation is computed there with numpy alone.
"""

from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pldistill.ship.export import BACKEND, FILES, STATIC  # noqa: E402  (after the path: run as a script)

SCRIPT = r'''
import csv, json, sys
import numpy as np

spec = json.loads(sys.argv[1])
with open(spec["pairs"], newline="", encoding="utf-8") as f:
    rows = list(csv.reader(f, delimiter="\t"))
s1, s2, gold = [r[0] for r in rows], [r[1] for r in rows], np.array([float(r[2]) for r in rows])
texts = list(dict.fromkeys(s1 + s2))
if spec["static"]:
    from model2vec import StaticModel
    model = StaticModel.from_pretrained(spec["path"], force_download=False)
    emb = model.encode(texts, batch_size=1024, show_progress_bar=False, use_multiprocessing=False)
else:
    from sentence_transformers import SentenceTransformer
    kwargs = {"backend": spec["backend"]} if spec["backend"] != "torch" else {}
    if spec["file"]:
        kwargs["model_kwargs"] = {"file_name": spec["file"], **spec["options"]}
    model = SentenceTransformer(spec["path"], device="cpu", **kwargs)
    emb = model.encode(texts, batch_size=64)
emb = emb / np.maximum(np.linalg.norm(emb, axis=1, keepdims=True), 1e-12)
pos = {t: i for i, t in enumerate(texts)}
score = np.sum(emb[[pos[t] for t in s1]] * emb[[pos[t] for t in s2]], axis=1)

def ranks(x):  # average ranks of ties, as scipy.stats.rankdata
    order = np.argsort(x, kind="mergesort")
    r = np.empty(len(x))
    r[order] = np.arange(1, len(x) + 1)
    _, inv, counts = np.unique(x, return_inverse=True, return_counts=True)
    sums = np.bincount(inv, weights=r)
    return (sums / counts)[inv]

rho = np.corrcoef(ranks(score), ranks(gold))[0, 1]
mods = sorted(m for m in sys.modules if m.split(".")[0] in ("pldistill", "sentence_transformers", "model2vec",
                                                           "optimum", "onnxruntime", "openvino"))
print(json.dumps({"spearman": round(100 * float(rho), 2), "top_modules": sorted({m.split(".")[0] for m in mods})}))
'''


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--python", required=True, help="the other environment's interpreter")
    ap.add_argument("--serve", type=Path, default=ROOT / "models/serve", help="a served or exported folder")
    ap.add_argument("--form", help="its form (default: eval.json's export.chosen for models/serve, else the folder's "
                                   "name under models/export)")
    ap.add_argument("--eval", type=Path, default=ROOT / "metrics/eval.json")
    ap.add_argument("--pairs", type=Path, default=ROOT / "data/clean/test.parquet")
    a = ap.parse_args()
    result = json.loads(a.eval.read_text())
    form = a.form or (result["export"]["chosen"] if a.serve.name == "serve" else a.serve.name)
    want = (result["bi"] if form == "torch" else result["export"][form])["test"]["spearman"]
    pairs = pd.read_parquet(a.pairs)
    with tempfile.TemporaryDirectory() as tmp:
        tsv = Path(tmp) / "pairs.tsv"
        with tsv.open("w", newline="", encoding="utf-8") as f:
            csv.writer(f, delimiter="\t").writerows(pairs[["sentence1", "sentence2", "score"]].itertuples(index=False))
        backend = BACKEND.get(form, "torch")
        spec = {"pairs": str(tsv), "path": str(a.serve.resolve()), "static": form in STATIC, "backend": backend,
                "file": FILES.get(form) if form not in STATIC else None,
                "options": {"ov_config": {"INFERENCE_PRECISION_HINT": "f32"}} if backend == "openvino" else {}}
        done = subprocess.run([a.python, "-c", SCRIPT, json.dumps(spec)], capture_output=True, text=True, check=False,
                              cwd=tmp, env={"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"})
    if done.returncode:
        raise SystemExit(f"the environment could not score it:\n{done.stderr[-3000:]}")
    got = json.loads(done.stdout.strip().splitlines()[-1])
    print(f"{form} in {a.python}: test Spearman {got['spearman']:.2f}, eval.json {want:.2f}, "
          f"difference {got['spearman'] - want:+.2f}; imported: {', '.join(got['top_modules'])}")
    if "pldistill" in got["top_modules"]:
        raise SystemExit("pldistill was imported: not an environment without it")


if __name__ == "__main__":
    main()
