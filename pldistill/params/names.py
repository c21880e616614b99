"""The names params.yaml may use for what a registry holds, at the bottom of the import graph: pldistill.params.config
checks a value against them without importing the code behind them, so checking params (every stage's first
step) does not make a data stage depend on sampling or translation code. Each registry refuses a name missing
here, and tests/test_recipes.py checks that the two agree.

Adding a sampling strategy, a dataset, a translation backend or a bundled model: register it in its module and
name it here. A recipe's name is its spec's (pldistill.params.recipes.RECIPES, beside its section)."""

from __future__ import annotations

# sample.strategy (pldistill.pairs.sampling.REGISTRY); several may be joined by + (bm25+semantic is one of its own)
STRATEGIES = ("none", "random", "kde", "bm25", "semantic", "given", "bm25+semantic")
# data.dataset's named datasets (pldistill.data.datasets.LOADERS); a path to a table is the other kind of value
DATASETS = ("demo", "stsb", "sickr", "mrpc", "qqp")
# augment.rtt.backend (pldistill.data.rtt.BACKENDS, and none)
RTT_BACKENDS = ("none", "marian", "table")
# bundled:<name> model specs (pldistill.base.bundled.BUNDLED, which holds where each ships and its checksum)
BUNDLED_MODELS = ("all-MiniLM-L6-v2", "all-mpnet-base-v2")

# export.formats (pldistill.ship.export, stage export): a transformer student's forms, then a static student's
EXPORT_FORMATS = ("onnx", "onnx-int8", "openvino", "openvino-int8", "model2vec", "model2vec-f16", "model2vec-int8")


# The formats a table path may name (data.dataset, data.unscored, embed.corpus, ...), and the compressions read
# through (pldistill.data.reading, by their first bytes): pairs.csv.gz is a .csv, gzip-compressed.
TABLE_SUFFIXES = (".csv", ".tsv", ".jsonl", ".parquet")
COMPRESSED_SUFFIXES = (".gz", ".bz2", ".xz", ".zip")


def format_suffix(path: str) -> str:
    """The format a file name says, a compression's suffix set aside: ``pairs.csv.gz`` -> ``.csv``, ``a.txt`` ->
    ``.txt``, ``stsb`` -> ``""`` (lower case)."""
    name = path.lower().rstrip("/").rsplit("/", 1)[-1]
    for packed in COMPRESSED_SUFFIXES:
        if name.endswith(packed):
            name = name[: -len(packed)]
            break
    stem, dot, ext = name.rpartition(".")
    return f".{ext}" if dot and stem else ""


def registered() -> dict[str, tuple[str, ...]]:
    """Each registry's names, keyed as the params validators ask for them (pldistill.params.data._registered)."""
    return {"dataset": DATASETS, "strategy": STRATEGIES, "rtt_backend": RTT_BACKENDS}


def __getattr__(name: str) -> object:
    # RECIPES moved beside the recipes' specs (issue 78): an old import names where it is now. An ImportError, since
    # `from ... import RECIPES` turns an AttributeError into a plain "cannot import name"
    if name == "RECIPES":
        raise ImportError("pldistill.params.names.RECIPES moved to pldistill.params.recipes.RECIPES (derived from "
                          "SPECS; docs/changelog.md)")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
