"""Round-trip translation (RTT): paraphrase sentences by translating them out to a pivot language and
back, and the corpus cleaning that goes with it (Liu & al., RTT ensemble distillation).

Backends, behind one registry:
- ``marian``: transformers MarianMT models named by hub id (``Helsinki-NLP/opus-mt-<src>-<lang>`` and
  back by default), or local directories; safetensors weights only; batched by length, with progress.
- ``table``: a user's file of ``sentence, language, translation`` (the round trip's result): how
  translations from any other system come in.
Both are callables (sentences, pivot language) -> paraphrase or None; stage augment picks one by name.
"""

from __future__ import annotations

import unicodedata
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path

import pandas as pd
from tqdm.auto import tqdm

from pldistill.base.cleaning import distinct, normalise, sentence_key
from pldistill.base.errors import RTTError
from pldistill.data.reading import read_sentences, read_table

# A language's script: letters outside it are stripped from its sentences.
SCRIPTS = {"latin": ("LATIN",), "cyrillic": ("CYRILLIC",), "greek": ("GREEK",), "han": ("CJK", "IDEOGRAPHIC"),
           "arabic": ("ARABIC",)}
LANGUAGE_SCRIPT = {**dict.fromkeys(("en", "de", "fr", "es", "nl", "it", "pt", "ro", "sv", "da", "fi", "pl", "cs"),
                                   "latin"),
                   "ru": "cyrillic", "uk": "cyrillic", "el": "greek", "zh": "han", "ar": "arabic"}


def script_of(language: str) -> str:
    if language not in LANGUAGE_SCRIPT:
        raise RTTError(f"no script known for language {language!r}; known: {', '.join(sorted(LANGUAGE_SCRIPT))} "
                       f"(set augment.rtt.script to one of {', '.join(SCRIPTS)})")
    return LANGUAGE_SCRIPT[language]


def strip_script(text: str, script: str) -> str:
    """Drop letters outside ``script`` (digits, punctuation and spaces stay); collapse the spaces left."""
    names = SCRIPTS[script]
    kept = "".join(c for c in text
                   if not unicodedata.category(c).startswith("L") or unicodedata.name(c, "").startswith(names))
    return " ".join(kept.split())


def clean_sentence(text: str, script: str, form: str = "NFKC") -> str:
    """Normalise (which collapses runs of repeated punctuation), then strip letters of other scripts."""
    return strip_script(normalise(text, form), script)


def clean_corpus(sentences: Sequence[str], script: str, min_chars: int,
                 form: str = "NFKC") -> tuple[list[str], Counter]:
    """Clean every sentence; drop those shorter than ``min_chars`` afterwards and repeats (cleaning.sentence_key:
    case, spacing, Unicode form aside), counted by reason."""
    kept: dict[str, str] = {}  # cleaning.sentence_key -> the sentence
    dropped: Counter = Counter()
    for s in sentences:
        c = clean_sentence(s, script, form)
        if len(c) < min_chars:
            dropped["too_short"] += 1
        elif sentence_key(c) in kept:
            dropped["duplicate"] += 1
        else:
            kept[sentence_key(c)] = c
    return list(kept.values()), dropped


def compensate(corpus: list[str], task_sentences: Sequence[str], dropped: int) -> tuple[list[str], int]:
    """Top the corpus back up by up to ``dropped`` sentences from the task's own (unlabelled) pairs that it
    does not hold yet, in their order. Returns the corpus and how many were added."""
    have = {sentence_key(s) for s in corpus}
    extra = distinct(task_sentences, have)[0][:dropped]
    return corpus + extra, len(extra)


# -- backends ----------------------------------------------------------------------------------------
RoundTrip = Callable[[list[str], str], list[str | None]]  # (sentences, pivot language) -> paraphrase or None


class Marian:
    """MarianMT out and back. ``models`` maps a pivot language to (out spec, back spec)."""

    def __init__(self, source: str, models: dict[str, tuple[str, str]], batch_size: int, num_beams: int,
                 max_new_tokens: int, bf16: bool | str):
        self.source, self.models = source, models
        self.batch_size, self.num_beams, self.max_new_tokens, self.bf16 = batch_size, num_beams, max_new_tokens, bf16

    def specs(self, language: str) -> tuple[str, str]:
        return self.models.get(language) or (f"Helsinki-NLP/opus-mt-{self.source}-{language}",
                                              f"Helsinki-NLP/opus-mt-{language}-{self.source}")

    def translate(self, texts: list[str], spec: str) -> list[str]:
        # loaded here, not with the module: torch and sentence-transformers take ~10 s to import on a 2-core CPU,
        # and the backends none and table use neither
        import torch
        from transformers import AutoTokenizer, MarianMTModel

        from pldistill.base.batching import length_sorted_batches
        from pldistill.base.bundled import resolve
        from pldistill.base.device import autocast, device

        path = resolve(spec)
        try:
            model = MarianMTModel.from_pretrained(path, use_safetensors=True).to(device()).eval()
        except OSError as err:
            raise RTTError(f"{spec}: no safetensors MarianMT weights could be loaded ({err}). Some opus-mt "
                           "repositories ship only pickled weights, which are never loaded: use a revision "
                           "or a local directory with model.safetensors (augment.rtt.models)") from None
        tok = AutoTokenizer.from_pretrained(path)
        out: list[str] = [""] * len(texts)
        batches = length_sorted_batches([len(t) for t in texts], self.batch_size)
        with torch.inference_mode(), autocast(self.bf16):
            for idx in tqdm(batches, desc=f"translate {Path(spec).name}", unit="batch", mininterval=2):
                enc = tok([texts[i] for i in idx], return_tensors="pt", padding=True, truncation=True).to(device())
                gen = model.generate(**enc, num_beams=self.num_beams, do_sample=False,
                                     max_new_tokens=self.max_new_tokens)
                for i, text in zip(idx, tok.batch_decode(gen, skip_special_tokens=True)):
                    out[i] = text
        return out

    def __call__(self, sentences: list[str], language: str) -> list[str | None]:
        out_spec, back_spec = self.specs(language)
        return list(self.translate(self.translate(sentences, out_spec), back_spec))


class Table:
    """Round trips a user brings: a table with columns sentence, language, translation."""

    COLUMNS = ("sentence", "language", "translation")

    def __init__(self, path: Path | str, script: str, form: str = "NFKC"):
        path = Path(path)
        if not path.is_file():
            raise RTTError(f"{path}: augment.rtt.table file not found")
        df, bad = read_table(path)
        missing = [c for c in self.COLUMNS if c not in df.columns]
        if missing:
            raise RTTError(f"{path}: expected columns {list(self.COLUMNS)}; missing {missing} "
                           f"(found {list(df.columns)})")
        # Keyed by the sentence cleaned as the corpus is; the first row of a repeated key wins.
        self.lookup: dict[tuple[str, str], str] = {}
        self.counts = Counter(unparsed_lines=bad)
        for s, lang, t in zip(df["sentence"], df["language"], df["translation"]):
            if pd.isna(t) or not str(t).strip():
                self.counts["empty_translation"] += 1
                continue
            key = (clean_sentence(str(s), script, form), str(lang))
            if key in self.lookup:
                self.counts["repeated_rows"] += 1
            else:
                self.lookup[key] = str(t)

    def __call__(self, sentences: list[str], language: str) -> list[str | None]:
        return [self.lookup.get((s, language)) for s in sentences]


# augment.rtt.backend -> the round trip it runs, made from the params and the corpus's script.
BACKENDS: dict[str, Callable[..., RoundTrip]] = {
    "marian": lambda p, script: Marian(p.augment.rtt.source, dict(p.augment.rtt.models), p.augment.rtt.batch_size,
                                       p.augment.rtt.num_beams, p.augment.rtt.max_new_tokens, p.augment.rtt.bf16),
    "table": lambda p, script: Table(p.augment.rtt.table, script, p.augment.unicode_form),
}


def paraphrase(corpus: list[str], languages: Sequence[str], round_trip: RoundTrip, script: str, min_chars: int,
               form: str = "NFKC") -> tuple[pd.DataFrame, Counter]:
    """(sentence, paraphrase, language) for every corpus sentence and pivot language; paraphrases are
    cleaned like the corpus. Rows without a usable paraphrase are dropped and counted by reason; an
    unchanged paraphrase is kept (still a valid positive) and counted."""
    rows, counts = [], Counter()
    for lang in languages:
        for s, translated in zip(corpus, round_trip(corpus, lang)):
            if translated is None:
                counts["no_translation"] += 1
                continue
            p = clean_sentence(translated, script, form)
            if len(p) < min_chars:
                counts["paraphrase_too_short"] += 1
                continue
            counts["unchanged"] += p == s
            rows.append((s, p, lang))
    return pd.DataFrame(rows, columns=["sentence", "paraphrase", "language"]), counts


def load_corpus(path: Path | str) -> list[str]:
    """augment.rtt.corpus: one sentence per line (.txt), or a table with a ``sentence`` column
    (pldistill.data.reading)."""
    return read_sentences(path, "augment.rtt.corpus")
