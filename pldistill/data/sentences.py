"""The sentences stage embed learns (and a static student's token weights are counted on): the task's, the given
pairs', the paraphrases' and an optional corpus's, every dev and test sentence held out, and variants of them
(pldistill.data.variants). Data only: no model, so stage cut reads them without the training code."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from pldistill.base import schemas
from pldistill.base.cleaning import distinct, normalise, sentence_key
from pldistill.base.errors import DataError
from pldistill.data.reading import read_sentences
from pldistill.data.variants import per_sentence, variants
from pldistill.params.train import EmbedParams


class EmbedError(DataError):
    """The sentences or the teacher cannot give embedding targets; the message says what to change."""


def read_corpus(path: Path) -> list[str]:
    """embed.corpus: a .txt (one sentence a line) or a table with a ``sentence`` column, read as every table is
    (pldistill.data.reading: compressed or not, UTF-8 or UTF-16 with its mark)."""
    return read_sentences(path, "embed.corpus")


def corpus_sentences(params: EmbedParams, unicode_form: str, min_chars: int, rng: np.random.Generator) -> list[str]:
    """embed.corpus's sentences, normalised, at least ``min_chars`` long, each once, and at most embed.max_corpus
    of them (drawn with ``rng``, kept in file order); evaluation sentences are not yet held out."""
    assert params.corpus is not None
    read = read_corpus(Path(params.corpus))  # refuses a file with no sentence, naming it
    corpus = [t for t in (normalise(t, unicode_form) for t in read) if len(t) >= min_chars]
    if not corpus:
        raise EmbedError(f"{params.corpus} (embed.corpus): none of its {len(read):,} sentences has {min_chars} "
                         f"characters or more (augment.min_chars); give longer sentences, or set embed.corpus to null")
    corpus, _ = distinct(corpus)
    if params.max_corpus is not None and len(corpus) > params.max_corpus:
        corpus = [corpus[i] for i in sorted(rng.choice(len(corpus), params.max_corpus, replace=False))]
    return corpus


def gather(params: EmbedParams, clean: Path, unicode_form: str, min_chars: int,
           rng: np.random.Generator, with_variants: bool = True) -> tuple[list[str], dict]:
    """The sentences the student learns, in a fixed order, and how many each source gave.

    Sentences are compared as cleaning.sentence_key compares them (case, spacing, Unicode form aside): one seen
    in dev or test is held out (counted), so no evaluation sentence is learned, and copies are learned once."""
    held = schemas.eval_keys(clean)
    parts: dict[str, list[str]] = {}
    if params.corpus:  # first: its sentences keep their places (and their stored teacher embeddings, chunk by
        # chunk) whatever the seed draws of the task's, so a second student reuses them
        parts["corpus"] = corpus_sentences(params, unicode_form, min_chars, rng)
    if "train" in params.sources:
        parts["train"] = schemas.sentences(clean / "train.parquet")
    if "given" in params.sources:
        parts["given"] = schemas.sentences(clean / schemas.UNSCORED_FILE, schemas.UNSCORED)
    if "paraphrases" in params.sources:
        df = schemas.read(clean / schemas.PARAPHRASES_FILE, schemas.PARAPHRASES)
        parts["paraphrases"] = [*df["sentence"], *df["paraphrase"]]
    seen: dict[str, str] = {}  # sentence_key -> the first spelling seen
    counts = {"held_out_eval": 0}

    def add(name: str, texts: list[str]) -> None:
        before = len(seen)
        for t in texts:
            k = sentence_key(t)
            if k in held:
                counts["held_out_eval"] += 1
            else:
                seen.setdefault(k, t)
        counts[name] = len(seen) - before  # new distinct sentences this source added

    for name, texts in parts.items():
        add(name, texts)
    if not seen:
        raise EmbedError(f"embed: no sentence to learn (sources {list(params.sources)}, corpus {params.corpus}); "
                         f"add a source or set embed.corpus")
    k = per_sentence(params.variants, len(seen)) if with_variants else 0
    if k:  # last: the sentences above keep their places (and stored embeddings) whatever it makes
        made, by_op = variants(list(seen.values()), k, params.variant_ops, rng)
        add("variants", made)
        counts["variants_by_op"] = by_op  # made, before copies and evaluation sentences were left out
    return list(seen.values()), counts
