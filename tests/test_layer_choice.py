"""benchmarks/layer_choice.py: every k-of-n cut, each scored as that cut scores alone, best dev first."""

from __future__ import annotations

import sys

import pytest

from pldistill.base.metrics import correlation
from pldistill.models.encoders import BiEncoder
from tests.conftest import ROOT, make_pairs

sys.path.insert(0, str(ROOT / "benchmarks"))
from layer_choice import rank  # benchmarks/ is a folder of scripts, not a package


def test_every_cut_ranked_by_dev(tiny_model_dir):
    dev, report = make_pairs(24), make_pairs(24, offset=100)
    rows = rank(str(tiny_model_dir), 1, {"dev": dev, "report": report}, max_length=32, batch_size=8)
    assert sorted(r["layers"] for r in rows) == [[0], [1]]  # the tiny model has 2 layers
    assert rows[0]["dev"] >= rows[1]["dev"]
    for r in rows:
        cut = BiEncoder.load(str(tiny_model_dir), 32, layers=tuple(r["layers"]))
        for name, df in (("dev", dev), ("report", report)):
            want = correlation(cut.score(df["sentence1"], df["sentence2"], 8, False), df["score"])["spearman"]
            assert r[name] == pytest.approx(want)
