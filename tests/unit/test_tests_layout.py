"""The tests keep the layout tests/README.md describes: no test file imports another test file
(what tests share lives in tests/support, or in a helper module beside the tests of one folder),
and a helper module is imported by its full dotted path (`tests.<folder>.<module>`), never by a
bare name that works only because pytest put the importing test's folder on sys.path."""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from pathlib import Path
from typing import Final

REPO: Final = Path(__file__).resolve().parents[2]
TESTS: Final = REPO / "tests"


@functools.cache
def python_files() -> dict[Path, tuple[str, ast.Module]]:
    """Every Python file under tests/: its text, parsed."""
    paths = sorted(p for p in TESTS.rglob("*.py") if "__pycache__" not in p.parts)
    return {p: (text, ast.parse(text, str(p))) for p in paths for text in [p.read_text()]}


def imported_modules(tree: ast.Module) -> Iterator[tuple[int, str]]:
    """(line, module) of every import in `tree`, at any depth; a relative import keeps its dots,
    and `from package import name` yields `package.name` too, since a name may be a module."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            base = "." * node.level + (node.module or "")
            yield node.lineno, base
            for alias in node.names:
                yield node.lineno, f"{base}.{alias.name}" if node.module else base + alias.name


def is_test_module(module: str) -> bool:
    return module.rsplit(".", 1)[-1].startswith("test_")


def helper_names() -> set[str]:
    """The bare names of the helper modules under tests/ that are not also a top-level package
    or module of the repository (`tests/support/hub.py` is not the `hub` package)."""
    names = {p.stem for p in python_files()} - {"conftest", "__init__"}
    return {n for n in names if not (REPO / n).is_dir() and not (REPO / f"{n}.py").exists()}


def test_no_test_file_imports_another_test_file() -> None:
    found = [
        f"{path.relative_to(REPO)}:{line}: {module}"
        for path, (_, tree) in python_files().items()
        for line, module in imported_modules(tree)
        if is_test_module(module)
    ]
    assert not found, (
        "a test file is imported; move what it shares to tests/support/<topic>.py (or a helper "
        "module beside the tests of one folder):\n" + "\n".join(found)
    )


def test_helper_modules_are_imported_by_their_dotted_path() -> None:
    helpers = helper_names()
    found = sorted(
        {
            f"{path.relative_to(REPO)}:{line}: {module.split('.', 1)[0] or module}"
            for path, (_, tree) in python_files().items()
            for line, module in imported_modules(tree)
            if module.startswith(".") or module.split(".", 1)[0] in helpers
        }
    )
    assert not found, (
        "import test helpers as tests.<folder>.<module> (pytest's sys.path is no API):\n"
        + "\n".join(found)
    )


def test_the_checks_see_what_they_forbid() -> None:
    """The checks above are not vacuous: each form of the imports they forbid is caught."""
    source = (
        "from tests.integration.activities.test_capacity_reservations import make_available\n"
        "import test_cycle_properties\n"
        "from .test_cycle_properties import NOW\n"
        "from tests.property import test_cycle_properties\n"
        "def f():\n"
        "    from test_affinity_enforcement import ENFORCED\n"
    )
    caught = [m for _, m in imported_modules(ast.parse(source)) if is_test_module(m)]
    assert len({line for line, m in imported_modules(ast.parse(source)) if is_test_module(m)}) == 5
    assert "tests.property.test_cycle_properties" in caught
    assert "cycle_builders" in helper_names()
    assert "hub" not in helper_names()
