"""benchmarks/encode_speed.py's floor: a model cut to no transformer layer still encodes, and the Amdahl bound
it gives is the whole time over the floor plus the kept layers' share."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from pldistill.models.encoders import BiEncoder
from tests.conftest import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
from encode_speed import amdahl  # benchmarks/ is a folder of scripts, not a package


def test_amdahl_bound_from_whole_and_floor_rates():
    # 100 sentences: whole 1.0 s, floor 0.1 s, so each of 6 layers costs 0.15 s; 3 kept: 0.1 + 0.45 = 0.55 s
    got = amdahl(100, {"whole": 100.0, "floor": 1000.0, "pruned": 180.0}, kept=3, total=6)
    assert got["floor_s"] == pytest.approx(0.1)
    assert got["per_layer_s"] == pytest.approx(0.15)
    assert got["floor_share_of_whole"] == pytest.approx(0.1)
    assert got["speedup_bound"] == pytest.approx(1.82)
    # no floor: halving the layers halves the time
    assert amdahl(10, {"whole": 10.0, "floor": 1e12}, kept=3, total=6)["speedup_bound"] == pytest.approx(2.0)


def test_model_with_no_layer_encodes(tiny_model_dir):
    floor = BiEncoder.load(str(tiny_model_dir), 32, layers=())
    assert floor.model[0].auto_model.config.num_hidden_layers == 0
    emb = floor.encode(["a cat sits on the mat", "two dogs run"], 8, False)
    assert emb.shape == (2, 32)
    np.testing.assert_allclose(np.linalg.norm(emb, axis=1), 1.0, rtol=1e-5)
