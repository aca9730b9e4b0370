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


# Every wait in the tests is bounded (tests/README.md): a loop that waits says its deadline, a
# blocking call gets a timeout or runs inside one, or the line says what bounds it.
BOUNDED_BY: Final = "# bounded by:"
DEADLINE_WORDS: Final = ("deadline", "timeout", "monotonic", "remaining")
# Calls that block when given no argument: Event/Barrier/Popen.wait, Thread.join, a future's
# or a workflow handle's result, Queue.get, Popen.communicate, Lock.acquire.
BLOCKING: Final = frozenset({"wait", "join", "result", "get", "communicate", "acquire"})
# What a loop calls when it waits.
WAITING: Final = BLOCKING | {"sleep", "next", "readline", "poll", "read", "recv"}
# Calls that bound what they are given.
BOUNDING: Final = frozenset({"wait_for", "within"})


def called(node: ast.Call) -> str:
    func = node.func
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


def unbounded_waits(source: str, name: str, tree: ast.Module | None = None) -> list[str]:
    """Where `source` waits without a bound: a `while` loop that waits and names no deadline, a
    blocking call with no argument outside `wait_for`/`within`; a line that says
    `# bounded by: ...` is taken at its word."""
    tree = tree or ast.parse(source, name)
    lines = source.splitlines()
    said = {number for number, line in enumerate(lines, 1) if BOUNDED_BY in line}
    inside_bounds = {
        id(arg)
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and called(node) in BOUNDING
        for arg in node.args
    }
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.While) and node.lineno not in said:
            inner = list(ast.walk(node))
            waits = any(
                isinstance(sub, ast.Await) or (isinstance(sub, ast.Call) and called(sub) in WAITING)
                for sub in inner
            )
            words = [sub.id for sub in inner if isinstance(sub, ast.Name)] + [
                sub.attr for sub in inner if isinstance(sub, ast.Attribute)
            ]
            if waits and not any(w in word.lower() for word in words for w in DEADLINE_WORDS):
                found.append(f"{name}:{node.lineno}: a loop that waits with no deadline")
        elif (
            isinstance(node, ast.Call)
            and called(node) in BLOCKING
            and isinstance(node.func, ast.Attribute)
            and not node.args
            and not node.keywords
            and id(node) not in inside_bounds
            and node.lineno not in said
        ):
            found.append(f"{name}:{node.lineno}: {ast.unparse(node)} with no timeout")
    return sorted(found, key=lambda line: int(line.split(":")[1]))


def test_every_wait_is_bounded() -> None:
    found = [
        line
        for path, (text, tree) in python_files().items()
        for line in unbounded_waits(text, str(path.relative_to(REPO)), tree)
    ]
    assert not found, (
        "bound each wait (tests/support/waits.py: until, until_async, within; a timeout=), or "
        f"say what bounds it with a `{BOUNDED_BY} ...` comment on its line:\n" + "\n".join(found)
    )


def test_the_wait_check_sees_what_it_forbids() -> None:
    unbounded = (
        "async def f(handle, event, thread, q):\n"
        "    while True:\n"
        "        await asyncio.sleep(0.1)\n"
        "    while not await ready():\n"
        "        pass\n"
        "    await handle.result()\n"
        "    await event.wait()\n"
        "    thread.join()\n"
        "    q.get()\n"
    )
    lines = [int(found.split(":")[1]) for found in unbounded_waits(unbounded, "f")]
    assert lines == [2, 4, 6, 7, 8, 9]
    bounded = (
        "async def f(handle, event, thread, q):\n"
        "    deadline = time.monotonic() + 5\n"
        "    while time.monotonic() < deadline:\n"
        "        await asyncio.sleep(0.1)\n"
        "    await asyncio.wait_for(handle.result(), 60)\n"
        "    await within(event.wait(), what='the gate')\n"
        "    thread.join(timeout=5)\n"
        "    q.get(timeout=1)\n"
        "    while data := await src.read(1):  # bounded by: the connection's end\n"
        "        pass\n"
        "    while n < 3:\n"
        "        n += 1\n"
    )
    assert unbounded_waits(bounded, "f") == []


def test_no_two_test_files_share_a_name() -> None:
    """pytest imports test files by their base name (no __init__.py here): two files of one name
    in different folders stop the whole run at collection ("import file mismatch"), which only
    the full suite shows."""
    by_name: dict[str, list[str]] = {}
    for path in sorted(TESTS.rglob("test_*.py")):
        by_name.setdefault(path.name, []).append(str(path.relative_to(REPO)))
    assert {name: paths for name, paths in by_name.items() if len(paths) > 1} == {}
