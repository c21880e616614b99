import pandas as pd
import pytest

from pldistill.base import schemas
from pldistill.base.cleaning import clean_train, normalise
from pldistill.data.datasets import DataError
from pldistill.params.config import parse_params
from stages.augment import augment


def test_normalise():
    assert normalise("  Ｈｅｌｌｏ\u00a0 world!!!  ") == "Hello world!"  # noqa: RUF001 -- fullwidth on purpose: NFKC folds it
    assert normalise("Wait.... what??") == "Wait... what?"
    assert normalise("tab\there\nnew\u200bline") == "tab here new line"
    assert normalise("a -- b") == "a - b"


def test_clean_train_counts_each_reason():
    df = pd.DataFrame({
        "sentence1": ["A cat sits.", "   ", "ok", "a cat sits.", "Dogs bark loudly.", "Birds sing."],
        "sentence2": ["A dog runs.", "x y z w", "fine sentence", "A DOG RUNS.", "Dogs bark loudly!!!", "Fish swim."],
        "score": [0.2, 0.5, 0.5, 0.3, 1.0, 0.1],
    })
    kept, dropped = clean_train(df, min_chars=4)
    assert dict(dropped) == {"empty": 1, "too_short": 1, "duplicate": 1}
    assert list(kept["sentence2"]) == ["A dog runs.", "Dogs bark loudly!", "Fish swim."]
    assert len(kept) + sum(dropped.values()) == len(df)


def test_augment_stage_keeps_dev_and_test_rows(tmp_path):
    raw = tmp_path / "raw" / "demo"
    bad = pd.DataFrame({"sentence1": ["x", "A  normal sentence", "A third sentence"],
                        "sentence2": ["y", "Another one", "And its partner"], "score": [0.0, 1.0, 0.5]})
    for split in ("train", "dev", "test"):
        schemas.write(raw / f"{split}.parquet", bad, schemas.PAIRS)
    report = augment(parse_params({}), tmp_path / "raw", tmp_path / "clean", tmp_path / "r.json")
    assert report["rows_out"] == {"train": 2, "dev": 3, "test": 3}
    assert report["dropped"]["too_short"] == 1
    dev = schemas.read(tmp_path / "clean" / "dev.parquet", schemas.PAIRS)
    assert dev.loc[1, "sentence1"] == "A normal sentence"


def test_augment_stops_when_cleaning_leaves_no_training_pairs(tmp_path):
    raw = tmp_path / "raw" / "demo"
    tiny = pd.DataFrame({"sentence1": ["x"], "sentence2": ["y"], "score": [0.0]})
    for split in ("train", "dev", "test"):
        schemas.write(raw / f"{split}.parquet", tiny, schemas.PAIRS)
    with pytest.raises(DataError, match="dropped every training pair .*too_short.*augment.min_chars"):
        augment(parse_params({}), tmp_path / "raw", tmp_path / "clean", tmp_path / "r.json")
