"""pldistill: pseudo-label distillation for sentence-pair models (library behind stages/). Its subpackages follow the
pipeline (docs/layout.md); ``python -m pldistill.score``, ``pldistill.verdict`` and ``pldistill.warm`` are its
commands."""

from __future__ import annotations

import importlib.abc
import sys

__version__ = "0.11.0"  # the package version (pyproject reads it); model cards name it

# Modules that moved into subpackages (docs/changelog.md, issue 78): importing an old path fails naming the new one.
MOVED = {
    **dict.fromkeys(("errors", "io", "schemas", "cleaning", "console", "seeding", "numeric", "store", "bundled",
                     "device", "batching", "metrics", "cards", "imports"), "base"),
    **dict.fromkeys(("names", "defaults", "defaults_data"), "params"),
    **dict.fromkeys(("runtime", "launch", "handover", "environment", "distributed"), "run"),
    **dict.fromkeys(("accel", "ahead", "dse"), "models"),
    **dict.fromkeys(("reading", "rows", "public_sets", "datasets", "rtt", "sentences", "variants"), "data"),
    **dict.fromkeys(("sampling", "bm25", "semantic"), "pairs"),
    **dict.fromkeys(("teachers", "labelling", "diagnostics"), "teach"),
    **dict.fromkeys(("training", "trainer_parts", "wrappers", "resume", "tracking", "stage_training", "losses"),
                    "train"),
    **dict.fromkeys(("cut", "static", "static_choice", "token_weights", "embedding"), "students"),
    **dict.fromkeys(("export", "served", "speed"), "ship"),
}
RENAMED = {"config": "params.config", "validate": "params.config", "params_data": "params.data",
           "params_base": "params.sections", "params_train": "params.train"}  # (models: now pldistill.models.encoders)


class _Moved(importlib.abc.MetaPathFinder):
    """Consulted last, once no finder found a ``pldistill.<name>``: a name that moved fails with its new path."""

    def find_spec(self, fullname: str, path: object = None, target: object = None) -> None:
        first, _, rest = fullname.removeprefix("pldistill.").partition(".")
        if not fullname.startswith("pldistill.") or (first not in MOVED and first not in RENAMED):
            return None
        new = RENAMED.get(first) or f"{MOVED[first]}.{first}"
        # no ``name=``: ``from pldistill import <old>`` would turn it into a plain "cannot import name"
        raise ModuleNotFoundError(f"No module named {fullname!r}: it moved to pldistill.{new}"
                                  f"{'.' + rest if rest else ''} (docs/changelog.md)")


sys.meta_path.append(_Moved())
