"""`dev` keeps the reconcile Schedule as `run` does, with the same option and default; both
take the admission window as auto, off or a number."""

from __future__ import annotations

import pytest

from control.config import DEFAULT_ADMISSION_WINDOW
from control.schedules import DEFAULT_RECONCILE_EVERY
from workers.cli import build_parser
from workers.cli.common import CliError
from workers.cli.run import run_config


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


@pytest.mark.parametrize("command", ["dev", "run"])
@pytest.mark.parametrize(
    ("value", "expected"),
    [("auto", "auto"), ("AUTO", "auto"), ("off", 0), ("0", 0), ("16", 16)],
)
def test_the_admission_window_is_auto_off_or_a_number(
    command: str, value: str, expected: object
) -> None:
    args = build_parser().parse_args([command, "--admission-window", value])
    assert args.admission_window == expected


@pytest.mark.parametrize("command", ["dev", "run"])
def test_the_admission_window_defaults_to_the_constant(command: str) -> None:
    args = build_parser().parse_args([command])
    assert args.admission_window == DEFAULT_ADMISSION_WINDOW


@pytest.mark.parametrize("command", ["dev", "run"])
@pytest.mark.parametrize("value", ["automatic", "16.5", "on", ""])
def test_an_admission_window_that_is_no_choice_is_a_usage_error(
    command: str, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args([command, "--admission-window", value])
    assert exited.value.code == 2
    assert "expected auto, off or a number of turns" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        pytest.param(["--admission-window", "auto"], "auto", id="auto"),
        pytest.param(["--admission-window", "off"], 0, id="off"),
        pytest.param(["--admission-window", "16"], 16, id="fixed"),
        # Beside KubeFleet auto is simply no window (the watcher's choice), so that a default of
        # auto never refuses a bare --no-snapshotter.
        pytest.param(["--admission-window", "auto", "--no-snapshotter"], "auto", id="auto-kf"),
        pytest.param(["--admission-window", "0", "--no-snapshotter"], 0, id="off-kf"),
    ],
)
def test_run_keeps_the_admission_choice(flags: list[str], expected: object) -> None:
    config = run_config(build_parser().parse_args(["run", *flags]))
    assert config.admission_window == expected


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        pytest.param(["--admission-window", "-1"], "must be 0 or more, got -1", id="negative"),
        pytest.param(
            ["--admission-window", "16", "--no-snapshotter"], "beside KubeFleet", id="fixed-kf"
        ),
    ],
)
def test_run_refuses_an_admission_window_it_cannot_keep(flags: list[str], message: str) -> None:
    with pytest.raises(CliError, match=message):
        run_config(build_parser().parse_args(["run", *flags]))
