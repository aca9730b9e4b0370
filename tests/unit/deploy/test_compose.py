"""deploy/compose.yaml and its collector config hang together (no Docker needed to check that):
every service the README promises is there, fleet-scheduler's command is one the CLI accepts and
points at the compose services, and traces flow fleet-scheduler -> collector -> Jaeger."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final
from urllib.parse import urlsplit

import pytest
import yaml

from tests.support.deploy import DEPLOY, REPO
from workers.cli import build_parser
from workers.devserver import search_attribute_flags
from workflows import names

COMPOSE: Final = DEPLOY / "compose.yaml"
SERVICES: Final = {"temporal", "otel-collector", "jaeger", "fleet-scheduler"}
TEMPORAL_FRONTEND: Final = 7233
TEMPORAL_UI: Final = 8233
JAEGER_UI: Final = 16686
JAEGER_OTLP_GRPC: Final = 4317


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    loaded = yaml.safe_load(COMPOSE.read_text())
    assert isinstance(loaded, dict)
    return loaded


@pytest.fixture(scope="module")
def services(compose: dict[str, Any]) -> dict[str, Any]:
    found = compose["services"]
    assert isinstance(found, dict)
    return found


def published(service: dict[str, Any]) -> set[int]:
    """Container ports published as the same port on the host ("host:container")."""
    out = set()
    for spec in service.get("ports", []):
        host, _, inside = str(spec).partition(":")
        assert host == inside, f"{spec}: the README promises the same port on localhost"
        out.add(int(inside))
    return out


def mount(volume: str) -> tuple[str, str]:
    """(source, target) of a short-syntax volume; the source may hold `${VAR:-default}`."""
    source, target = volume.removesuffix(":ro").removesuffix(":rw").rsplit(":", 1)
    return source, target


def flag(command: list[str], name: str) -> list[str]:
    return [arg.split("=", 1)[1] for arg in command if arg.startswith(f"{name}=")]


def collector_config(services: dict[str, Any]) -> dict[str, Any]:
    service = services["otel-collector"]
    (config_arg,) = service["command"]
    inside = config_arg.removeprefix("--config=")
    mounts = {mount(v)[1]: mount(v)[0] for v in service["volumes"]}
    source = (COMPOSE.parent / mounts[inside]).resolve()
    assert source.is_file(), f"the collector's config {source} does not exist"
    loaded = yaml.safe_load(source.read_text())
    assert isinstance(loaded, dict)
    return loaded


def test_compose_runs_the_promised_services_with_pinned_images(services: dict[str, Any]) -> None:
    assert set(services) == SERVICES
    for name, service in services.items():
        image = service["image"]
        assert ":" in image and not image.endswith(":latest"), f"{name}: pin {image}"


def test_temporal_dev_server_listens_outside_its_container_with_our_search_attributes(
    services: dict[str, Any],
) -> None:
    temporal = services["temporal"]
    command = temporal["command"]
    assert command[:2] == ["server", "start-dev"]
    assert flag(command, "--ip") == ["0.0.0.0"]
    wanted = search_attribute_flags(names.SEARCH_ATTRIBUTES)
    assert flag(command, "--search-attribute") == wanted[1::2]
    assert {TEMPORAL_FRONTEND, TEMPORAL_UI} <= published(temporal)
    (db,) = flag(command, "--db-filename")
    assert any(db.startswith(mount(v)[1] + "/") for v in temporal["volumes"]), "persisted"
    assert "healthcheck" in temporal


def test_fleet_scheduler_is_built_here_and_its_command_parses(services: dict[str, Any]) -> None:
    service = services["fleet-scheduler"]
    build = service["build"]
    context = (COMPOSE.parent / build["context"]).resolve()
    assert context == REPO
    assert (context / build["dockerfile"]).resolve() == DEPLOY / "Dockerfile"
    args = build_parser().parse_args(service["command"])
    assert args.command == "run"
    host, _, port = args.temporal_address.rpartition(":")
    assert host == "temporal" and int(port) == TEMPORAL_FRONTEND
    assert service["depends_on"]["temporal"]["condition"] == "service_healthy"
    kubeconfig_mounts = [v for v in service["volumes"] if mount(v)[1] == str(args.kubeconfig)]
    assert len(kubeconfig_mounts) == 1 and kubeconfig_mounts[0].endswith(":ro")
    assert args.metrics_port in published(service)
    assert service["read_only"] is True and service["cap_drop"] == ["ALL"]


def test_traces_flow_from_fleet_scheduler_through_the_collector_to_jaeger(
    services: dict[str, Any],
) -> None:
    env = services["fleet-scheduler"]["environment"]
    assert env["OTEL_TRACES_EXPORTER"] == "otlp"
    endpoint = urlsplit(env["OTEL_EXPORTER_OTLP_ENDPOINT"])
    assert endpoint.hostname == "otel-collector"
    config = collector_config(services)
    protocols = config["receivers"]["otlp"]["protocols"]
    listening = {int(p["endpoint"].rpartition(":")[2]) for p in protocols.values()}
    assert endpoint.port in listening
    assert env["OTEL_EXPORTER_OTLP_PROTOCOL"] == "http/protobuf"
    assert int(protocols["http"]["endpoint"].rpartition(":")[2]) == endpoint.port
    (pipeline,) = config["service"]["pipelines"].values()
    assert pipeline["receivers"] == ["otlp"]
    for exporter in pipeline["exporters"]:
        target = config["exporters"][exporter]["endpoint"]
        assert target == f"jaeger:{JAEGER_OTLP_GRPC}"
    for processor in pipeline["processors"]:
        assert processor in config["processors"]
    assert JAEGER_UI in published(services["jaeger"])


def test_compose_file_is_where_the_readme_says() -> None:
    readme = (DEPLOY / "README.md").read_text()
    assert "docker compose -f deploy/compose.yaml" in readme
    assert Path(COMPOSE).relative_to(REPO).as_posix() == "deploy/compose.yaml"
