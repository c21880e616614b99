"""Pair-sampling strategies of Augmented SBERT, behind a registry keyed by ``sample.strategy``.

A strategy turns the gold training pairs into new *unlabelled* candidate pairs over the same unique
sentences: never a self pair, never a gold pair, each unordered pair once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np
import pandas as pd

from pldistill.bm25 import BM25Index, tokenize
from pldistill.config import SampleParams

Strategy = Callable[[pd.DataFrame, SampleParams, np.random.Generator], pd.DataFrame]
REGISTRY: dict[str, Strategy] = {}


def register(name: str) -> Callable[[Strategy], Strategy]:
    def deco(fn: Strategy) -> Strategy:
        REGISTRY[name] = fn
        return fn

    return deco


def unique_sentences(pairs: pd.DataFrame) -> list[str]:
    """Unique sentences in order of first appearance (so ids are stable for a given input)."""
    both = np.column_stack([pairs["sentence1"].to_numpy(), pairs["sentence2"].to_numpy()]).ravel()
    return list(dict.fromkeys(both.tolist()))


def pair_key(a: str, b: str) -> tuple[str, str]:
    return (a, b) if a <= b else (b, a)


def new_pairs(found: Iterable[tuple[str, str]], gold: pd.DataFrame, strategy: str) -> pd.DataFrame:
    """Drop self pairs, gold pairs and repeats (either order) from ``found``; keep first-seen order."""
    seen = {pair_key(a, b) for a, b in zip(gold["sentence1"], gold["sentence2"])}
    rows = []
    for a, b in found:
        key = pair_key(a, b)
        if a == b or key in seen:
            continue
        seen.add(key)
        rows.append((a, b))
    df = pd.DataFrame(rows, columns=["sentence1", "sentence2"])
    df["strategy"] = strategy
    return df


@register("none")
def sample_none(gold: pd.DataFrame, params: SampleParams, rng: np.random.Generator) -> pd.DataFrame:
    """Gold only: no silver pairs."""
    return new_pairs([], gold, "none")


@register("bm25")
def sample_bm25(gold: pd.DataFrame, params: SampleParams, rng: np.random.Generator) -> pd.DataFrame:
    """Each unique sentence is a query; its ``top_k`` BM25 neighbours (positive score) become pairs."""
    sentences = unique_sentences(gold)
    tokens = [tokenize(s) for s in sentences]
    index = BM25Index(tokens, k1=params.bm25.k1, b=params.bm25.b, epsilon=params.bm25.epsilon)
    hits = index.top_k(tokens, params.top_k, exclude_self=True, chunk=params.query_chunk)
    found = ((sentences[q], sentences[d]) for q, docs, _ in hits for d in docs)
    return new_pairs(found, gold, "bm25")


def sample(gold: pd.DataFrame, params: SampleParams, rng: np.random.Generator) -> pd.DataFrame:
    return REGISTRY[params.strategy](gold, params, rng)
