"""Docs that cannot rot: every `-S key=value` and every params key the README and docs/ name is a key of params.yaml
(or one the typed config takes from section train);
every repository path they name exists (in git, or as an output dvc.yaml declares); every link and anchor leads
somewhere; every `make` target and `python -m` module they name is real; every field of metrics/eval.json is in the
reference (docs/outputs.md); every docs page the code points to exists."""

from __future__ import annotations

import json
import re
import subprocess
import typing
from functools import cache
from pathlib import Path

import pytest
import yaml

from scripts import params_doc

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
TOP_FILES = ("params.yaml", "dvc.yaml", "dvc.lock", "Makefile", "pyproject.toml")
TOP_DIRS = ("stages/", "pldistill/", "benchmarks/", "scripts/", "tests/", "docs/", "data/", "models/", "metrics/",
            ".ci/")
SETTING = re.compile(r"-S\s+['\"]?\+{0,2}([A-Za-z_][\w.]*)=")  # dvc exp run -S key=value (+key: a new map entry)
CODE = re.compile(r"`([^`\n]+)`")


def _name(page: Path) -> str:
    return str(page.relative_to(ROOT))


# -------------------------------------------------------------------------------------------- params keys
def param_keys(params: dict, prefix: str = "") -> set[str]:
    """Every dotted path of params.yaml, sections included (`data`, `data.split`, `data.split.dev`); a map the user
    fills (`data.columns: {}`) as `data.columns.*`."""
    out = set()
    for key, value in params.items():
        path = f"{prefix}{key}"
        out.add(path)
        if isinstance(value, dict):
            out |= param_keys(value, path + ".") if value else {path + ".*"}
    return out


def settings(text: str) -> list[str]:
    """The keys of every `-S key=value` in a text."""
    return SETTING.findall(text)


def named_keys(text: str, sections: set[str]) -> list[str]:
    """Keys named in code spans as settings: `key=value` or `key: value`, the key's first part a params section."""
    out = []
    for span in CODE.findall(text):
        m = re.fullmatch(r"(?:-S\s+)?'?([A-Za-z_]\w*(?:\.\w+)+)\s*(?:=|: ).*", span.strip())
        if m and m.group(1).split(".")[0] in sections:
            out.append(m.group(1))
    return out


def unknown_keys(text: str, keys: set[str], fields: frozenset[str] = frozenset()) -> list[str]:
    """Named keys params.yaml lacks; ``fields`` (eval.json's, as `export.chosen: torch`) are not keys."""
    sections = {k for k in keys if "." not in k}
    known = keys | fields
    return sorted({k for k in settings(text) + named_keys(text, sections)
                   if k not in known and k.rpartition(".")[0] + ".*" not in keys})


def config_keys(model: type, prefix: str = "") -> set[str]:
    """Every key the typed config accepts: params.yaml's, and those a section takes from section train without
    writing them (`student.select`, set with `-S ++student.select=last`)."""
    from pydantic import BaseModel

    out = set()
    for name, field in model.model_fields.items():
        out.add(prefix + name)
        for kind in (field.annotation, *typing.get_args(field.annotation)):
            if isinstance(kind, type) and issubclass(kind, BaseModel):
                out |= config_keys(kind, f"{prefix}{name}.")
    return out


@cache
def _params_keys() -> frozenset[str]:
    from pldistill.params.config import Params

    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    typed = config_keys(Params)  # only a key section train lends counts beyond params.yaml's own
    lent = {k for k in typed if "." in k and k.rsplit(".", 1)[1] in params.get("train", {})}
    return frozenset(param_keys(params) | lent)


# The changelog is history: it names keys and files of releases past. docs/bad-input.md's typo cases name a wrong key
# on purpose.
HISTORY = [p for p in PAGES if p.name == "changelog.md"]
TYPOS = frozenset({"student.lrr"})


@pytest.mark.parametrize("page", [p for p in PAGES if p not in HISTORY], ids=_name)
def test_every_setting_a_page_names_is_a_key_of_params_yaml(page):
    fields = frozenset(leaves(json.loads((ROOT / "metrics" / "eval.json").read_text()))) | TYPOS
    unknown = unknown_keys(page.read_text(), set(_params_keys()), fields)
    assert not unknown, f"{_name(page)}: params.yaml has no key {', '.join(unknown)} (renamed? fix the page)"


def test_a_renamed_key_is_caught():
    keys = param_keys({"student": {"keep": 2, "layers": "auto"}, "data": {"columns": {}}})
    text = ("`dvc exp run -S student.keep=3 -S 'data.columns={sentence1: q}' -S +data.columns.score=label`, then "
            "`student.layers: auto`; `-S student.kept=3` and `student.layer=[0, 5]` and `-S cycles=2`")
    assert unknown_keys(text, keys) == ["cycles", "student.kept", "student.layer"]


# -------------------------------------------------------------------------------------------- paths
@cache
def _tracked() -> frozenset[str]:
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    files = [f for f in files if (ROOT / f).exists()] + [str(p.relative_to(ROOT)) for p in PAGES]  # new pages too
    dirs = {str(Path(f).parents[i]) for f in files for i in range(len(Path(f).parents) - 1)}
    return frozenset(files) | frozenset(dirs)


@cache
def _outputs() -> tuple[str, ...]:
    """What dvc.yaml's stages write: outs, metrics and plots (a folder's files are its outputs too)."""
    dvc = yaml.safe_load((ROOT / "dvc.yaml").read_text())
    out = []
    for stage in dvc["stages"].values():
        for kind in ("outs", "metrics", "plots"):
            for entry in stage.get(kind, []):
                out.append(next(iter(entry)) if isinstance(entry, dict) else entry)
    return tuple(out)


def _part(part: str) -> str:
    """One part of a named path as a pattern: `<name>`, `NN` and `*` stand for any text, `{a,b}` for a or b."""
    out = []
    for tok in re.split(r"(<[^>]*>|NN|\*|\{[^}]*\})", part):
        if tok.startswith("<") or tok in ("NN", "*"):
            out.append(".+")
        elif tok.startswith("{"):
            out.append("(?:" + "|".join(re.escape(x.strip()) for x in tok[1:-1].split(",")) + ")")
        else:
            out.append(re.escape(tok))
    return "".join(out)


def known_path(path: str, tracked: frozenset[str], outputs: tuple[str, ...]) -> bool:
    """In git (placeholders matching), or a declared output, or under one, or under a folder the pipeline writes
    that git ignores (the root .gitignore's folders, as metrics/machine/; a folder with a .gitignore of its own)."""
    parts = [re.compile(_part(p)) for p in path.strip("/").split("/")]

    def matches(name: str, whole: bool) -> bool:
        names = name.strip("/").split("/")
        fits = len(names) == len(parts) if whole else len(names) <= len(parts)
        return fits and all(rx.fullmatch(n) for rx, n in zip(parts, names))

    written = [line.strip("/") for line in (ROOT / ".gitignore").read_text().splitlines()
               if line.startswith("/") and line.endswith("/")]
    written += [str(Path(f).parent) for f in tracked if f.endswith("/.gitignore")]
    return any(matches(t, True) for t in tracked) or any(matches(o, False) for o in (*outputs, *written))


def named_paths(text: str) -> list[str]:
    """Repository paths in code spans: a span's first word, if it starts with a top folder or is a top file;
    `a/{b,c}.md` is both a/b.md and a/c.md."""
    out = []
    for span in CODE.findall(text):
        word = span.split()[0].rstrip(".,;:") if span.split() else ""
        if word.startswith(TOP_DIRS) or word in TOP_FILES:
            m = re.search(r"\{([^}]*)\}", word)
            out += [word[:m.start()] + x.strip() + word[m.end():] for x in m.group(1).split(",")] if m else [word]
    return out


@pytest.mark.parametrize("page", [p for p in PAGES if p not in HISTORY], ids=_name)
def test_every_path_a_page_names_exists(page):
    missing = sorted({p for p in named_paths(page.read_text()) if not known_path(p, _tracked(), _outputs())})
    assert not missing, f"{_name(page)}: no such path in the tree or dvc.yaml's outputs: {', '.join(missing)}"


def test_a_missing_path_is_caught():
    tracked = frozenset({"benchmarks/stsb_exps.py", "benchmarks", "docs/results.md", "docs"})
    outputs = ("models/export", "metrics/eval.json")
    text = ("`benchmarks/stsb_exps.py run --rows serve`, `models/export/<format>/`, `metrics/eval.json`, "
            "`docs/{results,gone}.md`, `benchmarks/old.py`, `metrics/cut.json`")
    found = [p for p in named_paths(text) if not known_path(p, tracked, outputs)]
    assert found == ["docs/gone.md", "benchmarks/old.py", "metrics/cut.json"]


# -------------------------------------------------------------------------------------------- links
def anchors(text: str) -> set[str]:
    """A page's anchors: its headings' (GitHub's slugs) and its `<a id="...">` tags."""
    slugs = {params_doc._anchor(h) for h in re.findall(r"^#+ (.*)$", text, flags=re.M)}  # the generator's rule
    return slugs | set(re.findall(r"<a id=\"([^\"]+)\"", text))


@pytest.mark.parametrize("page", PAGES, ids=_name)
def test_every_link_and_anchor_leads_somewhere(page):
    bad = []
    for target, anchor in re.findall(r"\]\((?!https?:|mailto:)([^)#\s]*)(?:#([^)\s]*))?\)", page.read_text()):
        path = (page.parent / target).resolve() if target else page
        if not path.exists():
            bad.append(f"no file {target}")
        elif anchor and path.is_file() and anchor not in anchors(path.read_text()):
            bad.append(f"no anchor #{anchor} in {path.relative_to(ROOT)}")
    assert not bad, f"{_name(page)}: " + "; ".join(bad)


# -------------------------------------------------------------------------------------------- commands
@pytest.mark.parametrize("page", PAGES, ids=_name)
def test_every_make_target_and_module_a_page_names_exists(page):
    text = page.read_text()
    targets = set(re.findall(r"^([\w-]+):", (ROOT / "Makefile").read_text(), flags=re.M))
    commands = [c for c in CODE.findall(text) if c.startswith("make ")]
    commands += [line for b in _blocks(text) for line in b.splitlines() if line.lstrip("$ ").startswith("make ")]
    named = {m for c in commands for m in re.findall(r"^\$?\s*make (?:-\S+ |\w+=\S+ )*([a-z][\w-]*)", c)}
    # the changelog names modules as they were when it was written
    modules = set() if page.name == "changelog.md" else set(re.findall(r"python -m (pldistill(?:\.\w+)*)", text))
    bad = [f"make {t}" for t in sorted(named - targets)]
    bad += [m for m in sorted(modules) if not (ROOT / (m.replace(".", "/") + ".py")).is_file()
            and not (ROOT / m.replace(".", "/") / "__main__.py").is_file()]
    assert not bad, f"{_name(page)}: not in Makefile / no such module: {', '.join(bad)}"


def _blocks(text: str) -> list[str]:
    return re.findall(r"```(?:bash|sh|console)?\n(.*?)```", text, flags=re.S)


# -------------------------------------------------------------------------------------------- eval.json fields
def leaves(node, path: str = "") -> set[str]:
    if isinstance(node, dict) and node:
        return {leaf for k, v in node.items() for leaf in leaves(v, f"{path}.{k}" if path else k)}
    return {path}


def undocumented(fields: set[str], doc: str) -> list[str]:
    """Fields no dotted path in ``doc``'s code spans names; `<name>` in a documented path stands for any one part."""
    named = {span.split()[0] for span in CODE.findall(doc) if "." in span}
    rx = [re.compile(r"\.".join(_part(p).replace(".+", "[^.]+") for p in n.split("."))) for n in named]
    return sorted(f for f in fields if not any(r.fullmatch(f) for r in rx))


def test_every_field_of_eval_json_is_in_the_reference():
    fields = leaves(json.loads((ROOT / "metrics" / "eval.json").read_text()))
    missing = undocumented(fields, (ROOT / "docs" / "outputs.md").read_text())
    assert not missing, f"docs/outputs.md: document eval.json's {', '.join(missing[:20])}"


def test_an_undocumented_field_is_caught():
    doc = "`bi.<split>.spearman`, `export.<format>.speed`"
    assert undocumented({"bi.dev.spearman", "export.onnx.speed", "export.onnx.bytes"}, doc) == ["export.onnx.bytes"]


# -------------------------------------------------------------------------------------------- the code's pointers
def test_every_docs_page_the_code_points_to_exists():
    sources = [p for d in ("pldistill", "stages", "scripts", "benchmarks", "tests") for p in (ROOT / d).rglob("*.py")
               if p.name != "test_docs.py"]  # its own examples name pages that do not exist
    sources += [ROOT / f for f in TOP_FILES if (ROOT / f).is_file()]
    bad = sorted({f"{p.relative_to(ROOT)}: {m}" for p in sources
                  for m in re.findall(r"docs/[\w/-]+\.md", p.read_text()) if not (ROOT / m).is_file()})
    assert not bad, "pointers to docs pages that do not exist: " + "; ".join(bad)


# -------------------------------------------------------------------------------------------- nothing outside
# A user's clone holds the repository and nothing beside it: no page, message, card or comment may send them to a
# path outside it (issue 77: `../shared/...` was in the README, the guides and the offline error). A command's path is
# read from the repository root, a link's from its page's folder.
CLIMB = re.compile(r"(?<![\w/.])((?:\.\./)+[^\s`'\")\]},;]*)")
# bad-input.md shows an archive member with `..` being refused, as the user sees it: a name inside an archive
OUTSIDE_ON_PURPOSE = frozenset({"../../sts-train.csv"})
READ = [*PAGES, *[p for d in ("pldistill", "stages", "scripts", "benchmarks") for p in sorted((ROOT / d).rglob("*"))
                  if p.suffix in (".py", ".sh")], *[ROOT / f for f in ("Makefile", "params.yaml", "dvc.yaml")]]


def outside(text: str, folder: Path, root: Path = ROOT) -> list[str]:
    """The paths in ``text`` that lead out of ``root``: `../x` from ``root`` (a command run there), or from
    ``folder`` when it is a Markdown link's target (`](../x)`)."""
    out = []
    for m in CLIMB.finditer(text):
        path = m.group(1)
        base = folder if text[max(0, m.start() - 2):m.start()] == "](" else root
        if not (base / path).resolve().is_relative_to(root.resolve()):
            out.append(path)
    return out


@pytest.mark.parametrize("source", READ, ids=_name)
def test_nothing_a_user_reads_points_outside_the_repository(source):
    found = sorted(set(outside(source.read_text(), source.parent)) - OUTSIDE_ON_PURPOSE)
    assert not found, (f"{_name(source)}: {', '.join(found)} lies outside the repository, and a user's clone has "
                       f"nothing beside it: name a path inside it (data/downloads/...) or one the user fills in "
                       f"(path/to/...)")


def test_a_path_outside_is_caught(tmp_path):
    root = tmp_path / "repo"
    (root / "docs").mkdir(parents=True)
    text = ("`-S data.source=../shared/data/Stsbenchmark.tar.gz`, [the README](../README.md), see `../CONTRACT.md`, "
            "[up](../../x.md), `data/downloads/Stsbenchmark.tar.gz`, `path/to/Stsbenchmark.tar.gz`, a/../b")
    assert outside(text, root / "docs", root) == ["../shared/data/Stsbenchmark.tar.gz", "../CONTRACT.md", "../../x.md"]
