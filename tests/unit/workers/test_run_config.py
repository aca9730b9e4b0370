"""`run`'s flags become one RunConfig: the components and their defaults, the deprecated
spellings, and the activity children's argv, which must parse back into the config it came from."""

from __future__ import annotations

import argparse
import dataclasses
import os
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from control.config import (
    ADMISSION_AUTO,
    ALL_COMPONENTS,
    Component,
    HubFlags,
    RunConfig,
    TemporalFlags,
    VersionFlags,
)
from scheduler.moves.rebalance import STRATEGIES
from workers.cli import build_parser
from workers.cli.common import BUILD_ID_ENV, MAX_INTERVAL_S, CliError
from workers.cli.run import run_argv, run_config
from workers.processes import available_cpus

A, F, W = Component.ACTIVITIES, Component.WORKFLOWS, Component.WATCHER


def parse(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(list(argv))


def config_of(*flags: str) -> RunConfig:
    return run_config(parse("run", *flags))


@pytest.mark.parametrize(
    ("components", "processes"),
    [
        (None, available_cpus()),  # all three: activities in a process per core
        ("workflows,activities", available_cpus()),
        ("activities", 0),  # an activity pod: this process is the activity worker
        ("watcher", 0),
        ("workflows", 0),
        ("workflows,watcher", 0),
    ],
)
def test_processes_default_to_what_the_components_need(
    components: str | None, processes: int
) -> None:
    config = config_of(*(["--components", components] if components else []))
    assert config.processes == processes
    assert config.components == (
        ALL_COMPONENTS if components is None else {Component(c) for c in components.split(",")}
    )
    # Activities run here only when they are a component and no children take them.
    assert config.activities_here == (A in config.components and processes == 0)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (["--no-worker"], "watcher"),
        (["--no-watcher"], "activities,workflows"),
        (["--activities-only"], "activities"),
        (["--no-activities"], "watcher,workflows"),
        (["--no-watcher", "--no-activities"], "workflows"),
    ],
)
def test_the_old_component_switches_are_the_same_config_with_a_warning(
    old: list[str], new: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The deploy manifests of earlier releases keep working, and say what to write now."""
    assert config_of(*old) == config_of("--components", new)
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"fleet-scheduler: {' '.join(old)} "
                   f"{'are' if len(old) > 1 else 'is'} deprecated; use --components {new}"]


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--components", "watcher", "--processes", "2"], "--processes starts activity workers"),
        (["--components", "activities", "--no-worker"], "give --components alone"),
        (["--no-activities", "--activities-only"], "leave nothing to run"),
        (["--no-worker", "--activities-only"], "leave nothing to run"),
    ],
)
def test_impossible_components_are_refused(flags: list[str], message: str) -> None:
    with pytest.raises(CliError, match=message):
        config_of(*flags)


@pytest.mark.parametrize("value", ["", "workers", "watcher,nope", ","])
def test_an_unknown_component_is_a_usage_error(
    value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        parse("run", "--components", value)
    assert exited.value.code == 2
    assert "expected a comma-separated list of activities, watcher, workflows" in (
        capsys.readouterr().err
    )


@pytest.mark.parametrize("command", ["run", "status", "explain x", "requeue x", "check"])
def test_temporal_namespace_is_one_flag_in_every_command(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    words = command.split()
    assert parse(*words, "--temporal-namespace", "fleet").temporal_namespace == "fleet"
    assert capsys.readouterr().err == ""
    assert parse(*words, "--namespace", "fleet").temporal_namespace == "fleet"
    assert "--namespace is deprecated; use --temporal-namespace" in capsys.readouterr().err
    assert parse(*words, "--namespace", "a", "--namespace", "b").temporal_namespace == "b"
    assert capsys.readouterr().err.count("deprecated") == 1  # said once


@pytest.mark.parametrize(
    "argv",
    [
        ["status", "--temporal-namespace", "prod", "--namespace", "staging"],
        ["status", "--namespace", "staging", "--temporal-namespace", "prod"],
        ["devhub", "--kubeconfig-out", "kc", "--port", "1", "--hub-port", "2"],
        ["devhub", "--kubeconfig-out", "kc", "--hub-port", "2", "--port", "1"],
    ],
)
def test_an_old_spelling_beside_the_new_one_is_refused(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """Whichever comes last would win silently: a script mixing them is told instead."""
    with pytest.raises(SystemExit) as exited:
        parse(*argv)
    assert exited.value.code == 2
    assert "are the same flag; give it once" in capsys.readouterr().err


def test_the_log_level_may_follow_the_command() -> None:
    assert parse("status", "--log-level", "DEBUG").log_level == "DEBUG"
    assert parse("--log-level", "ERROR", "status").log_level == "ERROR"
    assert parse("status").log_level == "INFO"


def test_devhub_takes_the_hub_port_as_dev_spells_it(capsys: pytest.CaptureFixture[str]) -> None:
    base = ["devhub", "--kubeconfig-out", "kc"]
    assert parse(*base, "--hub-port", "7000").hub_port == 7000
    assert parse(*base, "--port", "7001").hub_port == 7001
    assert "--port is deprecated; use --hub-port" in capsys.readouterr().err


def test_rebalance_names_a_placement_as_the_other_commands_do() -> None:
    assert parse("rebalance").name is None
    assert parse("rebalance", "web").name == "web"
    args = parse("rebalance", "web", "-n", "team")
    assert (args.name, args.placement_namespace) == ("web", "team")


def test_fairness_is_a_run_flag_too() -> None:
    assert config_of("--fairness").fairness
    assert not config_of().fairness


# Values may begin with "-" or hold "=": a task queue "-blue" is one a parent accepts
# (`--task-queue=-blue`), so its children must too.
_names = st.from_regex(r"-{0,2}[a-zA-Z0-9][a-zA-Z0-9_=-]{0,11}", fullmatch=True)
_namespaces = st.from_regex(r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?", fullmatch=True)
_seconds = st.just(0.0) | st.floats(min_value=1, max_value=MAX_INTERVAL_S)


@st.composite
def configs(draw: st.DrawFn) -> RunConfig:
    components = frozenset(draw(st.sets(st.sampled_from(list(Component)), min_size=1)))
    snapshotter = draw(st.booleans())
    return RunConfig(
        components=components,
        processes=draw(st.integers(0, 8)) if A in components else 0,
        task_queue=draw(_names),
        snapshotter=snapshotter,
        profile_file=draw(st.none() | _names.map(lambda n: Path(f"/etc/{n}.yaml"))),
        fairness=draw(st.booleans()),
        resource_placements=draw(st.booleans()),
        placement_decisions=draw(st.none() | st.booleans()),
        decisions_namespace=draw(_namespaces),
        cluster_profile_namespace=draw(_namespaces),
        local_cycles_up_to=draw(st.integers(0, 5000)),
        # Beside KubeFleet a fixed window is refused; `auto` is accepted there (it is no window).
        admission_window=draw(
            st.integers(0, 64) | st.just(ADMISSION_AUTO)
            if snapshotter
            else st.sampled_from([0, ADMISSION_AUTO])
        ),
        reconcile_every_s=draw(_seconds),
        rebalance_every_s=draw(_seconds),
        rebalance_strategy=draw(st.sampled_from(STRATEGIES)),
        max_concurrent_activities=draw(st.integers(1, 64)),
        max_cached_workflows=draw(st.integers(0, 10_000)),
        metrics_host=draw(st.sampled_from(["127.0.0.1", "0.0.0.0"])),
        metrics_port=draw(st.integers(0, 65535)),
        log_level=draw(st.sampled_from(["DEBUG", "INFO", "WARNING", "ERROR"])),
        hub=HubFlags(
            draw(st.none() | _names.map(lambda n: Path(f"/kube/{n}"))), draw(st.none() | _names)
        ),
        temporal=TemporalFlags(
            draw(st.none() | _names.map(lambda n: f"{n}:7233")),
            draw(st.none() | _names),
            draw(st.none() | _names),
        ),
        version=VersionFlags(draw(st.none() | _names), draw(_names), draw(st.booleans())),
    )


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(configs())
def test_run_argv_parses_back_into_the_same_config(config: RunConfig) -> None:
    """What a child is started with is exactly what its parent decided: the argv `run` writes
    for a RunConfig parses into that RunConfig, for any config `run` could be given."""
    argv = run_argv(config)
    assert argv[1:3] == ["-m", "workers.cli"]
    with mock.patch.dict(os.environ):
        os.environ.pop(BUILD_ID_ENV, None)  # the flag's default when --build-id is left out
        assert run_config(build_parser().parse_args(argv[3:])) == config


def test_a_value_that_looks_like_a_flag_reaches_the_child() -> None:
    config = config_of("--task-queue=-blue", "--temporal-namespace=--prod")
    assert (config.task_queue, config.temporal.namespace) == ("-blue", "--prod")
    child = config.for_child()
    assert run_config(build_parser().parse_args(run_argv(child)[3:])) == child


@given(configs())
def test_a_child_runs_the_activities_alone_and_keeps_no_schedule(config: RunConfig) -> None:
    assume(A in config.components)
    child = config.for_child()
    assert child.components == {A} and child.activities_here and not child.manages_schedules
    assert not child.reconciles
    assert child.metrics_host == "127.0.0.1" and child.metrics_port == 0
    # Everything else is the parent's: the hub, Temporal, the profile, the version.
    same = {"hub", "temporal", "version", "task_queue", "snapshotter", "profile_file",
            "fairness", "max_concurrent_activities", "log_level", "resource_placements",
            "placement_decisions", "decisions_namespace", "cluster_profile_namespace"}
    for name in same:
        assert getattr(child, name) == getattr(config, name), name
    assert {f.name for f in dataclasses.fields(RunConfig)} >= same


@pytest.mark.parametrize("flag", ["--reconcile-every", "--rebalance-every"])
@pytest.mark.parametrize("value", ["-5", "nan", "inf", "1e300", "0.5", "soon"])
def test_a_schedule_interval_out_of_range_is_a_usage_error(
    flag: str, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Refused while parsing, not after the servers started (a timedelta overflow) or as a
    silent "off"."""
    with pytest.raises(SystemExit) as exited:
        parse("run", flag, value)
    assert exited.value.code == 2
    assert "expected a number of seconds, 0 or more (0: off; else 1 to 31536000, a year)" in (
        capsys.readouterr().err
    )
