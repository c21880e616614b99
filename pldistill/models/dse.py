"""Distilled Sentence Embedding (Barkan et al., 2020): a siamese sentence encoder whose pair score is a
small learned head over [u, v, u∘v, |u−v|], trained to reproduce a cross-encoder's logits.

The encoder is a sentence-transformers model; the head is saved beside it in ``dse_head/`` (a config and
safetensors weights). ``SentenceTransformer(path)`` still loads the directory (giving its own pooled
embeddings, not the head's score); ``DSE.load`` loads both. sentence-transformers 6 imports no module
class of ours without ``trust_remote_code``, hence the head lives outside ``modules.json``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file, save_file
from sentence_transformers import SentenceTransformer

from pldistill.base.bundled import resolve
from pldistill.base.device import device
from pldistill.base.errors import ModelError
from pldistill.base.io import atomic_dir, write_card
from pldistill.base.numeric import sigmoid
from pldistill.models import ahead
from pldistill.models.encoders import _batched_inference, pair_embeddings, prune_layers
from pldistill.params.recipes import DSE_POOLINGS

HEAD_DIR = "dse_head"


def pool(hidden_states: Sequence[torch.Tensor], mask: torch.Tensor, how: str, cls_first: bool) -> torch.Tensor:
    """Sentence vectors from a transformer's hidden states.

    hidden_states: (layers + 1) x (batch, seq, dim), embeddings first; mask: (batch, seq) 1 for tokens.
    last4: token means of each of the last four transformer layers (all of them in a shallower model),
    [CLS] left out, concatenated -> (batch, 4 * dim) (the paper's choice); mean: token mean of the last
    layer -> (batch, dim); cls: the first token of the last layer.
    """
    if how == "cls":
        return hidden_states[-1][:, 0]
    m = mask.to(hidden_states[-1].dtype).clone()
    layers = hidden_states[-1:]
    if how == "last4":
        layers = hidden_states[1:][-4:]  # [0] is the embedding layer's output
        if cls_first:
            m[:, 0] = 0  # including [CLS] in the mean hurt in the paper
    m = m.unsqueeze(-1)  # (batch, seq, 1)
    means = [(h * m).sum(1) / m.sum(1).clamp(min=1) for h in layers]
    return torch.cat(means, dim=-1)


class Head(torch.nn.Module):
    """f(u, v) = w^T ReLU(W [u, v, u∘v, |u−v|]): a logit. No biases, as in the paper's Eq. 3."""

    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.dim, self.hidden = dim, hidden
        self.proj = torch.nn.Linear(4 * dim, hidden, bias=False)
        self.out = torch.nn.Linear(hidden, 1, bias=False)

    def forward(self, u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:  # (batch, dim) x 2 -> (batch,)
        h = torch.cat([u, v, u * v, (u - v).abs()], dim=-1)
        return self.out(torch.relu(self.proj(h))).squeeze(-1)


class DSE:
    """The DSE student: encode sentences once, score any pair of cached embeddings with the head."""

    def __init__(self, st: SentenceTransformer, head: Head, pooling: str, name: str):
        self.st, self.head, self.pooling, self.name = st, head.to(st.device), pooling, name
        self.tokens = ahead.Tokens()  # the tokenizer's lock (inference tokenises ahead in a worker)
        self._module = torch.nn.ModuleDict({"encoder": st, "head": self.head})  # one state_dict for fit()

    @classmethod
    def create(cls, spec: str, pooling: str, hidden: int, max_length: int = 128,
               trust_remote_code: bool = False, layers: Sequence[int] | None = None) -> DSE:
        """A new student: the encoder from ``spec`` (only ``layers`` of it, if given), a randomly initialised
        head (seed torch first)."""
        if pooling not in DSE_POOLINGS:
            raise ValueError(f"dse.pooling: expected one of {', '.join(DSE_POOLINGS)}; found {pooling!r}")
        st = SentenceTransformer(resolve(spec), device=device(), trust_remote_code=trust_remote_code,
                                 model_kwargs={"use_safetensors": True})
        st.max_seq_length = max_length
        if pooling == "cls" and st.tokenizer.cls_token_id is None:
            raise ValueError(f"dse.pooling cls: {spec}'s tokenizer has no [CLS] token; use last4 or mean")
        if layers is not None:
            prune_layers(st[0].auto_model, layers, spec)
        cfg = st[0].auto_model.config
        dim = cfg.hidden_size * (min(4, cfg.num_hidden_layers) if pooling == "last4" else 1)
        return cls(st, Head(dim, hidden), pooling, spec)

    @classmethod
    def load(cls, path: Path | str) -> DSE:
        """A saved student with its head, truncating input where it did in training."""
        path = Path(path)
        cfg_file = path / HEAD_DIR / "config.json"
        if not cfg_file.is_file():
            raise FileNotFoundError(f"{path}: no {HEAD_DIR}/config.json; not a DSE student (train one with recipe dse)")
        try:
            cfg = json.loads(cfg_file.read_text())
            dim, hidden, pooling, max_length = cfg["dim"], cfg["hidden"], cfg["pooling"], cfg["max_length"]
        except (ValueError, KeyError) as err:
            raise ModelError(f"{cfg_file}: expected JSON with dim, hidden, pooling, max_length ({err!r})") from None
        if pooling not in DSE_POOLINGS:
            raise ModelError(f"{cfg_file}: pooling {pooling!r}, expected one of {', '.join(DSE_POOLINGS)}")
        st = SentenceTransformer(str(path), device=device(), model_kwargs={"use_safetensors": True})
        st.max_seq_length = max_length
        head = Head(dim, hidden)
        head.load_state_dict(load_file(path / HEAD_DIR / "model.safetensors"))
        return cls(st, head, pooling, str(path))

    @property
    def module(self) -> torch.nn.Module:
        return self._module

    @property
    def max_length(self) -> int:
        return self.st.max_seq_length

    @max_length.setter
    def max_length(self, value: int) -> None:
        self.st.max_seq_length = value

    def _embed(self, texts: list[str]) -> torch.Tensor:
        return self._pooled(self.tokens.locked(lambda: self.st.preprocess(texts)))

    def _pooled(self, feats: dict) -> torch.Tensor:
        inputs = {k: v.to(self.st.device, non_blocking=True) for k, v in feats.items()
                  if k in ("input_ids", "attention_mask", "token_type_ids")}
        out = self.st[0].auto_model(**inputs, output_hidden_states=True)
        cls_id = self.st.tokenizer.cls_token_id
        cls_first = cls_id is not None and bool((inputs["input_ids"][:, 0] == cls_id).all())
        return pool(out.hidden_states, inputs["attention_mask"], self.pooling, cls_first)  # (batch, dim)

    def _logits(self, s1: list[str], s2: list[str]) -> torch.Tensor:
        emb = self._embed(s1 + s2)  # one forward for both sides: (2 * batch, dim)
        return self.head(emb[: len(s1)].float(), emb[len(s1) :].float())

    def encode(self, texts: Sequence[str], batch_size: int = 64, bf16: bool | str = "auto",
               progress: bool = False) -> np.ndarray:
        """(len(texts), dim) float32 embeddings for the head (not normalised: the head saw them raw)."""
        texts = list(texts)
        self.module.eval()
        return _batched_inference(lambda idx: self.st.preprocess([texts[i] for i in idx]), self._pooled,
                                  [len(t) for t in texts], batch_size, bf16, "encode", progress, self.tokens,
                                  ahead.DEPTH)

    def score_cached(self, u: np.ndarray, v: np.ndarray, chunk: int = 8192) -> np.ndarray:
        """Head logits for embedding pairs (u_i, v_i); a single ``u`` row is broadcast against all of ``v``."""
        u_t, v_t = torch.from_numpy(np.atleast_2d(u)), torch.from_numpy(np.atleast_2d(v))
        out = np.empty(len(v_t), dtype=np.float32)
        self.head.eval()
        with torch.inference_mode():
            for i in range(0, len(v_t), chunk):
                vb = v_t[i : i + chunk].to(self.st.device)
                ub = u_t.expand(len(vb), -1) if len(u_t) == 1 else u_t[i : i + chunk]
                out[i : i + len(vb)] = self.head(ub.to(self.st.device), vb).float().cpu().numpy()
        return out

    def logits(self, s1: Sequence[str], s2: Sequence[str], batch_size: int = 64, bf16: bool | str = "auto",
               progress: bool = False) -> np.ndarray:
        """Head logits of each pair, each distinct sentence encoded once."""
        return self.score_cached(*pair_embeddings(self.encode, s1, s2, batch_size, bf16, progress))

    def score(self, s1: Sequence[str], s2: Sequence[str], batch_size: int = 64, bf16: bool | str = "auto",
              progress: bool = False) -> np.ndarray:
        return sigmoid(self.logits(s1, s2, batch_size, bf16, progress))

    def use_backend(self, backend: str) -> None:
        """DSE reads hidden states of several layers, which the exported graphs do not give: torch only."""
        if backend not in ("auto", "torch"):
            raise ModelError(f"backend {backend}: a DSE student scores on torch only; "
                             f"set evaluate.backend to auto or torch")

    def save(self, path: Path | str, card: str | None = None) -> None:
        with atomic_dir(path) as tmp:
            self.st.save(str(tmp), create_model_card=False, safe_serialization=True)
            write_card(tmp, card)
            (tmp / HEAD_DIR).mkdir()
            cfg = {"dim": self.head.dim, "hidden": self.head.hidden, "pooling": self.pooling,
                   "max_length": self.max_length, "base": self.name}
            (tmp / HEAD_DIR / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
            save_file({k: v.contiguous() for k, v in self.head.state_dict().items()},
                      str(tmp / HEAD_DIR / "model.safetensors"))
