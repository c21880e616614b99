import numpy as np
import pandas as pd

from pldistill import schemas
from pldistill.config import parse_params
from pldistill.sampling import REGISTRY, pair_key, sample
from stages.sample import sample as sample_stage
from tests.conftest import make_pairs


def test_registry_covers_every_allowed_strategy():
    from pldistill.config import STRATEGIES

    assert set(REGISTRY) == set(STRATEGIES)


def test_bm25_pairs_are_new_unique_and_labelled_by_strategy():
    gold = make_pairs(60)
    pairs = sample(gold, parse_params({"sample": {"top_k": 4}}).sample, np.random.default_rng(0))
    assert len(pairs) > 60
    assert (pairs["strategy"] == "bm25").all()
    assert not (pairs["sentence1"] == pairs["sentence2"]).any()
    keys = [pair_key(a, b) for a, b in zip(pairs["sentence1"], pairs["sentence2"])]
    assert len(set(keys)) == len(keys)
    gold_keys = {pair_key(a, b) for a, b in zip(gold["sentence1"], gold["sentence2"])}
    assert not set(keys) & gold_keys
    sentences = set(gold["sentence1"]) | set(gold["sentence2"])
    assert set(pairs["sentence1"]) <= sentences and set(pairs["sentence2"]) <= sentences


def test_none_gives_an_empty_table_with_the_schema(tmp_path):
    clean = tmp_path / "clean"
    schemas.write(clean / "train.parquet", make_pairs(10), schemas.PAIRS)
    report = sample_stage(parse_params({"sample": {"strategy": "none"}}), clean, tmp_path / "pairs", tmp_path / "r.json")
    assert report["candidates"] == 0
    assert schemas.read(tmp_path / "pairs" / "candidates.parquet", schemas.CANDIDATES).empty


def test_sampling_is_reproducible(tmp_path):
    gold = make_pairs(40)
    p = parse_params({}).sample
    a = sample(gold, p, np.random.default_rng(1))
    b = sample(gold, p, np.random.default_rng(1))
    pd.testing.assert_frame_equal(a, b)
