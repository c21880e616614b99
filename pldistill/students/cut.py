"""Which layers a pruned student keeps. ``student.layers: auto`` scores every cut of ``student.keep`` layers of
``student.model``, untrained, on the dev pairs (the Spearman of the cosine against the gold score) and keeps the
best: a cut's untrained score is where its training starts, and its encode cost depends on how many layers it
keeps, not which (docs/fast-student.md: on STS-B, [0, 5] is the best 2-layer start and the best after training).

Stage cut writes the ranking (``CUT_FILE`` in its folder, a cached artifact); the stages that build the student
(gold, embed, distill, evaluate) read the choice through ``resolve``, so no other code sees ``auto``.

``student.kind: static``: stage cut makes the static start instead (pldistill.students.static; ``STATIC_DIR`` in its
folder), from static.model or, with static.finetune, from that model fine-tuned on gold (``SOURCE_DIR``), and
``resolve`` makes it the student's model, with the static section's learning rates, and the transformer it came from
static.model."""

from __future__ import annotations

import itertools
import json
from math import comb
from pathlib import Path

import numpy as np
import pandas as pd

from pldistill.base.console import detail
from pldistill.base.errors import ConfigError
from pldistill.base.metrics import correlation
from pldistill.models.encoders import BiEncoder, prune_layers
from pldistill.params.config import Params
from pldistill.params.train import EmbedParams

CUT_FILE = "cut.json"
DIRECTIONS_FILE = "directions.npy"  # static.dims: the PCA directions the start was reduced by, (dims, width)
STATIC_DIR = "static"  # student.kind static: the start, a sentence-transformers model of one StaticEmbedding
SOURCE_DIR = "source"  # static.finetune > 0: the transformer fine-tuned on gold that the start is distilled from
MAX_CUTS = 256  # C(12, 2) = 66, C(12, 3) = 220 fit; past this, name the layers (student.layers: [0, 5, 11])


def depth(model: BiEncoder) -> int:
    """How many transformer layers ``model`` has."""
    return int(BiEncoder._transformer(model.model).config.num_hidden_layers)


def cuts(total: int, keep: int, spec: str) -> list[tuple[int, ...]]:
    """Every choice of ``keep`` of ``total`` layers, in order; an error naming the keys when there are too many."""
    if keep > total:
        raise ConfigError(f"student.keep {keep}: {spec} has only {total} transformer layers; set student.keep to at "
                          f"most {total} (or student.layers to null for the whole model)")
    if comb(total, keep) > MAX_CUTS:
        raise ConfigError(f"student.keep {keep} of {spec}'s {total} layers: {comb(total, keep)} cuts to score, more "
                          f"than {MAX_CUTS}; name the layers instead (student.layers: [...])")
    return list(itertools.combinations(range(total), keep))


def dev_spearman(model: BiEncoder, dev: pd.DataFrame, batch_size: int) -> float:
    """The untrained model's Spearman x100 on ``dev``, scored in fp32 (the same ranking on every CPU)."""
    return correlation(model.score(dev["sentence1"], dev["sentence2"], batch_size, False), dev["score"])["spearman"]


def rank(whole: BiEncoder, keep: int, dev: pd.DataFrame, batch_size: int) -> list[dict]:
    """Every ``keep``-layer cut of ``whole`` with its untrained dev Spearman, best first (ties: the earlier cut)."""
    rows = []
    for layers in cuts(depth(whole), keep, whole.name):
        # one load: each cut scored in place, its layers put back after (a copy a cut cost 0.13 s of its 0.4)
        restore = prune_layers(BiEncoder._transformer(whole.model), layers, whole.name)
        try:
            rows.append({"layers": list(layers), "dev": dev_spearman(BiEncoder(whole.model, whole.name), dev,
                                                                     batch_size)})
        finally:
            restore()
        detail(f"cut {list(layers)}: dev {rows[-1]['dev']}")
    return sorted(rows, key=lambda r: (-r["dev"], r["layers"]))


def choose(params: Params, dev: pd.DataFrame) -> dict:
    """What stage cut writes: the layers the student keeps (null: the whole model) and, for ``auto``, why."""
    sp = params.student
    if sp.layers != "auto":
        return {"layers": None if sp.layers is None else list(sp.layers), "chosen_by": "student.layers"}
    whole = BiEncoder.load(sp.model, sp.max_length, sp.trust_remote_code)
    total = depth(whole)
    if sp.keep == total:
        return {"layers": None, "chosen_by": f"student.keep {sp.keep}: every layer of the model", "keep": sp.keep}
    ranking = rank(whole, sp.keep, dev, params.evaluate.batch_size)
    return {"layers": ranking[0]["layers"], "chosen_by": "dev", "keep": sp.keep, "of": total,
            "dev": ranking[0]["dev"], "whole_dev": dev_spearman(whole, dev, params.evaluate.batch_size),
            "ranking": ranking}


def read(cut_dir: Path) -> dict:
    """Stage cut's choice, read back; an error saying how to make it when it is missing or unreadable."""
    path = cut_dir / CUT_FILE
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise ConfigError(f"{path}: student.layers is auto, but stage cut's choice cannot be read ({err}); "
                          "run it: dvc repro cut") from None


def start_directions(cut_dir: Path | None) -> np.ndarray | None:
    """The PCA directions stage cut reduced the static start by (``DIRECTIONS_FILE``), or None (not reduced)."""
    path = None if cut_dir is None else cut_dir / DIRECTIONS_FILE
    return np.load(path, allow_pickle=False) if path is not None and path.is_file() else None


def static_candidates(params: Params) -> list[tuple[str, int | None]]:
    """The static starts stage cut makes, (transformer, dims) in the order given: every static.model (auto meaning
    student.model) at every static.dims; the first is kept on a tie."""
    dims = params.static.dims if isinstance(params.static.dims, tuple) else (params.static.dims,)
    return [(spec, d) for spec in static_specs(params) for d in dims]


def static_specs(params: Params) -> list[str]:
    """static.model's transformers, auto meaning student.model, each once, in the order given."""
    models = params.static.model if isinstance(params.static.model, tuple) else (params.static.model,)
    return list(dict.fromkeys(params.student.model if m == "auto" else m for m in models))


def static_from(params: Params, cut_dir: Path | None = None) -> str:
    """The transformer a static student is distilled from: static.model, auto meaning student.model (of several,
    the one stage cut chose, read from ``cut_dir``); with static.finetune, that model fine-tuned on gold, which stage
    cut saves in ``cut_dir`` (when given)."""
    if params.static.finetune and cut_dir is not None:
        return str(cut_dir / SOURCE_DIR)
    specs = static_specs(params)
    if len(specs) > 1 and cut_dir is not None:
        return read(cut_dir)["from"]
    return specs[0]


def static_embed(params: Params) -> EmbedParams:
    """Section embed as a static student's embedding step runs it: at static.embed_lr."""
    return params.embed.model_copy(update={"lr": params.static.embed_lr})


def resolve(params: Params, cut_dir: Path | None, trains: str | None = None) -> Params:
    """``params`` with ``student.layers: auto`` replaced by the cut stage cut chose (in ``cut_dir``); unchanged
    otherwise. A static student (student.kind static) becomes stage cut's static start, with static.model resolved;
    ``trains``, what the calling stage trains it with: ``student`` (at static.lr, a soup of static.seeds) or ``embed``
    (at static.embed_lr)."""
    if params.student.kind == "static":
        if cut_dir is None:
            raise ConfigError("student.kind is static: the stage needs stage cut's folder (--cut models/cut), where "
                              "the static start is made")
        student = {"model": str(cut_dir / STATIC_DIR), "layers": None}
        if trains == "student":
            student["lr"] = params.static.lr
            # every seed to its end, averaged where dev prefers (pldistill/train/wrappers.py)
            if params.static.seeds > 1:
                student.update(seeds=params.static.seeds, soup=True)
        return params.model_copy(update={"student": params.student.model_copy(update=student),
                                         "embed": static_embed(params) if trains == "embed" else params.embed,
                                         "static": params.static.model_copy(
                                             update={"model": static_from(params, cut_dir)})})
    if params.student.layers != "auto":
        return params
    if cut_dir is None:
        raise ConfigError("student.layers is auto: the stage needs stage cut's folder (--cut models/cut); or set "
                          "student.layers to a list of layers or null")
    layers = read(cut_dir)["layers"]
    student = params.student.model_copy(update={"layers": None if layers is None else tuple(layers)})
    return params.model_copy(update={"student": student})
