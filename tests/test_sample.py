import numpy as np
import pandas as pd
import pytest

import pldistill.params.names
from pldistill.base import schemas
from pldistill.base.errors import ConfigError
from pldistill.pairs.sampling import REGISTRY, Context, merge, pair_key, sample, unique_sentences
from pldistill.params.config import parse_params
from pldistill.params.names import registered as names
from stages.sample import sample as sample_stage
from tests.conftest import make_pairs

TOPICS = ["cat", "dog", "car", "rain", "music", "bread", "river", "phone", "chess", "garden"]


def keyword_encoder(texts: list[str]) -> np.ndarray:
    """A mock encoder: one axis per topic word, so neighbours are exactly the sentences sharing a topic."""
    emb = np.array([[float(t in s.split()) for t in TOPICS] + [1e-3 * (i % 7)] for i, s in enumerate(texts)],
                   dtype=np.float32)
    return emb / np.linalg.norm(emb, axis=1, keepdims=True)


def ctx(gold, seed=0, encode=keyword_encoder, **sample):
    return Context(gold, parse_params({"sample": sample}).sample, np.random.default_rng(seed), seed=seed,
                   encode=encode)


def check_new_unique(pairs, gold):
    assert not (pairs["sentence1"] == pairs["sentence2"]).any()
    keys = [pair_key(a, b) for a, b in zip(pairs["sentence1"], pairs["sentence2"])]
    assert len(set(keys)) == len(keys)
    gold_keys = {pair_key(a, b) for a, b in zip(gold["sentence1"], gold["sentence2"])}
    assert not set(keys) & gold_keys
    sentences = set(gold["sentence1"]) | set(gold["sentence2"])
    assert set(pairs["sentence1"]) <= sentences and set(pairs["sentence2"]) <= sentences


def test_config_allows_exactly_the_registered_strategies(monkeypatch):
    assert names()["strategy"] == tuple(REGISTRY)
    named = pldistill.params.names
    monkeypatch.setattr(named, "STRATEGIES", (*named.STRATEGIES, "mine"))  # named: allowed
    assert parse_params({"sample": {"strategy": "mine"}}).sample.strategy == "mine"
    monkeypatch.undo()
    with pytest.raises(ConfigError, match="sample.strategy: expected one of"):
        parse_params({"sample": {"strategy": "mine"}})


def test_bm25_pairs_are_new_unique_and_labelled_by_strategy():
    gold = make_pairs(60)
    pairs = sample(ctx(gold, top_k=4))
    assert len(pairs) > 60
    assert (pairs["strategy"] == "bm25").all()
    check_new_unique(pairs, gold)


def test_random_draws_the_requested_number_of_new_pairs():
    gold = make_pairs(30)
    pairs = sample(ctx(gold, strategy="random", random={"pairs": 500}))
    assert len(pairs) == 500 and (pairs["strategy"] == "random").all()
    check_new_unique(pairs, gold)


def test_random_is_capped_at_every_possible_new_pair():
    gold = make_pairs(4)  # 8 sentences: 28 unordered pairs, 4 of them gold
    pairs = sample(ctx(gold, strategy="random", random={"pairs": 1000}))
    assert len(pairs) == 24
    check_new_unique(pairs, gold)


def test_kde_draws_its_pool_at_random():
    gold = make_pairs(30)
    pairs = sample(ctx(gold, strategy="kde", kde={"pool": 300}))
    assert len(pairs) == 300 and (pairs["strategy"] == "kde").all()


def test_semantic_neighbours_share_the_topic_word():
    gold = make_pairs(40)
    pairs = sample(ctx(gold, strategy="semantic", top_k=2))
    assert len(pairs) > 0 and (pairs["strategy"] == "semantic").all()
    check_new_unique(pairs, gold)

    def topic(s: str) -> str:
        return next(t for t in TOPICS if t in s.split())

    assert all(topic(a) == topic(b) for a, b in zip(pairs["sentence1"], pairs["sentence2"]))


def test_semantic_without_an_encoder_says_so():
    with pytest.raises(ValueError, match="needs an encoder"):
        sample(ctx(make_pairs(10), strategy="semantic", encode=None))


def test_bm25_plus_semantic_is_the_union_with_each_pair_once():
    gold = make_pairs(40)
    c = ctx(gold, strategy="bm25+semantic", top_k=3)
    both = sample(c)
    bm25 = sample(ctx(gold, strategy="bm25", top_k=3))
    sem = sample(ctx(gold, strategy="semantic", top_k=3))
    check_new_unique(both, gold)

    def keys(df: pd.DataFrame) -> set:
        return {pair_key(a, b) for a, b in zip(df["sentence1"], df["sentence2"])}

    assert keys(both) == keys(bm25) | keys(sem)
    assert c.found == {"bm25": len(bm25), "semantic": len(sem)}
    by = dict(zip([pair_key(a, b) for a, b in zip(both["sentence1"], both["sentence2"])], both["strategy"]))
    for k in keys(bm25) & keys(sem):
        assert by[k] == "bm25+semantic"
    for k in keys(bm25) - keys(sem):
        assert by[k] == "bm25"


def test_a_gold_pair_in_another_case_or_spacing_is_no_new_pair():
    """Sampling compares sentences as cleaning.sentence_key does: case and spacing variants of the gold
    sentences are the same sentences, so no candidate is a gold pair or a self pair in disguise."""
    gold = pd.DataFrame({"sentence1": ["The cat sat.", "the  CAT sat."], "sentence2": ["A dog ran.", "A bird sang."],
                         "score": [0.5, 0.6]})
    c = ctx(gold, strategy="random", random={"pairs": 50})
    assert c.sentences == ["The cat sat.", "A dog ran.", "A bird sang."]  # the first spelling of each
    pairs = sample(c)
    assert sorted(map(sorted, pairs[["sentence1", "sentence2"]].values.tolist())) == [["A bird sang.", "A dog ran."]]


def test_merge_records_every_strategy_that_found_a_pair():
    a = pd.DataFrame({"sentence1": ["x", "y"], "sentence2": ["y", "z"], "strategy": ["bm25", "bm25"]})
    b = pd.DataFrame({"sentence1": ["y", "z"], "sentence2": ["x", "w"], "strategy": ["semantic", "semantic"]})
    m = merge([a, b])
    assert m.values.tolist() == [["x", "y", "bm25+semantic"], ["y", "z", "bm25"], ["z", "w", "semantic"]]


def test_none_gives_an_empty_table_with_the_schema(tmp_path):
    clean = tmp_path / "clean"
    schemas.write(clean / "train.parquet", make_pairs(10), schemas.PAIRS)
    report = sample_stage(parse_params({"sample": {"strategy": "none"}}), clean, tmp_path / "gold", tmp_path / "pairs",
                          tmp_path / "r.json")
    assert report["candidates"] == 0
    assert schemas.read(tmp_path / "pairs" / "candidates.parquet", schemas.CANDIDATES).empty


@pytest.mark.parametrize("strategy", ["bm25", "random", "semantic", "bm25+semantic", "kde"])
def test_sampling_is_reproducible(strategy):
    gold = make_pairs(40)
    a = sample(ctx(gold, seed=1, strategy=strategy))
    b = sample(ctx(gold, seed=1, strategy=strategy))
    pd.testing.assert_frame_equal(a, b)


def test_a_pool_joins_the_sentences_searched_after_the_gold_ones():
    gold = make_pairs(20)
    pool = ["the cat story number 0 is here", "the cat sat in the garden", "THE CAT  sat in the garden",
            "a phone call about chess"]
    c = Context(gold, parse_params({}).sample, np.random.default_rng(0), seed=0, pool=pool)
    own = Context(gold, parse_params({}).sample, np.random.default_rng(0), seed=0).sentences
    # the gold pairs' sentences keep their places; a pool sentence already there, or one differing only by case and
    # spacing, is not added twice
    assert c.sentences == [*own, "the cat sat in the garden", "a phone call about chess"]
    pairs = sample(Context(gold, parse_params({"sample": {"top_k": 2}}).sample, np.random.default_rng(0), seed=0,
                           pool=pool))
    found = set(pairs["sentence1"]) | set(pairs["sentence2"])
    assert {"the cat sat in the garden", "a phone call about chess"} <= found  # pool sentences are paired


def _stage_dirs(tmp_path, test_sentence):
    clean = tmp_path / "clean"
    train, dev, test = make_pairs(20), make_pairs(4, 100), make_pairs(4, 200)
    for name, df in (("train", train), ("dev", dev), ("test", test)):
        schemas.write(clean / f"{name}.parquet", df, schemas.PAIRS)
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(f"the cat sat in the garden\nok\na river of music\n{test_sentence}\n")
    return clean, corpus


def test_the_stage_pairs_the_corpus_sentences_held_out_of_dev_and_test(tmp_path):
    clean, corpus = _stage_dirs(tmp_path, make_pairs(4, 200)["sentence1"].iloc[0])
    params = parse_params({"sample": {"corpus": True, "top_k": 3}, "embed": {"corpus": str(corpus)}})
    report = sample_stage(params, clean, tmp_path / "gold", tmp_path / "pairs", tmp_path / "r.json")
    # "ok" is below augment.min_chars and the test sentence is held out: two corpus sentences join the task's
    own = len(unique_sentences(make_pairs(20)))
    assert report["corpus_sentences"] == 2 and report["unique_sentences"] == own + 2
    pairs = schemas.read(tmp_path / "pairs" / "candidates.parquet", schemas.CANDIDATES)
    found = set(pairs["sentence1"]) | set(pairs["sentence2"])
    assert "the cat sat in the garden" in found and "a river of music" in found
    assert make_pairs(4, 200)["sentence1"].iloc[0] not in found
    off = sample_stage(parse_params({"embed": {"corpus": str(corpus)}}), clean, tmp_path / "gold",
                       tmp_path / "pairs2", tmp_path / "r2.json")
    assert off["corpus_sentences"] == 0 and off["unique_sentences"] == own  # sample.corpus false: the task's alone


def test_the_corpus_draw_is_stage_embeds(tmp_path):
    """embed.max_corpus: the same sentences stage embed learns, drawn with the seed."""
    from pldistill.base.seeding import numpy_rng
    from pldistill.data.sentences import gather
    from stages.sample import corpus as sample_corpus

    clean, corpus = _stage_dirs(tmp_path, "unrelated")
    corpus.write_text("".join(f"corpus sentence number {i}\n" for i in range(30)))
    params = parse_params({"sample": {"corpus": True}, "embed": {"corpus": str(corpus), "max_corpus": 7,
                                                                 "sources": []}, "seed": 5})
    picked = sample_corpus(params, clean)
    learned, _ = gather(params.embed, clean, params.augment.unicode_form, params.augment.min_chars, numpy_rng(5),
                        with_variants=False)
    assert len(picked) == 7 and picked == learned


def test_corpus_without_a_corpus_or_a_search_says_what_to_set():
    with pytest.raises(ConfigError, match="sample.corpus true pairs the sentences of embed.corpus, which is null"):
        parse_params({"sample": {"corpus": True}, "embed": {"corpus": None}})
    with pytest.raises(ConfigError, match="join a search, e.g. given\\+bm25"):
        parse_params({"sample": {"corpus": True, "strategy": "given"}, "data": {"unscored": "rest"},
                      "embed": {"corpus": "/x/c.txt"}})
    # on the demo, embed.corpus auto is the demo's own sentences: nothing more to set
    assert parse_params({"sample": {"corpus": True}}).sample.corpus
