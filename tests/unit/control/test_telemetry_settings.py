"""Tracing set-up from OTEL_* variables: off by default, clear errors for bad values, and the
span helper records nothing when off."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from control import telemetry


@pytest.fixture(autouse=True)
def tracing_off() -> Iterator[None]:
    telemetry.shutdown_tracing()
    yield
    telemetry.shutdown_tracing()


@pytest.mark.parametrize(
    ("env", "console", "exporters", "protocol", "service"),
    [
        pytest.param({}, False, (), "http/protobuf", "fleet-scheduler", id="default-off"),
        pytest.param(
            {"OTEL_TRACES_EXPORTER": "none"},
            False,
            (),
            "http/protobuf",
            "fleet-scheduler",
            id="none",
        ),
        pytest.param({}, True, ("console",), "http/protobuf", "fleet-scheduler", id="console-flag"),
        pytest.param(
            {"OTEL_TRACES_EXPORTER": "OTLP, console", "OTEL_SERVICE_NAME": "fs-prod"},
            True,
            ("otlp", "console"),
            "http/protobuf",
            "fs-prod",
            id="list-case-insensitive",
        ),
        pytest.param(
            {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
            False,
            ("otlp",),
            "grpc",
            "fleet-scheduler",
            id="grpc",
        ),
        pytest.param(
            {
                "OTEL_TRACES_EXPORTER": "otlp",
                "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
                "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf",
            },
            False,
            ("otlp",),
            "http/protobuf",
            "fleet-scheduler",
            id="traces-protocol-wins",
        ),
    ],
)
def test_settings_follow_the_otel_variables(
    env: dict[str, str], console: bool, exporters: tuple[str, ...], protocol: str, service: str
) -> None:
    settings = telemetry.tracing_settings(env, console=console)
    assert (settings.exporters, settings.protocol, settings.service_name) == (
        exporters,
        protocol,
        service,
    )
    assert settings.enabled is bool(exporters)


@pytest.mark.parametrize(
    ("env", "match"),
    [
        pytest.param({"OTEL_TRACES_EXPORTER": "jaeger"}, "jaeger", id="unknown-exporter"),
        pytest.param({"OTEL_TRACES_EXPORTER": "none,otlp"}, "mixes 'none'", id="none-and-otlp"),
        pytest.param(
            {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"},
            "http/json",
            id="unsupported-protocol",
        ),
    ],
)
def test_bad_settings_are_clear_errors(env: dict[str, str], match: str) -> None:
    with pytest.raises(telemetry.TelemetryConfigError, match=match):
        telemetry.setup_tracing("worker", env=env)
    assert telemetry.temporal_interceptors() == []  # tracing stayed off


def test_tracing_off_installs_nothing() -> None:
    assert telemetry.setup_tracing("worker", env={}) is None
    assert telemetry.temporal_interceptors() == []
    with telemetry.span("filter", clusters=3) as current:
        assert current is None


def test_otlp_over_http_is_the_default_exporter() -> None:
    provider = telemetry.setup_tracing(
        "worker", env={"OTEL_TRACES_EXPORTER": "otlp,console", "OTEL_SERVICE_NAME": "fs"}
    )
    assert provider is not None
    processors = provider._active_span_processor._span_processors  # what was installed
    exporters = [p.span_exporter for p in processors if isinstance(p, BatchSpanProcessor)]
    assert [type(e) for e in exporters] == [OTLPSpanExporter, ConsoleSpanExporter]
    assert provider.resource.attributes["service.name"] == "fs"
    assert provider.resource.attributes[telemetry.COMPONENT_ATTRIBUTE] == "worker"
    assert len(telemetry.temporal_interceptors()) == 1


def test_grpc_without_its_package_is_a_clear_error() -> None:
    if importlib.util.find_spec("opentelemetry.exporter.otlp.proto.grpc") is not None:
        pytest.skip("the gRPC exporter is installed here")
    with pytest.raises(
        telemetry.TelemetryConfigError, match="opentelemetry-exporter-otlp-proto-grpc"
    ):
        telemetry.setup_tracing(
            "worker", env={"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}
        )


def test_span_records_attributes_and_errors_when_on() -> None:
    exporter = InMemorySpanExporter()
    telemetry.setup_tracing("worker", exporter=exporter)
    with (
        telemetry.span("cycle", placement="web", clusters=3, picked=["a", "b"], skipped=None),
        pytest.raises(RuntimeError),
        telemetry.span("filter", plugin=object()),
    ):
        raise RuntimeError("boom")
    finished = {s.name: s for s in exporter.get_finished_spans()}
    assert set(finished) == {"cycle", "filter"}
    cycle, failed = finished["cycle"], finished["filter"]
    assert dict(cycle.attributes or {}) == {"placement": "web", "clusters": 3, "picked": ("a", "b")}
    assert failed.parent is not None and failed.parent.span_id == cycle.context.span_id
    assert not failed.status.is_ok
    assert str((failed.attributes or {})["plugin"]).startswith("<object object")


def test_setup_again_replaces_the_previous_provider() -> None:
    first, second = InMemorySpanExporter(), InMemorySpanExporter()
    telemetry.setup_tracing("worker", exporter=first)
    telemetry.setup_tracing("watcher", exporter=second)
    with telemetry.span("stage"):
        pass
    assert first.get_finished_spans() == ()
    assert [s.name for s in second.get_finished_spans()] == ["stage"]
