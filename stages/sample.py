"""sample: choose new unlabelled sentence pairs for the teacher to label (sample.strategy)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from pldistill.base import schemas
from pldistill.base.cleaning import distinct
from pldistill.base.io import write_report
from pldistill.base.seeding import numpy_rng
from pldistill.data.sentences import corpus_sentences
from pldistill.pairs import sampling
from pldistill.params.config import Params, load_params
from pldistill.run.runtime import main


def semantic(strategy: str) -> bool:
    """Whether the strategy (or one of those it joins with +) searches with an encoder."""
    return "semantic" in strategy.split("+")


def encoder(params: Params, gold_model: Path) -> tuple[str, Callable[[list[str]], np.ndarray]]:
    """The semantic-search encoder (by default the gold-trained bi-encoder), loaded only when called."""
    sp = params.sample.semantic
    spec = str(gold_model) if sp.encoder == "gold" else sp.encoder

    def encode(texts: list[str]) -> np.ndarray:
        from pldistill.models.encoders import (
            BiEncoder,  # sentence-transformers: ~10 s to import, for semantic search only
        )

        model = BiEncoder.load(spec, sp.max_length, sp.trust_remote_code)
        return model.encode(texts, sp.batch_size, sp.bf16, progress=True)

    return spec, encode


def corpus(params: Params, clean: Path) -> list[str]:
    """sample.corpus: the sentences of embed.corpus as stage embed reads them (cleaned alike, the same
    embed.max_corpus drawn with the seed, dev and test sentences held out); none without it."""
    if not params.sample.corpus:
        return []
    texts = corpus_sentences(params.embed, params.augment.unicode_form, params.augment.min_chars,
                             numpy_rng(params.seed))  # stage embed's draw: its first with this seed
    return distinct(texts, schemas.eval_keys(clean))[0]


def sample(params: Params, clean: Path, gold: Path, out: Path, report: Path) -> dict:
    """Write data/pairs/candidates.parquet: pairs over the training sentences (and sample.corpus's), with the
    strategy that found each."""
    rng = numpy_rng(params.seed)
    train = schemas.read(clean / "train.parquet", schemas.PAIRS)
    sp = params.sample
    spec, encode = encoder(params, gold) if semantic(sp.strategy) else (None, None)
    given = schemas.read(clean / schemas.UNSCORED_FILE, schemas.UNSCORED) if "given" in sp.strategy.split("+") else None
    pool = corpus(params, clean)
    ctx = sampling.Context(train, sp, rng, params.seed, encode=encode, given=given, pool=pool)
    t0 = time.perf_counter()
    pairs = sampling.sample(ctx)
    seconds = time.perf_counter() - t0
    schemas.write(out / schemas.CANDIDATES_FILE, pairs, schemas.CANDIDATES)
    result = {
        "strategy": sp.strategy, "top_k": sp.top_k, "encoder": spec,
        "unique_sentences": len(ctx.sentences), "corpus_sentences": len(pool), "gold_pairs": len(train),
        "candidates": len(pairs),
        # per strategy before the union, and what each final pair was found by
        "found": ctx.found or {sp.strategy: len(pairs)},
        "found_by": {k: int(v) for k, v in pairs["strategy"].value_counts().sort_index().items()},
        "seconds": round(seconds, 2),
    }
    write_report(report, result)
    return result


if __name__ == "__main__":
    main(sample, ["clean", "gold", "out", "report"], load=load_params)
