"""An export (pldistill.ship.export) run as a user serves it, to score and time it in stage evaluate: a transformer's
tokenizer (the fast one its folder holds), its graph on ONNX Runtime or OpenVINO, pooling and normalisation in
numpy; a static student through Model2Vec itself. Nothing of the student's torch model is used."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from pldistill.models.encoders import pair_embeddings
from pldistill.ship.export import BACKEND, FILES, POOLING, STATIC, ExportError, lacking, model_bytes


def _pool(hidden: np.ndarray, mask: np.ndarray, mode: str) -> np.ndarray:
    """(batch, seq, dim), (batch, seq) -> (batch, dim), as sentence-transformers' Pooling does."""
    if mode == "cls":
        return hidden[:, 0]
    m = mask[..., None].astype(np.float32)
    if mode == "max":
        return np.where(m > 0, hidden, -1e9).max(axis=1)
    total = (hidden * m).sum(axis=1)
    count = np.maximum(m.sum(axis=1), 1e-9)
    return total / (np.sqrt(count) if mode == "mean_sqrt_len_tokens" else count)


class Served:
    """One export, loaded from its folder: ``encode`` and ``score`` as a bi-encoder's (cosine of unit vectors)."""

    def __init__(self, folder: Path, fmt: str):
        if missing := lacking(fmt):
            raise ExportError(f"export {fmt}: needs {' and '.join(missing)}, not installed")
        self.folder, self.fmt, self.name = Path(folder), fmt, f"export {fmt}"
        self.bytes = model_bytes(self.folder, fmt)
        self._encode = self._static() if fmt in STATIC else self._transformer()

    def _static(self) -> Callable[[list[str], int], np.ndarray]:
        from model2vec import StaticModel

        model = StaticModel.from_pretrained(str(self.folder), force_download=False)
        return lambda texts, bs: model.encode(texts, batch_size=bs, show_progress_bar=False,
                                              use_multiprocessing=False)

    def _transformer(self) -> Callable[[list[str], int], np.ndarray]:
        from transformers import AutoTokenizer

        from pldistill.models.accel import openvino_session, ort_session

        modules = json.loads((self.folder / "modules.json").read_text())
        pooling = json.loads((self.folder / "1_Pooling" / "config.json").read_text())
        mode = next(k for k, v in POOLING.items() if pooling.get(v))  # the one flag stage export set
        normalise = any(m["type"].endswith("Normalize") for m in modules)
        max_length = json.loads((self.folder / "sentence_bert_config.json").read_text())["max_seq_length"]
        tok = AutoTokenizer.from_pretrained(str(self.folder))
        file = self.folder / FILES[self.fmt]
        run = ort_session(file) if BACKEND[self.fmt] == "onnx" else openvino_session(file, precision="f32")
        names = ("input_ids", "attention_mask", "token_type_ids")

        def encode(texts: list[str], bs: int) -> np.ndarray:
            # sentence-transformers' batches (longest first, numpy's default sort): an int8 form's activations are
            # scaled per batch, so another grouping moves its scores in the fourth decimal
            order = np.argsort([-len(t) for t in texts])
            out = np.empty((len(texts), 0), np.float32)
            for start in range(0, len(texts), bs):
                idx = order[start : start + bs]
                feats = tok([texts[i] for i in idx], padding=True, truncation=True, max_length=max_length,
                            return_tensors="np")
                feeds = {n: feats[n].astype(np.int64) for n in names if n in feats}
                emb = _pool(np.asarray(run(feeds), np.float32), feats["attention_mask"], mode)
                if out.shape[1] == 0:
                    out = np.empty((len(texts), emb.shape[1]), np.float32)
                out[idx] = emb
            if normalise:
                out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)
            return out

        return encode

    def encode(self, texts: Sequence[str], batch_size: int = 64, bf16: bool | str = "auto",
               progress: bool = False) -> np.ndarray:
        """(len(texts), dim) float32, unit length (for the cosine)."""
        emb = np.asarray(self._encode(list(texts), batch_size), np.float32)
        return emb / np.maximum(np.linalg.norm(emb, axis=1, keepdims=True), 1e-12)

    def score(self, s1: Sequence[str], s2: Sequence[str], batch_size: int = 64, bf16: bool | str = "auto",
              progress: bool = False) -> np.ndarray:
        a, b = pair_embeddings(self.encode, s1, s2, batch_size, bf16, progress)
        return np.sum(a * b, axis=1)

    def cost_key(self) -> None:
        return None  # always timed

    def use_backend(self, backend: str) -> None:
        """It runs on its own format's runtime, whatever evaluate.backend says."""


# How a user loads each form without pldistill: the packages, then three lines
LOADERS = {
    "onnx": ("sentence-transformers[onnx]", 'SentenceTransformer(path, backend="onnx", '
             'model_kwargs={{"file_name": "{file}"}})'),
    "openvino": ("sentence-transformers[openvino]", 'SentenceTransformer(path, backend="openvino", '
                 'model_kwargs={{"file_name": "{file}", "ov_config": {{"INFERENCE_PRECISION_HINT": "f32"}}}})'),
    "torch": ("sentence-transformers", "SentenceTransformer(path)"),
}


def serve_card(chosen: str, result: dict, dataset: str) -> str:
    """models/serve's README.md: what it is, its figures, and how to load it in three lines without pldistill."""
    primary = "spearman" if "spearman" in result["bi"]["test"] else "auc"
    figures = result["bi"] if chosen == "torch" else result["export"][chosen]
    if chosen in STATIC:
        install = "model2vec"
        lines = ["from model2vec import StaticModel", 'model = StaticModel.from_pretrained("models/serve")',
                 'embeddings = model.encode(["A sentence.", "Another one."])']
    else:
        backend = BACKEND.get(chosen, "torch")
        install, call = LOADERS[backend]
        call = call.format(file=FILES.get(chosen, "")).replace("(path", '("models/serve"')
        lines = ["from sentence_transformers import SentenceTransformer", f"model = {call}",
                 'embeddings = model.encode(["A sentence.", "Another one."])']
    student = result["bi"]
    rows = [("form", chosen), ("dataset", dataset),
            (f"test {primary} x100", f"{figures['test'][primary]} (the torch student: {student['test'][primary]})"),
            (f"dev {primary} x100", f"{figures['dev'][primary]} (the torch student: {student['dev'][primary]})"),
            ("speed against the whole start model in torch fp32",
             f"{figures.get('speed')}x [{figures.get('speed_low')}, {figures.get('speed_high')}] (95% interval)"),
            ("why this one", "the fastest export within export.max_drop dev points of the student, through the "
                             "drift gate" if chosen != "torch" else "no export within export.max_drop and the gate")]
    if chosen != "torch":
        rows.append(("weights", f"{figures['bytes']:,} bytes"))
    table = "\n".join(f"| {k} | {v} |" for k, v in rows)
    return (f"# The served student ({chosen})\n\nMade by pldistill's stage evaluate: of the student's exports, the one "
            f"it serves (eval.json `export.chosen`).\n\n| | |\n|---|---|\n{table}\n\n## Load it without pldistill\n\n"
            f"```bash\npip install \"{install}\"\n```\n\n```python\n" + "\n".join(lines) + "\n```\n")


def serve_copy(chosen: str, src: Path, dest: Path, result: dict, dataset: str) -> None:
    """``dest`` (models/serve): a copy of the chosen form's folder (its own card replaced by the serving card)."""
    import shutil

    from pldistill.base.io import atomic_dir

    with atomic_dir(dest) as tmp:
        shutil.copytree(src, tmp, dirs_exist_ok=True)
        (tmp / "README.md").write_text(serve_card(chosen, result, dataset), encoding="utf-8")
