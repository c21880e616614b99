"""Several static starts (static.model and static.dims as lists): stage cut makes each, runs stage embed's step on
each, keeps the best on dev and says why (pldistill/students/static_choice.py); stage embed then learns the chosen one's
targets in the start's own PCA directions."""

import json

import numpy as np
import pytest
import torch
from sentence_transformers import SentenceTransformer

from pldistill.base.errors import ConfigError
from pldistill.base.numeric import l2_normalise
from pldistill.params.config import parse_params
from pldistill.students import cut as cutting
from pldistill.students import embedding, static_choice
from tests.conftest import run_chain


def _static(raw: dict, static: dict, embed: dict | None = None):
    return parse_params({**raw, "student": {**raw["student"], "kind": "static"},
                         "static": {"lr": 0.05, "embed_lr": 0.05, "finetune": 0, **static},
                         "embed": {**raw["embed"], "epochs": 1, "batch_size": 8, **(embed or {})}})


def test_static_model_and_dims_take_lists_of_distinct_candidates():
    params = parse_params({"static": {"model": ["auto", "bundled:all-MiniLM-L6-v2"], "dims": [None, 256]}})
    # auto is student.model: the same transformer once, each at both dims, in the order given
    assert cutting.static_candidates(params) == [("bundled:all-MiniLM-L6-v2", None), ("bundled:all-MiniLM-L6-v2", 256)]
    one = parse_params({"static": {"model": "auto", "dims": 128}})
    assert cutting.static_candidates(one) == [("bundled:all-MiniLM-L6-v2", 128)]
    with pytest.raises(ConfigError, match="static.dims: .*list of distinct dims; found \\[256, 256\\]"):
        parse_params({"static": {"dims": [256, 256]}})
    with pytest.raises(ConfigError, match="static.dims: expected null or a number of dimensions of at least 2"):
        parse_params({"static": {"dims": [None, 1]}})
    with pytest.raises(ConfigError, match="static.model: .*bundled:<name>"):
        parse_params({"static": {"model": ["auto", "bundled:nope"]}})
    with pytest.raises(ConfigError, match="static.model: .*list of distinct models; found \\[\\]"):
        parse_params({"static": {"model": []}})


def test_targets_take_the_static_starts_own_directions():
    rng = np.random.default_rng(0)
    emb, directions = rng.normal(size=(20, 8)).astype(np.float32), rng.normal(size=(3, 8)).astype(np.float32)
    params = parse_params({}).embed
    target, how = embedding.targets(emb, 3, params, directions)
    assert how == "start"
    np.testing.assert_allclose(target, l2_normalise(emb @ directions.T), rtol=1e-6)
    assert embedding.targets(emb, 3, params)[1] == "pca"  # no start's directions: the sentences' own
    assert embedding.targets(emb, 4, params, directions)[1] == "pca"  # directions of another width: not these
    assert embedding.targets(emb, 8, params, directions)[1] == "none"  # the same width: no projection


def test_cut_keeps_the_start_best_on_dev_after_embeds_step_and_embed_repeats_it(chains, tmp_path):
    chain = chains("augsbert")
    params = _static(chain.params.model_dump(mode="json"), {"dims": [16, None, 4]})
    root = chain.copy_to(tmp_path / "c")
    report = run_chain(params, root, ("cut",))
    choice = json.loads((root / "models/cut/cut.json").read_text())
    rows = choice["candidates"]
    assert [r["dims"] for r in rows] == [16, 32, 4] and choice["chosen_by"] == "dev after stage embed's step"
    assert all(r["embed_steps"] > 0 and isinstance(r["embed_dev"], float) for r in rows)
    best = max(rows, key=lambda r: r["embed_dev"])
    assert choice["dims"] == best["dims"] and report["candidates"] == rows
    start = SentenceTransformer(str(root / "models/cut/static"))
    assert start.encode(["a cat"]).shape == (1, best["dims"])
    reduced = (root / "models/cut/directions.npy").is_file()
    assert reduced == (best["dims"] != 32)  # the tiny model is 32 wide: null keeps it whole

    run_chain(params, root, ("embed",))
    learned = json.loads((root / "metrics/embed.json").read_text())
    # stage embed runs the step cut tried: same sentences, seed, rate, steps, targets; so the same dev
    assert learned["best_dev"] == best["embed_dev"] and learned["steps"] == best["embed_steps"]
    assert learned["projection"] == ("start" if reduced else "none")

    again = run_chain(params, root, ("cut",))  # the same seed: the same choice, the same bytes
    assert again["candidates"] == rows


def test_without_embeds_step_the_starts_rank_untrained_and_cut_says_so(chains, tmp_path):
    chain = chains("augsbert")
    params = _static(chain.params.model_dump(mode="json"), {"dims": [16, 8]}, {"epochs": 0})
    root = chain.copy_to(tmp_path / "c")
    run_chain(params, root, ("cut",))
    choice = json.loads((root / "models/cut/cut.json").read_text())
    assert choice["chosen_by"] == "dev untrained (stage embed does not run (embed.epochs 0))"
    assert all("embed_dev" not in r for r in choice["candidates"])
    assert choice["dims"] == max(choice["candidates"], key=lambda r: r["dev"])["dims"]


def test_best_is_the_highest_dev_after_the_step_and_the_first_of_equals():
    def make(dims, dev, after):
        return static_choice.Candidate("m", dims, None, {"dims": dims, "dev": dev}, None, 0, after)

    tied = [make(384, 79.0, 85.0), make(256, 78.0, 85.0), make(128, 80.0, 84.0)]
    assert static_choice.best(tied).dims == 384  # equal after the step: the first given; untrained dev not asked
    assert static_choice.best([make(384, 79.0, 85.0), make(256, 78.0, 85.1)]).dims == 256
    untrained = [make(384, 79.0, None), make(256, 79.5, None)]
    assert static_choice.best(untrained).dims == 256  # no step run: untrained dev decides


def _other_transformer(tiny_model_dir, tmp_path) -> str:
    """The tiny transformer with its weights shifted by noise: a second source with a space of its own."""
    model = SentenceTransformer(str(tiny_model_dir), device="cpu")
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=gen) * 0.05)
    model.save(str(tmp_path / "other"))
    return str(tmp_path / "other")


def test_several_transformers_each_fine_tuned_and_the_chosen_one_becomes_the_source(chains, tiny_model_dir,
                                                                                    tmp_path, monkeypatch):
    chain = chains("augsbert")
    other = _other_transformer(tiny_model_dir, tmp_path)
    missing = "bundled:all-mpnet-base-v2"  # skipped as not installed, as a teacher candidate is
    monkeypatch.setattr(static_choice, "not_installed", lambda s: "not installed here" if s == missing else None)
    params = _static(chain.params.model_dump(mode="json"),
                     {"model": ["auto", missing, other], "dims": 16, "finetune": 1})
    root = chain.copy_to(tmp_path / "c")
    run_chain(params, root, ("cut",))
    choice = json.loads((root / "models/cut/cut.json").read_text())
    rows = choice["candidates"]
    assert [r["from"] for r in rows] == [params.student.model, other]
    assert choice["skipped"] == {missing: "not installed here"}
    assert rows[0]["dev"] != rows[1]["dev"]  # two spaces: two starts
    best = max(rows, key=lambda r: (r["embed_dev"], -rows.index(r)))
    assert choice["from"] == best["from"]
    folders = sorted(p.name for p in (root / "models/cut").iterdir())
    assert folders == ["cut.json", "directions.npy", "source", "static"]  # the other transformer's copy removed
    resolved = cutting.resolve(params, root / "models/cut", trains="embed")
    assert resolved.static.model == str(root / "models/cut/source")
    run_chain(params, root, ("embed",))  # it learns the chosen transformer's embeddings, as cut's trial did
    learned = json.loads((root / "metrics/embed.json").read_text())
    assert learned["best_dev"] == best["embed_dev"]


def test_several_transformers_as_given_resolve_to_the_chosen_one(chains, tiny_model_dir, tmp_path):
    chain = chains("augsbert")
    other = _other_transformer(tiny_model_dir, tmp_path)
    params = _static(chain.params.model_dump(mode="json"), {"model": ["auto", other], "dims": 16},
                     {"epochs": 0})
    root = chain.copy_to(tmp_path / "c")
    run_chain(params, root, ("cut",))
    choice = json.loads((root / "models/cut/cut.json").read_text())
    assert cutting.resolve(params, root / "models/cut").static.model == choice["from"]
    assert not (root / "models/cut/source").exists()  # static.finetune 0: the transformers as given


def test_no_installed_transformer_is_a_config_error(monkeypatch):
    monkeypatch.setattr(static_choice, "not_installed", lambda s: f"{s} is not installed")
    params = parse_params({"static": {"model": ["auto", "bundled:all-mpnet-base-v2"]}})
    with pytest.raises(ConfigError, match="static.model: none of its transformers is installed"):
        static_choice.available(params)
