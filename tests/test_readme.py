"""The layout page (docs/layout.md, linked from the README) names every module, so a newcomer finds any
concept from it; the README stays a front page. Its links, keys and paths: tests/test_docs.py."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_layout_lists_every_module_of_the_package_and_no_other():
    """docs/layout.md: the picture names each subpackage and each command module, and no other; the table's row of a
    subpackage names each of its modules (a nested package's too)."""
    text = (ROOT / "docs" / "layout.md").read_text()
    tree = text.split("```")[1]
    pkg = ROOT / "pldistill"
    packages = sorted(p.name for p in pkg.iterdir() if (p / "__init__.py").is_file())
    commands = {p.name for p in pkg.glob("*.py") if p.name != "__init__.py"}
    assert set(re.findall(r"^  (\w+\.py)\s", tree, flags=re.M)) == commands
    assert set(re.findall(r"^  (\w+)/\s", tree, flags=re.M)) == set(packages)
    rows = dict(re.findall(r"^\| `(\w+)` \| ([^|]+) \|", text, flags=re.M))
    assert sorted(rows) == packages, "docs/layout.md: one table row a subpackage"
    for name in packages:
        modules = {p.stem for p in (pkg / name).rglob("*.py") if p.name != "__init__.py"}
        listed = set(re.findall(r"\w+", rows[name]))
        assert modules <= listed, f"docs/layout.md, row {name}: add {sorted(modules - listed)}"


def test_the_readme_is_a_front_page_with_the_two_commands():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 300, "README.md: keep it a front page (<= 300 lines), the rest under docs/"
    assert "make run" in text and "make test" in text
