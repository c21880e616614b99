"""rtt-ensemble pieces: member weights, the ensemble embedding, the two losses, positives, checks."""

import json

import numpy as np
import pandas as pd
import pytest
import torch

from pldistill.base import schemas
from pldistill.base.errors import ConfigError
from pldistill.models.encoders import BiEncoder, ModelError
from pldistill.params.config import parse_params
from pldistill.recipes import rtt_ensemble
from pldistill.teach import ensemble
from pldistill.train.losses.ensemble import EnsembleDistillLoss
from pldistill.train.losses.info_nce import SimCSELoss


def test_member_weights_mean_and_softmax_of_dev_points():
    assert ensemble.member_weights([80.0, 70.0, 75.0], "mean") == pytest.approx([1 / 3] * 3)
    w = ensemble.member_weights([80.0, 79.0], "softmax")
    assert w == pytest.approx([np.e / (1 + np.e), 1 / (1 + np.e)])  # one point apart: e : 1
    flat = ensemble.member_weights([80.0, 79.0], "softmax", temperature=100.0)
    assert flat[0] - flat[1] == pytest.approx(np.tanh(0.005), rel=1e-6)  # a high temperature: near uniform
    with pytest.raises(ValueError, match="expected mean or softmax"):
        ensemble.member_weights([1.0], "median")


@pytest.fixture
def two_members(tiny_model_dir, tmp_path):
    """An ensemble directory with two different tiny sub-models and a members.json."""
    out = tmp_path / "teacher"
    for i, name in enumerate(("sub-01", "sub-02")):
        m = BiEncoder.load(str(tiny_model_dir), 32)
        torch.manual_seed(i)
        with torch.no_grad():  # make the second member differ from the first
            for p in m.module.parameters():
                p.add_(0.05 * i * torch.randn_like(p))
        m.save(out / name)
    (out / ensemble.MEMBERS_FILE).write_text(json.dumps({"positives": "dropout", "members": [
        {"name": "sub-01", "best_dev": 60.0}, {"name": "sub-02", "best_dev": 59.0}]}))
    return out


def test_ensemble_embedding_is_the_normalised_weighted_mean_of_normalised_members(two_members):
    texts = ["a cat sat on the mat", "rain falls on the river", "music at night"]
    ens = ensemble.Ensemble.load(two_members, "softmax", 1.0, 32)
    a, b = (m.encode(texts, bf16=False) for m in ens.members)
    assert not np.allclose(a, b, atol=1e-3)
    w = ens.weights
    assert w == pytest.approx([np.e / (1 + np.e), 1 / (1 + np.e)])  # softmax of members.json's 60 and 59
    expected = w[0] * a + w[1] * b
    expected /= np.linalg.norm(expected, axis=1, keepdims=True)
    got = ens.encode(texts, bf16=False)
    np.testing.assert_allclose(got, expected, atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1, atol=1e-5)
    pairs = ens.score(texts[:2], texts[1:], bf16=False)
    np.testing.assert_allclose(pairs, np.sum(got[:2] * got[1:], axis=1), atol=1e-5)


def test_ensemble_load_names_what_is_wrong(two_members, tmp_path):
    with pytest.raises(FileNotFoundError, match="no members.json; not an ensemble"):
        ensemble.Ensemble.load(tmp_path, "mean", 1.0, 32)
    (two_members / ensemble.MEMBERS_FILE).write_text(json.dumps({"members": [{"name": "sub-01"}]}))
    with pytest.raises(ModelError, match="members.json: expected"):
        ensemble.Ensemble.load(two_members, "mean", 1.0, 32)


def _embed(model, sentences):
    """(n, dim) embeddings through the model's forward, with gradients where the mode has them."""
    return model.model(model.model.preprocess(sentences))["sentence_embedding"]


def test_simcse_dropout_views_differ_in_training_and_agree_in_eval(tiny_model_dir):
    model = BiEncoder.load(str(tiny_model_dir), 32)
    sents = [f"sentence number {i} about {w}" for i, w in enumerate(["cats", "dogs", "rain", "cars"])]
    loss = SimCSELoss(model.model, 0.05)
    target = torch.zeros(len(sents))
    features = [model.model.preprocess(sents), model.model.preprocess(sents)]  # what the collator hands the loss
    model.module.train()
    torch.manual_seed(0)
    emb = _embed(model, sents + sents)
    assert not torch.allclose(emb[:4], emb[4:])  # two dropout masks: two views of each sentence
    train_loss = loss(features, target)
    model.module.eval()
    with torch.no_grad():
        emb = _embed(model, sents + sents)
        eval_loss = loss(features, target)
    torch.testing.assert_close(emb[:4], emb[4:])  # no dropout: the positive is the sentence's own embedding
    assert train_loss.requires_grad and train_loss.item() > 0
    sim = torch.nn.functional.cosine_similarity(emb[:4].unsqueeze(1), emb[:4].unsqueeze(0), dim=-1) / 0.05
    assert eval_loss.item() == pytest.approx(torch.nn.functional.cross_entropy(sim, torch.arange(4)).item(), rel=1e-5)


def test_distill_loss_is_weighted_mae_plus_infonce(tiny_model_dir):
    model = BiEncoder.load(str(tiny_model_dir), 32)
    model.module.eval()
    sents = ["one small cat", "two big dogs", "rain on the river"]
    F = torch.nn.functional
    with torch.no_grad():
        raw = _embed(model, sents)
        features = [model.model.preprocess(sents)]
        assert not torch.allclose(raw.norm(dim=-1), torch.ones(3))  # the tiny model has no Normalize module
        own = F.normalize(raw, dim=-1)
        same = EnsembleDistillLoss(model.model, 0.1, 0.3)(features, own)  # the student's raw norm does not matter
        info = F.cross_entropy(F.cosine_similarity(own.unsqueeze(1), own.unsqueeze(0), dim=-1) / 0.3, torch.arange(3))
        torch.manual_seed(0)
        other = F.normalize(torch.randn_like(own), dim=-1)
        only_mae = EnsembleDistillLoss(model.model, 0.0, 0.3)(features, other)
        assert only_mae.item() == pytest.approx((own - other).norm(dim=-1).mean().item(), rel=1e-5)
        # InfoNCE rows are the student's sentences, columns the teacher's: not the transpose
        sim = F.cosine_similarity(own.unsqueeze(1), other.unsqueeze(0), dim=-1) / 0.3
        only_nce = EnsembleDistillLoss(model.model, 1.0, 0.3)(features, other)
        assert only_nce.item() == pytest.approx(F.cross_entropy(sim, torch.arange(3)).item(), rel=1e-5)
        assert only_nce.item() != pytest.approx(F.cross_entropy(sim.T, torch.arange(3)).item(), rel=1e-3)
    assert same.item() == pytest.approx(0.1 * info.item(), rel=1e-4)  # MAE to itself is 0


def _clean_dir(tmp_path, paraphrases: pd.DataFrame) -> object:
    train = pd.DataFrame({"sentence1": ["a b c d", "e f g h"], "sentence2": ["e f g h", "i j k l"],
                          "score": [0.1, 0.9]})
    schemas.write(tmp_path / "train.parquet", train, schemas.PAIRS)
    schemas.write(tmp_path / schemas.PARAPHRASES_FILE, paraphrases, schemas.PARAPHRASES)
    for split in ("dev", "test"):
        schemas.write(tmp_path / f"{split}.parquet", pd.DataFrame(columns=["sentence1", "sentence2", "score"]),
                      schemas.PAIRS)
    return tmp_path


def test_corpus_without_paraphrases_is_train_then_given_sentences_less_dev_and_test(tmp_path):
    clean = _clean_dir(tmp_path, pd.DataFrame(columns=schemas.PARAPHRASES.names))
    assert ensemble.corpus(clean) == ["a b c d", "e f g h", "i j k l"]  # no given pairs yet
    given = pd.DataFrame({"sentence1": ["m n o p", "a b c d"], "sentence2": ["q r s t", "u v w x"]})
    schemas.write(clean / schemas.UNSCORED_FILE, given, schemas.UNSCORED)
    schemas.write(clean / "test.parquet", pd.DataFrame({"sentence1": ["q r s t"], "sentence2": ["e f g h"],
                                                        "score": [0.5]}), schemas.PAIRS)
    # a test sentence is never learned, wherever it also appears; order: train's, then the given pairs'
    assert ensemble.corpus(clean) == ["a b c d", "i j k l", "m n o p", "u v w x"]


def test_positive_sets_dropout_seeds_and_rtt_languages(tmp_path):
    empty = pd.DataFrame(columns=schemas.PARAPHRASES.names)
    clean = _clean_dir(tmp_path, empty)
    p = parse_params({"seed": 10, "recipe": "rtt-ensemble", "ensemble": {"k": 3}})
    sets = rtt_ensemble.positive_sets(p, clean)
    assert [(s.name, s.seed, s.language) for s in sets] == [("sub-01", 11, None), ("sub-02", 12, None),
                                                             ("sub-03", 13, None)]
    assert sets[0].sentences == sets[0].positives == ["a b c d", "e f g h", "i j k l"]  # distinct, in order

    rtt = parse_params({"recipe": "rtt-ensemble", "ensemble": {"positives": "rtt"},
                        "augment": {"rtt": {"backend": "table", "table": "t.tsv"}}})
    with pytest.raises(schemas.SchemaError, match="no paraphrases"):
        rtt_ensemble.positive_sets(rtt, clean)
    para = pd.DataFrame({"sentence": ["a b c d", "e f g h", "a b c d"], "paraphrase": ["a b c", "f e g h", "a c d"],
                         "language": ["fr", "fr", "de"]})
    clean = _clean_dir(tmp_path, para)
    sets = rtt_ensemble.positive_sets(rtt, clean)
    assert [(s.name, s.language, s.sentences, s.positives) for s in sets] == [
        ("sub-01", "de", ["a b c d"], ["a c d"]), ("sub-02", "fr", ["a b c d", "e f g h"], ["a b c", "f e g h"])]
    assert ensemble.corpus(clean) == ["a b c d", "e f g h"]  # the RTT corpus, not the pairs
    schemas.write(clean / "dev.parquet", pd.DataFrame({"sentence1": ["A B C D"], "sentence2": ["z z z z"],
                                                       "score": [0.5]}), schemas.PAIRS)
    assert ensemble.corpus(clean) == ["e f g h"]  # a dev sentence (in another case) is never learned
    sets = rtt_ensemble.positive_sets(rtt, clean)
    assert [(s.language, s.sentences) for s in sets] == [("fr", ["e f g h"])]


def test_rtt_sub_models_learn_paraphrases_one_per_language_and_repeat_exactly(tiny_model_dir, tmp_path):
    para = pd.DataFrame({"sentence": [f"the cat number {i} sat" for i in range(12)] * 2,
                         "paraphrase": [f"a cat {i} was sitting" for i in range(12)]
                                       + [f"cat {i} sits" for i in range(12)],
                         "language": ["fr"] * 12 + ["de"] * 12})
    clean = _clean_dir(tmp_path, para)
    dev = pd.DataFrame({"sentence1": ["a cat sat", "rain falls", "a dog ran"],
                        "sentence2": ["the cat sat", "music", "dogs run"],
                        "score": [0.9, 0.1, 0.7]})
    schemas.write(clean / "dev.parquet", dev, schemas.PAIRS)
    model = {"model": str(tiny_model_dir), "max_length": 32}
    p = parse_params({"recipe": "rtt-ensemble", "teacher": model, "evaluate": {"bf16": False},
                      "augment": {"rtt": {"backend": "table", "table": "t.tsv"}},
                      "ensemble": {"positives": "rtt", "k": 9, "sub": {"batch_size": 4, "lr": 1e-3}}})
    a = rtt_ensemble.train_members(p, clean, tmp_path / "a")
    assert [(m["name"], m["language"], m["sentences"], m["steps"]) for m in a["members"]] == [
        ("sub-01", "de", 12, 3), ("sub-02", "fr", 12, 3)]  # k is for dropout; rtt: one per language
    rtt_ensemble.train_members(p, clean, tmp_path / "b")
    for name in ("sub-01", "sub-02"):
        f = f"{name}/model.safetensors"
        assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes()  # same seed, same bytes
    assert json.loads((tmp_path / "a" / ensemble.MEMBERS_FILE).read_text())["positives"] == "rtt"


def test_collapse_is_reported_when_no_member_moved():
    assert rtt_ensemble.collapse_warning([{"best_step": 0}, {"best_step": 0}], "m").startswith("no sub-model beat")
    assert rtt_ensemble.collapse_warning([{"best_step": 0}, {"best_step": 4}], "m") is None


def test_read_embeddings_refuses_ragged_rows(tmp_path):
    f = tmp_path / "ensemble.parquet"
    schemas.write(f, ensemble.embeddings_frame(["a", "b"], np.ones((2, 3))), schemas.EMBEDDINGS)
    sents, emb = ensemble.read_embeddings(f)
    assert sents == ["a", "b"] and emb.shape == (2, 3) and emb.dtype == np.float32
    ragged = pd.DataFrame({"sentence": ["a", "b"], "embedding": [np.ones(3, np.float32), np.ones(2, np.float32)]})
    schemas.write(f, ragged, schemas.EMBEDDINGS)
    with pytest.raises(schemas.SchemaError, match=r"one embedding size; found sizes \[2, 3\]"):
        ensemble.read_embeddings(f)
    schemas.write(f, ensemble.embeddings_frame(["a", "b"], np.array([[1, 0], [np.nan, 1]])), schemas.EMBEDDINGS)
    with pytest.raises(schemas.SchemaError, match="1 embedding.* NaN or inf, first at row 1"):
        ensemble.read_embeddings(f)


def test_student_of_another_width_is_refused(tiny_model_dir, tmp_path):
    student = BiEncoder.load(str(tiny_model_dir), 32)
    with pytest.raises(ModelError, match="ensemble embeds in 384 dimensions, the student .* in 32"):
        rtt_ensemble.check_dims(student, 384, tmp_path / "ensemble.parquet")


def test_config_refuses_rtt_positives_without_translations_and_extra_cycles():
    with pytest.raises(ConfigError, match="augment.rtt.backend is none"):
        parse_params({"recipe": "rtt-ensemble", "ensemble": {"positives": "rtt"}})
    with pytest.raises(ConfigError, match="cycles must be 1"):
        parse_params({"recipe": "rtt-ensemble", "cycles": 2})
    with pytest.raises(ConfigError, match="ensemble.positives: expected one of dropout, rtt"):
        parse_params({"ensemble": {"positives": "backtranslation"}})
    with pytest.raises(ConfigError, match="ensemble.sub.batch_size"):
        parse_params({"ensemble": {"sub": {"batch_size": 1}}})  # InfoNCE needs a negative
