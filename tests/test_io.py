import json
import os

import pytest

from pldistill.base.io import atomic_dir, atomic_path, write_json, write_report


def test_a_failed_write_leaves_the_old_file_and_no_debris(tmp_path):
    target = tmp_path / "m.json"
    write_json(target, {"v": 1})
    with pytest.raises(RuntimeError), atomic_path(target) as tmp:
        tmp.write_text('{"v": 2, "half')
        raise RuntimeError("killed mid-write")
    assert target.read_text() == '{\n  "v": 1\n}\n'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.json"]


def test_a_failed_directory_write_leaves_the_old_directory(tmp_path):
    target = tmp_path / "model"
    with atomic_dir(target) as tmp:
        (tmp / "w").write_text("old")
    with pytest.raises(RuntimeError), atomic_dir(target) as tmp:
        (tmp / "w").write_text("new, partial")
        raise RuntimeError("killed mid-save")
    assert (target / "w").read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]
    with atomic_dir(target) as tmp:
        (tmp / "w").write_text("new")
    assert (target / "w").read_text() == "new" and sorted(p.name for p in tmp_path.iterdir()) == ["model"]


def test_written_files_follow_the_umask(tmp_path):
    write_json(tmp_path / "a.json", {})
    mask = os.umask(0)
    os.umask(mask)
    assert os.stat(tmp_path / "a.json").st_mode & 0o777 == 0o666 & ~mask


def test_a_report_keeps_what_the_machine_measured_apart(tmp_path):
    # wall times and throughput change with every run and host: not in the report git and dvc.lock hold
    report = {"best_dev": 80.1, "train_seconds": 3.2, "pruned": {"layers": [0], "sentences_per_s": {"pruned": 9.0},
                                                                 "speedup": 1.9},
              "cycles": [{"cycle": 1, "seconds": 2.0}, {"cycle": 2}], "label_pairs_per_s": None}
    write_report(tmp_path / "gold.json", report)
    assert json.loads((tmp_path / "gold.json").read_text()) == {
        "best_dev": 80.1, "pruned": {"layers": [0]}, "cycles": [{"cycle": 1}, {"cycle": 2}]}
    assert json.loads((tmp_path / "machine/gold.json").read_text()) == {
        "train_seconds": 3.2, "pruned": {"sentences_per_s": {"pruned": 9.0}, "speedup": 1.9},
        "cycles": [{"seconds": 2.0}, {}], "label_pairs_per_s": None}
    write_report(tmp_path / "gold.json", {"best_dev": 80.1})  # nothing measured: no stale file left
    assert not (tmp_path / "machine/gold.json").exists()
