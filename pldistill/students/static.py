"""A static student (``student.kind: static``): a sentence is the mean of learned token vectors, no transformer at
run time; sentence-transformers' ``StaticEmbedding`` module, so ``SentenceTransformer(path)`` loads it.

Its start is distilled from a transformer bi-encoder as Model2Vec does (Tulkens & van Dongen, 2024):
1. every token of the model's vocabulary through the whole model alone (``[CLS] token [SEP]``, the model's own
   pooling): one vector per token, (vocab, width);
2. PCA onto ``static.dims`` directions (centred on the vocabulary's mean, as scikit-learn's PCA does);
   With ``static.words``, the sentences' most frequent words the vocabulary splits join it, each through the model
   as a sentence (Model2Vec's vocabulary; tokenlearn's whole words);
3. SIF weights ``a / (a + p(token))`` (Arora et al., 2017) scale each row: ``p`` is the token's frequency counted
   on the sentences the student will learn (``static.weights: counts``; add-one smoothed) or, with no task data,
   Model2Vec's proxy from the token's rank in the vocabulary (``zipf``), or no weights (``none``).

Model2Vec's own ``distill`` extra pins transformers below 5.4, which this environment's sentence-transformers
6 and transformers 5 do not allow; the three steps above are all it does that a start needs, written here on
torch and numpy (docs/static-student.md)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from sentence_transformers import SentenceTransformer
from tokenizers import AddedToken, Tokenizer
from tqdm.auto import tqdm

from pldistill.base.device import device
from pldistill.base.errors import ModelError
from pldistill.base.numeric import principal_directions
from pldistill.models.encoders import StaticEmbedding

WEIGHTS = ("counts", "zipf", "none")
VOCAB_BATCH = 512  # tokens per forward pass: each input is 3 tokens long


def fast_tokenizer(model: SentenceTransformer, spec: str) -> Tokenizer:
    """A copy of the model's Rust tokenizer, without padding or truncation (a static model reads every token)."""
    hf = getattr(model, "tokenizer", None)
    inner = getattr(hf, "_tokenizer", None) or getattr(hf, "backend_tokenizer", None)
    if not isinstance(inner, Tokenizer):
        raise ModelError(f"{spec}: a static student needs a fast (Rust) tokenizer to copy; found "
                         f"{type(hf).__name__}. Distil from a model with a tokenizer.json")
    tok = Tokenizer.from_str(inner.to_str())
    tok.no_padding()
    tok.no_truncation()
    return tok


def token_vectors(model: SentenceTransformer, tok: Tokenizer, batch_size: int = VOCAB_BATCH,
                  progress: bool = True) -> np.ndarray:
    """(vocab, width) float32: each token of ``tok``'s vocabulary through ``model`` alone, as a sentence of one
    token between the model's own special tokens, pooled as the model pools (mean, CLS, ...; its Normalize too)."""
    hf = model.tokenizer
    cls_id, sep_id = hf.cls_token_id, hf.sep_token_id
    if cls_id is None or sep_id is None:  # e.g. a RoBERTa-style model: <s> token </s>
        cls_id, sep_id = hf.bos_token_id, hf.eos_token_id
    n = tok.get_vocab_size()
    out: np.ndarray | None = None
    model.eval()
    for start in tqdm(range(0, n, batch_size), desc="static: vocabulary", disable=not progress):
        ids = torch.arange(start, min(start + batch_size, n))
        cols = [ids] if cls_id is None else [torch.full_like(ids, cls_id), ids]
        cols += [] if sep_id is None else [torch.full_like(ids, sep_id)]
        input_ids = torch.stack(cols, dim=1)  # (batch, 3)
        features = {"input_ids": input_ids, "attention_mask": torch.ones_like(input_ids),
                    "token_type_ids": torch.zeros_like(input_ids)}
        with torch.inference_mode():
            emb = model({k: v.to(device()) for k, v in features.items()})["sentence_embedding"].float().cpu().numpy()
        if out is None:
            out = np.empty((n, emb.shape[1]), np.float32)
        out[start : start + len(ids)] = emb
    assert out is not None
    return out


def directions(vectors: np.ndarray, dims: int | None) -> np.ndarray | None:
    """(dims, width) float64: the top ``dims`` principal directions of the vocabulary's vectors (signs fixed: the
    same input gives the same bytes); ``None`` for ``dims`` None (the model's width kept)."""
    if dims is None:
        return None
    if dims > min(vectors.shape):
        raise ModelError(f"static.dims {dims}: the vocabulary's vectors are {vectors.shape[1]} wide; set static.dims "
                         f"to at most {min(vectors.shape)} (or null for the model's width)")
    return principal_directions(vectors, dims)


def pca(vectors: np.ndarray, dims: int | None) -> np.ndarray:
    """(vocab, dims): ``vectors`` centred and projected on their top ``dims`` principal directions (each
    direction's sign fixed: the same input gives the same bytes); ``None``: centred only."""
    return _reduce(vectors, directions(vectors, dims))


def _reduce(vectors: np.ndarray, found: np.ndarray | None) -> np.ndarray:
    """(vocab, dims) float32: ``vectors`` centred, then projected on ``found`` (dims, width) where given."""
    centred = vectors.astype(np.float64) - vectors.mean(axis=0)
    return (centred if found is None else centred @ found.T).astype(np.float32)


def frequent_words(tok: Tokenizer, sentences: Sequence[str], n: int, min_count: int = 2) -> list[str]:
    """The ``n`` words of ``sentences`` most often seen (at least ``min_count`` times) that ``tok`` splits into
    several tokens, as its normaliser and pre-tokeniser see them (lower case for an uncased model); ties by the
    word, so the same sentences give the same list."""
    counts: Counter[str] = Counter()
    vocab = tok.get_vocab()
    for s in sentences:
        text = tok.normalizer.normalize_str(s) if tok.normalizer is not None else s
        words = tok.pre_tokenizer.pre_tokenize_str(text) if tok.pre_tokenizer is not None else [(text, None)]
        counts.update(w for w, _ in words if len(w) > 1 and w.isalpha())
    kept = [(-c, w) for w, c in counts.items() if c >= min_count and w not in vocab]
    return [w for _, w in sorted(kept)[:n]]


def add_words(model: SentenceTransformer, tok: Tokenizer, words: Sequence[str], table: np.ndarray,
              batch_size: int = VOCAB_BATCH) -> np.ndarray:
    """``table`` with one row more per word: the word through ``model`` as a sentence (its own pooling), as
    Model2Vec's vocabulary does; ``tok`` learns each as one token (whole words only), numbered after the vocabulary."""
    if not words:
        return table
    rows = model.encode(list(words), batch_size=batch_size, convert_to_numpy=True, show_progress_bar=False)
    tok.add_tokens([AddedToken(w, single_word=True, normalized=True) for w in words])
    if tok.get_vocab_size() != len(table) + len(words):
        raise ModelError(f"static.words: {len(words)} words added to a vocabulary of {len(table)}, but the tokenizer "
                         f"now has {tok.get_vocab_size()} tokens; some words were tokens already")
    return np.concatenate([table, rows.astype(np.float32)])


def token_counts(tok: Tokenizer, sentences: Sequence[str]) -> np.ndarray:
    """(vocab,) int64: how often each token occurs in ``sentences``, tokenised as the static model tokenises."""
    counts = np.zeros(tok.get_vocab_size(), np.int64)
    for start in range(0, len(sentences), 4096):
        for enc in tok.encode_batch(list(sentences[start : start + 4096]), add_special_tokens=False):
            np.add.at(counts, enc.ids, 1)
    return counts


def sif_weights(how: str, sif: float, counts: np.ndarray | None, vocab: int) -> np.ndarray:
    """(vocab,) float32 weights ``sif / (sif + p)``: ``p`` from ``counts`` (add-one smoothed), or Zipf's law on
    the vocabulary's order (Model2Vec's proxy when no text is counted), or ones (``none``)."""
    if how == "none":
        return np.ones(vocab, np.float32)
    if how == "counts":
        if counts is None:
            raise ModelError("static.weights counts needs the sentences' token counts")
        p = (counts + 1.0) / (counts.sum() + vocab)
    elif how == "zipf":
        inv_rank = 1.0 / np.arange(2, vocab + 2)
        p = inv_rank / inv_rank.sum()
    else:
        raise ModelError(f"static.weights: expected one of {', '.join(WEIGHTS)}; found {how!r}")
    return (sif / (sif + p)).astype(np.float32)


@dataclass
class Vocabulary:
    """A transformer's vocabulary as token vectors: what every start distilled from it shares."""

    spec: str  # the transformer's name
    tok: Tokenizer  # its tokenizer, with the added words
    vectors: np.ndarray  # (vocab, width) float32: each token (and added word) through the transformer
    added: list[str]  # the whole words added (static.words)
    words: int = 0  # how many were asked for


def vocabulary(model: SentenceTransformer, spec: str, sentences: Sequence[str] = (), words: int = 0,
               progress: bool = True) -> Vocabulary:
    """Every token of ``model`` (named ``spec``) through it alone; ``words``: that many of the sentences' frequent
    whole words join the vocabulary (``frequent_words``)."""
    tok = fast_tokenizer(model, spec)
    vectors = token_vectors(model, tok, progress=progress)
    added = frequent_words(tok, sentences, words) if words else []
    return Vocabulary(spec, tok, add_words(model, tok, added, vectors), added, words)


def start(vocab: Vocabulary, dims: int | None, weights: str, sif: float,
          sentences: Sequence[str] = ()) -> tuple[SentenceTransformer, dict, np.ndarray | None]:
    """A static SentenceTransformer from ``vocab`` at ``dims`` (PCA; None: centred only), SIF-weighted; what was
    done, for the report; and the PCA directions (dims, width), None without: the map from the transformer's space
    into the start's, which stage embed applies to its targets so start and targets share one space."""
    found = directions(vocab.vectors, dims)
    table = _reduce(vocab.vectors, found)
    tok = Tokenizer.from_str(vocab.tok.to_str())  # each start its own copy
    counts = token_counts(tok, sentences) if weights == "counts" else None
    table *= sif_weights(weights, sif, counts, len(table))[:, None]
    module = StaticEmbedding(tok, embedding_weights=torch.from_numpy(table), base_model=vocab.spec)
    static = SentenceTransformer(modules=[module], device=device())
    facts = {"from": vocab.spec, "vocab": len(table), "dims": int(table.shape[1]), "weights": weights, "sif": sif,
             **({"words_added": len(vocab.added)} if vocab.words else {})}
    if counts is not None:
        facts |= {"counted_sentences": len(sentences), "counted_tokens": int(counts.sum()),
                  "vocab_seen": int((counts > 0).sum())}
    return static, facts, None if found is None else found.astype(np.float32)


def copy_of(model: SentenceTransformer, spec: str) -> SentenceTransformer:
    """A static model's copy to train, with its own table and tokenizer (``spec``: the transformer it came from)."""
    module = model[0]
    tok = Tokenizer.from_str(module.tokenizer.to_str())
    table = module.embedding.weight.detach().clone()
    return SentenceTransformer(modules=[StaticEmbedding(tok, embedding_weights=table, base_model=spec)],
                               device=device())


def distil(model: SentenceTransformer, spec: str, dims: int | None, weights: str, sif: float,
           sentences: Sequence[str] = (), progress: bool = True, words: int = 0) -> tuple[SentenceTransformer, dict]:
    """A static SentenceTransformer distilled from ``model`` (named ``spec``) and what was done, for the report;
    ``words``: that many of the sentences' frequent whole words join the vocabulary (``frequent_words``)."""
    static, facts, _ = start(vocabulary(model, spec, sentences, words, progress), dims, weights, sif, sentences)
    return static, facts
