"""scheduler/ stays grouped by concept (issue 34): its root holds only what every package shares,
each package says in its docstring what it decides, and scheduler/README.md maps every one."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Final

SCHEDULER: Final = Path(__file__).resolve().parents[3] / "scheduler"

# The error tree, the wire base, the fleet-wide invariants and the test builders: the rest of
# scheduler/ lives in a package that says what it holds.
ROOT_MODULES: Final = {"__init__", "errors", "wire", "invariants", "testing"}


def packages() -> list[Path]:
    return sorted(p.parent for p in SCHEDULER.glob("*/__init__.py"))


def test_the_root_holds_only_what_every_package_shares() -> None:
    stray = sorted(p.name for p in SCHEDULER.glob("*.py") if p.stem not in ROOT_MODULES)
    assert not stray, f"put these in the package of their concept (scheduler/README.md): {stray}"


def test_every_package_says_what_it_decides() -> None:
    found = packages()
    assert {"cycles", "framework", "room", "moves", "requeue"} <= {p.name for p in found}
    for package in found:
        docstring = ast.get_docstring(ast.parse((package / "__init__.py").read_text()))
        assert docstring, f"{package.name}/__init__.py has no docstring"
        assert len(docstring.split()) >= 20, f"{package.name}/__init__.py: say what it decides"


def test_the_readme_maps_every_package_and_root_module() -> None:
    readme = (SCHEDULER / "README.md").read_text()
    layout = readme.split("```\n", 2)[1]
    named = {line.split()[0] for line in layout.splitlines() if line and not line[0].isspace()}
    wanted = {f"{p.name}/" for p in packages()} | {f"{m}.py" for m in ROOT_MODULES - {"__init__"}}
    assert named == wanted
