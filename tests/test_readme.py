"""The README's Layout tree names every module, so a newcomer finds any concept from it."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_layout_lists_every_module_of_the_package_and_no_other():
    text = (ROOT / "README.md").read_text()
    tree = text.split("## Layout", 1)[1].split("```")[1]
    listed = set(re.findall(r"^\s+(\w+\.py)\s", tree, flags=re.M))
    modules = {p.name for p in (ROOT / "pldistill").rglob("*.py")
               if p.name != "__init__.py" or p.parent.name != "pldistill"}
    assert modules == listed, f"README Layout: add {sorted(modules - listed)}, remove {sorted(listed - modules)}"
