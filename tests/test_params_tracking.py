"""dvc.yaml tracks, for every stage, each params key the stage reads and no key it never reads: a key
missing serves stale results when it changes; a key too many re-runs the stage for nothing.

What a stage reads is recorded while it really runs (conftest.ParamReads): in the chains the tests share
(each recipe, a classification table, domain adaptation), then in a few stages run again, on copies, with
the settings whose branches read more keys (every sampling strategy and faiss index, KDE selection,
round-trip translation by table and by MarianMT). dvc.yaml is one file for every recipe, so a stage
tracks what it reads under any of them.
"""

from pathlib import Path

import pandas as pd
import pytest
import yaml
from pydantic import BaseModel

from pldistill.params.config import Params, parse_params, step_sections
from pldistill.params.recipes import RECIPES
from pldistill.params.train import SharedStepParams
from tests.conftest import CHAINS, ROOT, STAGES, make_pairs, run_chain
from tests.test_rtt import tiny_marian_dir  # noqa: F401  (a fixture: the MarianMT of the marian variant)

DVC_STAGES = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]

# Keys a stage tracks but no run here reads, each with the branch that reads it. Kept exact: a key that a
# run does read must leave this list.
def _scheduled(*sections: str) -> dict[str, str]:
    """checkpoint_seconds of these training sections: read when a checkpoint falls due, with checkpoints on."""
    return dict.fromkeys((f"{s}.checkpoint_seconds" for s in ("train", *sections)),
                         "the checkpoint schedule (training.Run.save_due), checkpoints on")


NOT_RUN: dict[str, dict[str, str]] = {
    # gold tracks student whole (a run's checkpoint fingerprint dumps the section whole: pldistill.train.training)
    "gold": _scheduled("student"),
    "teacher": _scheduled("teacher", "ensemble.sub"),
    # embed.corpus auto is resolved from data.dataset and data.source as params.yaml is parsed (config.Params.
    # _auto_corpus), before any stage reads a key: the demo read from another file learns no demo sentences
    "cut": {"data.source": "embed.corpus auto's resolution, at parse time",
            "embed.checkpoint_seconds": _scheduled()["train.checkpoint_seconds"]},
    "sample": dict.fromkeys(("data.dataset", "data.source"), "embed.corpus auto's resolution, at parse time"),
    "embed": {"data.source": "embed.corpus auto's resolution, at parse time", **_scheduled("embed")},
    "distill": {**dict.fromkeys((f"sample.semantic.{k}" for k in ("nlist", "nprobe", "hnsw_m", "ef_search")),
                                "augsbert's later cycles mining with an ivf or hnsw index"),
                **_scheduled("student", "dse", "trans.cross", "trans.bi", "ensemble.distill")},
}


def _update(raw: dict, changes: dict) -> dict:
    """``raw`` with ``changes`` merged in, section by section."""
    out = dict(raw)
    for k, v in changes.items():
        out[k] = _update(raw.get(k) or {}, v) if isinstance(v, dict) and v else v
    return out


def variants(tables: Path, marian: Path) -> list[tuple[str, str, tuple[str, ...], dict]]:
    """(run name, chain copied, stages run again, params changed) for the branches the chains do not take."""
    table = tables / "translations.csv"
    pd.DataFrame({"sentence": ["the cat story number 0 is here"], "language": ["de"],
                  "translation": ["a cat story, number 0, is here"]}).to_csv(table, index=False)
    corpus = tables / "corpus.txt"
    # The tiny MarianMT knows the pieces of conftest.make_pairs' sentences (the classification chain's) only.
    corpus.write_text("the cat story number 3 is here\na rain story about 5 things\nok\n")  # "ok": dropped
    pairs = tables / "pairs.csv"  # no split column: split by data.split (adapt.split)
    make_pairs(100, offset=700).to_csv(pairs, index=False)
    kde = {"sample": {"strategy": "kde", "kde": {"pool": 200}}}
    embed = {"embed": {"epochs": 1, "corpus": str(corpus), "max_corpus": 2, "batch_size": 8},
             "teacher": {"kind": "bi", "finetune": False}}
    return [
        *((f"sample {s}", "augsbert", ("sample",), {"sample": {"strategy": s}})
          for s in ("none", "random", "bm25+semantic")),
        *((f"sample semantic {i}", "augsbert", ("sample",),
           {"sample": {"strategy": "semantic", "semantic": {"index": i}}}) for i in ("flat", "torch", "ivf", "hnsw")),
        ("kde", "augsbert", ("sample", "label"), kde),
        ("sample corpus", "augsbert", ("sample",),
         {"sample": {"corpus": True}, "embed": {"corpus": str(corpus), "max_corpus": 2}}),
        ("augsbert cycles", "augsbert", ("distill",), {"cycles": 2, "rounds": {"pairs": 8, "top_k": 2}}),
        ("embed", "augsbert", ("teacher", "embed", "distill"), embed),
        ("given pairs", "augsbert", ("download", "augment", "sample"),
         {"data": {"unscored": "rest"}, "sample": {"strategy": "given+bm25"}}),
        ("kde under adaptation", "adaptation", ("sample", "label"), kde),
        ("adaptation from a table", "adaptation", ("download",),
         {"adapt": {"dataset": str(pairs), "score_range": [0, 1]}}),
        ("cut chosen on dev", "augsbert", ("cut", "embed"),  # (the others read the choice as test_cut checks)
         {"student": {"layers": "auto", "keep": 1}, "embed": {"epochs": 1, "batch_size": 8}}),
        ("static student", "augsbert", ("cut", "gold", "embed", "distill", "evaluate"),
         {"student": {"kind": "static"}, "static": {"dims": 16, "finetune": 0},
          "embed": {"epochs": 1, "corpus": str(corpus), "max_corpus": 2, "batch_size": 8}}),
        ("static student, several starts", "augsbert", ("cut",),
         {"student": {"kind": "static"}, "static": {"dims": [16, 8], "finetune": 0},
          "embed": {"epochs": 1, "corpus": str(corpus), "max_corpus": 2, "batch_size": 8}}),
        ("static student from its model fine-tuned on gold", "augsbert", ("cut", "embed"),
         {"student": {"kind": "static"}, "static": {"dims": 16, "finetune": 1},
          "embed": {"epochs": 1, "batch_size": 8}}),
        ("evaluation sets", "augsbert", ("evaluate",),
         {"evaluate": {"extra": [{"name": "pairs", "data": {"dataset": str(pairs)}}]}}),
        ("rtt table", "augsbert", ("augment",), {"augment": {"rtt": {"backend": "table", "table": str(table)}}}),
        ("rtt marian, own corpus", "classification", ("augment",), {"augment": {"rtt": {
            "backend": "marian", "models": {"de": [str(marian), str(marian)]}, "corpus": str(corpus),
            "num_beams": 1, "max_new_tokens": 8, "bf16": False}}}),
    ]


@pytest.fixture(scope="module")
def reads(chains, tmp_path_factory, tiny_marian_dir) -> dict[str, dict[str, set[str]]]:  # noqa: F811
    """run -> stage -> the params keys the stage read in that run."""
    runs = {name: chains(name).reads for name in CHAINS}
    work = tmp_path_factory.mktemp("variants")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PLDISTILL_STORE", str(work / "store"))  # the stored steps of augsbert's cycles
        for name, chain_name, stages, changes in variants(work, tiny_marian_dir):
            chain = chains(chain_name)
            params = parse_params(_update(chain.params.model_dump(mode="json"), changes))
            runs[name] = {}
            run_chain(params, chain.copy_to(work / name.replace(" ", "-").replace(",", "")), stages,
                      reads=runs[name])
    return runs


def leaves(key: str) -> list[str]:
    """The keys under ``key`` that hold a value: ``key`` itself, or every such key of the section it names."""
    model: type[BaseModel] | None = Params
    for part in key.split("."):
        assert model is not None and part in model.model_fields, f"dvc.yaml tracks {key!r}: params has no such key"
        ann = model.model_fields[part].annotation
        model = ann if isinstance(ann, type) and issubclass(ann, BaseModel) else None
    return [key] if model is None else [leaf for name in model.model_fields for leaf in leaves(f"{key}.{name}")]


def tracked(stage: str) -> list[str]:
    return DVC_STAGES[stage].get("params", [])


SECTIONS = {".".join(path) for path in step_sections(Params)}  # the training sections, each inheriting train's keys


def inherited(key: str) -> str | None:
    """For a key a training section inherits from section train (``student.bf16``), that section (``student``)."""
    section, _, name = key.rpartition(".")
    return section if section in SECTIONS and name in SharedStepParams.model_fields else None


def read_keys(by_stage: dict[str, set[str]], stage: str) -> set[str]:
    """What ``stage`` read, an inherited key read as itself and as section train's (``student.bf16``: train.bf16)."""
    keys = by_stage.get(stage, set())
    return keys | {f"train.{k.rpartition('.')[2]}" for k in keys if inherited(k)}


def test_the_chains_run_every_recipe_and_every_stage():
    assert set(RECIPES) <= set(CHAINS)
    # check tracks no key: it depends on params.yaml as a file, so a key no stage reads (a typo) reruns it
    assert list(DVC_STAGES) == ["check", *STAGES]
    assert "params" not in DVC_STAGES["check"] and "params.yaml" in DVC_STAGES["check"]["deps"]


@pytest.mark.parametrize("stage", STAGES)
def test_stage_tracks_every_key_it_reads(reads, stage):
    declared = tracked(stage)
    missing: dict[str, list[str]] = {}
    for run, by_stage in reads.items():
        for key in sorted(read_keys(by_stage, stage)):
            if not any(key == d or key.startswith(f"{d}.") for d in declared):
                missing.setdefault(key, []).append(run)
            # an inherited key is in the section only once a user adds it (-S ++student.bf16=true), and DVC tracks no
            # key params.yaml lacks: the stage must track the whole section to see that override
            section = inherited(key)
            if section and not any(section == d or section.startswith(f"{d}.") for d in declared):
                missing.setdefault(f"{section} (whole: {key} is inherited from train)", []).append(run)
    assert not missing, (f"stage {stage} reads params keys dvc.yaml does not track; add them to stages.{stage}.params "
                         "(a key of a recipe's own section: to its spec's reads in pldistill/params/recipes.py, then "
                         "python scripts/stage_deps.py --write): "
                         + "; ".join(f"{k} (in {', '.join(runs)})" for k, runs in missing.items()))


@pytest.mark.parametrize("stage", STAGES)
def test_stage_tracks_no_key_it_never_reads(reads, stage):
    read = set().union(*(read_keys(by_stage, stage) for by_stage in reads.values()))
    unread = {leaf for d in tracked(stage) for leaf in leaves(d)} - read
    documented = NOT_RUN.get(stage, {})
    assert not unread - set(documented), (
        f"stage {stage} tracks params keys no run read: {sorted(unread - set(documented))}; drop them from "
        f"stages.{stage}.params (or a section's key from its list; a recipe's key from its spec's reads, then "
        f"python scripts/stage_deps.py --write), or, if a branch no run here takes reads "
        f"one, add a run that takes it (variants) or name the branch in NOT_RUN")
    stale = set(documented) - unread
    assert not stale, f"stage {stage}: NOT_RUN names keys that a run read or that it does not track: {sorted(stale)}"
