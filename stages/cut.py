"""cut: the student's start (pldistill.students.cut). With ``student.layers: auto``, every cut of ``student.keep``
layers of ``student.model`` is scored untrained on the dev pairs and the best kept; the ranking is
``models/cut/cut.json``, read by stages gold, embed, distill and evaluate. With layers given (or null) it only records
them. With ``student.kind: static``, it distils the static start from a transformer (pldistill.students.static) into
``models/cut/static``, token weights counted on the sentences stage embed learns; with ``static.finetune`` epochs,
that transformer first learns the gold pairs (``models/cut/source``, the space the start and stage embed's target
then lie in)."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pandas as pd

from pldistill.base import schemas
from pldistill.base.cards import card, fit_facts
from pldistill.base.console import detail
from pldistill.base.io import atomic_dir, write_json, write_report
from pldistill.base.seeding import seed_all
from pldistill.data.datasets import gold_dir
from pldistill.data.sentences import gather as sentences_of
from pldistill.models.encoders import BiEncoder
from pldistill.params.config import Params, load_params
from pldistill.params.train import TrainParams
from pldistill.run.runtime import main
from pldistill.students import cut as cutting
from pldistill.students import static_choice
from pldistill.train.wrappers import train_model

# The teacher section's keys static.finetune trains at (dvc.yaml tracks each for this stage): read key by key, not
# the section's overrides of train's keys, which DVC cannot track
FROM_TEACHER = ("lr", "batch_size", "warmup", "max_length", "seed_stop", "group_by_length")


def finetune_params(params: Params, spec: str) -> TrainParams:
    """The training section static.finetune runs: section train's keys, the teacher's ``FROM_TEACHER``, and this
    step's own choices. Validated whole, so a key TrainParams gains is taken from train or refused, never dropped."""
    own = {"model": spec, "epochs": params.static.finetune, "evals_per_epoch": 1, "layers": None, "seeds": 1,
           "soup": False, "loss": "cosine", "trust_remote_code": params.student.trust_remote_code}
    teacher = params.teacher.model_dump(include=set(FROM_TEACHER))
    return TrainParams.model_validate({**params.train.model_dump(), **teacher, **own})


def finetuned(params: Params, clean: Path, dev: pd.DataFrame, spec: str, out: Path) -> tuple[BiEncoder, dict]:
    """``spec`` fine-tuned on the gold pairs for static.finetune epochs (cosine MSE at the teacher section's lr,
    batch_size, warmup and max_length, run as section train says: a teacher candidate's recipe, the best on dev after
    each epoch kept), saved in ``out``; and its fit."""
    train = schemas.read(gold_dir(params, clean) / "train.parquet", schemas.PAIRS)
    tp = finetune_params(params, spec)
    model, res = train_model(tp, params.evaluate, list(train["sentence1"]), list(train["sentence2"]),
                             list(train["score"]), dev, params.seed, desc="cut: static.model on gold")
    fit = res.summary()
    model.save(out, card("Static start's source", "bi", spec, {
        "dataset": params.data.name, "gold pairs learned": len(train), "loss": "MSE of the cosine to the gold score",
        **fit_facts(fit, tp), "seed": params.seed},
        "The transformer the static start was distilled from, fine-tuned on the gold pairs first (static.finetune); "
        "stage embed learns its sentence embeddings."))
    return model, {"source_finetuned": {"epochs": tp.epochs, "pairs": len(train), **fit}}


def static_start(params: Params, clean: Path, dev: pd.DataFrame, tmp: Path, out: Path) -> dict:
    """Distil the static start into ``tmp``/static (from static.model, fine-tuned on gold first into
    ``tmp``/source with static.finetune; of several candidates, the best on dev: pldistill.students.static_choice);
    return what stage cut records (cut.json). ``out``: the folder ``tmp`` becomes, as the later stages name it."""
    st = params.static
    specs, skipped = static_choice.available(params)
    sentences: list[str] = []
    if st.weights == "counts" or st.words:  # the sentences stage embed learns, drawn as it draws them (its corpus too;
        # not its variants: a dropped or swapped word would count as text the task has)
        sentences, _ = sentences_of(params.embed, clean, params.augment.unicode_form, params.augment.min_chars,
                                    seed_all(params.seed)[0], with_variants=False)
    several = sum(spec in specs for spec, _ in cutting.static_candidates(params)) > 1
    untrained = static_choice.untrained_only(params) if several else None
    learned = static_choice.embed_sentences(params, clean) if several and untrained is None else []
    candidates: list[static_choice.Candidate] = []
    tuned: list[dict] = []
    for i, spec in enumerate(specs):
        folder = tmp / (cutting.SOURCE_DIR if len(specs) == 1 else f"{cutting.SOURCE_DIR}-{i}")
        source, facts = _source(params, clean, dev, spec, folder)
        tuned.append(facts)
        whole_dev = cutting.dev_spearman(source, dev, params.evaluate.batch_size)
        mine = static_choice.starts(params, spec, source, i, sentences, dev, whole_dev)
        if several and untrained is None:
            name, weights = (str(out / cutting.SOURCE_DIR), str(folder)) if st.finetune else (spec, spec)
            static_choice.try_embed(params, learned, mine, source, name, weights, dev)
        candidates += mine
        del source  # a transformer is not held beside the next (MPNet: about 420 MB)
    kept = static_choice.best(candidates)
    _save(params, kept, len(specs), tmp)
    result = {"layers": None, "kind": "static", "chosen_by": "student.kind", **kept.facts, **tuned[kept.source]}
    if several:
        how = f"dev untrained ({untrained})" if untrained else "dev after stage embed's step"
        result |= {"chosen_by": how, "candidates": [c.row() for c in candidates]}
        detail(f"cut: of {len(candidates)} static starts, {kept.spec} at {kept.facts['dims']} dims, the best on {how}")
    return result | ({"skipped": skipped} if skipped else {})


def _source(params: Params, clean: Path, dev: pd.DataFrame, spec: str, folder: Path) -> tuple[BiEncoder, dict]:
    """The transformer ``spec`` a start is distilled from: fine-tuned on gold into ``folder`` (static.finetune), or
    as given; and what its fine-tuning did ({} as given)."""
    if params.static.finetune:
        return finetuned(params, clean, dev, spec, folder)
    return BiEncoder.load(spec, params.student.max_length, params.student.trust_remote_code), {}


def _save(params: Params, kept: static_choice.Candidate, sources: int, tmp: Path) -> None:
    """The kept start into ``tmp``/static, its PCA directions beside it, and, of several fine-tuned transformers,
    its own as ``tmp``/source (the others removed)."""
    st, facts = params.static, kept.facts
    if st.finetune and sources > 1:  # the chosen transformer becomes the one source stage embed reads
        (tmp / f"{cutting.SOURCE_DIR}-{kept.source}").rename(tmp / cutting.SOURCE_DIR)
        for i in range(sources):
            shutil.rmtree(tmp / f"{cutting.SOURCE_DIR}-{i}", ignore_errors=True)
    kept.start.save(tmp / cutting.STATIC_DIR, card("Static start", "bi", kept.spec, {
        "dataset": params.data.name, **{k: v for k, v in facts.items() if k not in ("from", "dev", "whole_dev")}},
        "Token vectors distilled from the transformer as Model2Vec does (pldistill/students/static.py): a sentence is "
        "the mean of its tokens' vectors; stages embed and distill train it next."))
    if kept.directions is not None:
        np.save(tmp / cutting.DIRECTIONS_FILE, kept.directions, allow_pickle=False)  # in tmp: written whole
    origin = f"{kept.spec} fine-tuned on gold ({st.finetune} epochs)" if st.finetune else kept.spec
    detail(f"cut: static start from {origin}, {facts['vocab']} tokens x {facts['dims']}, weights {st.weights}: dev "
           f"{facts['dev']} untrained (the whole model {facts['whole_dev']})")


def cut(params: Params, clean: Path, out: Path, report: Path) -> dict:
    """Choose the student's layers into ``out`` (``cut.json``); return the report (the ranking's top five)."""
    dev = schemas.read(gold_dir(params, clean) / "dev.parquet", schemas.PAIRS)
    with atomic_dir(out) as tmp:
        static_kind = params.student.kind == "static"
        choice = static_start(params, clean, dev, tmp, out) if static_kind else cutting.choose(params, dev)
        write_json(tmp / cutting.CUT_FILE, choice)
    result = {k: v for k, v in choice.items() if k != "ranking"}
    if "ranking" in choice:
        result |= {"cuts": len(choice["ranking"]), "top": choice["ranking"][:5]}
    write_report(report, result)
    return result


if __name__ == "__main__":
    main(cut, ["clean", "out", "report"], load=load_params)
