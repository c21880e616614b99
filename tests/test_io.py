import os

import pytest

from pldistill.io import atomic_dir, atomic_path, write_json


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
