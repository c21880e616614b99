"""Cycles of recipe augsbert (pldistill.recipes.rounds): each cycle after the first, the student mines new
pairs, the teacher labels only those, the student learns on; finished cycles are reused when `cycles` grows."""

import itertools
import json
import shutil

import pandas as pd
import pytest

from pldistill.base import schemas
from pldistill.base.errors import ConfigError
from pldistill.pairs.sampling import pair_key
from pldistill.params.config import parse_params
from tests.conftest import run_chain

ARTIFACTS = ["models/bi/model.safetensors", "metrics/cycles.csv", "metrics/student-dev.csv"]


def with_cycles(params, cycles: int, **rounds):
    raw = params.model_dump(mode="json")
    return parse_params({**raw, "cycles": cycles, "rounds": {**raw["rounds"], "pairs": 12, "top_k": 2, **rounds}})


def distill(params, root, store, monkeypatch) -> dict:
    monkeypatch.setenv("PLDISTILL_STORE", str(store))
    run_chain(params, root, ("distill",))
    return json.loads((root / "metrics/distill.json").read_text())


def keys(df: pd.DataFrame) -> set:
    return {pair_key(a, b) for a, b in zip(df["sentence1"], df["sentence2"])}


@pytest.fixture(scope="module")
def grown(chains, tmp_path_factory):
    """The augsbert chain run with cycles 2, then grown to 3 on the same store (``base/store``): built once for the
    module; read it, or copy it before running on it."""
    chain, base = chains("augsbert"), tmp_path_factory.mktemp("grown")
    root = chain.copy_to(base / "grown")
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(root)  # as DVC runs a stage: in the project
        first = distill(with_cycles(chain.params, 2), root, base / "store", mp)
        second = distill(with_cycles(chain.params, 3), root, base / "store", mp)
    return chain, root, first, second


def test_later_cycles_label_only_new_pairs_the_student_mined(grown):
    _, root, _, r = grown
    clean = {s: schemas.read(root / f"data/clean/{s}.parquet", schemas.PAIRS) for s in ("train", "dev", "test")}
    seen = set().union(*(keys(df) for df in clean.values()))
    silver = schemas.read(root / "data/silver/silver.parquet", schemas.PSEUDO)
    cycle1 = schemas.read(root / "data/pseudo/cycle-01.parquet", schemas.PSEUDO)
    assert keys(cycle1) == keys(silver)  # cycle 1 learned stage label's pairs
    seen |= keys(silver)
    for c in (2, 3):
        mined = schemas.read(root / f"data/pseudo/cycle-{c:02d}.parquet", schemas.PSEUDO)
        assert 0 < len(mined) <= 12 and (mined["cycle"] == c).all() and (mined["strategy"] == "student").all()
        assert not keys(mined) & seen, f"cycle {c} relabelled a pair labelled before, or a gold/dev/test pair"
        assert (mined["sentence1"] != mined["sentence2"]).all()
        assert mined["labeller"].iloc[0] == silver["labeller"].iloc[0]  # the same teacher
        assert mined["score"].between(0, 1).all()
        seen |= keys(mined)
    per = r["per_cycle"]
    assert [c["cycle"] for c in per] == [1, 2, 3]
    assert [c["silver_pairs"] for c in per] == [len(silver), len(silver) + per[1]["mined"]["kept"],
                                                 len(silver) + per[1]["mined"]["kept"] + per[2]["mined"]["kept"]]
    # the student of the best cycle on dev is the stage's student; its score is the report's
    best = max(per, key=lambda c: (c["dev"]["spearman"], -c["cycle"]))
    assert r["selected_cycle"] == best["cycle"] and r["best_dev"] == best["best_dev"]
    # a later cycle starts from the one before, which counts as its first checkpoint: dev never falls
    assert all(b["dev"]["spearman"] >= a["dev"]["spearman"] for a, b in itertools.pairwise(per))
    rows = (root / "metrics/cycles.csv").read_text().splitlines()
    assert rows[0] == "cycle,bi_dev,bi_test,cross_dev,cross_test" and len(rows) == 1 + 4  # cycle 0 .. 3


def test_growing_cycles_reuses_the_finished_ones_and_ends_as_a_fresh_run(grown, tmp_path, monkeypatch):
    chain, root, first, second = grown
    assert first["steps"]["computed"] == ["c01-bi", "c02-mine", "c02-label", "c02-bi"]
    assert second["steps"]["reused"] == first["steps"]["computed"]
    assert second["steps"]["computed"] == ["c03-mine", "c03-label", "c03-bi"]
    fresh = chain.copy_to(tmp_path / "fresh")
    monkeypatch.chdir(fresh)
    distill(with_cycles(chain.params, 3), fresh, tmp_path / "other-store", monkeypatch)
    for rel in ARTIFACTS + [f"data/pseudo/cycle-{c:02d}.parquet" for c in (1, 2, 3)]:
        assert (root / rel).read_bytes() == (fresh / rel).read_bytes(), rel


def test_a_changed_rounds_param_recomputes_the_later_cycles_only(grown, tmp_path, monkeypatch):
    chain, grown_root, _, _ = grown
    root = tmp_path / "grown"
    shutil.copytree(grown_root, root)
    shutil.copytree(grown_root.parent / "store", tmp_path / "store")
    monkeypatch.chdir(root)  # a copy of the project elsewhere (dvc exp run --temp, the queue) finds the same steps
    r = distill(with_cycles(chain.params, 2, pairs=5), root, tmp_path / "store", monkeypatch)
    assert r["steps"]["reused"] == ["c01-bi"] and r["steps"]["computed"] == ["c02-mine", "c02-label", "c02-bi"]
    assert r["per_cycle"][1]["mined"]["kept"] <= 5


def test_cycles_are_refused_where_they_mean_nothing(tiny_params):
    raw = tiny_params.model_dump(mode="json")
    with pytest.raises(ConfigError, match="recipe dse labels once and trains once, so cycles must be 1"):
        parse_params({**raw, "recipe": "dse", "cycles": 2})
    with pytest.raises(ConfigError, match="run in one process.*set processes to 1"):
        parse_params({**raw, "cycles": 2, "processes": 2})
    with pytest.raises(ConfigError, match="rounds.pairs"):
        parse_params({**raw, "cycles": 2, "rounds": {"pairs": 0}})
