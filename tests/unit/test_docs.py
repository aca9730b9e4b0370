"""The repository documents itself: every `kubefleet-rules N.N` citation names a section of
docs/kubefleet-rules.md, nothing points outside the repository, where a clone has nothing, and
the placements a walkthrough annotates exist in `make run`'s samples."""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Final

import pytest
import yaml

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


# --- placements the docs have the reader annotate exist in `make run`'s sample fleet ----------

SAMPLE_PLACEMENTS: Final = REPO / "devhub" / "samples" / "placements.yaml"
CLUSTER_KINDS: Final = frozenset({"crp", "clusterresourceplacement", "clusterresourceplacements"})
NAMESPACED_KINDS: Final = frozenset({"rp", "resourceplacement", "resourceplacements"})
# kubectl flags that take a value, so the value is not read as the kind or the name.
VALUE_FLAGS: Final = frozenset({"--kubeconfig", "--context", "-n", "--namespace", "-l"})


def sample_placements() -> set[str]:
    """Keys of the sample placements: `name`, or `namespace/name` for a ResourcePlacement."""
    keys = set()
    for doc in yaml.safe_load_all(SAMPLE_PLACEMENTS.read_text(encoding="utf-8")):
        if doc and doc["kind"] in ("ClusterResourcePlacement", "ResourcePlacement"):
            namespace, name = doc["metadata"].get("namespace"), doc["metadata"]["name"]
            keys.add(f"{namespace}/{name}" if namespace else name)
    return keys


def annotated_placements(text: str) -> Iterator[tuple[int, str]]:
    """(line, placement key) of each `kubectl ... annotate crp NAME` (or `rp -n NS NAME`,
    `crp/NAME`) in `text`."""
    for number, line in enumerate(text.splitlines(), 1):
        if "kubectl" not in line or "annotate" not in line:
            continue
        try:
            words = shlex.split(line.replace("`", " "), comments=True)
        except ValueError:
            continue
        if "kubectl" not in words or "annotate" not in words:
            continue
        positional, namespace = [], None
        rest = iter(words[words.index("kubectl") + 1 :])
        for word in rest:
            if word in VALUE_FLAGS:
                value = next(rest, "")
                namespace = value if word in ("-n", "--namespace") else namespace
            elif word.startswith(("-n=", "--namespace=")):
                namespace = word.split("=", 1)[1]
            elif not word.startswith("-"):
                positional.append(word)
        if positional[:1] != ["annotate"]:
            continue
        kind, _, name = positional[1].partition("/") if len(positional) > 1 else ("", "", "")
        if not name and len(positional) > 2:
            name = positional[2]
        if kind.lower() in CLUSTER_KINDS:
            yield number, name
        elif kind.lower() in NAMESPACED_KINDS:
            yield number, f"{namespace or 'default'}/{name}"


def test_annotated_placements_are_read_as_written() -> None:
    text = (
        "    kubectl --kubeconfig .run/kubeconfig annotate crp web a=b\n"
        "    kubectl annotate rp -n shop storefront a=b\n"
        "    kubectl annotate crp/api-spread a=b  # a comment\n"
        "Run `kubectl annotate clusterresourceplacement pinned a=b` first.\n"
        "    kubectl get crp web\n"
    )
    assert list(annotated_placements(text)) == [
        (1, "web"), (2, "shop/storefront"), (3, "api-spread"), (4, "pinned")
    ]


def test_placements_the_docs_annotate_are_sample_placements() -> None:
    """A walkthrough on `make run` annotates a placement that exists there
    (devhub/samples/placements.yaml), not one the reader never made."""
    samples = sample_placements()
    missing = [
        f"{path.relative_to(REPO)}:{number}: {key}"
        for path in project_files(".md")
        if (text := read(path)) is not None
        for number, key in annotated_placements(text)
        if key not in samples
    ]
    assert not missing, (
        f"placements annotated in the docs but not among the samples {sorted(samples)}:\n"
        + "\n".join(missing)
    )
