import json

import pytest

from pldistill.base.store import MANIFEST, Store, default_root, fingerprint, step_key


def fill(store, key, text="weights", meta=None):
    with store.put(key, meta) as tmp:
        (tmp / "model").mkdir()
        (tmp / "model" / "w.bin").write_text(text)
        (tmp / "labels.parquet").write_text("labels")
    return store.get(key)


def test_put_then_get_returns_the_verified_entry_and_its_meta(tmp_path):
    store = Store(tmp_path)
    entry = fill(store, "k1", meta={"dev": 81.5})
    assert entry == tmp_path / "k1"
    assert (entry / "model" / "w.bin").read_text() == "weights"
    assert store.meta("k1") == {"dev": 81.5}
    files = json.loads((entry / MANIFEST).read_text())["files"]
    assert set(files) == {"model/w.bin", "labels.parquet"}


def test_missing_key_is_absent(tmp_path):
    assert Store(tmp_path).get("nope") is None


def test_a_failed_step_leaves_no_entry_and_no_temp_dir(tmp_path):
    store = Store(tmp_path)
    with pytest.raises(RuntimeError), store.put("k") as tmp:
        (tmp / "half").write_text("x")
        raise RuntimeError("killed mid-step")
    assert store.get("k") is None
    assert list(tmp_path.iterdir()) == []


def test_an_entry_without_manifest_is_moved_aside_and_can_be_stored_again(tmp_path):
    (tmp_path / "k").mkdir()
    (tmp_path / "k" / "w.bin").write_text("half written by someone else")
    store = Store(tmp_path)
    assert store.get("k") is None and store.corrupt == ["k"]
    assert fill(store, "k") == tmp_path / "k"  # the step can be stored under its key again


def test_sweep_removes_temp_dirs_of_dead_writers_only(tmp_path):
    import os
    import subprocess
    dead = subprocess.Popen(["true"])
    dead.wait()  # its pid is now free
    orphan = tmp_path / f".abcd.{dead.pid}.x1.tmp"
    live = tmp_path / f".abcd.{os.getpid()}.x2.tmp"
    orphan.mkdir()
    live.mkdir()
    assert Store(tmp_path).sweep() == [orphan.name]
    assert live.is_dir() and not orphan.exists()


def test_content_digest_changes_with_the_bytes(tmp_path):
    store = Store(tmp_path)
    fill(store, "a", text="one")
    fill(store, "b", text="two")
    fill(store, "c", text="one")
    assert store.content("a") == store.content("c") != store.content("b")


@pytest.mark.parametrize("damage", ["alter", "delete", "add", "manifest"])
def test_a_corrupted_entry_is_detected_and_moved_aside(tmp_path, damage):
    store = Store(tmp_path)
    entry = fill(store, "k")
    if damage == "alter":
        (entry / "model" / "w.bin").write_text("weightz")  # same size, other bytes
    elif damage == "delete":
        (entry / "labels.parquet").unlink()
    elif damage == "add":
        (entry / "stray.txt").write_text("?")
    else:
        (entry / MANIFEST).write_text("{not json")
    assert store.get("k") is None
    assert store.corrupt == ["k"]
    assert not (tmp_path / "k").exists() and any(p.name.startswith("corrupt-k-") for p in tmp_path.iterdir())
    assert fill(store, "k") is not None  # recomputed and stored again


def test_a_second_writer_keeps_the_first_entry(tmp_path):
    store = Store(tmp_path)
    fill(store, "k", text="first")
    fill(store, "k", text="second")
    assert (store.get("k") / "model" / "w.bin").read_text() == "first"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["k"]


def test_keys_chain_so_any_upstream_change_changes_every_later_key(tmp_path):
    data = tmp_path / "pairs.parquet"
    data.write_text("v1")
    base = fingerprint([data], {"seed": 1, "lr": 2e-5})
    k1 = step_key(base, "c01-train-cross", None)
    k2 = step_key(base, "c02-train-cross", k1)
    assert step_key(base, "c01-train-cross", None) == k1  # deterministic
    assert fingerprint([data], {"lr": 2e-5, "seed": 1}) == base  # key order does not matter
    assert fingerprint([data], {"seed": 2, "lr": 2e-5}) != base
    data.write_text("v2")
    changed = fingerprint([data], {"seed": 1, "lr": 2e-5})
    assert changed != base
    assert step_key(changed, "c02-train-cross", step_key(changed, "c01-train-cross", None)) != k2
    assert step_key(base, "c02-train-cross", "other-parent") != k2


def test_a_copy_of_the_project_elsewhere_has_the_same_keys(tmp_path, monkeypatch):
    """Files are named relative to the project a stage runs in: `dvc exp run --temp` and the queue run in copies."""
    keys = []
    for where in ("here", "there"):
        project = tmp_path / where
        (project / "data").mkdir(parents=True)
        (project / "data/pairs.parquet").write_text("v1")
        monkeypatch.chdir(project)
        keys.append(fingerprint([project / "data/pairs.parquet"], {"seed": 1}))
    assert keys[0] == keys[1]
    (tmp_path / "there/data/other.parquet").write_text("v1")  # same bytes, another file: another key
    assert fingerprint([tmp_path / "there/data/other.parquet"], {"seed": 1}) != keys[1]


def test_default_root_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.delenv("PLDISTILL_STORE", raising=False)
    monkeypatch.setenv("DVC_ROOT", str(tmp_path))
    assert default_root() == tmp_path / ".pldistill-store"
    monkeypatch.setenv("PLDISTILL_STORE", str(tmp_path / "elsewhere"))
    assert default_root() == tmp_path / "elsewhere"
