"""The layout page (docs/layout.md, linked from the README) names every module, so a newcomer finds any
concept from it; the README stays a front page. Its links, keys and paths: tests/test_docs.py."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_layout_lists_every_module_of_the_package_and_no_other():
    tree = (ROOT / "docs" / "layout.md").read_text().split("```")[1]
    listed = set(re.findall(r"^\s+(\w+\.py)\s", tree, flags=re.M))
    modules = {p.name for p in (ROOT / "pldistill").rglob("*.py")
               if p.name != "__init__.py" or p.parent.name != "pldistill"}
    assert modules == listed, f"docs/layout.md: add {sorted(modules - listed)}, remove {sorted(listed - modules)}"


def test_the_readme_is_a_front_page_with_the_two_commands():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 300, "README.md: keep it a front page (<= 300 lines), the rest under docs/"
    assert "make run" in text and "make test" in text
