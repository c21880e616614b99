"""Round-trip translation (pldistill/data/rtt.py, stage augment): cleaning, compensation, the table backend,
and the marian backend on a tiny randomly initialised MarianMT model built from a config."""

import io
import json
import shutil

import pandas as pd
import pytest
import torch

from pldistill.base import schemas
from pldistill.base.errors import ConfigError
from pldistill.data import rtt
from pldistill.params.config import parse_params
from stages.augment import augment
from tests.conftest import make_pairs


def test_cleaning_strips_other_scripts_collapses_punctuation_and_drops_short():
    assert rtt.clean_sentence("Hello 世界 world!!!", "latin") == "Hello world!"
    assert rtt.clean_sentence("Café Привет ok", "latin") == "Café ok"  # accents are Latin
    assert rtt.clean_sentence("Привет, mир", "cyrillic") == "Привет, ир"  # noqa: RUF001 -- Cyrillic on purpose: the script kept
    kept, dropped = rtt.clean_corpus(["A fine sentence.", "ok", "日本", "a FINE sentence.", "Another one!!"],
                                     "latin", 4)
    assert kept == ["A fine sentence.", "Another one!"]
    assert dict(dropped) == {"too_short": 2, "duplicate": 1}  # "日本" is empty once stripped


def test_compensation_tops_up_with_new_task_sentences_only():
    corpus, added = rtt.compensate(["a b c d"], ["A B C D", "e f g h", "E F G H", "i j k l", "m n o p"], dropped=2)
    assert corpus == ["a b c d", "e f g h", "i j k l"] and added == 2


def test_unknown_language_names_the_setting():
    with pytest.raises(rtt.RTTError, match="augment.rtt.script"):
        rtt.script_of("xx")


def test_table_backend_through_the_stage_counts_what_it_drops(tmp_path):
    raw = tmp_path / "raw" / "demo"
    for split in ("train", "dev", "test"):
        schemas.write(raw / f"{split}.parquet", make_pairs(4), schemas.PAIRS)
    train_sentences = list(dict.fromkeys([*make_pairs(4)["sentence1"], *make_pairs(4)["sentence2"]]))
    table = pd.DataFrame({"sentence": [*train_sentences[:5], train_sentences[0], train_sentences[6]],
                          "language": ["de"] * 7,
                          "translation": ["a story told again", "ok", train_sentences[2], "x 中文 y z w", "fine!!!",
                                          "a second one for the same sentence", ""]})
    table.to_csv(tmp_path / "rt.csv", index=False)
    params = parse_params({"augment": {"rtt": {"backend": "table", "table": str(tmp_path / "rt.csv")}}})
    report = augment(params, tmp_path / "raw", tmp_path / "clean", tmp_path / "r.json")["rtt"]
    out = schemas.read(tmp_path / "clean/paraphrases.parquet", schemas.PARAPHRASES)
    assert report["corpus"] == len(train_sentences) and report["paraphrases"] == len(out) == 4
    assert report["paraphrase_counts"] == {"no_translation": len(train_sentences) - 5, "paraphrase_too_short": 1,
                                           "unchanged": 1, "repeated_rows": 1, "empty_translation": 1}
    assert out["paraphrase"].tolist() == ["a story told again", train_sentences[2], "x y z w", "fine!"]
    assert set(out["language"]) == {"de"}


def test_table_backend_needs_its_file():
    with pytest.raises(ConfigError, match="augment.rtt.table"):
        parse_params({"augment": {"rtt": {"backend": "table"}}})


@pytest.fixture(scope="session")
def tiny_marian_dir(tmp_path_factory):
    """A 1-layer, 16-wide MarianMT with random weights and a 60-piece sentencepiece vocabulary trained here."""
    spm = pytest.importorskip("sentencepiece")
    from transformers import MarianConfig, MarianMTModel, MarianTokenizer

    out = tmp_path_factory.mktemp("tiny-marian")
    corpus = [s for p in make_pairs(40).itertuples() for s in (p.sentence1, p.sentence2)]
    buf = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(corpus), model_writer=buf, vocab_size=60,
                                   model_type="unigram", character_coverage=1.0, hard_vocab_limit=False,
                                   num_threads=1, minloglevel=2)
    for name in ("source.spm", "target.spm"):
        (out / name).write_bytes(buf.getvalue())
    sp = spm.SentencePieceProcessor(model_proto=buf.getvalue())
    pieces = [sp.id_to_piece(i) for i in range(sp.get_piece_size()) if not (sp.is_control(i) or sp.is_unknown(i))]
    vocab = {"</s>": 0, "<unk>": 1, **{p: i + 2 for i, p in enumerate(pieces)}}
    vocab["<pad>"] = len(vocab)
    (out / "vocab.json").write_text(json.dumps(vocab))
    (out / "tokenizer_config.json").write_text(json.dumps({"source_lang": "en", "target_lang": "de",
                                                           "tokenizer_class": "MarianTokenizer"}))
    torch.manual_seed(0)
    cfg = MarianConfig(vocab_size=len(vocab), d_model=16, encoder_layers=1, decoder_layers=1,
                       encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=32, decoder_ffn_dim=32,
                       max_position_embeddings=64, pad_token_id=vocab["<pad>"], decoder_start_token_id=vocab["<pad>"],
                       eos_token_id=0, forced_eos_token_id=0)
    MarianMTModel(cfg).save_pretrained(out, safe_serialization=True)
    MarianTokenizer.from_pretrained(out)  # the files are consistent
    return out


def test_marian_backend_round_trips_every_sentence_reproducibly(tiny_marian_dir, tmp_path):
    sentences = ["the cat story number 3 is here", "a dog", "a rain story about 5 things and more words"]
    marian = rtt.Marian("en", {"de": (str(tiny_marian_dir), str(tiny_marian_dir))}, batch_size=2, num_beams=2,
                        max_new_tokens=12, bf16=False)
    first = marian(sentences, "de")
    assert len(first) == 3 and all(isinstance(p, str) for p in first)
    assert marian(sentences, "de") == first  # greedy/beam decoding: no randomness
    one_by_one = [marian([s], "de")[0] for s in sentences]
    assert one_by_one == first  # length-sorted batching puts every result back in its place


def test_marian_refuses_pickled_weights(tiny_marian_dir, tmp_path):
    pickled = tmp_path / "pickled"
    shutil.copytree(tiny_marian_dir, pickled)
    from safetensors.torch import load_file
    torch.save(load_file(pickled / "model.safetensors"), pickled / "pytorch_model.bin")  # what old repos ship
    (pickled / "model.safetensors").unlink()
    marian = rtt.Marian("en", {}, 2, 1, 4, False)
    from pldistill.models.encoders import ModelError
    with pytest.raises(ModelError, match="pickled .bin weights are not loaded"):
        marian.translate(["a cat"], str(pickled))
