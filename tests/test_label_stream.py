"""Stage label streams: the candidates are read, labelled and written chunk by chunk, with the same labels
as one pass, and checked reads/writes of Parquet pieces (pldistill.base.schemas.read_chunks / writer)."""

import json

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import stages.label as label_stage
from pldistill.base import schemas
from pldistill.models.encoders import CrossModel
from pldistill.teach import labelling
from pldistill.teach.teachers import Calibration, Member, Teacher
from tests.conftest import make_pairs


@pytest.fixture(scope="module")
def teacher_dir(tiny_model_dir, tmp_path_factory):
    path = tmp_path_factory.mktemp("teacher") / "teacher"
    model = CrossModel.load(str(tiny_model_dir), 32)
    Teacher([Member("member-00", "cross", str(tiny_model_dir), True, model, Calibration())]).save(path, "card")
    return path


def _inputs(root, n):
    clean, pairs = root / "clean", root / "pairs"
    schemas.write(clean / "train.parquet", make_pairs(40), schemas.PAIRS)
    cands = make_pairs(n, offset=1000)[["sentence1", "sentence2"]].assign(strategy="bm25")
    schemas.write(pairs / schemas.CANDIDATES_FILE, cands, schemas.CANDIDATES)
    return clean, pairs, cands


def _label(params, root, clean, pairs, teacher_dir):
    report = root / "label.json"
    label_stage.label(params, clean, pairs, teacher_dir, root / "silver", report, root / "density.csv")
    return schemas.read(root / "silver" / schemas.SILVER_FILE, schemas.PSEUDO), json.loads(report.read_text())


@pytest.mark.parametrize("strategy", ["bm25", "kde"])
def test_chunked_labels_equal_one_pass(tiny_params, teacher_dir, tmp_path, monkeypatch, strategy):
    params = tiny_params.model_copy(update={"sample": tiny_params.sample.model_copy(update={"strategy": strategy})})
    clean, pairs, cands = _inputs(tmp_path, 150)
    whole, whole_report = _label(params, tmp_path / "one", clean, pairs, teacher_dir)
    monkeypatch.setattr(labelling, "CHUNK_ROWS", 32)  # 150 pairs: five chunks, the last one short
    chunked, chunked_report = _label(params, tmp_path / "chunked", clean, pairs, teacher_dir)

    assert list(chunked["sentence1"]) == list(whole["sentence1"])  # same pairs, same order
    np.testing.assert_allclose(chunked["score"], whole["score"], atol=1e-5)
    np.testing.assert_allclose(chunked["logit"], whole["logit"], atol=1e-4)
    assert chunked_report["candidates"] == whole_report["candidates"] == 150
    if strategy == "bm25":
        assert len(whole) == 150
        assert list(whole["sentence2"]) == list(cands["sentence2"])
        assert pq.ParquetFile(tmp_path / "chunked/silver" / schemas.SILVER_FILE).metadata.num_row_groups == 5
    else:  # the same selection; the pool was a scratch file, gone afterwards
        assert chunked_report["kde"]["kept"] == whole_report["kde"]["kept"] == len(chunked) < 150
        assert sorted(p.name for p in (tmp_path / "chunked/silver").iterdir()) == [schemas.SILVER_FILE]


def test_chunked_reads_check_every_piece(tmp_path):
    path = tmp_path / "c.parquet"
    schemas.write(path, make_pairs(10)[["sentence1", "sentence2"]].assign(strategy="x"), schemas.CANDIDATES)
    assert [len(c) for c in schemas.read_chunks(path, schemas.CANDIDATES, 4)] == [4, 4, 2]
    assert schemas.rows(path) == 10
    with pytest.raises(schemas.SchemaError, match=r"c\.parquet: expected columns .* missing \['score'\]"):
        next(schemas.read_chunks(path, schemas.PAIRS, 4))  # before any piece is handed out
    nulls = tmp_path / "n.parquet"
    df = pd.DataFrame({"sentence1": ["a"] * 5 + [None], "sentence2": ["b"] * 6, "strategy": ["x"] * 6})
    pq.write_table(pa.Table.from_pandas(df, preserve_index=False), nulls, row_group_size=3)
    chunks = schemas.read_chunks(nulls, schemas.CANDIDATES, 3)
    assert len(next(chunks)) == 3
    with pytest.raises(schemas.SchemaError, match=r"n\.parquet: column 'sentence1' has 1 null"):
        next(chunks)
    (tmp_path / "bad.parquet").write_bytes(b"PAR1 not parquet at all")
    with pytest.raises(schemas.SchemaError, match="not a readable Parquet file"):
        next(schemas.read_chunks(tmp_path / "bad.parquet", schemas.CANDIDATES, 3))


def test_piecewise_writer_is_atomic_and_matches_write(tmp_path):
    df = make_pairs(6)
    schemas.write(tmp_path / "whole.parquet", df, schemas.PAIRS)
    with schemas.writer(tmp_path / "one.parquet", schemas.PAIRS) as add:
        add(df)
    assert (tmp_path / "one.parquet").read_bytes() == (tmp_path / "whole.parquet").read_bytes()
    with schemas.writer(tmp_path / "none.parquet", schemas.PAIRS):
        pass
    schemas.write(tmp_path / "empty.parquet", pd.DataFrame(columns=schemas.PAIRS.names), schemas.PAIRS)
    assert (tmp_path / "none.parquet").read_bytes() == (tmp_path / "empty.parquet").read_bytes()

    with pytest.raises(RuntimeError), schemas.writer(tmp_path / "killed.parquet", schemas.PAIRS) as add:
        add(df)
        raise RuntimeError("labelling failed half-way")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty.parquet", "none.parquet", "one.parquet",
                                                           "whole.parquet"]  # nothing half-written
