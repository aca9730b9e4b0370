"""The repository documents itself: every `kubefleet-rules N.N` citation names a section of
docs/kubefleet-rules.md, and nothing points outside the repository, where a clone has nothing."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Final

import pytest

REPO: Final = Path(__file__).resolve().parents[2]
RULES: Final = REPO / "docs" / "kubefleet-rules.md"

# Not part of the project's text: virtualenvs, caches, build output, local run state.
SKIPPED_DIRS: Final = frozenset({"build", "dist", "node_modules", "__pycache__"})

ANCHOR: Final = re.compile(r'<a id="rule-(\d+(?:-\d+)*)"></a>')

# A citation: `kubefleet-rules`, optionally `section(s)`, then numbers joined by `,` `-` `and`
# `then`, each optionally qualified (`step 4`, `steps 5-6`, `branch A`, `table`). Line breaks
# and a comment's `#` may fall anywhere between the words.
_GAP = r"[\s#]*"
_NUMBER = r"(\d+(?:\.\d+)*)(?![\w.]*\d)"
_QUALIFIER = (
    rf"(?:{_GAP},?{_GAP}(?:steps?{_GAP}\d+(?:{_GAP}(?:-|,|and){_GAP}\d+)*|branch{_GAP}[A-Z]\b|table))?"
)
_SEPARATOR = rf"{_GAP}(?:,{_GAP}(?:then{_GAP})?|-|and{_GAP}|then{_GAP}){_GAP}"
CITATION: Final = re.compile(rf"kubefleet-rules{_GAP}(?:sections?{_GAP})?{_NUMBER}")
# After the first number, a further one is a dotted section number, or any number right after
# "section": a bare number is a step ("steps 2 and 3"), not a section.
FOLLOWING: Final = re.compile(
    rf"{_QUALIFIER}{_SEPARATOR}(?:sections?{_GAP}(\d+(?:\.\d+)*)|(\d+\.\d+(?:\.\d+)*))(?![\w.]*\d)"
)


def sections(text: str) -> set[str]:
    """Section numbers that have an anchor: `rule-4-8-1` is section 4.8.1."""
    return {match.replace("-", ".") for match in ANCHOR.findall(text)}


def citations(text: str) -> Iterator[str]:
    """Every section number a text cites, ranges by both ends (`2.2-2.5` cites 2.2 and 2.5)."""
    for match in CITATION.finditer(text):
        yield match.group(1)
        position = match.end()
        while following := FOLLOWING.match(text, position):
            yield following.group(1) or following.group(2)
            position = following.end()


def project_files(*suffixes: str) -> Iterator[Path]:
    for path in sorted(REPO.rglob("*")):
        parts = path.relative_to(REPO).parts
        if any(part.startswith(".") or part.endswith(".egg-info") for part in parts):
            continue
        if SKIPPED_DIRS.intersection(parts) or not path.is_file():
            continue
        if not suffixes or path.suffix in suffixes or path.name in suffixes:
            yield path


def read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        return None


def test_every_numbered_heading_of_the_rules_has_its_anchor() -> None:
    text = RULES.read_text(encoding="utf-8")
    headings = set(re.findall(r"^#{2,4} (\d+(?:\.\d+)*)\.? ", text, flags=re.MULTILINE))
    assert headings, "no numbered sections found"
    assert headings <= sections(text)
    # Section 10's items are cited one by one ("kubefleet-rules 10.21").
    assert {f"10.{item}" for item in range(1, 27)} <= sections(text)


@pytest.mark.parametrize(
    ("text", "cited"),
    [
        ("(kubefleet-rules 4.8.1)", ["4.8.1"]),
        ("kubefleet-rules sections 1.2-1.9 and", ["1.2", "1.9"]),
        ("(kubefleet-rules 4.1 steps 5-6, then 4.9):", ["4.1", "4.9"]),
        ("(kubefleet-rules\n1.9, 4.7 step 5, 4.10).", ["1.9", "4.7", "4.10"]),
        ("(kubefleet-rules 1.10, section 6)", ["1.10", "6"]),
        ("kubefleet-rules 4.1, steps 2 and 3): a", ["4.1"]),
        ("(kubefleet-rules\n    # section 7). Then 2.0 seconds", ["7"]),
        ("kubefleet-rules 1.12's example", ["1.12"]),
        ("kubefleet-rules 3.2 table, first row", ["3.2"]),
    ],
)
def test_citations_are_read_as_written(text: str, cited: list[str]) -> None:
    assert list(citations(text)) == cited


def test_a_citation_of_a_missing_section_is_found() -> None:
    known = sections(RULES.read_text(encoding="utf-8"))
    cited = set(citations("as KubeFleet does (kubefleet-rules 4.99, 10.27)"))
    assert cited == {"4.99", "10.27"}
    assert not cited <= known


def test_every_cited_section_exists() -> None:
    known = sections(RULES.read_text(encoding="utf-8"))
    missing = [
        f"{path.relative_to(REPO)}: kubefleet-rules {number}"
        for path in project_files(".py", ".md")
        if path != Path(__file__).resolve() and (text := read(path)) is not None
        for number in citations(text)
        if number not in known
    ]
    assert not missing, "cited sections missing from docs/kubefleet-rules.md:\n" + "\n".join(
        missing
    )


def test_nothing_refers_outside_the_repository() -> None:
    outside = "../" + "shared"  # spelled in two parts so this file does not match itself
    found = [
        str(path.relative_to(REPO))
        for path in project_files()
        if (text := read(path)) is not None and outside in text
    ]
    assert not found, f"these files refer to {outside}, which a clone does not have: {found}"
