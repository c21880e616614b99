"""Stage embed (embedding distillation) and the given pairs (data.unscored, sample.strategy given)."""

import json
import shutil

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
import torch

from pldistill.base import schemas
from pldistill.base.errors import ConfigError
from pldistill.data import datasets
from pldistill.data.datasets import DataError
from pldistill.models.encoders import BiEncoder
from pldistill.pairs import sampling
from pldistill.params.config import parse_params
from pldistill.params.train import EmbedParams
from pldistill.students import embedding
from pldistill.train.losses.embedding import cosine_matrix_mse
from stages.embed import skipped
from tests.conftest import run_chain


def _with(params, **sections):
    raw = params.model_dump(mode="json")
    for name, values in sections.items():
        raw[name] = {**raw[name], **values} if isinstance(values, dict) else values
    return parse_params(raw)


@pytest.fixture(scope="module")
def other_tiny(tiny_model_dir, tmp_path_factory):
    """The tiny model's architecture with other random weights: a student that starts far from its teacher."""
    from transformers import BertModel

    out = tmp_path_factory.mktemp("other-tiny")
    shutil.copytree(tiny_model_dir, out, dirs_exist_ok=True)
    torch.manual_seed(1)
    BertModel(BertModel.from_pretrained(tiny_model_dir).config).save_pretrained(out, safe_serialization=True)
    return out


@pytest.fixture(scope="module")
def embedded(chains, other_tiny, tmp_path_factory):
    """The augsbert chain again from stage teacher, with a bi-encoder teacher used as given, a student of other
    weights, a corpus and embedding distillation on."""
    chain = chains("augsbert")
    root = chain.copy_to(tmp_path_factory.mktemp("embedded"))
    corpus = root / "corpus.txt"
    test = schemas.read(root / "data/clean/test.parquet", schemas.PAIRS)
    corpus.write_text("a garden story about the river\nok\n" + test["sentence1"].iloc[0] + "\n")
    params = _with(chain.params, teacher={"kind": "bi", "finetune": False}, student={"model": str(other_tiny)},
                   embed={"epochs": 3, "lr": 1e-3, "batch_size": 8, "corpus": str(corpus), "select": "last"})
    result = run_chain(params, root, ("teacher", "embed", "distill", "evaluate"))
    return params, root, result


def test_embed_writes_the_teachers_embeddings_and_a_student_that_learned_them(embedded):
    params, root, _ = embedded
    report = json.loads((root / "metrics/embed.json").read_text())
    frame = schemas.read(root / "data/embed/teacher.parquet", schemas.EMBEDDINGS)
    assert len(frame) == report["sentences"] == len(set(frame["sentence"]))
    # every dev and test sentence held out, the corpus' test sentence too; "ok" is below min_chars
    held = set()
    for split in ("dev", "test"):
        df = schemas.read(root / f"data/clean/{split}.parquet", schemas.PAIRS)
        held |= set(df["sentence1"]) | set(df["sentence2"])
    assert not held & set(frame["sentence"]) and report["by_source"]["held_out_eval"] >= 1
    assert report["by_source"]["corpus"] == 1 and "ok" not in set(frame["sentence"])
    assert report["projection"] == "none" and report["steps"] > 0

    # the student moved towards the teacher's embeddings: the distance to its targets falls
    target = np.stack(frame["embedding"].to_numpy())
    texts = list(frame["sentence"])
    sp = params.student
    start = BiEncoder.load(sp.model, sp.max_length).encode(texts, 16, False)
    learned = BiEncoder.load(str(root / "models/embed"), sp.max_length).encode(texts, 16, False)
    before, after = (float(np.mean(np.sum((e - target) ** 2, axis=1))) for e in (start, learned))
    print(f"squared distance to the teacher: {before:.4f} -> {after:.4f}")
    assert after < 0.5 * before


def test_distill_starts_from_the_embedded_student(embedded):
    _, root, result = embedded
    card = (root / "models/bi/README.md").read_text()
    assert "| embedding distillation | 3 epoch(s) first (models/embed) |" in card
    assert result["bi"]["test"]["spearman"] == json.loads((root / "metrics/eval.json").read_text())["bi"]["test"][
        "spearman"]


def test_a_cross_encoder_teacher_skips_embed_with_notes_and_the_student_starts_from_its_model(chains):
    root = chains("augsbert").root  # its teacher: one cross-encoder
    report = json.loads((root / "metrics/embed.json").read_text())
    assert "every teacher member is a cross-encoder" in report["skipped"]
    assert (root / "models/embed/SKIPPED.txt").is_file()
    assert "embedding distillation" not in (root / "models/bi/README.md").read_text()


def test_embed_teacher_gives_a_cross_encoder_teacher_embeddings_to_learn(chains, tiny_model_dir, tmp_path):
    chain = chains("augsbert")  # its teacher: one cross-encoder
    root = chain.copy_to(tmp_path / "chain")
    spec = str(tiny_model_dir)
    params = _with(chain.params, embed={"epochs": 1, "batch_size": 8, "teacher": spec})
    assert skipped(params) is None
    report = run_chain(params, root, ("embed",))
    assert "skipped" not in report and report["steps"] > 0
    frame = schemas.read(root / "data/embed/teacher.parquet", schemas.EMBEDDINGS)
    want = BiEncoder.load(spec, params.teacher.max_length).encode(list(frame["sentence"]), 16, False)
    np.testing.assert_allclose(np.stack(frame["embedding"].to_numpy()), want, atol=1e-5)
    meta = json.loads((root / "data/embed/meta.json").read_text())
    assert meta["teacher"].startswith(f"bi:{spec}@")
    assert f"bi-encoder {spec} (embed.teacher)" in (root / "models/embed/README.md").read_text()


def test_auto_has_a_cut_student_learn_its_own_whole_model_beside_a_cross_encoder_teacher(chains, tmp_path):
    chain = chains("augsbert")  # its teacher: one cross-encoder; its student: the tiny model whole
    assert chain.params.embed.teacher == "auto" and skipped(chain.params) is not None  # whole: the teacher's, none
    root = chain.copy_to(tmp_path / "chain")
    params = _with(chain.params, student={"layers": [1]}, embed={"epochs": 1, "batch_size": 8})
    run_chain(params, root, ("cut", "embed"))
    spec = params.student.model  # the model the student was cut from, whole
    frame = schemas.read(root / "data/embed/teacher.parquet", schemas.EMBEDDINGS)
    want = BiEncoder.load(spec, params.teacher.max_length).encode(list(frame["sentence"]), 16, False)
    np.testing.assert_allclose(np.stack(frame["embedding"].to_numpy()), want, atol=1e-5)
    assert json.loads((root / "data/embed/meta.json").read_text())["teacher"].startswith(f"bi:{spec}@")
    assert f"bi-encoder {spec} (the student's whole model)" in (root / "models/embed/README.md").read_text()
    assert json.loads((root / "models/embed/config.json").read_text())["num_hidden_layers"] == 1


def test_embed_off_and_other_recipes_say_why_nothing_is_trained(tiny_params):
    assert "embed.epochs 0" in skipped(_with(tiny_params, teacher={"kind": "bi"}, embed={"epochs": 0}))
    assert "recipe trans-encoder does not start" in skipped(_with(tiny_params, recipe="trans-encoder",
                                                                   teacher={"kind": "bi"}))
    assert skipped(_with(tiny_params, teacher={"kind": "cross", "members": [{"kind": "bi"}]})) is None


class Counting:
    """A stand-in bi-encoder: a fixed embedding per text; fails on the call numbered ``fail_at``."""

    def __init__(self, fail_at: int | None = None):
        self.calls, self.fail_at = 0, fail_at

    def encode(self, texts, batch_size, bf16, progress=False):
        self.calls += 1
        if self.calls == self.fail_at:
            raise KeyboardInterrupt
        rows = [np.random.default_rng(abs(hash(t)) % 2**32).normal(size=6) for t in texts]
        emb = np.asarray(rows, np.float32)
        return emb / np.linalg.norm(emb, axis=1, keepdims=True)


def test_a_killed_encoding_resumes_with_the_chunks_it_finished(tmp_path, monkeypatch):
    monkeypatch.setattr(embedding, "CHUNK", 4)
    texts = [f"sentence {i}" for i in range(10)]  # 3 chunks
    whole = embedding.teacher_embeddings([Counting()], "k", texts, 8, False, root=tmp_path / "a")
    killed = Counting(fail_at=3)
    with pytest.raises(KeyboardInterrupt):
        embedding.teacher_embeddings([killed], "k", texts, 8, False, root=tmp_path / "b")
    again = Counting()
    resumed = embedding.teacher_embeddings([again], "k", texts, 8, False, root=tmp_path / "b")
    assert again.calls == 1 and np.array_equal(resumed, whole)
    other = Counting()  # another teacher key: nothing reused
    embedding.teacher_embeddings([other], "k2", texts, 8, False, root=tmp_path / "b")
    assert other.calls == 3


def test_a_second_seed_reuses_the_corpus_teacher_embeddings(tmp_path, monkeypatch):
    """The corpus comes first, so its chunks (and their stored embeddings) do not move when another seed
    draws other training sentences: only the task's sentences are encoded again."""
    monkeypatch.setattr(embedding, "CHUNK", 4)
    clean = tmp_path / "clean"
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(f"corpus sentence number {i}\n" for i in range(8)))  # 2 chunks
    pair = lambda a, b: pd.DataFrame({"sentence1": a, "sentence2": b, "score": 0.5})  # noqa: E731
    for split in ("dev", "test"):
        schemas.write(clean / f"{split}.parquet", pair([f"{split} one"], [f"{split} two"]), schemas.PAIRS)
    params = EmbedParams(epochs=1, corpus=str(corpus), sources=["train"], variants=0)
    calls = []
    for seed in (42, 43):  # another seed: other training sentences
        schemas.write(clean / "train.parquet", pair([f"train {seed} a"], [f"train {seed} b"]), schemas.PAIRS)
        texts, counts = embedding.gather(params, clean, "NFKC", 4, np.random.default_rng(seed))
        assert texts[:8] == [f"corpus sentence number {i}" for i in range(8)] and counts["corpus"] == 8
        model = Counting()
        embedding.teacher_embeddings([model], "k", texts, 8, False, root=tmp_path / "store")
        calls.append(model.calls)
    assert calls == [3, 1]  # the second seed encodes its own training sentences' chunk alone


def test_an_evaluation_sentence_in_another_case_or_spacing_is_held_out_and_copies_learned_once(tmp_path):
    """One normalisation (cleaning.sentence_key) wherever sentences are held out or merged (issue 35)."""
    clean = tmp_path / "clean"
    pair = lambda a, b: pd.DataFrame({"sentence1": a, "sentence2": b, "score": 0.5})  # noqa: E731
    schemas.write(clean / "dev.parquet", pair(["A dog runs."], ["The sun is out."]), schemas.PAIRS)
    schemas.write(clean / "test.parquet", pair(["Rain falls."], ["Café noir."]), schemas.PAIRS)
    corpus = tmp_path / "corpus.txt"  # case, spacing, a zero-width space, a decomposed accent
    corpus.write_text("a dog RUNS.\nthe  sun\u200b is out.\nCafe\u0301 noir.\nA new one.\nA NEW ONE.\n")
    schemas.write(clean / "train.parquet", pair(["a new one."], ["rain falls."]), schemas.PAIRS)
    params = EmbedParams(epochs=1, corpus=str(corpus), sources=["train"], variants=0)
    texts, counts = embedding.gather(params, clean, "NFKC", 4, np.random.default_rng(0))
    assert texts == ["A new one."]  # the first spelling seen
    assert counts == {"held_out_eval": 4, "corpus": 1, "train": 0}


def test_embeddings_written_a_row_group_at_a_time_read_back_whole(tmp_path, monkeypatch):
    monkeypatch.setattr(embedding, "ROW_GROUP", 3)
    texts = [f"s{i}" for i in range(7)]
    emb = np.arange(14, dtype=np.float32).reshape(7, 2)
    embedding.write_embeddings(tmp_path / "e.parquet", texts, emb)
    frame = schemas.read(tmp_path / "e.parquet", schemas.EMBEDDINGS)
    assert list(frame["sentence"]) == texts and np.array_equal(np.stack(frame["embedding"].to_numpy()), emb)
    assert pq.ParquetFile(tmp_path / "e.parquet").num_row_groups == 3


def test_two_members_side_by_side_give_the_mean_of_their_cosines(tmp_path):
    texts = ["one", "two", "three"]
    a, b = Counting(), Counting()
    b.encode = lambda t, *args, **kw: Counting().encode([x + "!" for x in t], 8, False)
    emb = embedding.teacher_embeddings([a, b], "k", texts, 8, False, root=tmp_path)
    ea, eb = Counting().encode(texts, 8, False), Counting().encode([t + "!" for t in texts], 8, False)
    assert np.allclose(emb @ emb.T, (ea @ ea.T + eb @ eb.T) / 2, atol=1e-6)


def test_pca_targets_for_a_wider_teacher_and_a_clear_error_without_projection():
    rng = np.random.default_rng(0)
    emb = rng.normal(size=(50, 12)).astype(np.float32)
    t, how = embedding.targets(emb, 4, EmbedParams(epochs=1))
    assert how == "pca" and t.shape == (50, 4) and np.allclose(np.linalg.norm(t, axis=1), 1, atol=1e-5)
    assert np.array_equal(t, embedding.targets(emb, 4, EmbedParams(epochs=1))[0])  # same input, same output
    assert embedding.targets(emb, 4, EmbedParams(epochs=1, loss="sim"))[1] == "none"
    with pytest.raises(DataError, match="teacher is 12 wide and the student 4; set embed.projection"):
        embedding.targets(emb, 4, EmbedParams(epochs=1, projection="none"))


def test_cosine_matrix_mse_is_zero_for_the_same_geometry_in_another_width():
    a = torch.randn(5, 8)
    q, _ = torch.linalg.qr(torch.randn(12, 12))
    wide = torch.cat([a, torch.zeros(5, 4)], dim=1) @ q  # the same cosines in 12 dimensions
    assert cosine_matrix_mse(a, wide) < 1e-10
    assert cosine_matrix_mse(a, torch.randn(5, 12)) > 0.01


# -- given pairs ----------------------------------------------------------------------------------------------

def test_given_pairs_from_a_table_map_columns_and_never_read_scores(tmp_path, tiny_params):
    table = tmp_path / "unscored.csv"
    pd.DataFrame({"q1": ["a cat", "a dog", None], "q2": ["the cat", "the dog", "x"], "score": [9, "n/a", 1]}
                 ).to_csv(table, index=False)
    data = tiny_params.data.model_copy(update={"unscored": str(table), "columns": {"sentence1": "q1",
                                                                                 "sentence2": "q2"}})
    pairs, report = datasets.read_given(data, None)
    assert list(pairs.columns) == ["sentence1", "sentence2"] and len(pairs) == 2
    assert report["rows"] == 2 and report["dropped"] == {"empty_or_not_text": 1}


def test_given_rest_needs_max_train(tiny_params):
    data = tiny_params.data.model_copy(update={"unscored": "rest"})
    with pytest.raises(DataError, match="data.unscored rest: .* max_train is null"):
        datasets.read_given(data, None)


def test_given_pairs_drop_gold_pairs_of_every_split_either_way_round():
    gold = {"train": pd.DataFrame({"sentence1": ["A cat sits."], "sentence2": ["A dog runs."], "score": [0.5]}),
            "test": pd.DataFrame({"sentence1": ["Rain falls."], "sentence2": ["It rains."], "score": [0.9]})}
    pairs = pd.DataFrame({"sentence1": ["a dog runs.", "\uff29\uff34 rains.", "Birds sing.", "Birds  sing."],
                          "sentence2": ["a cat sits.", "Rain falls.", "A bird sings.", "A bird sings."]})
    kept, report = datasets.clean_given(pairs, gold, 4, "NFC")  # NFC keeps the full-width IT; the pair key folds it
    assert kept.values.tolist() == [["Birds sing.", "A bird sings."]]
    assert report["dropped"] == {"duplicate": 1, "gold_pair": 2}  # case and width make no new pair


def test_strategy_given_combines_with_bm25(tiny_params):
    gold = pd.DataFrame({"sentence1": ["the cat sat", "a dog ran"], "sentence2": ["the cat sat down", "a dog ran off"],
                         "score": [0.9, 0.8]})
    given_pairs = pd.DataFrame({"sentence1": ["the cat sat", "new one"], "sentence2": ["the cat sat down", "other"]})
    sp = parse_params({"data": {"unscored": "rest", "max_train": 5},
                       "sample": {"strategy": "given+bm25", "top_k": 1}}).sample
    ctx = sampling.Context(gold, sp, np.random.default_rng(0), 0, given=given_pairs)
    pairs = sampling.sample(ctx)
    assert ("new one", "other", "given") in set(map(tuple, pairs.values.tolist()))  # the gold pair is not a candidate
    assert set(ctx.found) == {"given", "bm25"} and ctx.found["given"] == 1
    assert set(pairs["strategy"]) <= {"given", "bm25", "given+bm25"}


def test_strategy_given_without_unscored_is_refused():
    with pytest.raises(ConfigError, match="sample.strategy given\\+bm25 .* data.unscored, which is null"):
        parse_params({"sample": {"strategy": "given+bm25"}})
    with pytest.raises(ConfigError, match="sample.strategy: expected one of"):
        parse_params({"sample": {"strategy": "given+kde"}})


def test_the_corpus_is_read_as_every_table_is(tmp_path):
    """One reader (pldistill.data.reading): a compressed corpus is read through, a line that is not UTF-8 named."""
    import gzip

    packed = tmp_path / "corpus.txt"
    packed.write_bytes(gzip.compress(b"first sentence here\nsecond sentence here\n"))
    assert embedding.read_corpus(packed) == ["first sentence here", "second sentence here"]
    bad = tmp_path / "bad.txt"
    bad.write_bytes("fine line\ncaf\xe9 au lait\n".encode("latin-1"))
    with pytest.raises(DataError, match=r"bad\.txt: line 2 is not UTF-8"):
        embedding.read_corpus(bad)
    from pldistill.data import rtt  # the RTT corpus goes through the same reader

    assert rtt.load_corpus(packed) == ["first sentence here", "second sentence here"]
    with pytest.raises(DataError, match=r"bad\.txt: line 2 is not UTF-8"):
        rtt.load_corpus(bad)
    with pytest.raises(DataError, match=r"nowhere\.txt: augment\.rtt\.corpus not found"):
        rtt.load_corpus(tmp_path / "nowhere.txt")


def test_an_empty_corpus_is_refused_naming_the_file_and_a_compressed_name_is_read(tmp_path):
    """Issue 77: an empty embed.corpus was learnt from silently (the task's sentences alone); a corpus named
    corpus.txt.gz or corpus.csv.gz was refused by its name. Now the one is refused, naming the file and the key,
    and the other read as its name says."""
    import gzip

    from pldistill.data import sentences

    empty, blank = tmp_path / "empty.txt", tmp_path / "blank.txt"
    empty.write_bytes(b"")
    blank.write_text("\n  \n\n")
    with pytest.raises(DataError, match=r"empty\.txt \(embed\.corpus\): empty file \(0 bytes\).*set embed\.corpus "
                                        r"to null"):
        embedding.read_corpus(empty)
    with pytest.raises(DataError, match=r"blank\.txt \(embed\.corpus\): no sentence in it, only blank lines"):
        embedding.read_corpus(blank)
    (tmp_path / "empty.csv").write_bytes(b"")
    with pytest.raises(DataError, match=r"empty\.csv \(embed\.corpus\): empty file"):
        embedding.read_corpus(tmp_path / "empty.csv")
    short = tmp_path / "short.txt"
    short.write_text("a\nbb\n")
    params = parse_params({"embed": {"corpus": str(short)}}).embed
    with pytest.raises(DataError, match=r"short\.txt \(embed\.corpus\): none of its 2 sentences has 4 characters"):
        sentences.corpus_sentences(params, "NFKC", 4, np.random.default_rng(0))
    for name, data in (("corpus.txt.gz", b"first sentence here\nsecond sentence here\n"),
                       ("corpus.csv.gz", b"sentence\nfirst sentence here\nsecond sentence here\n")):
        (tmp_path / name).write_bytes(gzip.compress(data))
        assert parse_params({"embed": {"corpus": str(tmp_path / name)}}).embed.corpus == str(tmp_path / name)
        assert embedding.read_corpus(tmp_path / name) == ["first sentence here", "second sentence here"]
