"""Watcher construction and readiness before any server answers (no network is touched)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from control.config import RunConfig
from control.routes import Route
from control.watcher import WATCHED_KINDS, Watcher, WatcherTiming
from hub.client import HubClient, Resync
from hub.types import CapacityLedger, MemberCluster, PriorityClass
from workflows import names

pytestmark = pytest.mark.asyncio(loop_scope="session")


@pytest_asyncio.fixture(loop_scope="session")
async def lazy_client() -> AsyncIterator[Client]:
    # lazy: nothing connects until a call is made, and no call is made here.
    yield await Client.connect("127.0.0.1:1", lazy=True)


@pytest.fixture
def hub() -> HubClient:
    return HubClient.from_url("http://127.0.0.1:1")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        pytest.param({"coalesce_seconds": -1.0}, "coalesce_seconds", id="negative-window"),
        pytest.param({"max_in_flight": 0}, "max_in_flight", id="no-slots"),
        pytest.param({"watch_seconds": 0}, "watch_seconds", id="no-watch-time"),
    ],
)
async def test_nonsense_settings_are_refused_with_their_name(
    hub: HubClient, lazy_client: Client, options: dict[str, float], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        WatcherTiming(**options)  # type: ignore[arg-type]


async def test_a_new_watcher_is_not_ready_and_says_which_lists_it_waits_for(
    hub: HubClient, lazy_client: Client
) -> None:
    watcher = Watcher(hub, lazy_client)
    ready, reason = watcher.readiness()
    assert not ready and not watcher.ready
    # PriorityClasses and CapacityLedgers are not waited for
    waited = [k.PLURAL for k in watcher.kinds if k not in (PriorityClass, CapacityLedger)]
    assert reason == "waiting for the first list of " + ", ".join(waited)
    assert PriorityClass in watcher.kinds and CapacityLedger in watcher.kinds
    assert set(WATCHED_KINDS) < set(watcher.kinds)
    assert watcher.idle and watcher.pending == 0
    assert watcher.stats.sent == 0


UNKNOWN_SERVICE = "unknown service temporal.api.workflowservice.v1.WorkflowService"
# What the server answers once a run has had history.maximumSignalsPerExecution signals.
SIGNAL_LIMIT = "exceeded workflow execution limit for signal events"


@pytest.mark.parametrize(
    ("status", "message", "permanent"),
    [
        pytest.param(RPCStatusCode.INVALID_ARGUMENT, "bad payload", True, id="invalid-argument"),
        pytest.param(RPCStatusCode.UNIMPLEMENTED, UNKNOWN_SERVICE, False, id="server-starting"),
        pytest.param(RPCStatusCode.UNAVAILABLE, "connection refused", False, id="unavailable"),
        # The run continues-as-new and the next one takes signals: the event must wait, not go.
        pytest.param(RPCStatusCode.INVALID_ARGUMENT, SIGNAL_LIMIT, False, id="signal-limit"),
    ],
)
async def test_only_errors_a_retry_cannot_fix_drop_a_signal(status, message, permanent) -> None:
    from control.sending import _permanent

    assert _permanent(RPCError(message, status, b"")) is permanent


@pytest.mark.parametrize(
    ("up_to", "before_list", "after_list"),
    [(None, "auto", "auto"), (2, None, "local"), (1, None, "queue"), (0, None, "queue")],
)
async def test_a_forced_turn_execution_is_decided_only_once_the_clusters_are_listed(
    hub: HubClient, lazy_client: Client, up_to: int | None, before_list: str, after_list: str
) -> None:
    """By default the watcher lets the workers choose, list or no list. Forced by the fleet's
    size: before the cluster list arrives the size is unknown, and the watcher says nothing
    rather than call a large fleet small; after it, the fleet of 2 decides (0: the queue)."""
    watcher = Watcher(hub, lazy_client, RunConfig(local_cycles_up_to=up_to))
    assert watcher.turn_execution() == before_list
    clusters = [
        MemberCluster.from_wire({"metadata": {"name": n, "resourceVersion": "1"}})
        for n in ("member-a", "member-b")
    ]
    watcher._views[MemberCluster].apply_resync(Resync(clusters, "1"))
    assert watcher.turn_execution() == after_list


# --- priority (docs/priority.md) ----------------------------------------------------------


def _crp(name: str, annotations: dict[str, str] | None = None, labels=None, version: str = "1"):
    from hub.types import ClusterResourcePlacement

    return ClusterResourcePlacement.from_wire(
        {
            "metadata": {
                "name": name, "resourceVersion": version, "generation": 1,
                "annotations": annotations or {}, "labels": labels or {},
            },
            "spec": {"policy": {"placementType": "PickAll"}},
        }
    )  # fmt: skip


def _pc(name: str, value: int, default: bool = False, version: str = "1") -> PriorityClass:
    return PriorityClass.from_wire(
        {"metadata": {"name": name, "resourceVersion": version}, "value": value,
         "globalDefault": default}
    )  # fmt: skip


def _ready(watcher: Watcher, placements, classes) -> None:
    """Every kind listed, as the watch threads would hand the lists over."""
    from hub.client import Resync

    for kind in watcher.kinds:
        objects = (
            placements
            if kind.KIND == "ClusterResourcePlacement"
            else (classes if kind is PriorityClass else [])
        )
        watcher._apply(kind, Resync(objects, "1"))
    watcher._sender._outbox.take_due(1e9)  # the start-up signals


async def test_a_turn_gets_the_priority_of_the_class_its_placement_names(
    hub: HubClient, lazy_client: Client
) -> None:
    from scheduler.framework.queue_sort import TurnCause

    watcher = Watcher(hub, lazy_client)
    annotated = _crp("web", {"fleet-scheduler.io/priority-class": "urgent"})
    _ready(watcher, [annotated, _crp("plain")], [_pc("urgent", 5000), _pc("batch", -5, True)])
    assert watcher.ready
    own = watcher.queue_priority("web", TurnCause.PLACEMENT)
    assert (own.value, own.priority_class, own.priority_key) == (5000, "urgent", 2)
    # Never scheduled: its fan-outs are not demoted (unsatisfied first, below).
    assert watcher.queue_priority("web", TurnCause.FAN_OUT).priority_key == 2
    plain = watcher.queue_priority("plain", TurnCause.PLACEMENT)
    assert (plain.value, plain.priority_class, plain.priority_key) == (-5, "batch", 4)
    unknown = watcher.queue_priority("gone", TurnCause.PLACEMENT)
    assert (unknown.value, unknown.priority_key) == (-5, 4)  # the global default


def _with_scheduled(crp, status: str, observed: int = 1, generation: int = 1):
    from hub.types import ClusterResourcePlacement

    wire = crp.to_wire()
    wire["metadata"]["generation"] = generation
    wire["status"] = {"conditions": [{
        "type": "ClusterResourcePlacementScheduled", "status": status,
        "reason": "Scheduled" if status == "True" else "SchedulingPolicyUnfulfilled",
        "observedGeneration": observed,
    }]}  # fmt: skip
    return ClusterResourcePlacement.from_wire(wire)


async def test_unsatisfied_placements_go_before_re_decisions_of_their_class(
    hub: HubClient, lazy_client: Client
) -> None:
    """Issue 35: a placement that has less than it asks for (new, below its N, spec changed
    since it was scheduled) goes before re-decisions of placements that already have it, in
    the outbox and, for fan-outs, at a better Temporal key."""
    from hub.client import WatchEvent
    from hub.types import ClusterResourcePlacement
    from scheduler.framework.queue_sort import TurnCause

    watcher = Watcher(hub, lazy_client)
    settled = [_with_scheduled(_crp(f"settled-{i}"), "True") for i in range(20)]
    short = _with_scheduled(_crp("short"), "False")  # below its N
    changed = _with_scheduled(_crp("changed"), "True", observed=1, generation=2)
    _ready(watcher, [*settled, short, changed], [])
    orders = {
        name: watcher.queue_priority(name, TurnCause.FAN_OUT).order
        for name in ("settled-0", "short", "changed")
    }
    assert orders == {"settled-0": (4, 2), "short": (3, 1), "changed": (3, 1)}
    assert watcher.queue_priority("settled-0", TurnCause.PLACEMENT).order == (3, 2)
    # A backlog of re-decisions of satisfied placements at key 3 (a person's requeue, as the
    # reconcile or `requeue` sends them), then a new placement of the same class.
    for placement in settled:
        watcher._enqueue(Route(placement.metadata.name, names.SIGNAL_PLACEMENT_CHANGED, "x"))
    watcher._apply(ClusterResourcePlacement, WatchEvent("ADDED", _crp("new", version="9"), "9"))
    taken = [b.placement for b in watcher._sender._outbox.take_due(1e9, limit=2)]
    assert taken == ["new", "settled-0"]
    watcher._sender._outbox.take_due(1e9)
    # A binding going away leaves the placement short before its condition can say so.
    watcher._enqueue(Route("settled-1", names.SIGNAL_PLACEMENT_CHANGED, "x"))
    watcher._enqueue(Route("settled-2", names.SIGNAL_BINDING_DELETING, "binding b deleting"))
    taken = [b.placement for b in watcher._sender._outbox.take_due(1e9)]
    assert taken == ["settled-2", "settled-1"]


async def test_a_new_placement_goes_before_a_backlog_of_edited_ones(
    hub: HubClient, lazy_client: Client
) -> None:
    """Issue 35, new first: edited placements want something too (their Scheduled condition is
    at an older generation), but a placement that has nothing yet goes before them in the
    outbox; an edited one still goes before a satisfied re-decision."""
    from hub.client import WatchEvent
    from hub.types import ClusterResourcePlacement
    from scheduler.framework.queue_sort import TurnCause

    watcher = Watcher(hub, lazy_client)
    edited = [
        _with_scheduled(_crp(f"edited-{i}"), "True", observed=1, generation=2) for i in range(20)
    ]
    settled = _with_scheduled(_crp("settled"), "True")
    _ready(watcher, [*edited, settled], [])
    assert watcher.queue_priority("edited-0", TurnCause.PLACEMENT).order == (3, 1)
    assert watcher.queue_priority("settled", TurnCause.PLACEMENT).order == (3, 2)
    watcher._enqueue(Route("settled", names.SIGNAL_PLACEMENT_CHANGED, "x"))
    for placement in edited:
        watcher._enqueue(Route(placement.metadata.name, names.SIGNAL_PLACEMENT_CHANGED, "x"))
    watcher._apply(ClusterResourcePlacement, WatchEvent("ADDED", _crp("new", version="9"), "9"))
    assert watcher.queue_priority("new", TurnCause.PLACEMENT).order == (3, 0)
    taken = [b.placement for b in watcher._sender._outbox.take_due(1e9)]
    assert taken == ["new", *(f"edited-{i}" for i in range(20)), "settled"]


async def test_unsatisfied_first_off_keeps_arrival_order(
    hub: HubClient, lazy_client: Client
) -> None:
    from hub.client import WatchEvent
    from hub.types import ClusterResourcePlacement
    from scheduler import load_profile

    profile = load_profile("pluginConfig: [{name: PrioritySort, args: {unsatisfiedFirst: false}}]")
    watcher = Watcher(hub, lazy_client, queue_sort=profile.queue_sorter)
    settled = [_with_scheduled(_crp(f"settled-{i}"), "True") for i in range(3)]
    _ready(watcher, settled, [])
    for placement in settled:
        watcher._enqueue(Route(placement.metadata.name, names.SIGNAL_PLACEMENT_CHANGED, "x"))
    watcher._apply(ClusterResourcePlacement, WatchEvent("ADDED", _crp("new", version="9"), "9"))
    taken = [b.placement for b in watcher._sender._outbox.take_due(1e9)]
    assert taken == ["settled-0", "settled-1", "settled-2", "new"]


async def test_priority_changes_reach_the_workflows_without_a_turn(
    hub: HubClient, lazy_client: Client
) -> None:
    """A new annotation (no generation change: KubeFleet routes nothing) and a PriorityClass
    whose value moves each queue a priority_changed signal, which never starts a workflow;
    a class change that moves no placement queues nothing."""
    from hub.client import WatchEvent
    from hub.types import ClusterResourcePlacement

    watcher = Watcher(hub, lazy_client)
    _ready(watcher, [_crp("web"), _crp("api")], [_pc("urgent", 5000)])
    annotated = _crp("web", {"fleet-scheduler.io/priority-class": "urgent"}, version="2")
    watcher._apply(ClusterResourcePlacement, WatchEvent("MODIFIED", annotated, "2"))
    (batch,) = watcher._sender._outbox.take_due(1e9)
    assert (batch.placement, batch.signal, batch.may_start) == (
        "web", "priority_changed", False,
    )  # fmt: skip
    assert batch.priority.value == 5000
    watcher._apply(PriorityClass, WatchEvent("ADDED", _pc("unused", 7, version="3"), "3"))
    assert watcher._sender._outbox.take_due(1e9) == []
    raised = _pc("urgent", 2_000_000_000, version="4")
    watcher._apply(PriorityClass, WatchEvent("MODIFIED", raised, "4"))
    (moved,) = watcher._sender._outbox.take_due(1e9)
    assert (moved.placement, moved.signal, moved.priority.value) == (
        "web", "priority_changed", 2_000_000_000,
    )  # fmt: skip


async def test_a_failing_queue_sort_plugin_gives_the_default_priority(
    hub: HubClient, lazy_client: Client
) -> None:
    from scheduler.framework.queue_sort import QueuePriority, TurnCause

    class Broken:
        name = "Broken"

        def queue_sort(self, item):
            raise RuntimeError("boom")

    watcher = Watcher(hub, lazy_client, queue_sort=Broken())  # type: ignore[arg-type]
    assert watcher.queue_priority("web", TurnCause.PLACEMENT) == QueuePriority()


# --- admission (docs/priority.md, "Admission") -------------------------------------------------


async def test_a_relist_frees_the_places_of_turns_that_ended_while_nobody_watched(
    hub: HubClient, lazy_client: Client
) -> None:
    """A watch restarted after 410 Gone comes back as a Resync: a placement scheduled at its
    generation meanwhile gives its place up, one still waiting keeps it."""
    from hub.types import ClusterResourcePlacement

    watcher = Watcher(hub, lazy_client, RunConfig(admission_window=2))
    _ready(watcher, [_crp("done"), _crp("waiting")], [])
    watcher._sender._admission.admit("done", 3, now=0.0)
    watcher._sender._admission.admit("waiting", 3, now=0.0)
    scheduled = ClusterResourcePlacement.from_wire(
        {
            **_crp("done", version="2").to_wire(),
            "status": {"conditions": [{
                "type": "ClusterResourcePlacementScheduled", "status": "False",
                "reason": "SchedulingPolicyUnfulfilled", "observedGeneration": 1,
            }]},
        }
    )  # fmt: skip
    watcher._apply(ClusterResourcePlacement, Resync([scheduled, _crp("waiting")], "2"))
    assert watcher._sender._admission.placements() == ["waiting"]


async def test_metrics_sum_what_placements_short_of_room_are_missing(
    hub: HubClient, lazy_client: Client
) -> None:
    """docs/capacity.md: /metrics exports unschedulable demand per resource, read back from the
    Scheduled conditions the watcher caches (placements without a shortage count nothing)."""
    from hub import names
    from scheduler.explain.explanation import ResourceShortage, Shortage
    from workers.metrics import SchedulerMetrics

    def short(name: str, unplaced: int, cpu: str, memory: str | None) -> object:
        resources = [ResourceShortage(resource="cpu", requested=cpu, clusters=2, missing=cpu)]
        if memory is not None:
            resources.append(
                ResourceShortage(resource="memory", requested=memory, clusters=1, missing=memory)
            )
        message = (
            "could not find all the clusters needed; "
            + Shortage(unplaced=unplaced, requests=f"cpu={cpu}", resources=resources).message()
        )
        crp = _crp(name).to_wire()
        crp["metadata"]["annotations"] = {names.REQUESTS_ANNOTATION: f"cpu={cpu}"}
        crp["status"] = {"conditions": [
            {"type": "ClusterResourcePlacementScheduled", "status": names.FALSE,
             "reason": "SchedulingPolicyUnfulfilled", "message": message}]}  # fmt: skip
        return type(_crp(name)).from_wire(crp)

    metrics = SchedulerMetrics(process_metrics=False)
    watcher = Watcher(hub, lazy_client, metrics=metrics)
    dropped = short("d", 1, "7", None)  # said short, then dropped its requests: counts nothing
    meta = dropped.metadata.model_copy(update={"annotations": {}})  # type: ignore[attr-defined]
    dropped = dropped.model_copy(update={"metadata": meta})  # type: ignore[attr-defined]
    placements = [short("a", 1, "4", "8Gi"), short("b", 2, "1500m", None), _crp("c"), dropped]
    _ready(watcher, placements, [])  # type: ignore[arg-type]
    sample = metrics.registry.get_sample_value
    assert sample("fleet_scheduler_unschedulable_demand", {"resource": "cpu"}) == 5.5
    assert sample("fleet_scheduler_unschedulable_demand", {"resource": "memory"}) == 8 * 2**30
    assert sample("fleet_scheduler_unschedulable_placements", {}) == 2


def _scheduled(name: str, version: str = "2"):
    from hub.types import ClusterResourcePlacement

    return ClusterResourcePlacement.from_wire(
        {
            **_crp(name, version=version).to_wire(),
            "status": {"conditions": [{
                "type": "ClusterResourcePlacementScheduled", "status": "True",
                "reason": "SchedulingPolicyFulfilled", "observedGeneration": 1,
            }]},
        }
    )  # fmt: skip


async def test_an_automatic_window_that_grows_lets_the_waiting_turns_in_at_once(
    hub: HubClient, lazy_client: Client
) -> None:
    """docs/priority.md: the window is sized again as turns are seen done; when it grows, the
    sends are woken and the turns that waited for a place go together, not one per completion."""
    import asyncio
    import functools

    from control.admission import AutoSizing
    from control.routes import Route
    from hub.types import ClusterResourcePlacement
    from workers.metrics import SchedulerMetrics
    from workflows import names

    metrics = SchedulerMetrics(process_metrics=False)
    sizing = AutoSizing(target_wait_s=2.0, floor=2, start=2, warmup_s=1.0, min_samples=2)
    watcher = Watcher(
        hub,
        lazy_client,
        RunConfig(admission_window="auto"),
        metrics=metrics,
        timing=WatcherTiming(admission_sizing=sizing),
    )
    sender = watcher._sender
    placements = [f"p-{i}" for i in range(8)]
    _ready(watcher, [_crp(name) for name in placements], [])
    sample = metrics.registry.get_sample_value
    assert sample("fleet_scheduler_admission_window", {}) == 2
    for name in placements:
        watcher._enqueue(Route(name, names.SIGNAL_PLACEMENT_CHANGED, "created"))
    now = asyncio.get_running_loop().time()
    taken = sender._outbox.take_due(now, admit=functools.partial(sender._take_place, now))
    assert [b.placement for b in taken] == ["p-0", "p-1"] and sender._refused
    # Three seconds of backlog in which ten turns (of placements since gone) finished.
    admission = sender._admission
    admission.waiting(now - 3.0, True)
    for index in range(10):
        admission.admit(f"earlier-{index}", 3, now - 3.0)
        admission.finished(f"earlier-{index}", now - 3.0 + index * 0.3)
    sender._wake.clear()
    # A look at p-1, whose turn is not done, frees no place; but the rate is known now (9 turns
    # after the first in 3 s): the window grows to 6, and that alone wakes the sends.
    sender.release_done(["p-1"])
    assert watcher.admission_window == 6 and sender._wake.is_set()
    sender._wake.clear()

    # p-0's turn is seen done: 10 turns in 3 s, so 7 places.
    watcher._apply(
        ClusterResourcePlacement,
        Resync([_scheduled("p-0"), *(_crp(name) for name in placements[1:])], "2"),
    )
    assert watcher.admission_window == 7 and watcher.drain_rate == pytest.approx(10 / 3, rel=0.05)
    assert sender._wake.is_set()
    now = asyncio.get_running_loop().time()
    taken = sender._outbox.take_due(now, admit=functools.partial(sender._take_place, now))
    # p-1 holds one place; six more turns go at once
    assert [b.placement for b in taken] == [f"p-{i}" for i in range(2, 8)]
    assert sample("fleet_scheduler_admission_window", {}) == 7
    assert sample("fleet_scheduler_admission_drain_rate", {}) == pytest.approx(10 / 3, rel=0.05)


@pytest.mark.parametrize(
    ("config", "window"),
    [
        pytest.param(RunConfig(), 64, id="default-auto-starts-at-64"),
        pytest.param(RunConfig(admission_window=0), 0, id="off"),
        pytest.param(RunConfig(admission_window=16), 16, id="fixed"),
        pytest.param(RunConfig(admission_window="auto"), 64, id="auto-starts-at-64"),
        pytest.param(RunConfig(admission_window="auto", snapshotter=False), 0, id="auto-kf"),
        pytest.param(RunConfig(admission_window=16, snapshotter=False), 0, id="fixed-kf"),
    ],
)
async def test_metrics_show_the_admission_window_and_no_rate_before_one_is_measured(
    hub: HubClient, lazy_client: Client, config: RunConfig, window: int
) -> None:
    import math

    from workers.metrics import SchedulerMetrics

    metrics = SchedulerMetrics(process_metrics=False)
    watcher = Watcher(hub, lazy_client, config, metrics=metrics)
    assert watcher.admission_window == window and watcher.drain_rate is None
    assert metrics.registry.get_sample_value("fleet_scheduler_admission_window", {}) == window
    rate = metrics.registry.get_sample_value("fleet_scheduler_admission_drain_rate", {})
    assert rate is not None and math.isnan(rate)
