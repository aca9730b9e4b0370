"""`plan`'s two forms, `-f FILE` and `--all`/`NAME` with `--config`, and the mixtures refused
before anything is read (each a one-line CliError, exit 2)."""

from __future__ import annotations

import pytest

from workers.cli import build_parser
from workers.cli.common import CliError
from workers.cli.plan import USAGE_NEEDS_CONFIG, USAGE_ONE_FORM, _profile_form


@pytest.mark.parametrize(
    ("argv", "profile_form"),
    [
        (["-f", "p.yaml"], False),
        (["-f", "p.yaml", "-n", "shop", "--config", "new.yaml"], False),
        (["--all", "--config", "new.yaml"], True),
        (["--all", "--config", "new.yaml", "--current-config", "old.yaml", "--exit-code", "-v"],
         True),
        (["web", "--config", "new.yaml", "--exit-code"], True),
        (["-n", "shop", "storefront", "--config", "new.yaml"], True),
    ],
)  # fmt: skip
def test_each_form_is_recognised(argv: list[str], profile_form: bool) -> None:
    assert _profile_form(build_parser().parse_args(["plan", *argv])) is profile_form


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], USAGE_ONE_FORM),
        (["--all"], USAGE_NEEDS_CONFIG),
        (["web"], USAGE_NEEDS_CONFIG),
        (["--all", "web", "--config", "c"], "leave out NAME"),
        (["--all", "-f", "p.yaml", "--config", "c"], "leave out -f FILE"),
        (["--all", "-n", "shop", "--config", "c"], "leave out -n NAMESPACE"),
        (["web", "-f", "p.yaml"], "give -f FILE or NAME, not both"),
        (["-f", "p.yaml", "--current-config", "c"], "--current-config applies to --all or NAME"),
        (["-f", "p.yaml", "--exit-code"], "--exit-code applies to --all or NAME"),
        (["-f", "p.yaml", "-v"], "--verbose applies to --all or NAME"),
    ],
)
def test_mixtures_are_refused_with_one_line(argv: list[str], message: str) -> None:
    with pytest.raises(CliError) as refused:
        _profile_form(build_parser().parse_args(["plan", *argv]))
    assert message in str(refused.value)
