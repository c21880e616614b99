import numpy as np
import pandas as pd
import pytest

from pldistill.base import schemas
from pldistill.base.errors import ConfigError
from pldistill.data import variants
from pldistill.params.config import parse_params
from pldistill.params.train import EMBED_VARIANT_OPS, EmbedParams
from pldistill.students import embedding

SENTENCES = ["the quick brown fox jumps over the lazy dog today",
             "a man is slicing red onions on a wooden board",
             "rain is expected in the north on friday evening",
             "too short"]


def _one_op(name: str, seed: int = 0, k: int = 50) -> list[list[str]]:
    made, counts = variants.variants(SENTENCES[:1], k, [name], np.random.default_rng(seed))
    assert counts == {name: k}
    return [v.split() for v in made]


def test_the_registry_names_what_params_accept():
    assert tuple(variants.OPS) == EMBED_VARIANT_OPS


def test_drop_keeps_a_subsequence_of_at_least_three_words():
    words = SENTENCES[0].split()
    for v in _one_op("drop"):
        it = iter(words)
        assert all(w in it for w in v) and len(v) >= variants.MIN_WORDS  # in order, each word once at most
    assert any(len(v) < len(words) for v in _one_op("drop"))


def test_crop_keeps_one_contiguous_span_of_60_to_90_percent():
    text = SENTENCES[0]
    for v in _one_op("crop"):
        assert " ".join(v) in text and 6 <= len(v) <= 9  # 10 words: int(10 x [0.6, 0.9])


def test_splice_keeps_the_first_half_and_ends_with_another_sentences_second_half():
    made, _ = variants.variants(SENTENCES[:3], 20, ["splice"], np.random.default_rng(1))
    halves = [" ".join(s.split()[len(s.split()) // 2:]) for s in SENTENCES[:3]]
    for sentence, v in zip(np.repeat(SENTENCES[:3], 20), made):
        words = sentence.split()
        assert v.startswith(" ".join(words[: len(words) // 2])) and any(v.endswith(h) for h in halves)


def test_swap_keeps_the_length_and_draws_words_from_the_sentences():
    made, _ = variants.variants(SENTENCES[:3], 20, ["swap"], np.random.default_rng(2))
    vocab = {w for s in SENTENCES[:3] for w in s.split()}
    assert [len(v.split()) for v in made] == [len(s.split()) for s in SENTENCES[:3] for _ in range(20)]
    assert all(set(v.split()) <= vocab for v in made) and any(v not in SENTENCES for v in made)


def test_the_same_seed_makes_the_same_variants_and_a_short_sentence_none():
    a = variants.variants(SENTENCES, 3, EMBED_VARIANT_OPS, np.random.default_rng(42))
    b = variants.variants(SENTENCES, 3, EMBED_VARIANT_OPS, np.random.default_rng(42))
    c = variants.variants(SENTENCES, 3, EMBED_VARIANT_OPS, np.random.default_rng(43))
    assert a == b and a[0] != c[0]
    assert len(a[0]) == 9 and sum(a[1].values()) == 9  # 3 each for the three sentences of 3 words or more


def test_an_unknown_op_is_refused_by_params_and_by_the_registry():
    with pytest.raises(ConfigError, match="embed.variant_ops: expected one or more distinct ops among drop, crop"):
        parse_params({"embed": {"variants": 2, "variant_ops": ["drop", "shuffle"]}})
    with pytest.raises(ValueError, match="found \\['shuffle'\\]"):
        variants.variants(SENTENCES, 1, ["shuffle"], np.random.default_rng(0))


def test_gather_adds_variants_last_held_out_and_counted(tmp_path):
    """The task's sentences keep their places; a variant that is an evaluation sentence or a copy is left out."""
    clean = tmp_path / "clean"
    pair = lambda a, b: pd.DataFrame({"sentence1": a, "sentence2": b, "score": 0.5})  # noqa: E731
    schemas.write(clean / "dev.parquet", pair(["one two three"], ["a man is slicing"]), schemas.PAIRS)
    schemas.write(clean / "test.parquet", pair(["x y z"], ["p q r"]), schemas.PAIRS)
    schemas.write(clean / "train.parquet", pair(["one two three four"], [SENTENCES[1]]), schemas.PAIRS)
    plain = EmbedParams(epochs=1, corpus=None, sources=["train"], variants=0)
    base, _ = embedding.gather(plain, clean, "NFKC", 4, np.random.default_rng(0))
    params = EmbedParams(epochs=1, corpus=None, sources=["train"], variants=6, variant_ops=["crop"])
    texts, counts = embedding.gather(params, clean, "NFKC", 4, np.random.default_rng(0))
    assert texts[:2] == base and len(texts) == 2 + counts["variants"]
    assert counts["variants_by_op"] == {"crop": 12} and 0 < counts["variants"] < 12  # copies kept once
    assert "one two three" not in texts and counts["held_out_eval"] > 0  # a crop equal to a dev sentence


def test_auto_gives_a_small_step_three_variants_a_sentence_and_a_corpus_none():
    assert variants.per_sentence("auto", 5_378) == variants.AUTO == 1  # the demo's step
    assert variants.per_sentence("auto", variants.AUTO_BELOW) == 0 and variants.per_sentence(2, 10**6) == 2
