"""SchedulerMetrics: KubeFleet's metric names, buckets and labels, and our counters."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from workers.devserver import free_port
from workers.metrics import CYCLE_DURATION_BUCKETS_MS, SchedulerMetrics


def sample(metrics: SchedulerMetrics, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(name, labels)


@pytest.mark.parametrize(
    ("outcome", "is_failed", "needs_requeue"),
    [
        pytest.param("success", "false", "false", id="success"),
        pytest.param("requeue", "false", "true", id="requeue"),
        pytest.param("error", "true", "true", id="retryable-error"),
        pytest.param("unexpected", "true", "false", id="unexpected-error"),
    ],
)
def test_cycle_outcome_sets_kubefleet_labels(
    outcome: str, is_failed: str, needs_requeue: str
) -> None:
    metrics = SchedulerMetrics(process_metrics=False)
    metrics.observe_cycle(42.0, placement_type="PickN", outcome=outcome)  # type: ignore[arg-type]
    labels = {"is_failed": is_failed, "needs_requeue": needs_requeue}
    assert sample(metrics, "scheduling_cycle_duration_milliseconds_count", **labels) == 1
    assert sample(metrics, "scheduling_cycle_duration_milliseconds_sum", **labels) == 42.0
    assert (
        sample(metrics, "fleet_scheduler_cycles_total", placement_type="PickN", outcome=outcome)
        == 1
    )


def test_cycle_histogram_has_kubefleet_buckets() -> None:
    metrics = SchedulerMetrics(process_metrics=False)
    metrics.observe_cycle(75.0, placement_type="PickAll", outcome="success")
    (family,) = [
        f
        for f in text_string_to_metric_families(metrics.render().decode())
        if f.name == "scheduling_cycle_duration_milliseconds"
    ]
    bounds = [s.labels["le"] for s in family.samples if s.name.endswith("_bucket")]
    assert bounds == [f"{float(b)}" for b in CYCLE_DURATION_BUCKETS_MS] + ["+Inf"]
    counts = {s.labels["le"]: s.value for s in family.samples if s.name.endswith("_bucket")}
    assert counts["50.0"] == 0 and counts["100.0"] == 1


def test_active_workers_gauge_counts_blocks_even_when_they_fail() -> None:
    metrics = SchedulerMetrics(process_metrics=False)
    with metrics.active_worker():
        assert sample(metrics, "scheduling_active_workers") == 1
        with pytest.raises(KeyError), metrics.active_worker():
            assert sample(metrics, "scheduling_active_workers") == 2
            raise KeyError("x")
    assert sample(metrics, "scheduling_active_workers") == 0


def test_binding_writes_and_watcher_events_are_counted() -> None:
    metrics = SchedulerMetrics(process_metrics=False)
    metrics.count_binding_writes("create", 3)
    metrics.count_binding_writes("remove_finalizer")
    metrics.count_binding_writes("delete", 0)
    metrics.count_watcher_event("MemberCluster", "MODIFIED", "signalled")
    assert sample(metrics, "fleet_scheduler_binding_writes_total", operation="create") == 3
    assert (
        sample(metrics, "fleet_scheduler_binding_writes_total", operation="remove_finalizer") == 1
    )
    assert sample(metrics, "fleet_scheduler_binding_writes_total", operation="delete") is None
    assert (
        sample(
            metrics,
            "fleet_scheduler_watcher_events_total",
            kind="MemberCluster",
            event="MODIFIED",
            action="signalled",
        )
        == 1
    )


def test_unknown_label_values_are_refused() -> None:
    metrics = SchedulerMetrics(process_metrics=False)
    with pytest.raises(ValueError, match="cycle outcome"):
        metrics.observe_cycle(1.0, placement_type="PickN", outcome="meh")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="binding write"):
        metrics.count_binding_writes("upsert")  # type: ignore[arg-type]


def test_registries_are_independent() -> None:
    first, second = SchedulerMetrics(), SchedulerMetrics()
    first.count_binding_writes("patch")
    assert sample(second, "fleet_scheduler_binding_writes_total", operation="patch") is None
    assert b"process_cpu_seconds_total" in first.render()


async def test_exposition_without_sdk_url_is_ours_alone() -> None:
    metrics = SchedulerMetrics(process_metrics=False)
    assert await metrics.exposition() == metrics.render()


async def test_unreachable_sdk_endpoint_still_serves_ours_with_a_note() -> None:
    nothing_there = f"http://127.0.0.1:{free_port()}/metrics"
    metrics = SchedulerMetrics(sdk_metrics_url=nothing_there, process_metrics=False)
    metrics.count_binding_writes("delete")
    body = await metrics.exposition()
    assert body.startswith(metrics.render())
    assert f"# Temporal SDK metrics unavailable from {nothing_there}".encode() in body
