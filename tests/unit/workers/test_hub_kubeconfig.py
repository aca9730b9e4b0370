"""Which kubeconfig the commands read the hub with: the flag, then $KUBECONFIG, then, for the
commands a person runs beside `make run` (plan, rebalance, requeue --wait), `.run/kubeconfig` in
the current directory; nothing found leaves it to the service account or ~/.kube/config."""

from __future__ import annotations

from pathlib import Path

import pytest

from workers.cli import build_parser
from workers.cli.common import hub_kubeconfig

MAKE_RUN = Path(".run/kubeconfig")


@pytest.fixture
def beside_make_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The current directory is a repository root where `make run` wrote its kubeconfig."""
    (tmp_path / ".run").mkdir()
    (tmp_path / MAKE_RUN).write_text("apiVersion: v1\nkind: Config\n")
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize(
    ("flag", "env", "local_default", "expected"),
    [
        pytest.param(None, {}, True, MAKE_RUN, id="make-run"),
        pytest.param(Path("hub.yaml"), {}, True, Path("hub.yaml"), id="flag-wins"),
        pytest.param(None, {"KUBECONFIG": "/k"}, True, None, id="env-wins"),
        pytest.param(None, {"KUBECONFIG": ""}, True, MAKE_RUN, id="empty-env-is-unset"),
        pytest.param(None, {}, False, None, id="not-for-run"),
    ],
)
def test_make_runs_kubeconfig_comes_after_the_flag_and_the_environment(
    beside_make_run: Path,
    flag: Path | None,
    env: dict[str, str],
    local_default: bool,
    expected: Path | None,
) -> None:
    assert hub_kubeconfig(flag, local_default=local_default, env=env) == expected


def test_without_make_runs_file_nothing_is_chosen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert hub_kubeconfig(None, local_default=True, env={}) is None


@pytest.mark.parametrize("command", ["plan", "rebalance"])
def test_help_says_where_the_kubeconfig_comes_from(command: str) -> None:
    parser = build_parser()
    sub = parser._subparsers._group_actions[0].choices[command]  # type: ignore[union-attr]
    text = " ".join(sub.format_help().split())
    assert "default: $KUBECONFIG; else .run/kubeconfig when it exists in the current directory" in (
        text
    )
