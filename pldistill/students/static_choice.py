"""Which static start a run keeps (stage cut, ``student.kind: static``). Every candidate (static.model x
static.dims, pldistill.students.cut.static_candidates) is distilled (pldistill.students.static); with several, each
learns its own transformer's embeddings of the sentences exactly as stage embed will
(pldistill.students.embedding.learn: same sentences, seed, rate and steps) and the best dev Spearman after that step is
kept (the first on a tie).

Why after the step, not untrained as the cut ranks layers: on STS-B the untrained start ranked MPNet's table at 384
dims above MiniLM's (79.29 against 79.16 dev), and MiniLM's at 256 below it (78.89), yet the first finished 4.30
test points lower (its targets then in the sentences' PCA directions) and the second 0.38 higher; dev after the step
ranked both as test did (81.35 and 85.61 against 85.31; docs/results.md#static-choice). Where stage embed does not
run, or learns another teacher (embed.teacher), the candidates are ranked untrained."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from pldistill.base.bundled import not_installed, short_hint
from pldistill.base.console import detail, hint
from pldistill.base.errors import ConfigError
from pldistill.base.seeding import seed_all
from pldistill.models.encoders import BiEncoder
from pldistill.params.config import Params
from pldistill.students import cut as cutting
from pldistill.students import embedding, static


@dataclass
class Candidate:
    """One static start: what it was distilled from and at how many dims, and its dev scores."""

    spec: str  # the transformer, as static.model names it
    dims: int | None  # as static.dims gives it
    start: BiEncoder  # the untrained start
    facts: dict  # pldistill.students.static.start's, and the dev scores
    directions: np.ndarray | None  # the PCA directions it was reduced by (pldistill.students.static.start)
    source: int  # which transformer (index into the list of sources)
    embed_dev: float | None = None  # dev after stage embed's step (several candidates only)
    embed_fit: dict = field(default_factory=dict)

    def row(self) -> dict:
        """Its line of the ranking in cut.json."""
        return {"from": self.spec, "dims": self.facts["dims"], "dev": self.facts["dev"],
                **({"embed_dev": self.embed_dev, "embed_steps": self.embed_fit.get("steps")}
                   if self.embed_dev is not None else {})}


def untrained_only(params: Params) -> str | None:
    """Why several candidates are ranked untrained (stage embed's step cannot be run ahead of it), or None."""
    if params.embed.epochs == 0:
        return "stage embed does not run (embed.epochs 0)"
    if params.embed.teacher != "auto":
        return f"stage embed learns embed.teacher ({params.embed.teacher}), not each candidate's own transformer"
    return None


def available(params: Params) -> tuple[list[str], dict[str, str]]:
    """The candidates' transformers that can load here, and why the others cannot (a bundled one not installed is
    skipped as a teacher candidate is; a lone transformer is never skipped: its load error says what to do)."""
    specs = cutting.static_specs(params)
    if len(specs) == 1:
        return specs, {}
    skipped = {s: why for s in specs if (why := not_installed(s))}
    kept = [s for s in specs if s not in skipped]
    if not kept:
        raise ConfigError("static.model: none of its transformers is installed: " + "; ".join(skipped.values()))
    for s in skipped:
        hint(s, f"cut: static.model {s} skipped: {short_hint(s)}")
    return kept, skipped


def starts(params: Params, spec: str, source: BiEncoder, index: int, sentences: list[str], dev: pd.DataFrame,
           whole_dev: float) -> list[Candidate]:
    """Every static.dims start distilled from ``source`` (``spec``, the ``index``-th transformer), scored untrained
    on ``dev``; ``sentences``: those the SIF weights count and static.words draws from."""
    st, batch = params.static, params.evaluate.batch_size
    vocab = static.vocabulary(source.model, spec, sentences, st.words)
    out = []
    for s, dims in cutting.static_candidates(params):
        if s != spec:
            continue
        model, facts, directions = static.start(vocab, dims, st.weights, st.sif, sentences)
        start = BiEncoder(model, "static start")
        facts |= {"dev": cutting.dev_spearman(start, dev, batch), "whole_dev": whole_dev}
        out.append(Candidate(spec, dims, start, facts, directions, index))
    return out


def embed_sentences(params: Params, clean: Path) -> list[str]:
    """The sentences stage embed learns, drawn as it draws them (its seed's first generator)."""
    rng, _ = seed_all(params.seed)
    return embedding.gather(params.embed, clean, params.augment.unicode_form, params.augment.min_chars, rng)[0]


def try_embed(params: Params, sentences: list[str], candidates: list[Candidate], source: BiEncoder, name: str,
              weights: str, dev: pd.DataFrame) -> None:
    """Each of ``candidates`` (of one transformer, ``source``) learns its embeddings of ``sentences``
    (``embed_sentences``) as stage embed will, on a copy; their dev after it into ``embed_dev``. ``name``: the
    transformer as stage embed will name it, so the embeddings go into the store under its key (with the hash of
    ``weights``, its files) and stage embed reads them back rather than encoding again."""
    ep, ev = cutting.static_embed(params), params.evaluate
    key = embedding.bi_key(name, weights)
    raw = embedding.teacher_embeddings([source], key, sentences, params.label.batch_size, params.label.bf16)
    for c in candidates:
        _, gen = seed_all(params.seed)  # stage embed's generator, untouched until its training
        trial = BiEncoder(static.copy_of(c.start.model, c.spec), c.start.name)
        target, _ = embedding.targets(raw, trial.dim, ep, c.directions)
        res = embedding.learn(trial, sentences, target, dev, ep, ev, gen,
                              desc=f"cut: {c.spec} at {c.facts['dims']} dims, embed's step")
        del target
        c.embed_fit = res.summary()
        c.embed_dev = c.embed_fit["best_dev"]
        detail(f"cut: static start from {c.spec} at {c.facts['dims']} dims: dev {c.facts['dev']} untrained, "
               f"{c.embed_dev} after embed's step")


def best(candidates: list[Candidate]) -> Candidate:
    """The best on dev after embed's step (untrained where that did not run); the first of equals."""
    return max(candidates, key=lambda c: (c.facts["dev"] if c.embed_dev is None else c.embed_dev,
                                          -candidates.index(c)))
