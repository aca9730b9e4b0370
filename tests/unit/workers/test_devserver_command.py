"""The dev server's command line, checked without starting a process (the integration tests
start real ones)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from workers import devserver
from workers.devserver import DevServer, DevServerError, free_port, search_attribute_flags
from workflows import names

BINARY = "/opt/temporal"


def flag_values(cmd: list[str], flag: str) -> list[str]:
    return [cmd[i + 1] for i, arg in enumerate(cmd) if arg == flag]


def test_command_binds_loopback_with_ui_and_quiet_logs() -> None:
    server = DevServer(port=7300, ui_port=8300)
    cmd = server.command(BINARY)
    assert cmd[:3] == [BINARY, "server", "start-dev"]
    assert flag_values(cmd, "--ip") == ["127.0.0.1"]
    assert flag_values(cmd, "--port") == ["7300"]
    assert flag_values(cmd, "--ui-port") == ["8300"]
    assert flag_values(cmd, "--log-level") == ["warn"]
    assert "--headless" not in cmd and "--db-filename" not in cmd
    assert server.target == "127.0.0.1:7300" and server.ui_url == "http://127.0.0.1:8300"


def test_data_dir_persists_to_sqlite_in_wal_mode(tmp_path: Path) -> None:
    server = DevServer(port=7300, data_dir=tmp_path / "temporal")
    cmd = server.command(BINARY)
    assert flag_values(cmd, "--db-filename") == [str(tmp_path / "temporal" / "temporal.db")]
    assert flag_values(cmd, "--sqlite-pragma") == ["journal_mode=wal"]


def test_headless_server_has_no_ui_url() -> None:
    server = DevServer(port=7300, ui=False)
    assert "--headless" in server.command(BINARY)
    assert "--ui-port" not in server.command(BINARY)
    assert server.ui_url is None


def test_ui_port_defaults_to_the_cli_rule() -> None:
    assert DevServer(port=7300).ui_port == 8300


def test_port_0_is_a_free_port_chosen_before_the_server_starts() -> None:
    """The temporal CLI refuses --port 0 ("missing frontend port"): `dev --temporal-port 0`
    means a free one, as `--hub-port 0` does."""
    server = DevServer(port=0, ui_port=0)
    assert server.port > 0 and server.ui_port > 0 and server.port != server.ui_port
    assert flag_values(server.command(BINARY), "--port") == [str(server.port)]
    assert flag_values(server.command(BINARY), "--ui-port") == [str(server.ui_port)]


def test_search_attributes_are_registered_with_cli_type_names() -> None:
    cmd = DevServer(port=7300).command(BINARY)
    assert flag_values(cmd, "--search-attribute") == [
        "FleetPlacementName=Keyword",
        "FleetPlacementType=Keyword",
        "FleetFullyScheduled=Bool",
        "FleetPlacementKind=Keyword",
        "FleetPlacementNamespace=Keyword",
        "FleetPriority=Int",
        "FleetTenant=Keyword",
        "FleetPatchGeneration=Int",
        "FleetClustersVersion=Int",
    ]
    assert search_attribute_flags(names.SEARCH_ATTRIBUTES) == cmd[cmd.index("--search-attribute") :]


def test_extra_namespace_is_created_at_start() -> None:
    assert flag_values(DevServer(port=7300, namespace="fleet").command(BINARY), "--namespace") == [
        "fleet"
    ]
    assert "--namespace" not in DevServer(port=7300).command(BINARY)


async def test_missing_binary_is_a_clear_error(tmp_path: Path) -> None:
    server = DevServer(port=7300, binary=str(tmp_path / "no-such-temporal"))
    with pytest.raises(DevServerError, match="make install"):
        await server.start()
    assert not server.running


async def test_binary_that_cannot_run_is_a_clear_error(tmp_path: Path) -> None:
    not_executable = tmp_path / "temporal"
    not_executable.write_text("not a program")
    server = DevServer(port=free_port(), ui=False, binary=str(not_executable))
    with pytest.raises(DevServerError, match="cannot run the Temporal CLI"):
        await server.start()
    assert not server.running


def test_free_port_is_outside_the_kernels_ephemeral_range_and_bindable() -> None:
    """Outgoing connections and the dev server's random listeners draw from the ephemeral
    range; a port chosen there can be taken before the server binds it."""
    low, _ = devserver._ephemeral_port_range()
    ports = {free_port() for _ in range(20)}
    assert all(devserver.FIRST_CHOSEN_PORT <= port < low for port in ports)
    assert len(ports) > 1  # spread out, so two servers started together do not collide
    for port in ports:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind((devserver.LOOPBACK, port))


def test_fairness_turns_on_the_servers_fairness_and_nothing_else() -> None:
    fair = DevServer(port=7300, fairness=True).command(BINARY)
    assert flag_values(fair, "--dynamic-config-value") == ["matching.enableFairness=true"]
    assert "--dynamic-config-value" not in DevServer(port=7300).command(BINARY)
