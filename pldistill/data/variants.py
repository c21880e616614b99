"""Variants of the sentences stage embed learns (embed.variants): a sentence with some words dropped, cropped to a
span, spliced with another sentence's end, or with some words swapped for other words of the corpus. The teacher
embeds a variant as it embeds any text, so each one is another example of the function the student learns, drawn
near the task's own sentences: more inputs, not more labels. Made with the run's seed, so reruns learn the same.

Why: on the demo the embedding step is short of sentences (dev after it rose with each batch of plain sentences
written: 91.67, 92.77, 93.24), and 3 variants a sentence in one epoch took the student from 87.04 to 87.61 test on
the mean of three seeds; without them, 2x and 4x the steps gave 87.07 and 87.10 on seed 42 (docs/fast-student.md).
Data only: no model, no torch."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

DROP = 0.15  # drop: each word's chance to go
SWAP = 0.15  # swap: each word's chance to be replaced by a word drawn from every sentence's words
CROP = (0.6, 0.9)  # crop: the span kept, as a share of the words, drawn uniformly
MIN_WORDS = 3  # a variant keeps at least this many words; a sentence shorter than that gets none
# embed.variants auto: AUTO variants a sentence for a step of fewer than AUTO_BELOW sentences (the demo's 5.4k, STS-B's
# 10k), none above: a corpus brings its own inputs, and 3 variants of 147k sentences would be hours of encoding. 1, not
# 3: on the demo 3 gave +0.32 test more (87.65 against 87.33, seeds 42-44) and on STS-B nothing measurable, for about
# 70 s more of `make run` on a CPU without AVX-512 (docs/fast-student.md, "A warm interpreter for make run")
AUTO, AUTO_BELOW = 1, 20_000

# (words of the sentence, the generator, every sentence's words) -> the variant's words
Op = Callable[[list[str], np.random.Generator, list[list[str]]], list[str]]


def drop(words: list[str], rng: np.random.Generator, pool: list[list[str]]) -> list[str]:
    kept = [w for w, gone in zip(words, rng.random(len(words)) < DROP) if not gone]
    return kept if len(kept) >= MIN_WORDS else words


def crop(words: list[str], rng: np.random.Generator, pool: list[list[str]]) -> list[str]:
    n = max(MIN_WORDS, int(len(words) * rng.uniform(*CROP)))
    start = int(rng.integers(0, len(words) - n + 1))
    return words[start : start + n]


def splice(words: list[str], rng: np.random.Generator, pool: list[list[str]]) -> list[str]:
    other = pool[int(rng.integers(len(pool)))]
    return words[: max(2, len(words) // 2)] + other[len(other) // 2 :]


def swap(words: list[str], rng: np.random.Generator, pool: list[list[str]]) -> list[str]:
    out = list(words)
    for i in np.flatnonzero(rng.random(len(words)) < SWAP):
        source = pool[int(rng.integers(len(pool)))]  # a sentence, then one of its words: common words come up
        out[i] = source[int(rng.integers(len(source)))]  # often, without a flat list of every word of the corpus
    return out


OPS: dict[str, Op] = {"drop": drop, "crop": crop, "splice": splice, "swap": swap}  # params_train.EMBED_VARIANT_OPS


def per_sentence(setting: int | str, sentences: int) -> int:
    """embed.variants resolved for a step of ``sentences`` sentences."""
    if setting == "auto":
        return AUTO if sentences < AUTO_BELOW else 0
    return int(setting)


def variants(sentences: Sequence[str], k: int, ops: Sequence[str],
             rng: np.random.Generator) -> tuple[list[str], dict[str, int]]:
    """``k`` variants of each sentence, each by one of ``ops`` drawn uniformly, in the sentences' order,
    and how many each op made. Words are split on whitespace and joined by one space; a sentence of fewer than
    MIN_WORDS words gets none. A variant may equal a sentence or another variant: the caller keeps one of each."""
    unknown = [o for o in ops if o not in OPS]
    if unknown or not ops:
        raise ValueError(f"embed.variant_ops: expected one or more of {', '.join(OPS)}; found {list(ops)}")
    pool = [s.split() for s in sentences]  # every sentence's words: splice's and swap's source
    out: list[str] = []
    made = dict.fromkeys(ops, 0)
    for words in pool:
        if len(words) < MIN_WORDS:
            continue
        for name in (ops[i] for i in rng.integers(len(ops), size=k)):
            out.append(" ".join(OPS[name](words, rng, pool)))
            made[name] += 1
    return out, made
