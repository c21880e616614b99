"""Pair-sampling strategies of Augmented SBERT, behind a registry keyed by ``sample.strategy``.

A strategy turns the gold training pairs into new *unlabelled* candidate pairs over the same unique
sentences (with ``sample.corpus``, a corpus's too): never a self pair, never a gold pair, each unordered
pair once (sentences compared as cleaning.sentence_key compares them: case, spacing and Unicode form
aside). ``kde`` only draws its random pool here; the teacher labels the pool in the `label` stage, which
keeps the pairs whose scores make the silver distribution match the gold one (``pldistill.teach.diagnostics``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import pandas as pd

from pldistill.base.cleaning import distinct, pair_key, tokenize
from pldistill.pairs.bm25 import BM25Index
from pldistill.params import names
from pldistill.params.sections import SampleParams


@dataclass
class Context:
    """What a strategy may use: the gold pairs, its params, the run's RNG, and (lazily) an encoder."""

    gold: pd.DataFrame
    params: SampleParams
    rng: np.random.Generator
    seed: int  # for index building (IVF k-means); draws use ``rng``
    # texts -> (n, dim) L2-normalised float32 embeddings; only semantic strategies call it
    encode: Callable[[list[str]], np.ndarray] | None = None
    found: dict[str, int] = field(default_factory=dict)  # pairs each strategy found, before merging
    given: pd.DataFrame | None = None  # the given pairs (data.unscored) for strategy `given`
    pool: Sequence[str] = ()  # more sentences to pair (sample.corpus: embed.corpus's)

    @cached_property
    def sentences(self) -> list[str]:
        """What the searches pair: the gold pairs' sentences in order, then the pool's not among them."""
        own = unique_sentences(self.gold)
        return distinct([*own, *self.pool])[0] if self.pool else own


Strategy = Callable[[Context], pd.DataFrame]
REGISTRY: dict[str, Strategy] = {}


def register(name: str) -> Callable[[Strategy], Strategy]:
    if name not in names.STRATEGIES:  # params are checked against that list, which imports no strategy
        raise ValueError(f"sampling strategy {name!r}: add its name to pldistill.params.names.STRATEGIES too")

    def deco(fn: Strategy) -> Strategy:
        REGISTRY[name] = fn
        return fn

    return deco


def unique_sentences(pairs: pd.DataFrame) -> list[str]:
    """Unique sentences (cleaning.distinct) in order of first appearance (so ids are stable for a given input)."""
    both = np.column_stack([pairs["sentence1"].to_numpy(), pairs["sentence2"].to_numpy()]).ravel()
    return distinct(both.tolist())[0]


def is_self(key: str) -> bool:
    """A pair key (cleaning.pair_key) of a sentence with itself."""
    a, _, b = key.partition("\0")
    return a == b


def gold_keys(gold: pd.DataFrame) -> set[str]:
    return {pair_key(a, b) for a, b in zip(gold["sentence1"], gold["sentence2"])}


def new_pairs(found: Iterable[tuple[str, str]], gold: pd.DataFrame, strategy: str) -> pd.DataFrame:
    """Drop self pairs, gold pairs and repeats (either order) from ``found``; keep first-seen order."""
    seen = gold_keys(gold)
    rows = []
    for a, b in found:
        key = pair_key(a, b)
        if key in seen or is_self(key):
            continue
        seen.add(key)
        rows.append((a, b))
    df = pd.DataFrame(rows, columns=["sentence1", "sentence2"])
    df["strategy"] = strategy
    return df


@register("none")
def sample_none(ctx: Context) -> pd.DataFrame:
    """Gold only: no silver pairs."""
    return new_pairs([], ctx.gold, "none")


def random_pairs(ctx: Context, n: int, strategy: str) -> pd.DataFrame:
    """``n`` distinct new pairs drawn uniformly from all pairs of unique sentences (fewer if there are fewer)."""
    sents = ctx.sentences
    m = len(sents)
    taken = gold_keys(ctx.gold)
    available = m * (m - 1) // 2 - sum(not is_self(k) for k in taken)  # gold self pairs are not among the m(m-1)/2
    n = min(n, max(available, 0))
    rows: list[tuple[str, str]] = []
    while len(rows) < n:
        # Rejection sampling in batches: cheap while n is far below the m^2/2 possible pairs; near
        # exhaustion the batches shrink to what is missing, so it still ends.
        need = n - len(rows)
        i = ctx.rng.integers(0, m, size=2 * need + 16)
        j = ctx.rng.integers(0, m, size=2 * need + 16)
        for a, b in zip(i.tolist(), j.tolist()):
            if a == b:
                continue
            key = pair_key(sents[a], sents[b])
            if key in taken:
                continue
            taken.add(key)
            rows.append((sents[a], sents[b]))
            if len(rows) == n:
                break
    df = pd.DataFrame(rows, columns=["sentence1", "sentence2"])
    df["strategy"] = strategy
    return df


@register("random")
def sample_random(ctx: Context) -> pd.DataFrame:
    """``sample.random.pairs`` uniformly random pairs (the paper's R.S.: mostly dissimilar pairs)."""
    return random_pairs(ctx, ctx.params.random.pairs, "random")


@register("kde")
def sample_kde_pool(ctx: Context) -> pd.DataFrame:
    """The random pool (``sample.kde.pool`` pairs) that `label` scores and KDE then thins."""
    return random_pairs(ctx, ctx.params.kde.pool, "kde")


def _top_k_pairs(hits: Iterable[tuple[int, np.ndarray, np.ndarray]], sentences: list[str]) -> Iterable[tuple[str, str]]:
    return ((sentences[q], sentences[d]) for q, docs, _ in hits for d in docs)


@register("bm25")
def sample_bm25(ctx: Context) -> pd.DataFrame:
    """Each unique sentence is a query; its ``top_k`` BM25 neighbours (positive score) become pairs."""
    p, sentences = ctx.params, ctx.sentences
    tokens = [tokenize(s) for s in sentences]
    index = BM25Index(tokens, k1=p.bm25.k1, b=p.bm25.b, epsilon=p.bm25.epsilon)
    hits = index.top_k(tokens, p.top_k, exclude_self=True, chunk=p.query_chunk)
    return new_pairs(_top_k_pairs(hits, sentences), ctx.gold, "bm25")


@register("semantic")
def sample_semantic(ctx: Context) -> pd.DataFrame:
    """Each unique sentence's ``top_k`` cosine neighbours under the encoder (faiss, see ``semantic``)."""
    if ctx.encode is None:
        raise ValueError("strategy semantic needs an encoder (sample.semantic.encoder)")
    from pldistill.pairs import semantic  # faiss and torch: loaded by the semantic strategies only

    p, sentences = ctx.params, ctx.sentences
    emb = ctx.encode(sentences)  # (n, dim), L2-normalised
    hits = semantic.neighbours(emb, p.top_k, p.semantic, ctx.seed, chunk=p.semantic.search_chunk)
    return new_pairs(_top_k_pairs(hits, sentences), ctx.gold, "semantic")


@register("given")
def sample_given(ctx: Context) -> pd.DataFrame:
    """The given pairs (data.unscored, cleaned by stage augment): pairs the user already has, unscored."""
    if ctx.given is None:
        raise ValueError("strategy given needs the given pairs (data.unscored)")
    return new_pairs(zip(ctx.given["sentence1"], ctx.given["sentence2"]), ctx.gold, "given")


def merge(parts: list[pd.DataFrame]) -> pd.DataFrame:
    """Union of candidate sets, each unordered pair once; a pair found by several records all, joined by "+"."""
    order: dict[str, tuple[str, str]] = {}
    found_by: dict[str, list[str]] = {}
    for part in parts:
        for a, b, s in zip(part["sentence1"], part["sentence2"], part["strategy"]):
            key = pair_key(a, b)
            if key not in order:
                order[key] = (a, b)
                found_by[key] = []
            if s not in found_by[key]:
                found_by[key].append(s)
    rows = [(a, b, "+".join(found_by[k])) for k, (a, b) in order.items()]
    return pd.DataFrame(rows, columns=["sentence1", "sentence2", "strategy"])


@register("bm25+semantic")
def sample_bm25_semantic(ctx: Context) -> pd.DataFrame:
    """BM25 and semantic search together; a pair both found is kept once, as ``bm25+semantic``."""
    parts = [sample_bm25(ctx), sample_semantic(ctx)]
    ctx.found.update({"bm25": len(parts[0]), "semantic": len(parts[1])})
    return merge(parts)


def sample(ctx: Context) -> pd.DataFrame:
    """The strategy's pairs; several joined by "+" (given+bm25) run each and are merged as ``merge`` says."""
    name = ctx.params.strategy
    if name in REGISTRY:
        return REGISTRY[name](ctx)
    parts = {part: REGISTRY[part](ctx) for part in name.split("+")}
    ctx.found.update({part: len(df) for part, df in parts.items()})
    return merge(list(parts.values()))
