import io
import json
import re
import tarfile
from typing import ClassVar

import numpy as np
import pandas as pd
import pytest

from pldistill.base import schemas
from pldistill.data import datasets, public_sets
from pldistill.params.config import parse_params
from stages.download import download
from tests.conftest import ROOT, STSB_ARCHIVE

# The format fixtures below are a few rows with a bad one or two: a drop share far above data.max_drop_share,
# which these tests lift (the threshold has its own tests).
LENIENT = {"max_drop_share": 1}
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
    "dev": ["main-captions\tMSRvid\t2012test\t0002\t0.500\tA woman slices onions.\tA dog runs.",
            "main-captions\tMSRvid\t2012test\t0005\t4.0\tA man rides a bike.\tA man is cycling."],
    "test": ["main-captions\tMSRvid\t2012test\t0003\t2.5\tKids play.\tChildren are playing outside.",
             "main-captions\tMSRvid\t2012test\t0006\t1.0\tA cat sleeps.\tA car drives by."],
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
    loaded = datasets.load(parse_params({"data": {"dataset": "stsb", "source": str(archive), **LENIENT}}).data, 0)
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
    params = parse_params({"data": {"dataset": "stsb", "source": str(tmp_path / "unpacked"), **LENIENT}})
    loaded = datasets.load(params.data, 0)
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
    assert loaded.sha256 == public_sets.STSB_SHA256
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


def test_demo_plain_sentences_are_built_from_their_parts_and_hold_no_pair_sentence(tmp_path):
    """data/demo/sentences.txt is what build.py makes of parts/plain-*.txt: each sentence once, none of pairs.tsv."""
    import shutil
    import subprocess
    import sys

    demo = tmp_path / "demo"
    shutil.copytree(ROOT / "data/demo", demo)
    subprocess.run([sys.executable, str(demo / "build.py")], check=True, capture_output=True)
    assert (demo / "sentences.txt").read_bytes() == (ROOT / "data/demo/sentences.txt").read_bytes()
    assert (demo / "pairs.tsv").read_bytes() == (ROOT / "data/demo/pairs.tsv").read_bytes()
    plain = (ROOT / "data/demo/sentences.txt").read_text(encoding="utf-8").splitlines()
    pairs = pd.read_csv(ROOT / "data/demo/pairs.tsv", sep="\t", quoting=3)
    key = lambda s: " ".join(s.lower().split()).strip(".?! ")  # noqa: E731
    in_pairs = {key(s) for s in [*pairs["sentence1"], *pairs["sentence2"]]}
    assert len(plain) > 4000 and len({key(s) for s in plain}) == len(plain)
    assert not {key(s) for s in plain} & in_pairs
    # nor a near copy of an evaluation sentence: 80% of the words (build.py's NEAR) or more in common
    words = lambda s: set(re.sub(r"\W+", " ", s.lower()).split())  # noqa: E731
    evals = pairs[pairs["split"] != "train"]
    held_out = [words(s) for s in [*evals["sentence1"], *evals["sentence2"]]]
    assert not [w for w in map(words, plain) if any(len(w & h) >= 0.8 * len(w | h) for h in held_out)]


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
    params = parse_params({"data": {"dataset": "stsb", "source": str(archive), **LENIENT}})
    report = download(params, tmp_path / "raw", tmp_path / "report.json")
    assert report["rows"] == {"train": 3, "dev": 2, "test": 2} and report["dropped_total"] == 3
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
    monkeypatch.setattr(public_sets.urllib.request, "urlopen", fake_urlopen)
    params = parse_params({"data": {"dataset": "stsb", **LENIENT}}).data
    with pytest.raises(datasets.DataError, match="expected the pinned"):  # our archive is not the official one
        datasets.load(params, 0)
    assert calls == [public_sets.STSB_URL]
    assert not (tmp_path / "data/downloads/Stsbenchmark.tar.gz").exists()  # a bad download is not kept

    monkeypatch.setattr(public_sets, "STSB_SHA256", public_sets.sha256_file(archive))
    assert len(datasets.load(params, 0).splits["train"]) == 3
    datasets.load(params, 0)
    assert len(calls) == 2  # the load after a good download used the verified cached copy


def test_offline_download_says_how_to_point_at_a_local_copy(tmp_path, monkeypatch):
    def no_network(url, timeout):
        raise public_sets.urllib.error.URLError("no route to host")

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(public_sets.urllib.request, "urlopen", no_network)
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
    loaded = datasets.load(parse_params({"data": {"dataset": str(jsonl), **LENIENT}}).data, 0)
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
            _sick_row(8, "A bird sings", "A truck parks", "1.5", "TRIAL"),
            _sick_row(4, "A woman cooks", "Nobody cooks", "2.2", "TEST"),
            _sick_row(9, "A boy jumps", "A boy is jumping", "4.8", "TEST"),
            _sick_row(5, "Too high", "score", "5.5", "TEST"),
            _sick_row(6, "Odd split", "row", "3.0", "EXTRA"),
            "7\ttruncated row"]
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("SICK.txt", "\n".join([SICK_HEADER, *rows]) + "\n")


def test_sickr_from_the_official_zip_format(tmp_path):
    write_sick_zip(tmp_path / "SICK.zip")
    for source in (tmp_path / "SICK.zip", tmp_path):  # the zip, or a directory holding it
        params = parse_params({"data": {"dataset": "sickr", "source": str(source), **LENIENT}})
        loaded = datasets.load(params.data, 0)
        s = loaded.splits
        assert [len(s[k]) for k in ("train", "dev", "test")] == [2, 2, 2]
        assert s["train"]["score"].tolist() == pytest.approx([0.975, 0.0])  # (4.9 - 1) / 4
        assert s["train"].loc[0, "sentence1"] == 'A man is "playing" a guitar'
        assert dict(loaded.dropped) == {"SICK.txt:too_few_fields": 1, "SICK.txt:unknown_SemEval_set": 1,
                                        "SICK.txt[test]:score_out_of_range": 1}


MRPC_HEADER = "\ufeffQuality\t#1 ID\t#2 ID\t#1 String\t#2 String"


def write_mrpc_dir(d):
    d.mkdir()
    train = [MRPC_HEADER, "1\t101\t102\tHe said \"yes\" today.\tHe agreed today.",
             "0\t103\t104\tThe market fell.\tIt rained in Paris.", "1\t105\t106\tA dev pair.\tOne for dev.",
             "0\t110\t111\tAnother dev pair.\tUnrelated words.",
             "2\t107\t108\tBad label\there", "1\t109"]
    test = [MRPC_HEADER.lstrip("\ufeff"), "0\t201\t202\tTest one.\tOther thing.",
            "1\t203\t204\tTest two.\tThe second test."]
    (d / "msr_paraphrase_train.txt").write_text("\n".join(train) + "\n", encoding="utf-8")
    (d / "msr_paraphrase_test.txt").write_text("\n".join(test) + "\n", encoding="utf-8")
    (d / "mrpc_dev_ids.tsv").write_text("105\t106\n110\t111\n")


def test_mrpc_train_test_as_published_and_glue_dev_ids(tmp_path):
    write_mrpc_dir(tmp_path / "mrpc")
    params = parse_params({"data": {"dataset": "mrpc", "source": str(tmp_path / "mrpc"), **LENIENT}})
    loaded = datasets.load(params.data, 0)
    s = loaded.splits
    assert s["train"]["sentence1"].tolist() == ['He said "yes" today.', "The market fell."]  # BOM and quotes ok
    assert s["train"]["score"].tolist() == [1.0, 0.0]
    assert list(s["train"].columns) == ["sentence1", "sentence2", "score"]
    assert s["dev"]["sentence1"].tolist() == ["A dev pair.", "Another dev pair."] and len(s["test"]) == 2
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
    monkeypatch.setattr(public_sets.urllib.request, "urlopen", fake_urlopen)
    with pytest.raises(datasets.DataError, match="expected the pinned"):
        datasets.load(parse_params({"data": {"dataset": "mrpc"}}).data, 0)
    assert calls == [public_sets.MRPC_FILES["train"][0]]


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
    params = parse_params({"data": {"dataset": dataset, "source": str(tmp_path / "src"), **LENIENT}})
    assert download(params, tmp_path / "raw", tmp_path / "download.json")["task"] == task


# ----------------------------------------------------------------- issue 26: copies merged before the split
def pairs_table(n: int, score=lambda i: (i % 5) / 4) -> pd.DataFrame:
    return pd.DataFrame({"sentence1": [f"the cat number {i} sat" for i in range(n)],
                         "sentence2": [f"a dog number {i} ran" for i in range(n)],
                         "score": [score(i) for i in range(n)]})


def test_a_table_without_copies_is_split_as_before(tmp_path):
    """The group split, with one pair per group, draws the same permutation and cuts as the row split it
    replaced: tables without copies (the demo has a split column anyway) keep their splits."""
    path = tmp_path / "t.csv"
    pairs_table(103).to_csv(path, index=False)
    loaded = datasets.load(parse_params({"data": {"dataset": str(path)}}).data, 11)
    order = np.random.default_rng(11).permutation(103)  # the row split: 10 dev, 10 test, the rest train
    before = {"dev": np.sort(order[:10]), "test": np.sort(order[10:20]), "train": np.sort(order[20:])}
    for split, rows in before.items():
        assert loaded.splits[split]["sentence1"].tolist() == [f"the cat number {i} sat" for i in rows]
    assert loaded.duplicates["copies_merged"] == 0


def test_copies_are_merged_before_the_split_with_their_mean_score(tmp_path):
    base = pairs_table(60)
    swapped = base.iloc[:30].rename(columns={"sentence1": "sentence2", "sentence2": "sentence1"})
    shouting = base.iloc[30:40].assign(sentence1=lambda d: d["sentence1"].str.upper() + "  ", score=1.0)
    path = tmp_path / "t.csv"
    pd.concat([base, swapped, shouting]).to_csv(path, index=False)
    loaded = datasets.load(parse_params({"data": {"dataset": str(path)}}).data, 0)
    merged = pd.concat(loaded.splits.values())
    assert len(merged) == 60 and loaded.dropped["t.csv:duplicate"] == 40
    assert datasets.overlap(loaded.splits) == {"dev_in_train": 0, "test_in_train": 0}
    scores = dict(zip(merged["sentence1"], merged["score"]))
    assert scores["the cat number 0 sat"] == 0.0 and scores["the cat number 31 sat"] == (0.25 + 1.0) / 2
    assert loaded.duplicates == {"copies_merged": 40, "pairs_with_copies": 40, "scores_disagreed": 8,
                                 "score_rule": "mean"}


def test_copies_of_a_labelled_pair_take_the_majority_and_a_tie_is_dropped(tmp_path):
    base = pairs_table(40, score=lambda i: i % 2)
    extra = pd.DataFrame({"sentence1": ["the cat number 0 sat"] * 2 + ["the cat number 1 sat"],
                          "sentence2": ["a dog number 0 ran"] * 2 + ["a dog number 1 ran"], "score": [1, 1, 0]})
    path = tmp_path / "t.csv"
    pd.concat([base, extra]).to_csv(path, index=False)  # pair 0: 0, 1, 1 -> 1; pair 1: 1, 0 -> a tie
    loaded = datasets.load(parse_params({"data": {"dataset": str(path)}}).data, 0)
    merged = pd.concat(loaded.splits.values())
    assert set(merged["score"]) == {0.0, 1.0} and len(merged) == 39
    assert merged.loc[merged["sentence1"] == "the cat number 0 sat", "score"].tolist() == [1.0]
    assert "the cat number 1 sat" not in set(merged["sentence1"])
    assert loaded.dropped["t.csv:duplicate"] == 3 and loaded.dropped["t.csv:duplicate_conflict"] == 1


def test_split_by_sentence_keeps_pairs_that_share_a_sentence_on_one_side(tmp_path):
    rows = [(f"base {g} is here", f"variant {v} of {g}", v / 3) for g in range(50) for v in range(4)]
    rows += [(f"variant 0 of {g}", f"variant 1 of {g + 1}", 0.5) for g in range(0, 50, 10)]  # links two groups
    path = tmp_path / "t.csv"
    pd.DataFrame(rows, columns=["sentence1", "sentence2", "score"]).to_csv(path, index=False)
    by_pair = datasets.load(parse_params({"data": {"dataset": str(path)}}).data, 0).splits
    by_sentence = datasets.load(parse_params({"data": {"dataset": str(path), "split_by": "sentence"}}).data, 0).splits

    def shared(splits: dict) -> int:
        train = set(splits["train"]["sentence1"]) | set(splits["train"]["sentence2"])
        return sum(len((set(splits[s]["sentence1"]) | set(splits[s]["sentence2"])) & train) for s in ("dev", "test"))

    assert shared(by_pair) > 0 and shared(by_sentence) == 0
    assert [len(by_sentence[s]) for s in ("dev", "test")] >= [20, 20]  # each got at least its 10%
    groups = datasets.sentence_groups(pd.DataFrame(rows, columns=["sentence1", "sentence2", "score"]))
    assert groups.max() + 1 == 45  # 50 groups of four, five pairs of them joined


@pytest.mark.parametrize(("bad", "stops"), [(5, False), (6, True)])
def test_a_drop_share_over_max_drop_share_stops_the_load(tmp_path, bad, stops):
    df = pairs_table(100)
    df.loc[: bad - 1, "score"] = 7  # out of data.score_range
    path = tmp_path / "t.csv"
    df.to_csv(path, index=False)
    params = parse_params({"data": {"dataset": str(path), "score_range": [0, 1]}}).data  # default 5%
    if not stops:
        assert datasets.load(params, 0).dropped["t.csv:score_out_of_range"] == bad
        return
    with pytest.raises(datasets.DataError, match=r"6 of 100 rows \(6\.0%\) were dropped as score_out_of_range.*"
                                                 r"e\.g\. row 1: sentence1='the cat number 0 sat', .*score='7\.0'"):
        datasets.load(params, 0)


def test_download_reports_copies_and_overlap(tmp_path, capsys):
    df = pairs_table(60).assign(split=["train"] * 40 + ["dev"] * 10 + ["test"] * 10)
    df.loc[55, ["sentence1", "sentence2"]] = ["A DOG NUMBER 3 RAN", "the cat number 3 sat"]  # train pair 3, swapped
    df.to_csv(tmp_path / "given.csv", index=False)
    report = download(parse_params({"data": {"dataset": str(tmp_path / "given.csv")}}), tmp_path / "raw",
                      tmp_path / "r.json")
    assert report["overlap"] == {"dev_in_train": 0, "test_in_train": 1} and report["duplicates"] == {}
    assert "warning: " in capsys.readouterr().out
    pd.concat([pairs_table(60), pairs_table(20)]).to_csv(tmp_path / "ours.csv", index=False)
    report = download(parse_params({"data": {"dataset": str(tmp_path / "ours.csv")}}), tmp_path / "raw",
                      tmp_path / "r.json")
    assert report["overlap"] == {"dev_in_train": 0, "test_in_train": 0}
    assert report["duplicates"]["copies_merged"] == 20 and report["dropped"] == {"ours.csv:duplicate": 20}


def test_download_loads_its_own_sections_checked_as_config_checks_them(tmp_path):
    """Stage download's command reads seed, data and adapt alone (DataSections): a bad key there is named
    with the nearest valid one; other sections are stage check's to validate."""
    from pldistill.base.errors import ConfigError
    from pldistill.params.data import load_data_sections

    path = tmp_path / "params.yaml"
    path.write_text("seed: 3\ndata:\n  datset: stsb\nstudent:\n  lrr: 1\n")
    with pytest.raises(ConfigError, match=r"data\.datset: unknown key \(did you mean data\.dataset\?\)"):
        load_data_sections(path)
    path.write_text("seed: 3\ndata:\n  dataset: nope\nstudent:\n  lrr: 1\n")
    with pytest.raises(ConfigError, match="data.dataset"):
        load_data_sections(path)
    path.write_text("seed: 3\ndata:\n  dataset: stsb\nstudent:\n  lrr: 1\n")
    loaded = load_data_sections(path)
    assert (loaded.seed, loaded.data.dataset, loaded.adapt.data) == (3, "stsb", None)
