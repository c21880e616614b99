"""A static student (student.kind static): the start distilled from a transformer by stage cut
(pldistill.students.static), trained by stages gold, embed and distill as any student, loaded by sentence-transformers
alone."""

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from sentence_transformers import SentenceTransformer

from pldistill.base.errors import ConfigError, ModelError
from pldistill.base.io import sha256_file
from pldistill.models.encoders import BiEncoder, StaticEmbedding, is_static
from pldistill.params.config import parse_params
from pldistill.students import cut as cutting
from pldistill.students import static, token_weights
from pldistill.verdict import verdict
from stages.embed import embed_teacher
from tests.conftest import run_chain


def test_sif_weights_fall_with_a_tokens_frequency():
    counts = np.array([0, 1, 10, 1000])
    w = static.sif_weights("counts", 1e-3, counts, 4)
    assert w.dtype == np.float32 and list(np.argsort(-w)) == [0, 1, 2, 3]  # unseen weighs most, frequent least
    p = (counts + 1.0) / (counts.sum() + 4)
    np.testing.assert_allclose(w, 1e-3 / (1e-3 + p), rtol=1e-6)
    zipf = static.sif_weights("zipf", 1e-3, None, 5)
    assert np.all(np.diff(zipf) > 0)  # later in the vocabulary: rarer by Zipf's law, weighed more
    assert np.all(static.sif_weights("none", 1e-3, None, 3) == 1)
    with pytest.raises(ModelError, match="needs the sentences' token counts"):
        static.sif_weights("counts", 1e-3, None, 3)


def test_pca_is_centred_deterministic_and_refuses_more_dims_than_there_are():
    rng = np.random.default_rng(0)
    v = rng.normal(size=(50, 8)).astype(np.float32) + 3
    a, b = static.pca(v, 4), static.pca(v.copy(), 4)
    assert a.shape == (50, 4) and a.tobytes() == b.tobytes()
    np.testing.assert_allclose(a.mean(axis=0), 0, atol=1e-5)
    var = a.var(axis=0)
    assert np.all(np.diff(var) <= 1e-6)  # the top directions first
    assert static.pca(v, None).shape == (50, 8)
    with pytest.raises(ModelError, match="static.dims 9: the vocabulary's vectors are 8 wide"):
        static.pca(v, 9)


def test_token_counts_count_the_tokens_the_static_model_reads(tiny_model_dir):
    model = BiEncoder.load(str(tiny_model_dir)).model
    tok = static.fast_tokenizer(model, "tiny")
    counts = static.token_counts(tok, ["the cat", "the dog"])
    the = tok.token_to_id("the")
    assert counts[the] == 2 and counts.sum() == 4 and counts[tok.token_to_id("[CLS]")] == 0


def test_frequent_words_the_vocabulary_splits_join_it_as_whole_tokens(tiny_model_dir, tmp_path):
    model = BiEncoder.load(str(tiny_model_dir)).model
    tok = static.fast_tokenizer(model, "tiny")
    sentences = ["Crocodiles swim.", "The crocodiles swam", "Two crocodiles and a gharial", "gharials, gharial!"]
    # counted as the tokenizer normalises (lower case); a word seen once, or already a token, stays out
    assert static.frequent_words(tok, sentences, 10) == ["crocodiles", "gharial"]
    assert static.frequent_words(tok, sentences, 1) == ["crocodiles"]  # the most frequent first
    vocab = tok.get_vocab_size()
    table = static.add_words(model, tok, ["crocodiles", "gharial"], np.zeros((vocab, 32), np.float32))
    assert table.shape == (vocab + 2, 32)
    np.testing.assert_allclose(table[vocab], model.encode("crocodiles"), rtol=1e-5, atol=1e-6)
    ids = tok.encode("CROCODILES near a gharialish gharial", add_special_tokens=False).ids
    assert ids[0] == vocab and ids[-1] == vocab + 1 and vocab + 1 not in ids[:-1]  # whole words only
    static_model, facts = static.distil(model, "tiny", None, "counts", 1e-3, sentences * 2, progress=False, words=5)
    assert facts["words_added"] == 3 and facts["vocab"] == vocab + 3  # "gharials" too, seen twice now
    static_model.save(str(tmp_path / "m"))
    again = SentenceTransformer(str(tmp_path / "m"), device="cpu")  # the words travel in its tokenizer.json
    np.testing.assert_allclose(again.encode(["two gharials"]), static_model.encode(["two gharials"]), rtol=1e-6)


def test_a_static_student_runs_the_pipeline_and_loads_in_sentence_transformers(chains, tmp_path):
    chain = chains("augsbert")
    raw = chain.params.model_dump(mode="json")
    params = parse_params({**raw, "student": {**raw["student"], "kind": "static"},
                           "static": {"dims": 16, "lr": 0.05, "embed_lr": 0.05, "finetune": 0},  # the model as given
                           "embed": {**raw["embed"], "epochs": 1, "batch_size": 8}})
    root = chain.copy_to(tmp_path / "c")
    report = run_chain(params, root, ("cut",))
    choice = json.loads((root / "models/cut/cut.json").read_text())
    assert choice["kind"] == "static" and choice["dims"] == 16 and choice["weights"] == "counts"
    vocab = len((Path(raw["student"]["model"]) / "vocab.txt").read_text().splitlines())  # the tiny model's
    assert choice["counted_sentences"] > 0 and choice["vocab"] == vocab and report["kind"] == "static"
    start = SentenceTransformer(str(root / "models/cut/static"))  # sentence-transformers alone loads it
    assert isinstance(start[0], StaticEmbedding) and start.encode(["a cat"]).shape == (1, 16)
    first = sha256_file(root / "models/cut/static/model.safetensors")
    run_chain(params, root, ("cut",))  # the same seed: the same bytes
    assert sha256_file(root / "models/cut/static/model.safetensors") == first

    resolved = cutting.resolve(params, root / "models/cut")
    assert resolved.student.model == str(root / "models/cut/static") and resolved.student.layers is None
    assert resolved.static.model == params.student.model  # auto: the student's model
    assert resolved.student.lr == params.student.lr and resolved.embed.lr == params.embed.lr  # what evaluate sees
    assert cutting.resolve(params, root / "models/cut", trains="student").student.lr == 0.05  # gold and distill
    assert cutting.resolve(params, root / "models/cut", trains="embed").embed.lr == 0.05
    souped = params.model_copy(update={"static": params.static.model_copy(update={"seeds": 3})})
    as_trained = cutting.resolve(souped, root / "models/cut", trains="student").student
    assert (as_trained.seeds, as_trained.soup) == (3, True)  # static.seeds: a soup, in place of student.seeds
    assert (resolved.student.seeds, resolved.student.soup) == (params.student.seeds, params.student.soup)

    run_chain(params, root, ("gold", "embed", "distill", "evaluate"))
    for trained in ("models/gold", "models/embed", "models/bi"):
        model = BiEncoder.load(str(root / trained))
        assert is_static(model.model) and model.dim == 16, trained
    learned = json.loads((root / "metrics/distill.json").read_text())["token_weights"]  # static.token_weights 1
    assert learned["epochs"] == 1 and learned["steps"] > 0 and isinstance(learned["kept"], bool)
    emb = json.loads((root / "metrics/embed.json").read_text())
    assert emb["projection"] == "start" and emb["teacher_width"] == 32  # the tiny transformer's, by the start's PCA
    assert np.load(root / "models/cut/directions.npy").shape == (16, 32)  # static.dims 16 of its 32
    result = json.loads((root / "metrics/eval.json").read_text())
    assert result["bi"]["speed"] > 0 and result["baseline"]["start"]["speed"] > 0
    free = result["baseline"]["order_free"]  # the teacher with its word order shuffled away (a static student's)
    teacher = result.get("teacher") or result["cross"]
    assert set(free) == {"dev", "test"} and free["test"]["spearman"] != teacher["test"]["spearman"]
    assert any("without word order" in line for line in verdict(result))
    timing = json.loads((root / "metrics/machine/eval.json").read_text())["speed"]
    assert timing["student"]["batch_size"] == params.evaluate.static_batch_size  # as a static model's users encode
    assert timing["teacher"]["batch_size"] == timing["student"]["reference_batch_size"] == params.evaluate.batch_size


def test_a_static_start_from_its_model_fine_tuned_on_gold(chains, tmp_path):
    chain = chains("augsbert")
    raw = chain.params.model_dump(mode="json")
    params = parse_params({**raw, "student": {**raw["student"], "kind": "static"},
                           "static": {"dims": 16, "finetune": 1}})
    root = chain.copy_to(tmp_path / "c")
    run_chain(params, root, ("cut",))
    choice = json.loads((root / "models/cut/cut.json").read_text())
    tuned = choice["source_finetuned"]
    assert tuned["epochs"] == 1 and tuned["pairs"] > 0 and tuned["steps"] > 0
    source = BiEncoder.load(str(root / "models/cut/source"))  # the transformer, fine-tuned, beside the start
    whole = BiEncoder.load(params.student.model)
    assert not is_static(source.model)
    a, b = (m.model.encode(["a cat"], convert_to_numpy=True) for m in (source, whole))
    assert not np.allclose(a, b)  # it learned the gold pairs
    resolved = cutting.resolve(params, root / "models/cut", trains="embed")
    assert resolved.static.model == str(root / "models/cut/source")  # stage embed learns its embeddings
    assert embed_teacher(resolved) == resolved.static.model
    first = sha256_file(root / "models/cut/static/model.safetensors")
    run_chain(params, root, ("cut",))  # the same seed: the same bytes
    assert sha256_file(root / "models/cut/static/model.safetensors") == first
    run_chain(params, root, ("gold", "embed", "distill", "evaluate"))
    timing = json.loads((root / "metrics/machine/eval.json").read_text())["speed"]
    assert timing["reference"] == f"{params.student.model} whole, torch fp32"  # as given, not the start's source


def test_static_is_refused_where_the_recipe_needs_a_transformer_and_without_stage_cut():
    with pytest.raises(ConfigError, match="student.kind static .* recipe dse needs a transformer student"):
        parse_params({"recipe": "dse", "student": {"kind": "static"}})
    with pytest.raises(ConfigError, match="static.weights: expected one of counts"):
        parse_params({"static": {"weights": "tfidf"}})
    with pytest.raises(ConfigError, match="student.kind is static: the stage needs stage cut's folder"):
        cutting.resolve(parse_params({"student": {"kind": "static"}}), None)


def _noisy_static(tiny_model_dir, tmp_path) -> BiEncoder:
    """A static model whose "the" outweighs every word (10 times as long, its own direction), so pairs that share
    many a "the" look alike whatever their words; "cat" and "dog" point their own ways."""
    source = SentenceTransformer(str(tiny_model_dir))
    tok = static.fast_tokenizer(source, "tiny")
    table = np.random.default_rng(0).normal(scale=0.01, size=(tok.get_vocab_size(), 3)).astype(np.float32)
    ids = {w: tok.token_to_id(w) for w in ("cat", "dog", "the")}
    table[ids["cat"]], table[ids["dog"]], table[ids["the"]] = [1, 0, 0], [0, 1, 0], [0, 0, 10]
    model = SentenceTransformer(modules=[StaticEmbedding(tok, embedding_weights=torch.from_numpy(table))])
    model.save(str(tmp_path / "noisy"))
    return BiEncoder.load(str(tmp_path / "noisy"))


def _noisy_pairs(n: int) -> pd.DataFrame:
    """Same animal (score 1) with few "the"; different animals (0) with many: the start ranks them backwards."""
    rows = []
    for i in range(n):
        a, b = ("cat", "dog") if i % 2 else ("dog", "cat")
        rows.append((a, f"the {a}", 1.0) if i % 4 < 2 else (f"the the the {a}", f"the the the {b}", 0.0))
    return pd.DataFrame(rows, columns=["sentence1", "sentence2", "score"])


def test_token_weights_learn_to_quiet_a_noisy_token_and_fold_into_the_table(tiny_model_dir, tmp_path):
    model = _noisy_static(tiny_model_dir, tmp_path)
    before = model.model[0].embedding.weight.detach().clone()
    train, dev = _noisy_pairs(32), _noisy_pairs(8)
    params = parse_params({"static": {"token_weights": 3, "token_weights_lr": 0.3},
                           "student": {"batch_size": 8, "evals_per_epoch": 2}})
    done = token_weights.learn(model, list(train["sentence1"]), list(train["sentence2"]), list(train["score"]), dev,
                               params.student, params.static, params.evaluate, seed=0)
    assert done["kept"] and done["best_dev"] > done["dev_before"]  # the start ranked the pairs backwards
    after = model.model[0].embedding.weight.detach()
    assert list(model.model.state_dict()) == ["0.embedding.weight"]  # folded: a plain StaticEmbedding again
    the = model.model[0].tokenizer.token_to_id("the")
    assert after[the].norm() < 10  # the noisy token quieted
    assert torch.equal(after[the] / after[the].norm(), before[the] / before[the].norm())  # only its length moved
    unseen = model.model[0].tokenizer.token_to_id("river")
    assert torch.equal(after[unseen], before[unseen])  # a token no pair holds keeps its vector to the bit


def test_token_weights_leave_the_model_as_it_was_where_dev_prefers_none(tiny_model_dir, tmp_path):
    model = _noisy_static(tiny_model_dir, tmp_path)
    before = model.model[0].embedding.weight.detach().clone()
    dev = pd.DataFrame({"sentence1": ["cat", "dog"], "sentence2": ["cat", "cat"], "score": [1.0, 0.0]})  # ranked
    train = _noisy_pairs(16)
    params = parse_params({"static": {"token_weights": 1}, "student": {"batch_size": 8}})
    done = token_weights.learn(model, list(train["sentence1"]), list(train["sentence2"]), list(train["score"]), dev,
                               params.student, params.static, params.evaluate, seed=0)
    assert not done["kept"]  # dev was perfect at the start: nothing beats it
    assert torch.equal(model.model[0].embedding.weight.detach(), before)  # weights of 1, to the bit
    off = parse_params({"static": {"token_weights": 0}})
    assert token_weights.learn(model, ["cat"], ["dog"], [0.0], dev, off.student, off.static, off.evaluate, 0) is None
