"""README's commands cannot drift from the CLI: every subcommand has a row in the commands table,
and each row names exactly the options that subcommand's parser accepts; every command of the
walkthroughs works as typed from the repository root (the venv's `fleet-scheduler`, no
placeholders, a `-f FILE` only after the README has had the reader make FILE) and parses."""

from __future__ import annotations

import argparse
import re
import shlex
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest
import yaml

from workers.cli import COMMANDS, build_parser

README = Path(__file__).resolve().parents[2] / "README.md"
OPTION = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]*)")


def readme_rows() -> dict[str, str]:
    text = README.read_text(encoding="utf-8")
    section = text.split("\n## Commands\n", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        found = re.match(r"\| `fleet-scheduler (\w+)(.*?)` \|", line)
        if found:
            rows[found[1]] = found[2]
    return rows


def parser_options(name: str, *, deprecated: bool = False) -> set[str]:
    """The subcommand's long options: the current ones, or (`deprecated`) the old spellings
    kept for earlier manifests, whose help says "deprecated"."""
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {
        option
        for action in sub.choices[name]._actions
        for option in action.option_strings
        if option.startswith("--") and option != "--help"
        and (action.help or "").startswith("deprecated") == deprecated
    }


def test_every_subcommand_has_a_row() -> None:
    assert sorted(readme_rows()) == sorted(COMMANDS)


# Options every command takes, which the README names once above the table, not in each row.
EVERY_COMMAND = {"--log-level"}


def test_the_options_of_every_command_are_named_above_the_table() -> None:
    section = README.read_text().split("## Commands", 1)[1].split("\n| ", 1)[0]
    assert set(OPTION.findall(section)) >= EVERY_COMMAND
    for name in COMMANDS:
        assert parser_options(name) >= EVERY_COMMAND, name


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_a_row_names_exactly_the_options_of_its_subcommand(name: str) -> None:
    """Every current option, and nothing the command does not take; a row may name an old
    spelling (to say it still works), never instead of the new one."""
    documented = set(OPTION.findall(readme_rows()[name])) - parser_options(name, deprecated=True)
    accepted = parser_options(name) - EVERY_COMMAND
    assert documented == accepted, (
        f"README row of {name}: missing {sorted(accepted - documented)}, "
        f"unknown {sorted(documented - accepted)}"
    )


# --- the walkthroughs: every command works as typed from the repository root ------------------

REPO = README.parent
VENV_PROGRAM = ".venv/bin/fleet-scheduler"  # `make install` puts it there; nothing on PATH does
LIST_ITEM = re.compile(r"^ *(?:\d+\.|[-*+]) +")
SHELL_FENCES = frozenset({"", "sh", "bash", "shell", "console"})
CONTROL = re.compile(r"\s*(?:&&|\|\||;|\|)\s*")
# Telling the reader to make a file: "Save it as `.run/demo.yaml`", or a command writing it.
SAVE_AS = re.compile(r"[Ss]ave (?:it|this|them)[^`]*? as\s+`([^`]+)`")
WRITES = re.compile(r"(?:>|--kubeconfig-out|-o)\s+(\S+)")
READS = re.compile(r"(?:^|\s)(?:-f|--filename)[ =](\S+)")
INLINE_CODE = re.compile(r"`([^`\n]+)`")


def code_lines(text: str) -> list[tuple[int, str]]:
    """(line number, text) of each line of the code blocks: indented ones (inside a list item,
    indented four beyond its text) and shell fences; YAML fences and prose are left out."""
    found: list[tuple[int, str]] = []
    content = 0  # where the text of the list item we are in starts (0: not in a list)
    fence: str | None = None
    in_block, after_blank = False, True
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if fence is not None:
            if stripped.startswith("```"):
                fence = None
            elif fence in SHELL_FENCES:
                found.append((number, stripped))
            continue
        indent = len(line) - len(line.lstrip(" "))
        if stripped.startswith("```"):
            fence, in_block = stripped[3:].strip(), False
            content = min(content, indent)  # a fence left of an item's text ends the list
            continue
        if not stripped:
            after_blank = True
            continue
        if (in_block or after_blank) and indent >= content + 4:
            found.append((number, stripped))
            in_block = True
        else:
            in_block = False
            item = LIST_ITEM.match(line)
            if item is not None:
                content = len(item.group(0))
            elif after_blank and indent < content:
                content = 0  # a paragraph left of the item's text: the list has ended
        after_blank = False
    return found


def commands(text: str) -> list[tuple[int, list[str]]]:
    """Each command of the code blocks, split at `&&`, `|`, `;`, as words (comments dropped)."""
    found = []
    for number, line in code_lines(text):
        for piece in CONTROL.split(line):
            try:
                words = shlex.split(piece, comments=True)
            except ValueError:
                continue  # printed output, not a command
            if words:
                found.append((number, words))
    return found


def fleet_scheduler_commands(text: str) -> list[tuple[int, list[str]]]:
    """The `fleet-scheduler SUBCOMMAND ...` commands (not output such as `fleet-scheduler dev:`)."""
    return [
        (number, words)
        for number, words in commands(text)
        if Path(words[0]).name == "fleet-scheduler" and words[1:2] and words[1] in COMMANDS
    ]


def bare_commands(text: str) -> list[str]:
    return [
        f"line {number}: {' '.join(words)}"
        for number, words in fleet_scheduler_commands(text)
        if words[0] != VENV_PROGRAM
    ]


def placeholders(text: str) -> list[str]:
    """Commands with a `<name>` to fill in: typed as is, the shell reads `<name` as a file."""
    return [
        f"line {number}: {' '.join(words)}"
        for number, words in commands(text)
        if any(re.fullmatch(r"<[^<>]+>", word) for word in words)
    ]


def files_read_before_made(text: str) -> list[str]:
    """`-f FILE` in a command or a prose `code span` whose FILE neither is in the repository
    nor was made earlier in the text (saved by the reader, or written by a command)."""
    lines = text.splitlines()
    code = dict(code_lines(text))
    made: dict[str, int] = {}
    reads: list[tuple[int, str]] = []
    for number, line in enumerate(lines, 1):
        if line.lstrip().startswith("|"):
            continue  # the commands table: a synopsis (`-f/--filename FILE`), not a command
        spans = [code[number]] if number in code else INLINE_CODE.findall(line)
        for span in spans:
            reads += [(number, path) for path in READS.findall(span)]
            if number in code:
                for path in WRITES.findall(span):
                    made.setdefault(path, number)
        for path in SAVE_AS.findall(line):
            made.setdefault(path, number)
    return [
        f"line {number}: {path}"
        for number, path in reads
        if not (REPO / path).exists() and made.get(path, number + 1) > number
    ]


README_TEXT = README.read_text(encoding="utf-8")


def test_every_command_runs_the_venvs_fleet_scheduler() -> None:
    assert fleet_scheduler_commands(README_TEXT), "no fleet-scheduler commands found"
    assert bare_commands(README_TEXT) == [], (
        f"run from the repository root, only {VENV_PROGRAM} exists (no venv is activated)"
    )


def test_every_command_is_typed_without_placeholders() -> None:
    assert placeholders(README_TEXT) == []


def test_every_file_a_command_reads_is_made_first() -> None:
    assert files_read_before_made(README_TEXT) == []


@pytest.mark.parametrize(
    ("number", "words"),
    [pytest.param(n, words, id=f"line-{n}") for n, words in fleet_scheduler_commands(README_TEXT)],
)
def test_every_fleet_scheduler_command_parses(number: int, words: list[str]) -> None:
    try:
        build_parser().parse_args(words[1:])
    except SystemExit as exc:
        pytest.fail(f"README line {number}: {' '.join(words)} is refused (exit {exc.code})")


SAMPLE = """\
1. Start:

       .venv/bin/fleet-scheduler status

2. A step whose text goes on
    at four spaces, which is prose, not code.

   Save it as `.run/mine.yaml` and apply it:

       kubectl apply -f .run/mine.yaml

```yaml
fleet-scheduler explain web
```

    fleet-scheduler dev: ready in 1.4s (task queue fleet-scheduler); try: ...
"""


@pytest.mark.parametrize(
    ("text", "found"),
    [
        pytest.param(SAMPLE, [], id="clean"),
        pytest.param(SAMPLE + "\n    fleet-scheduler explain web\n",
                     ["line 18: fleet-scheduler explain web"], id="bare"),
        pytest.param(SAMPLE + "\n    make run && fleet-scheduler requeue web --wait\n",
                     ["line 18: fleet-scheduler requeue web --wait"], id="bare-after-and"),
        pytest.param(SAMPLE + "\n```sh\nfleet-scheduler status\n```\n",
                     ["line 19: fleet-scheduler status"], id="bare-in-a-shell-fence"),
    ],
)  # fmt: skip
def test_a_bare_fleet_scheduler_is_caught(text: str, found: list[str]) -> None:
    assert bare_commands(text) == found


@pytest.mark.parametrize(
    ("text", "found"),
    [
        pytest.param(SAMPLE, [], id="saved-first"),
        pytest.param(SAMPLE + "\n    .venv/bin/fleet-scheduler plan -f .run/other.yaml\n",
                     ["line 18: .run/other.yaml"], id="never-made"),
        pytest.param(SAMPLE + "\nThen `plan -f .run/other.yaml` works too.\n",
                     ["line 18: .run/other.yaml"], id="never-made-in-prose"),
        pytest.param("    kubectl apply -f .run/later.yaml\n\nSave it as `.run/later.yaml`.\n",
                     ["line 1: .run/later.yaml"], id="made-after"),
        pytest.param("    kubectl apply -f devhub/samples/placements.yaml\n", [],
                     id="in-the-repository"),
    ],
)  # fmt: skip
def test_a_file_read_before_it_is_made_is_caught(text: str, found: list[str]) -> None:
    assert files_read_before_made(text) == found


def test_a_placeholder_is_caught() -> None:
    assert placeholders("    kubectl annotate crp <name> a=b\n") == [
        "line 1: kubectl annotate crp <name> a=b"
    ]


# --- the walkthroughs' files ship with the samples ----------------------------------------------

YAML_BLOCK = re.compile(r"^(?P<indent> *)```yaml\n(?P<body>.*?)^(?P=indent)```", re.S | re.M)
SHIPPED = re.compile(r"\A# (?P<path>devhub/samples/[\w.-]+\.yaml)\n")


def shown_files(text: str) -> dict[str, str]:
    """Path -> text of each YAML block that names its file in its first line
    (`# devhub/samples/demo.yaml`), as the reader sees it (the list item's indent removed)."""
    found = {}
    for block in YAML_BLOCK.finditer(text):
        body = textwrap.dedent(block["body"])
        named = SHIPPED.match(body)
        if named is not None:
            found[named["path"]] = body
    return found


def test_every_file_the_walkthroughs_show_ships_as_shown() -> None:
    """The reader applies the walkthroughs' placements and profile from devhub/samples/, never
    copies them out of the README; what the README shows is the file, byte for byte."""
    shown = shown_files(README_TEXT)
    assert sorted(shown) == [
        "devhub/samples/checkout.yaml", "devhub/samples/demo.yaml", "devhub/samples/no-taints.yaml"
    ]  # fmt: skip
    for path, body in shown.items():
        assert (REPO / path).read_text(encoding="utf-8") == body, f"{path} differs from README"


def test_no_walkthrough_yaml_is_left_to_copy_by_hand() -> None:
    """A placement or profile the README shows names the sample file it ships as."""
    unnamed = [
        block["body"].strip().splitlines()[0]
        for block in YAML_BLOCK.finditer(README_TEXT)
        if SHIPPED.match(textwrap.dedent(block["body"])) is None
    ]
    assert unnamed == []


def test_the_copies_the_walkthrough_makes_change_what_it_says(tmp_path: Path) -> None:
    """Steps 7 and 10 derive `.run/demo-3.yaml` and `.run/demo-broken.yaml` from the shipped
    demo with `sed` and `grep -v`: run those lines as typed (into a scratch `.run/`) and read
    what they made."""
    made = [
        line
        for _, line in code_lines(README_TEXT)
        if line.startswith(("sed ", "grep ")) and "devhub/samples/demo.yaml > .run/" in line
    ]
    assert len(made) == 2, made
    (tmp_path / "devhub" / "samples").mkdir(parents=True)
    (tmp_path / ".run").mkdir()
    shutil.copy(REPO / "devhub/samples/demo.yaml", tmp_path / "devhub/samples/demo.yaml")
    for line in made:
        subprocess.run(["sh", "-c", line], cwd=tmp_path, check=True, timeout=30)
    three = yaml.safe_load((tmp_path / ".run/demo-3.yaml").read_text())
    broken = yaml.safe_load((tmp_path / ".run/demo-broken.yaml").read_text())
    assert three["spec"]["policy"]["numberOfClusters"] == 3
    assert broken["spec"]["policy"]["placementType"] == "PickN"
    assert "numberOfClusters" not in broken["spec"]["policy"]
