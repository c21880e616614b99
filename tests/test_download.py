import io
import json
import tarfile
from typing import ClassVar

import pandas as pd
import pytest

from pldistill import datasets, schemas
from pldistill.validate import parse_params
from stages.download import download
from tests.conftest import ROOT, STSB_ARCHIVE

STSB_LINES = {
    "train": [
        "main-captions\tMSRvid\t2012test\t0001\t5.000\tA plane is taking off.\tAn air plane is taking off.",
        "main-captions\tMSRvid\t2012test\t0004\t3.800\tA man is playing a flute.\tA man is playing a bamboo flute.",
        # extra fields: kept
        "main-news\theadlines\t2015\t0012\t1.2\tSaudi \"royal\" dies\tOil prices drop\tsrc1\tsrc2",
        "main-news\theadlines\t2015\t0013\tnot-a-score\tA\tB",
        "main-news\theadlines\t2015\t0014\t7.5\tOut of range.\tScore above five.",
        "truncated line\t2.0",
    ],
    "dev": ["main-captions\tMSRvid\t2012test\t0002\t0.500\tA woman slices onions.\tA dog runs."],
    "test": ["main-captions\tMSRvid\t2012test\t0003\t2.5\tKids play.\tChildren are playing outside."],
}


def write_stsb_archive(path):
    with tarfile.open(path, "w:gz") as tar:
        for split, lines in STSB_LINES.items():
            data = ("\n".join(lines) + "\n").encode()
            info = tarfile.TarInfo(f"stsbenchmark/sts-{split}.csv")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def test_stsb_archive_format_and_malformed_rows(tmp_path):
    archive = tmp_path / "Stsbenchmark.tar.gz"
    write_stsb_archive(archive)
    loaded = datasets.load(parse_params({"data": {"dataset": "stsb", "source": str(archive)}}).data, 0)
    train = loaded.splits["train"]
    assert list(train["score"]) == [1.0, 0.76, 0.24]
    assert train.loc[2, "sentence1"] == 'Saudi "royal" dies'  # quotes are text, not CSV quoting
    assert dict(loaded.dropped) == {
        "sts-train.csv:score_not_a_number": 1, "sts-train.csv:score_out_of_range": 1,
        "sts-train.csv:too_few_fields": 1,
    }


def test_stsb_from_unpacked_directory(tmp_path):
    archive = tmp_path / "a.tar.gz"
    write_stsb_archive(archive)
    with tarfile.open(archive) as tar:
        tar.extractall(tmp_path / "unpacked", filter="data")
    loaded = datasets.load(parse_params({"data": {"dataset": "stsb", "source": str(tmp_path / "unpacked")}}).data, 0)
    assert len(loaded.splits["train"]) == 3


def test_stsb_bad_sources(tmp_path):
    with pytest.raises(datasets.DataError, match="not found"):
        datasets.load(parse_params({"data": {"dataset": "stsb", "source": str(tmp_path / "x")}}).data, 0)
    junk = tmp_path / "junk.tar.gz"
    junk.write_bytes(b"not a tar")
    with pytest.raises(datasets.DataError, match="not a readable tar"):
        datasets.load(parse_params({"data": {"dataset": "stsb", "source": str(junk)}}).data, 0)


@pytest.mark.skipif(not STSB_ARCHIVE.exists(), reason="official STS-B archive not beside the project")
def test_official_stsb_archive():
    loaded = datasets.load(parse_params({"data": {"dataset": "stsb", "source": str(STSB_ARCHIVE)}}).data, 0)
    assert loaded.sha256 == datasets.STSB_SHA256
    assert {s: len(df) for s, df in loaded.splits.items()} == {"train": 5749, "dev": 1500, "test": 1379}
    assert sum(loaded.dropped.values()) == 0


def test_demo_dataset_is_shipped_and_sized():
    loaded = datasets.load(parse_params({}).data, 0)
    sizes = {s: len(df) for s, df in loaded.splits.items()}
    assert sum(sizes.values()) >= 600 and min(sizes.values()) >= 90
    assert not loaded.dropped
    train = loaded.splits["train"]
    assert train["score"].between(0, 1).all() and train["score"].nunique() > 20
    # splits are by group: no sentence of test appears in train
    test = loaded.splits["test"]
    assert not set(test["sentence1"]) & (set(train["sentence1"]) | set(train["sentence2"]))
    assert (ROOT / "data/demo/README.md").is_file()  # the note on how it was made


@pytest.mark.parametrize("suffix", [".csv", ".tsv", ".jsonl", ".parquet"])
def test_table_by_path_with_column_mapping(tmp_path, suffix):
    df = pd.DataFrame({"q1": [f"question {i} here" for i in range(40)],
                       "q2": [f"another {i} there" for i in range(40)],
                       "sim": pd.Series([i % 6 for i in range(40)], dtype=object)})
    df.loc[3, "q1"] = ""
    df.loc[5, "sim"] = "n/a" if suffix in (".csv", ".tsv") else None
    path = tmp_path / f"pairs{suffix}"
    {".csv": lambda: df.to_csv(path, index=False), ".tsv": lambda: df.to_csv(path, sep="\t", index=False),
     ".jsonl": lambda: df.to_json(path, orient="records", lines=True),
     ".parquet": lambda: df.astype({"sim": "float64"} if suffix == ".parquet" else {}).to_parquet(path)}[suffix]()
    params = parse_params({"data": {"dataset": str(path), "score_range": [0, 5],
                                    "columns": {"sentence1": "q1", "sentence2": "q2", "score": "sim"}}}).data
    loaded = datasets.load(params, 3)
    sizes = {s: len(d) for s, d in loaded.splits.items()}
    assert sizes == {"train": 32, "dev": 3, "test": 3}  # 38 valid rows, 10% = 3 each
    assert loaded.dropped[f"pairs{suffix}:missing_sentence"] == 1
    assert loaded.dropped[f"pairs{suffix}:score_not_a_number"] == 1
    again = datasets.load(params, 3)
    pd.testing.assert_frame_equal(again.splits["test"], loaded.splits["test"])  # split is a function of seed
    assert not datasets.load(params, 4).splits["test"].equals(loaded.splits["test"])


def test_table_errors_say_what_to_do(tmp_path):
    path = tmp_path / "t.csv"
    pd.DataFrame({"text": ["a b c"], "label": [1]}).to_csv(path, index=False)
    with pytest.raises(datasets.DataError, match=r"expected columns \['sentence1', 'sentence2', 'score'\]; "
                                                r"found \['text', 'label'\].*data.columns"):
        datasets.load(parse_params({"data": {"dataset": str(path)}}).data, 0)
    out_of_range = pd.DataFrame({"sentence1": ["a b c"] * 20, "sentence2": ["c d e"] * 20, "score": [4.0] * 20})
    out_of_range.to_csv(path, index=False)
    with pytest.raises(datasets.DataError, match=r"outside \[0, 1\].*data.score_range"):
        datasets.load(parse_params({"data": {"dataset": str(path)}}).data, 0)
    pd.DataFrame({"sentence1": ["a b c"] * 3, "sentence2": ["c d e"] * 3, "score": [0.5] * 3,
                  "split": ["train", "holdout", "test"]}).to_csv(path, index=False)
    with pytest.raises(datasets.DataError, match=r"split column has values \['holdout'\]"):
        datasets.load(parse_params({"data": {"dataset": str(path)}}).data, 0)


def test_download_stage_writes_schema_and_report(tmp_path):
    archive = tmp_path / "s.tar.gz"
    write_stsb_archive(archive)
    params = parse_params({"data": {"dataset": "stsb", "source": str(archive)}})
    report = download(params, tmp_path / "raw", tmp_path / "report.json")
    assert report["rows"] == {"train": 3, "dev": 1, "test": 1} and report["dropped_total"] == 3
    train = schemas.read(tmp_path / "raw" / "stsb" / "train.parquet", schemas.PAIRS)
    assert list(train.columns) == ["sentence1", "sentence2", "score"]
    assert (tmp_path / "report.json").is_file()


def test_a_table_of_0_1_labels_is_a_classification_task_unless_told(tmp_path):
    path = tmp_path / "dups.csv"
    pd.DataFrame({"sentence1": [f"s {i}" for i in range(30)], "sentence2": [f"t {i}" for i in range(30)],
                  "score": [i % 2 for i in range(30)]}).to_csv(path, index=False)
    assert download(parse_params({"data": {"dataset": str(path)}}), tmp_path / "raw", tmp_path / "r.json")[
        "task"] == "classification"
    told = parse_params({"data": {"dataset": str(path), "task": "regression"}})
    assert download(told, tmp_path / "raw", tmp_path / "r.json")["task"] == "regression"


def test_schema_read_names_file_and_problem(tmp_path):
    path = tmp_path / "x.parquet"
    pd.DataFrame({"sentence1": ["a"], "score": [0.1]}).to_parquet(path)
    with pytest.raises(schemas.SchemaError, match=r"x.parquet: expected columns .* missing \['sentence2'\]"):
        schemas.read(path, schemas.PAIRS)
    with pytest.raises(schemas.SchemaError, match="run the stage"):
        schemas.read(tmp_path / "none.parquet", schemas.PAIRS)


class _FakeResponse(io.BytesIO):
    headers: ClassVar[dict[str, str | None]] = {"Content-Length": None}

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_stsb_is_fetched_from_its_official_url_and_checked(tmp_path, monkeypatch):
    archive = tmp_path / "built.tar.gz"
    write_stsb_archive(archive)
    payload = archive.read_bytes()
    calls = []

    def fake_urlopen(url, timeout):
        calls.append(url)
        return _FakeResponse(payload)

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(datasets.urllib.request, "urlopen", fake_urlopen)
    params = parse_params({"data": {"dataset": "stsb"}}).data
    with pytest.raises(datasets.DataError, match="expected the pinned"):  # our archive is not the official one
        datasets.load(params, 0)
    assert calls == [datasets.STSB_URL]
    assert not (tmp_path / "data/downloads/Stsbenchmark.tar.gz").exists()  # a bad download is not kept

    monkeypatch.setattr(datasets, "STSB_SHA256", datasets.sha256_file(archive))
    assert len(datasets.load(params, 0).splits["train"]) == 3
    datasets.load(params, 0)
    assert len(calls) == 2  # the load after a good download used the verified cached copy


def test_offline_download_says_how_to_point_at_a_local_copy(tmp_path, monkeypatch):
    def no_network(url, timeout):
        raise datasets.urllib.error.URLError("no route to host")

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(datasets.urllib.request, "urlopen", no_network)
    with pytest.raises(datasets.DataError, match="data.source"):
        datasets.load(parse_params({"data": {"dataset": "stsb"}}).data, 0)


def test_unparseable_lines_are_counted_not_fatal(tmp_path):
    good = [f"sentence number {i},another sentence {i},{i % 2 * 0.5}" for i in range(30)]
    csv = tmp_path / "t.csv"
    csv.write_text("sentence1,sentence2,score\n" + "\n".join([*good[:10], "a,b,0.5,EXTRA,FIELDS", *good[10:]]) + "\n")
    loaded = datasets.load(parse_params({"data": {"dataset": str(csv)}}).data, 0)
    assert loaded.dropped["t.csv:unparseable_line"] == 1
    assert sum(len(d) for d in loaded.splits.values()) == 30

    jsonl = tmp_path / "t.jsonl"
    lines = [json.dumps({"sentence1": f"s {i} here", "sentence2": f"t {i} there", "score": 0.5}) for i in range(30)]
    jsonl.write_text("\n".join([*lines[:5], '{"sentence1": "broken', "[1, 2]", *lines[5:]]) + "\n")
    loaded = datasets.load(parse_params({"data": {"dataset": str(jsonl)}}).data, 0)
    assert loaded.dropped["t.jsonl:unparseable_line"] == 2
    assert sum(len(d) for d in loaded.splits.values()) == 30


def test_mapped_column_wins_over_a_same_named_one(tmp_path):
    path = tmp_path / "t.csv"
    pd.DataFrame({"sentence1": [f"a {i} b" for i in range(30)], "sentence2": [f"c {i} d" for i in range(30)],
                  "score": ["junk"] * 30, "label": [0.25] * 30}).to_csv(path, index=False)
    loaded = datasets.load(parse_params({"data": {"dataset": str(path), "columns": {"score": "label"}}}).data, 0)
    assert (loaded.splits["train"]["score"] == 0.25).all()


# ----------------------------------------------------------------- SICK-R, MRPC, QQP in their own formats
SICK_HEADER = ("pair_ID\tsentence_A\tsentence_B\tentailment_label\trelatedness_score\tentailment_AB\tentailment_BA\t"
               "sentence_A_original\tsentence_B_original\tsentence_A_dataset\tsentence_B_dataset\tSemEval_set")


def _sick_row(i, a, b, score, split):
    return f"{i}\t{a}\t{b}\tNEUTRAL\t{score}\tA_neutral_B\tB_neutral_A\t{a}\t{b}\tFLICKR\tFLICKR\t{split}"


def write_sick_zip(path):
    import zipfile
    rows = [_sick_row(1, "A man is \"playing\" a guitar", "A man plays guitar", "4.9", "TRAIN"),
            _sick_row(2, "A dog runs", "A cat sleeps", "1.0", "TRAIN"),
            _sick_row(3, "Kids play", "Children play", "4.5", "TRIAL"),
            _sick_row(4, "A woman cooks", "Nobody cooks", "2.2", "TEST"),
            _sick_row(5, "Too high", "score", "5.5", "TEST"),
            _sick_row(6, "Odd split", "row", "3.0", "EXTRA"),
            "7\ttruncated row"]
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("SICK.txt", "\n".join([SICK_HEADER, *rows]) + "\n")


def test_sickr_from_the_official_zip_format(tmp_path):
    write_sick_zip(tmp_path / "SICK.zip")
    for source in (tmp_path / "SICK.zip", tmp_path):  # the zip, or a directory holding it
        loaded = datasets.load(parse_params({"data": {"dataset": "sickr", "source": str(source)}}).data, 0)
        s = loaded.splits
        assert [len(s[k]) for k in ("train", "dev", "test")] == [2, 1, 1]
        assert s["train"]["score"].tolist() == pytest.approx([0.975, 0.0])  # (4.9 - 1) / 4
        assert s["train"].loc[0, "sentence1"] == 'A man is "playing" a guitar'
        assert dict(loaded.dropped) == {"SICK.txt:too_few_fields": 1, "SICK.txt:unknown_SemEval_set": 1,
                                        "SICK.txt[test]:score_out_of_range": 1}


MRPC_HEADER = "\ufeffQuality\t#1 ID\t#2 ID\t#1 String\t#2 String"


def write_mrpc_dir(d):
    d.mkdir()
    train = [MRPC_HEADER, "1\t101\t102\tHe said \"yes\" today.\tHe agreed today.",
             "0\t103\t104\tThe market fell.\tIt rained in Paris.", "1\t105\t106\tA dev pair.\tOne for dev.",
             "2\t107\t108\tBad label\there", "1\t109"]
    test = [MRPC_HEADER.lstrip("\ufeff"), "0\t201\t202\tTest one.\tOther thing."]
    (d / "msr_paraphrase_train.txt").write_text("\n".join(train) + "\n", encoding="utf-8")
    (d / "msr_paraphrase_test.txt").write_text("\n".join(test) + "\n", encoding="utf-8")
    (d / "mrpc_dev_ids.tsv").write_text("105\t106\n")


def test_mrpc_train_test_as_published_and_glue_dev_ids(tmp_path):
    write_mrpc_dir(tmp_path / "mrpc")
    params = parse_params({"data": {"dataset": "mrpc", "source": str(tmp_path / "mrpc")}})
    loaded = datasets.load(params.data, 0)
    s = loaded.splits
    assert s["train"]["sentence1"].tolist() == ['He said "yes" today.', "The market fell."]  # BOM and quotes ok
    assert s["train"]["score"].tolist() == [1.0, 0.0]
    assert list(s["train"].columns) == ["sentence1", "sentence2", "score"]
    assert s["dev"]["sentence1"].tolist() == ["A dev pair."] and len(s["test"]) == 1
    assert dict(loaded.dropped) == {"msr_paraphrase_train.txt:score_out_of_range": 1,
                                    "msr_paraphrase_train.txt:too_few_fields": 1}
    (tmp_path / "mrpc/mrpc_dev_ids.tsv").unlink()
    with pytest.raises(datasets.DataError, match="no mrpc_dev_ids.tsv inside"):
        datasets.load(params.data, 0)


def test_mrpc_download_uses_the_pinned_urls(tmp_path, monkeypatch):
    calls = []

    def fake_urlopen(url, timeout):
        calls.append(url)
        return _FakeResponse(b"not the official bytes")

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(datasets.urllib.request, "urlopen", fake_urlopen)
    with pytest.raises(datasets.DataError, match="expected the pinned"):
        datasets.load(parse_params({"data": {"dataset": "mrpc"}}).data, 0)
    assert calls == [datasets.MRPC_FILES["train"][0]]


def test_qqp_quoted_newlines_and_a_seeded_split(tmp_path):
    rows = ["id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate"]
    for i in range(40):
        rows.append(f'{i}\t{2 * i}\t{2 * i + 1}\tHow do I learn {i}?\t"What is the best way\nto learn {i}?"\t{i % 2}')
    rows.append('99\t1\t2\t\tEmpty first question?\t0')
    (tmp_path / "quora_duplicate_questions.tsv").write_text("\n".join(rows) + "\n")
    params = parse_params({"seed": 3, "data": {"dataset": "qqp", "source": str(tmp_path)}})
    a = datasets.load(params.data, 3)
    assert {k: len(v) for k, v in a.splits.items()} == {"train": 32, "dev": 4, "test": 4}
    everything = pd.concat(a.splits.values())
    assert everything["sentence2"].str.contains("best way to learn").all()  # the newline became a space
    assert set(everything["score"]) == {0.0, 1.0} and dict(a.dropped) == {
        "quora_duplicate_questions.tsv:missing_sentence": 1}
    b = datasets.load(params.data, 3)
    assert all(a.splits[k].equals(b.splits[k]) for k in a.splits)


@pytest.mark.parametrize("dataset,task", [("mrpc", "classification"), ("sickr", "regression")])
def test_named_datasets_know_their_task(tmp_path, dataset, task):
    if dataset == "mrpc":
        write_mrpc_dir(tmp_path / "src")
    else:
        (tmp_path / "src").mkdir()
        write_sick_zip(tmp_path / "src/SICK.zip")
    params = parse_params({"data": {"dataset": dataset, "source": str(tmp_path / "src")}})
    assert download(params, tmp_path / "raw", tmp_path / "download.json")["task"] == task
