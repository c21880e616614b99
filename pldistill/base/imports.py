"""The import graph of pldistill/ and stages/, read from the code's text (ast; nothing is imported): which modules
each module imports, lazy imports inside functions included. dvc.yaml's module deps (scripts/stage_deps.py) and a
training run's code fingerprint (pldistill.train.resume) are both derived from it, never kept by hand."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the project: pldistill/, stages/
PACKAGES = ("pldistill", "stages")


def modules(root: Path = ROOT) -> dict[str, Path]:
    """Dotted module name -> its file, for every module of PACKAGES (a package is its ``__init__.py``)."""
    out = {}
    for pkg in PACKAGES:
        for f in sorted((root / pkg).rglob("*.py")):
            parts = list(f.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = f
    return out


def imports(mods: dict[str, Path]) -> dict[str, set[str]]:
    """Module -> the modules of ours it imports, wherever the import statement sits."""
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for m, f in mods.items():
        package = m.split(".") if f.name == "__init__.py" else m.split(".")[:-1]
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                stem = node.module or ""
                if node.level:  # relative: from its package, up level - 1
                    stem = ".".join(package[: len(package) - node.level + 1] + ([stem] if stem else []))
                names = [stem] + [f"{stem}.{a.name}" for a in node.names]
            else:
                continue
            for name in names:
                parts = name.split(".")
                # the longest module of ours the name starts with (`from pldistill.base import io` is pldistill.base.io)
                found = next((".".join(parts[:k]) for k in range(len(parts), 0, -1) if ".".join(parts[:k]) in mods),
                             None)
                if found and found != m:
                    graph[m].add(found)
    return graph


def closure(graph: dict[str, set[str]], start: str) -> set[str]:
    """Every module that running ``start`` runs: its imports, theirs, and each one's parent packages."""
    seen, todo = set(), [start]
    while todo:
        m = todo.pop()
        if m in seen:
            continue
        seen.add(m)
        parts = m.split(".")
        todo += [p for k in range(1, len(parts)) if (p := ".".join(parts[:k])) in graph]
        todo += graph[m]
    return seen
