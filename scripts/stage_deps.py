#!/usr/bin/env python3
"""The import graph of pldistill/ and stages/, read from the code (stdlib + yaml; the recipes' specs from
pldistill.params), and what it says dvc.yaml must list: each stage depends on every module it runs (every import,
lazy ones inside functions too, the packages' ``__init__`` files, config included) and on no other module. And
the keys of each recipe's own section each stage tracks: its spec's ``reads`` (pldistill/params/recipes.py), so a
new recipe's keys reach dvc.yaml from its spec alone.

    python scripts/stage_deps.py            # per stage: the modules and recipe keys dvc.yaml lacks or lists for
                                            # nothing; exit 1 if any
    python scripts/stage_deps.py --write    # rewrite them: each stage's module deps and recipe params in dvc.yaml
    python scripts/stage_deps.py --cycles   # import cycles among the modules; exit 1 if any
    python scripts/stage_deps.py --levels   # the modules by level (0: imports nothing of ours)

tests/test_dvc_yaml.py and tests/test_imports.py run the same checks.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run as a script: the project's package

from pldistill.base.imports import PACKAGES, closure, imports, modules  # noqa: E402 (after the path)
from pldistill.params.recipes import SPECS  # noqa: E402 (plain data: each recipe's section and the keys stages read)

__all__ = ["PACKAGES", "closure", "imports", "modules"]
# `python -m pldistill.run.launch stages.<name> ...`: runs the launcher, then the stage
LAUNCHER = "pldistill.run.launch"


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10 * len(graph)))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def levels(graph: dict[str, set[str]]) -> dict[str, int]:
    """Level 0: imports nothing of ours; otherwise one above the highest module it imports (no cycles)."""
    level: dict[str, int] = {}

    def of(m: str) -> int:
        if m not in level:
            level[m] = 1 + max((of(d) for d in graph[m]), default=-1)
        return level[m]

    for m in graph:
        of(m)
    return level


def entries(cmd: str) -> list[str]:
    """The modules a stage's command starts: ``python -m X`` and, for the launcher, the stage it runs."""
    words = cmd.split()
    out = [words[i + 1] for i, w in enumerate(words[:-1]) if w == "-m"]
    if out and out[0] == LAUNCHER:
        out += [w for w in words if w.startswith("stages.")][:1]
    return out


def needed(root: Path = ROOT) -> dict[str, list[str]]:
    """Stage -> the module files (relative paths) its command runs, for each dvc.yaml stage run by module."""
    mods = modules(root)
    graph = imports(mods)
    out = {}
    for name, stage in yaml.safe_load((root / "dvc.yaml").read_text())["stages"].items():
        cmd = " ".join(stage["cmd"]) if isinstance(stage["cmd"], list) else stage["cmd"]
        starts = [m for m in entries(cmd) if m in mods]
        if starts:
            run = set().union(*(closure(graph, m) for m in starts))
            out[name] = sorted(mods[m].relative_to(root).as_posix() for m in run)
    return out


def is_code(dep: str) -> bool:
    return dep.split("/")[0] in PACKAGES


def compare(root: Path = ROOT) -> dict[str, tuple[list[str], list[str]]]:
    """Stage -> (modules it runs that its deps lack, code deps it lists that it does not run)."""
    stages = yaml.safe_load((root / "dvc.yaml").read_text())["stages"]
    out = {}
    for name, files in needed(root).items():
        deps = [d if isinstance(d, str) else next(iter(d)) for d in stages[name].get("deps", [])]
        code = [d for d in deps if is_code(d)]
        out[name] = ([f for f in files if f not in code], [d for d in code if d not in files])
    return out


RECIPE_SECTIONS = tuple(s.section for s in SPECS.values() if s.section)


def is_recipe_key(key: str) -> bool:
    """A key of a recipe's own section (``ensemble.k``, ``rounds``): its spec says which stages track it."""
    return key.split(".")[0] in RECIPE_SECTIONS


def recipe_params(comments: bool = False) -> dict[str, list[str]]:
    """Stage -> the keys of the recipes' own sections it tracks, from each spec's ``reads`` (SPECS' order); with
    ``comments``, each as dvc.yaml writes it, naming its recipe."""
    out: dict[str, list[str]] = {}
    for spec in SPECS.values():
        for stage, keys in spec.reads.items():
            listed = [f"{spec.section}.{k}" for k in keys] if keys else [str(spec.section)]
            out.setdefault(stage, []).extend(f"{k:<21} # recipe {spec.name}" if comments else k for k in listed)
    return out


def compare_params(root: Path = ROOT) -> dict[str, tuple[list[str], list[str]]]:
    """Stage -> (recipe keys its spec's reads name that dvc.yaml lacks, recipe keys dvc.yaml lists that none name)."""
    stages, wanted = yaml.safe_load((root / "dvc.yaml").read_text())["stages"], recipe_params()
    out = {f"{name} (no such stage in dvc.yaml)": (keys, []) for name, keys in wanted.items() if name not in stages}
    for name, stage in stages.items():
        listed = [k for k in stage.get("params", []) if isinstance(k, str) and is_recipe_key(k)]
        want = wanted.get(name, [])
        out[name] = ([k for k in want if k not in listed], [k for k in listed if k not in want])
    return out


_ITEM = re.compile(r"^(\s+)- (\S+)")


def rewrite(text: str, wanted: dict[str, list[str]], section_name: str = "deps",
            owned: Callable[[str], bool] = is_code) -> str:
    """dvc.yaml's text with the ``owned`` items of each stage's ``section_name`` list (its code deps; or, with
    "params" and ``is_recipe_key``, its recipe keys) replaced by ``wanted[stage]`` (in place of the first owned item,
    or first in the list); every other line, comments included, as it was."""
    lines, out = text.splitlines(keepends=True), []
    stage = section = None
    placed = False
    for i, line in enumerate(lines):
        if m := re.match(r"^  (\w[\w-]*):\s*$", line):
            stage, section = m.group(1), None
        elif m := re.match(r"^    (\w+):", line):
            section, placed = m.group(1), False
            out.append(line)
            if section == section_name and stage in wanted and not any(
                    (n := _ITEM.match(x)) and owned(n.group(2)) for x in _section(lines, i)):
                out += [f"      - {f}\n" for f in wanted[stage]]
                placed = True
            continue
        item = _ITEM.match(line)
        if section == section_name and stage in wanted and item and owned(item.group(2)):
            if not placed:
                out += [f"{item.group(1)}- {f}\n" for f in wanted[stage]]
                placed = True
            continue
        out.append(line)
    return "".join(out)


def write(root: Path = ROOT) -> None:
    """dvc.yaml with every stage's code deps and recipe keys as the code and the specs say."""
    dvc_yaml = root / "dvc.yaml"
    text = rewrite(dvc_yaml.read_text(), needed(root))
    stages = yaml.safe_load(text)["stages"]
    wanted = recipe_params(comments=True)
    params = {name: wanted.get(name, []) for name in stages}  # a stage no spec names loses its recipe keys
    dvc_yaml.write_text(rewrite(text, params, "params", is_recipe_key))


def _section(lines: list[str], start: int) -> list[str]:
    """The lines of the section whose header is ``lines[start]``."""
    body = []
    for line in lines[start + 1:]:
        if re.match(r"^ {0,4}\S", line):
            break
        body.append(line)
    return body


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    what = ap.add_mutually_exclusive_group()
    what.add_argument("--write", action="store_true", help="rewrite the code deps of dvc.yaml's stages")
    what.add_argument("--cycles", action="store_true", help="list the import cycles")
    what.add_argument("--levels", action="store_true", help="list the modules by level")
    ap.add_argument("--root", type=Path, default=ROOT)
    args = ap.parse_args(argv)
    mods = modules(args.root)
    graph = imports(mods)
    if args.cycles:
        found = cycles(graph)
        for c in found:
            print(f"cycle of {len(c)}: {' '.join(c)}")
        print(f"{len(mods)} modules, {sum(map(len, graph.values()))} imports, {len(found)} cycles")
        return 1 if found else 0
    if args.levels:
        if cycles(graph):
            print("the graph has cycles: --cycles lists them")
            return 1
        by_level: dict[int, list[str]] = {}
        for m, lv in levels(graph).items():
            by_level.setdefault(lv, []).append(m)
        for lv in sorted(by_level):
            print(f"{lv}: {' '.join(sorted(by_level[lv]))}")
        print(f"{len(mods)} modules on {len(by_level)} levels")
        return 0
    if args.write:
        write(args.root)
    bad = 0
    checks = ((compare(args.root), "runs {} but does not depend on it", "depends on {} but does not run it"),
              (compare_params(args.root), "reads {} (its recipe's spec says) but does not track it",
               "tracks {}, which no recipe's spec says it reads"))
    for found, lacks, lists in checks:
        for name, (missing, extra) in found.items():
            for what, say in ((missing, lacks), (extra, lists)):
                for item in what:
                    print(f"stage {name}: {say.format(item)}")
                bad += len(what)
    print(f"{bad} missing or extra stage dependencies")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
