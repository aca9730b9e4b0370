"""`dev` keeps the reconcile Schedule as `run` does, with the same option and default."""

from __future__ import annotations

import pytest

from control.schedules import DEFAULT_RECONCILE_EVERY
from workers.cli import build_parser


@pytest.mark.parametrize("command", ["dev", "run"])
def test_reconcile_every_defaults_to_the_schedules_interval(command: str) -> None:
    args = build_parser().parse_args([command])
    assert args.reconcile_every == DEFAULT_RECONCILE_EVERY.total_seconds() == 300
    assert build_parser().parse_args([command, "--reconcile-every", "0"]).reconcile_every == 0


@pytest.mark.parametrize("command", ["dev", "run"])
@pytest.mark.parametrize("value", ["-5", "soon", "nan"])
def test_reconcile_every_below_0_is_refused(
    command: str, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args([command, "--reconcile-every", value])
    assert exited.value.code == 2
    assert "expected a number of seconds, 0 or more" in capsys.readouterr().err
