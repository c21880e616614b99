"""benchmarks/stsb_exps.py: the README's STS-B rows as `dvc exp run -S ...`, read back from `dvc exp show --json`."""

import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
from stsb_exps import ROWS, experiments, settings, table  # benchmarks/ is a folder of scripts, not a package


def _exp(name: str, student: float, speed: float) -> dict:
    return {"rev": name, "name": name, "data": {"metrics": {"metrics/eval.json": {"data": {
        "bi": {"test": {"spearman": student}, "dev": {"spearman": 80.0}, "speed": speed},
        "teacher": {"test": {"spearman": 82.03}},
        "baseline": {"gold": {"test": {"spearman": 78.0}}, "start": {"test": {"spearman": 60.0}}}}}}}}


def test_rows_are_data_settings_plus_their_own_and_the_table_means_seeds():
    args = settings("gold-only", 43, Path("x.tar.gz"))
    pairs = dict(zip(args[1::2], args[::2]))  # each setting follows its -S
    assert set(pairs.values()) == {"-S"} and "seed=43" in pairs and "sample.strategy=none" in pairs
    assert f"data.source={Path('x.tar.gz').resolve()}" in pairs and "data.unscored=rest" in pairs
    # dvc exp show --json: the workspace, then each baseline commit with its experiments' revs
    shown = [{"rev": "workspace", "name": None, "data": {}},
             {"rev": "abc", "name": "main", "data": {}, "experiments": [
                 {"revs": [_exp("default-s42", 82.0, 2.6)]}, {"revs": [_exp("default-s43", 83.0, 2.8)]},
                 {"revs": [_exp("gold-only-s42", 78.0, 2.7)]},
                 {"executor": {"state": "running"}, "revs": [_exp("gold-only-s43", 87.0, 2.7)]}]}]  # baseline's
    found = experiments(shown)
    assert set(found) == {"default-s42", "default-s43", "gold-only-s42"} and found["default-s42"]["teacher"] == 82.03
    lines = table(found).splitlines()
    assert lines[2] == "| default | 42,43 | 82.50 | 80.00 | 2.70 | 78.00 | 60.00 | 82.03 |"  # made before export
    assert lines[3].startswith("| gold-only | 42 | 78.00 |") and len(lines) == 4


def test_the_corpus_row_needs_its_file_and_passes_its_absolute_path(tmp_path):
    with pytest.raises(SystemExit, match="benchmarks/corpus.py"):
        settings("corpus", 42, Path("x.tar.gz"), tmp_path / "missing.txt")
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("a sentence\n")
    args = settings("corpus", 42, Path("x.tar.gz"), corpus)
    assert f"embed.corpus={corpus.resolve()}" in args


def test_rows_measured_before_the_embedding_rate_changed_pin_the_old_one_and_todays_default_spells_the_new():
    pinned = lambda row: _setting(row, "embed.lr")  # noqa: E731
    assert pinned("default-grouped") == pinned("gold-only") == "embed.lr=2e-4"
    assert pinned("embed-lr") == pinned("embed-e3") == "embed.lr=5e-4" and ROWS["corpus20k"]["embed.lr"] == "5e-4"
    assert pinned("embed-e2") == "embed.lr=1e-3"


def test_rows_measured_before_the_embedding_epochs_changed_pin_five_and_keep_their_own():
    pinned = lambda row: _setting(row, "embed.epochs")  # noqa: E731
    assert pinned("default-grouped") == pinned("embed-lr") == pinned("static-ft-wise") == "embed.epochs=5"
    assert pinned("gold-only") == "embed.epochs=0" and ROWS["corpus20k"]["embed.epochs"] == 2
    assert pinned("embed-e3") == "embed.epochs=3" and pinned("embed-e2") == "embed.epochs=2"


def test_rows_measured_before_the_variants_pin_them_off_and_todays_default_spells_them():
    pinned = lambda row: _setting(row, "embed.variants")  # noqa: E731
    assert pinned("embed-e2") == pinned("default-wise") == pinned("static-ft-wise") == "embed.variants=0"
    assert ROWS["corpus20k"]["embed.variants"] == 0
    assert pinned("embed-v3") == "embed.variants=3" and _setting("embed-v3", "embed.epochs") == "embed.epochs=1"
    assert pinned("embed-v1") == "embed.variants=auto" and _setting("embed-v1", "embed.epochs") == "embed.epochs=1"


def _setting(row: str, key: str) -> str:
    """The `-S key=value` ``row`` passes at seed 42."""
    return next(arg for arg in settings(row, 42, Path("x.tar.gz")) if arg.startswith(f"{key}="))


def test_a_row_rerun_on_a_later_commit_replaces_the_earlier_run():
    # dvc exp show --json --all-commits lists baseline commits newest first
    shown = [{"rev": "new", "name": "main", "data": {}, "experiments": [{"revs": [_exp("default-s42", 83.4, 2.6)]}]},
             {"rev": "old", "name": None, "data": {}, "experiments": [{"revs": [_exp("default-s42", 82.0, 2.5)]}]}]
    assert experiments(shown)["default-s42"]["bi.test.spearman"] == 83.4


def test_a_row_made_with_stage_export_shows_what_was_served_per_seed():
    exp = _exp("serve-s42", 82.57, 2.85)
    eval_json = exp["data"]["metrics"]["metrics/eval.json"]["data"]
    eval_json["export"] = {"chosen": "openvino-int8", "openvino-int8": {"test": {"spearman": 82.56}, "speed": 14.0}}
    line = table(experiments([{"rev": "abc", "name": "main", "data": {}, "experiments": [{"revs": [exp]}]}]))
    assert line.splitlines()[2].endswith("| 82.03 | openvino-int8 82.56 at 14.0x |")


def test_seed_pairs_means_the_differences_with_a_t_interval():
    from seed_pairs import figures, paired

    mean, low, high = paired([1.0, 2.0, 3.0])  # sd 1, se 1/sqrt(3), t(0.975, 2 df) = 4.3027
    assert mean == 2.0 and round(low, 3) == -0.484 and round(high, 3) == 4.484
    assert paired([0.5])[0] == 0.5 and all(x != x for x in paired([0.5])[1:])  # one seed: no interval (nan)
    assert figures("82.76") == (82.76, None)  # a figure measured elsewhere
    with pytest.raises(SystemExit, match="expected an experiment name"):
        figures("no-such-experiment-s42")
