"""README's commands table cannot drift from the CLI: every subcommand has a row, and each row
names exactly the options that subcommand's parser accepts."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

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


def parser_options(name: str) -> set[str]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {
        option
        for action in sub.choices[name]._actions
        for option in action.option_strings
        if option.startswith("--") and option != "--help"
    }


def test_every_subcommand_has_a_row() -> None:
    assert sorted(readme_rows()) == sorted(COMMANDS)


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_a_row_names_exactly_the_options_of_its_subcommand(name: str) -> None:
    documented = set(OPTION.findall(readme_rows()[name]))
    accepted = parser_options(name)
    assert documented == accepted, (
        f"README row of {name}: missing {sorted(accepted - documented)}, "
        f"unknown {sorted(documented - accepted)}"
    )
