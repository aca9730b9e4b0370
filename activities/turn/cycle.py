"""One scheduling cycle against the hub: read, schedule, write bindings, write status.

Reading, deciding and writing happen in one activity: a first PickAll plan at 5,000 clusters is
megabytes, too big to pass between activities, so only a compact `CycleReport` leaves it. Its
stages carry OpenTelemetry spans (`read`, `schedule` with a child span per extension point the
scheduler runs, `apply`, `write_status`). A cycle the scheduler cannot act on (bad annotation,
failing plugin) is not a failure: its False condition is written and the report carries the
error (kubefleet-rules 3.2 table, first row)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Final

from activities.bindings import apply_binding_plan
from activities.capacity import (
    NOMINATION_GRACE,
    CapacityWrites,
    Ledgers,
    NoRoomError,
    capacity_input,
    capacity_writes,
    ledgers_problem,
    release,
    requests_of,
    sweep_own,
)
from activities.conditions import write_scheduled_condition
from activities.deadline import deadline_condition, record_deadline_event
from activities.decisions import publish, target_for
from activities.plumbing import ActivitySettings, CycleOutcome, CycleRun, PhaseSpans, heartbeat
from activities.preemption import (
    drop_nominations,
    left_held,
    nominations_of,
    preempt,
    said_victims,
    victims_asked,
    yield_room,
)
from activities.shared_results import shared_for
from hub import names
from hub.client import HubClient
from hub.errors import NotFoundError, UnauthorizedError
from hub.kinds import kinds_for, placement_key
from hub.types import (
    ClusterResourceBinding,
    ClusterResourcePlacement,
    ClusterSchedulingPolicySnapshot,
    MemberCluster,
)
from scheduler import CapacityInput, CycleInput, CycleResult, Explanation, schedule
from scheduler.bindings.published import active_after
from scheduler.cycles.schedule import placement_type_of
from scheduler.explain.readable import main_filter_reasons, readable_reason
from scheduler.framework.profile import default_profile
from scheduler.opt_in.deadline import (
    ScheduleDeadline,
    carried_deadline,
    exceeded_message,
    missing_line,
)
from scheduler.opt_in.placement_annotations import annotation_problems
from scheduler.requeue.decided import view_version
from scheduler.room.requests import RequestsError, parse_requests
from scheduler.snapshots import placement_scheduled_condition
from workflows.models import CycleReport, TurnRequest, WriteCounts

__all__ = ["Fleet", "cycle_summary", "outcome_of", "read_clusters", "read_fleet", "run_cycle"]

log = logging.getLogger("fleet_scheduler.cycles")

# How many picked cluster names, and filtering plugins, a cycle's one-line summary lists
# before "+N more".
SUMMARY_NAMES: Final = 5
SUMMARY_PLUGINS: Final = 3
# Fresh decisions a capacity-aware cycle makes after losing races for room, in one activity.
NO_ROOM_ATTEMPTS: Final = 20
# A placement waiting on its victims looks again this long after its nominations go stale.
NOMINATION_SLACK_S: Final = 15.0


@dataclass(frozen=True)
class Fleet:
    """What a cycle reads besides its snapshot: every member cluster, the placement's bindings."""

    clusters: list[MemberCluster]
    bindings: list[ClusterResourceBinding]
    clusters_cached: bool = False


def read_fleet(
    client: HubClient,
    placement: str,
    cached_clusters: Callable[[], list[MemberCluster] | None] | None = None,
    namespace: str | None = None,
) -> Fleet:
    """Every MemberCluster (from the cache when it answers, as KubeFleet reads its informer) and
    the bindings labelled with the placement's name, read directly (kubefleet-rules 4.1): for a
    ResourcePlacement, its ResourceBindings in `namespace` (kubefleet-rules 9). Writes nothing:
    `fleet-scheduler plan` reads with it too."""
    cached = cached_clusters() if cached_clusters is not None else None
    clusters = read_clusters(client, lambda: cached)
    bindings = client.list(
        kinds_for(namespace).binding,
        {names.PARENT_PLACEMENT_LABEL: placement},
        namespace=namespace,
    )
    return Fleet(
        clusters=clusters, bindings=list(bindings.items), clusters_cached=cached is not None
    )


def read_clusters(
    client: HubClient, cached_clusters: Callable[[], list[MemberCluster] | None] | None = None
) -> list[MemberCluster]:
    """Every MemberCluster: from the cache when it answers, else listed."""
    cached = cached_clusters() if cached_clusters is not None else None
    return cached if cached is not None else list(client.list(MemberCluster).items)


def run_cycle(
    client: HubClient,
    settings: ActivitySettings,
    request: TurnRequest,
    placement: ClusterResourcePlacement,
    snapshot: ClusterSchedulingPolicySnapshot,
    run: CycleRun,
) -> CycleReport:
    """The cycle on the placement and latest snapshot this activity has just read.

    A capacity-aware cycle that lost a race for room (another placement reserved it between
    this cycle's read of the ledgers and its own reservation, docs/capacity.md) decides again
    from fresh reads, up to NO_ROOM_ATTEMPTS times, before the activity fails as a retryable
    Conflict: in a burst onto a few clusters such races are routine, not failures. Nothing is
    written twice: bindings already created are adopted, reservations already made are kept."""
    for attempt in range(1, NO_ROOM_ATTEMPTS + 1):
        try:
            return _run_cycle(client, settings, request, placement, snapshot, run)
        except NoRoomError as exc:
            if attempt == NO_ROOM_ATTEMPTS:
                raise
            heartbeat(f"cycle {request.cycle}: {exc}; deciding again")
    raise AssertionError("unreachable")  # pragma: no cover


def _run_cycle(
    client: HubClient,
    settings: ActivitySettings,
    request: TurnRequest,
    placement: ClusterResourcePlacement,
    snapshot: ClusterSchedulingPolicySnapshot,
    run: CycleRun,
) -> CycleReport:
    tracer = settings.get_tracer()
    with tracer.start_as_current_span("read") as span:
        span.set_attribute("placement", request.placement)
        if request.namespace:
            span.set_attribute("namespace", request.namespace)
        span.set_attribute("snapshot", snapshot.name)
        run.placement_type = placement_type_of(snapshot)
        run.counted = True
        fleet = read_fleet(client, request.placement, settings.clusters, request.namespace)
        span.set_attribute("clusters_cached", fleet.clusters_cached)
        span.set_attribute("clusters", len(fleet.clusters))
        span.set_attribute("bindings", len(fleet.bindings))
    heartbeat(f"cycle {request.cycle}: read {len(fleet.clusters)} clusters")

    now = settings.now()
    key = placement_key(request.namespace, request.placement)
    requests_text = requests_of(placement)
    capacity: CapacityInput | None = None
    writes_capacity: CapacityWrites | None = None
    ledgers: Ledgers | None = None
    if requests_text is not None:
        with tracer.start_as_current_span("read_capacity") as span:
            try:
                ledgers = Ledgers.read(client)
            except (NotFoundError, UnauthorizedError) as exc:
                # Retrying cannot make the hub serve the kind: the cycle fails with a condition
                # that says so, and the placement waits for an event.
                capacity = CapacityInput(requests=requests_text, problem=ledgers_problem(exc))
            else:
                swept = sweep_own(client, ledgers, key, fleet.bindings, now)
                if swept:
                    ledgers = Ledgers.read(client)  # what the sweep released is free again
                fleet, ledgers = _give_room(
                    client, settings, request, placement, snapshot, fleet, ledgers, run
                )
                capacity = capacity_input(requests_text, ledgers, fleet.bindings, key)
                writes_capacity = capacity_writes(
                    client,
                    key,
                    requests_text,
                    fleet.clusters,
                    fleet.bindings,
                    ledgers,
                    settings.now,
                )
                span.set_attribute("ledgers", len(ledgers.by_cluster))
                span.set_attribute("swept", swept)
    with tracer.start_as_current_span("schedule") as span:
        result = schedule(
            CycleInput(
                snapshot=snapshot,
                clusters=fleet.clusters,
                bindings=fleet.bindings,
                now=now,
                fresh=request.fresh,
                capacity=capacity,
                # Said on the Scheduled condition; a bad requests value fails the cycle itself.
                annotation_problems=annotation_problems(
                    placement.metadata.annotations, skip=(names.REQUESTS_ANNOTATION,)
                ),
            ),
            settings.profile,
            PhaseSpans(tracer),
            shared_for(settings.profile),
        )
        explanation = result.explanation
        span.set_attribute("placement_type", result.outcome.placement_type)
        span.set_attribute("clusters", len(fleet.clusters))
        span.set_attribute("picked", result.outcome.picked)
        span.set_attribute("filtered", sum(len(g.clusters) for g in explanation.filtered))
        span.set_attribute("binding_writes", result.plan.binding_writes)
        if result.error:
            span.set_attribute("error", result.error)
    heartbeat(f"cycle {request.cycle}: scheduled, {result.plan.binding_writes} binding writes")

    with tracer.start_as_current_span("apply") as span:
        apply_binding_plan(client, result.plan, run.tally, heartbeat, writes_capacity)
        span.set_attribute("created", run.tally.created)
        span.set_attribute("patched", run.tally.patched)
        span.set_attribute("unscheduled", run.tally.unscheduled)

    decisions_written = 0
    if settings.decisions is not None and settings.decisions.publish:
        # In step with the bindings this turn leaves (docs/decisions.md).
        with tracer.start_as_current_span("publish_decisions") as span:
            target = target_for(settings.decisions, request.placement, request.namespace)
            decisions_written = publish(client, target, active_after(fleet.bindings, result.plan))
            span.set_attribute("written", decisions_written)

    if writes_capacity is not None and ledgers is not None and not result.error:
        with tracer.start_as_current_span("preempt") as span:
            _preempt(client, settings, key, placement, snapshot, result, ledgers, fleet, run)
            span.set_attribute("nominated", len(run.preempted_for))

    with tracer.start_as_current_span("write_status") as span:
        status_written = False
        write = result.plan.snapshot_status
        if write is not None:
            metadata = snapshot.metadata.model_copy(
                update={"resource_version": write.resource_version}
            )
            snapshot = client.update_status(
                snapshot.model_copy(update={"status": write.status, "metadata": metadata})
            )
            status_written = True
        # Past its scheduling deadline and still not fully scheduled: say so (activities.deadline).
        exceeded = _exceeded(request, result, placement)
        condition_written = False
        if settings.snapshotter:
            written_snapshot = snapshot
            condition_written = write_scheduled_condition(
                client,
                placement,
                lambda p: (
                    placement_scheduled_condition(p, written_snapshot, now)
                    if exceeded is None
                    else deadline_condition(
                        placement_scheduled_condition(p, written_snapshot, now), exceeded
                    )
                ),
            )
        deadline_event = False
        if exceeded is not None and request.deadline is not None:
            deadline_event = record_deadline_event(
                client, placement, request.deadline, exceeded, now
            )
        span.set_attribute("status_written", status_written)
        span.set_attribute("placement_condition_written", condition_written)

    tally = run.tally
    writes = WriteCounts(
        created=tally.created,
        adopted=tally.adopted,
        patched=tally.patched,
        unscheduled=tally.unscheduled,
        finalizers_removed=tally.finalizers_removed,
        status_written=status_written,
        placement_condition_written=condition_written,
        deadline_event=deadline_event,
        decisions_written=decisions_written,
        nominated=len(run.preempted_for),
        preempted=run.preempted,
    )
    return CycleReport(
        cycle=request.cycle,
        placement=request.placement,
        namespace=request.namespace,
        snapshot=snapshot.name,
        outcome=result.outcome,
        writes=writes,
        requeue=result.requeue,
        requeue_after_seconds=_after(result, run),
        error=result.error,
        clusters_seen=len(fleet.clusters),
        clusters_version=view_version(fleet.clusters),
        bindings_seen=len(fleet.bindings),
        duration_ms=run.duration_ms,
        summary=cycle_summary(request.cycle, result, writes),
    ).recording(explanation, request.known_explanation)


def _give_room(
    client: HubClient,
    settings: ActivitySettings,
    request: TurnRequest,
    placement: ClusterResourcePlacement,
    snapshot: ClusterSchedulingPolicySnapshot,
    fleet: Fleet,
    ledgers: Ledgers,
    run: CycleRun,
) -> tuple[Fleet, Ledgers]:
    """Before a capacity-aware cycle decides: give a preemptor the room its nominations ask of
    this placement's bindings (activities.preemption.yield_room), and finish a yield an earlier
    attempt cut short before its release; then the fleet and ledgers as they are now."""
    key = placement_key(request.namespace, request.placement)
    asked = victims_asked(ledgers, key, fleet.bindings)
    unreleased = left_held(ledgers, key, fleet.bindings)
    for cluster, held_keys in unreleased.items():
        release(client, cluster, held_keys)
    if not asked:
        return fleet, (Ledgers.read(client) if unreleased else ledgers)
    with settings.get_tracer().start_as_current_span("yield_room") as span:
        done = yield_room(
            client,
            settings.profile,
            placement,
            snapshot,
            asked,
            fleet.clusters,
            ledgers,
            readable_requests(requests_of(placement)),
            settings.now,
        )
        span.set_attribute("asked", len(asked))
    run.lines += done.lines
    run.preempted += done.unscheduled
    fleet = read_fleet(client, request.placement, settings.clusters, request.namespace)
    return fleet, Ledgers.read(client)


def _preempt(
    client: HubClient,
    settings: ActivitySettings,
    key: str,
    placement: ClusterResourcePlacement,
    snapshot: ClusterSchedulingPolicySnapshot,
    result: CycleResult,
    ledgers: Ledgers,
    fleet: Fleet,
    run: CycleRun,
) -> None:
    """After a capacity-aware cycle's writes: a placement the cycle left short of room asks the
    PostFilter plugins to preempt (activities.preemption); one that is not short any more drops
    the room still nominated for it."""
    shortage = result.explanation.shortage
    nominated = nominations_of(ledgers, key)
    if nominated:
        held_after = active_after(fleet.bindings, result.plan)
        taken = sorted(c for c in nominated if c in held_after)
        if taken:
            log.info(
                "placement %s: took the room preempted for it: %s",
                key,
                said_victims(nominated, taken),
            )
    if shortage is None:
        if nominated:
            drop_nominations(client, key, nominated)
        return
    requests = readable_requests(requests_of(placement))
    if requests is None:
        return
    done = preempt(
        client,
        settings.profile or default_profile(),
        key,
        placement,
        snapshot,
        result.explanation,
        ledgers,
        fleet.bindings,
        fleet.clusters,
        requests,
        settings.now(),
    )
    run.lines += done.lines
    for note in done.notes:
        log.info("placement %s: %s", key, note)
    run.preempted_for += [done.priority_class] * len(done.nominated)
    run.waits_on_victims = done.waiting


def _after(result: CycleResult, run: CycleRun) -> float | None:
    """When the workflow should run the placement again by itself: the cycle's word, or, while
    it waits on victims, once its nominations would be stale (a victim that could not leave:
    its own sweep then drops them and it may preempt again)."""
    after = result.requeue_after_seconds
    if not run.waits_on_victims:
        return after
    stale = NOMINATION_GRACE.total_seconds() + NOMINATION_SLACK_S
    return stale if after is None else min(after, stale)


def readable_requests(text: str | None) -> dict[str, Fraction] | None:
    """The requests annotation's amounts, or None (not capacity-aware, or unreadable)."""
    if text is None:
        return None
    try:
        return dict(parse_requests(text))
    except RequestsError:
        return None


def _exceeded(
    request: TurnRequest, result: CycleResult, placement: ClusterResourcePlacement
) -> str | None:
    """The deadline message when the workflow says the placement is past its deadline, the
    placement still asks for that deadline, and this cycle leaves it not fully scheduled; None
    otherwise. The miss was the workflow's clock when the turn began: the annotation's removal
    (or change) is what signalled this turn, and once it has run no turn comes to clear it."""
    miss = request.deadline
    if miss is None or (result.outcome.fulfilled and not result.requeue):
        return None
    annotation = placement.metadata.annotations.get(names.SCHEDULE_DEADLINE_ANNOTATION)
    # Both as carried: a miss asked by a workflow from before issue 33 holds the raw value.
    if annotation is None or carried_deadline(annotation) != carried_deadline(miss.deadline):
        return None
    deadline = ScheduleDeadline(seconds=miss.seconds)
    return exceeded_message(deadline, miss.misses, missing_line(result.outcome, result.explanation))


def outcome_of(report: CycleReport) -> CycleOutcome:
    """KubeFleet's outcome of a finished cycle (kubefleet-rules 3.2 table)."""
    if report.error:
        return "unexpected"
    return "requeue" if report.requeue else "success"


def _names(names_: list[str]) -> str:
    shown = ",".join(names_[:SUMMARY_NAMES])
    more = len(names_) - SUMMARY_NAMES
    return f"{shown} +{more} more" if more > 0 else shown


def _filtered(explanation: Explanation) -> str:
    """e.g. "; filtered 13: ClusterAffinity 12, TaintToleration 1" (clusters per plugin, most
    first); "" when no cluster was filtered. The reasons are in the workflow's current details
    and in `explain`."""
    by_plugin: dict[str, int] = {}
    for group in main_filter_reasons(explanation):
        by_plugin[group.plugin] = by_plugin.get(group.plugin, 0) + len(group.clusters)
    if not by_plugin:
        return ""
    ranked = sorted(by_plugin.items(), key=lambda item: (-item[1], item[0]))
    shown = ", ".join(f"{plugin} {count}" for plugin, count in ranked[:SUMMARY_PLUGINS])
    more = len(ranked) - SUMMARY_PLUGINS
    return f"; filtered {sum(by_plugin.values())}: {shown}" + (f" +{more} more" if more > 0 else "")


def cycle_summary(cycle: int, result: CycleResult, writes: WriteCounts) -> str:
    """One line for the Temporal UI and logs, e.g. "cycle 7: PickN 3/3, picked a,b,c; 1 created;
    filtered 2: ClusterAffinity 2".

    The only summary of a cycle: it names what was picked, what was actually written (an
    adopted binding is an earlier attempt's create, not a new write) and which plugins filtered
    how many clusters. Reasons read as `explain` prints them (scheduler.explain.readable)."""
    outcome = result.outcome
    wanted = "" if outcome.wanted is None else f"/{outcome.wanted}"
    head = f"cycle {cycle}: {outcome.placement_type} {outcome.picked}{wanted}"
    explanation = result.explanation
    # In `explain`'s order (workers.cli.render.cluster_rows): picked, kept, valid, each by name,
    # so the same picks read the same whether a cycle picked or kept them.
    selected = list(
        dict.fromkeys(
            sorted(c for g in explanation.picked for c in g.clusters)
            + sorted(explanation.kept)
            + sorted(explanation.valid)
        )
    )
    if selected:
        head += f", picked {_names(selected)}"
    if result.error:
        return f"{head}; error: {readable_reason(result.error)}"
    parts = [
        f"{count} {what}"
        for count, what in (
            (writes.created, "created"),
            (writes.adopted, "adopted"),
            (writes.patched, "patched"),
            (writes.unscheduled, "unscheduled"),
            (writes.finalizers_removed, "finalizers removed"),
        )
        if count
    ]
    if writes.status_written:
        parts.append("status written")
    if writes.placement_condition_written:
        parts.append("placement condition written")
    if writes.deadline_event:
        parts.append("deadline Event")
    if writes.decisions_written:
        parts.append(f"{writes.decisions_written} decision slice(s) written")
    if writes.preempted:
        parts.append(f"{writes.preempted} preempted")
    if writes.nominated:
        parts.append(f"preempting on {writes.nominated} cluster(s)")
    if result.requeue:
        parts.append("requeue")
    return f"{head}; " + (", ".join(parts) if parts else "no change") + _filtered(explanation)
