"""Preemption in the turn (docs/priority.md, "Preemption"): kube-scheduler's DefaultPreemption
across clusters, for capacity-aware placements.

Two halves, each in the turn of the placement it changes, so every binding is still written
only by its own placement's turns (serialised by its workflow), as rebalance moves are:

- **The preemptor's turn** (`preempt`), when its cycle leaves it short of room: it reads what
  the PostFilter plugins need (PriorityClasses, the placements and bindings holding room on the
  clusters that pass every filter but room, their disruption budgets), asks them for a plan,
  and *nominates* each chosen cluster: one compare-and-swap on the cluster's CapacityLedger
  adds a `Nomination` for the preemptor naming its victims, checked again on the ledger as it
  is now. The nomination counts against every other placement's room (scheduler.room.capacity
  `held`), so the room the victims give up is the preemptor's; the preemptor's own binding
  there replaces it in one write (activities.capacity `reserve`). A placement that holds a
  nomination never plans again until it is gone: a retried turn finishes the preemption it
  started, and never chooses twice.
- **Each victim's turn** (`yield_room`): the watcher sees the nomination and wakes the victims'
  placements. A victim's binding that has room elsewhere moves there, through the moves engine
  (activities.moves, within its budget); what cannot move is unscheduled, if its budget allows,
  with an Event on its placement, and its room released. Its placement is then short, and its
  Scheduled condition says who took its room.

Nominations go when their preemptor no longer needs them (a turn that leaves it fully
scheduled drops them), when it is deleted (its cleanup), and after NOMINATION_GRACE (the
sweeps), so a victim that could not leave does not hold the room for ever."""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from fractions import Fraction
from typing import Final

from activities.bindings import apply_patch
from activities.capacity import (
    Ledgers,
    binding_key,
    drop_nominations,
    is_active,
    nominate,
    release,
    requests_of,
)
from activities.deadline import warning_event
from activities.moves import MoveCause, apply_moves, budget_of, feasible_clusters
from hub import names
from hub.client import HubClient
from hub.errors import AlreadyExistsError, ConflictError, NotFoundError, UnauthorizedError
from hub.kinds import kinds_for, placement_key, placement_label, split_key
from hub.types import (
    ClusterResourceBinding,
    ClusterResourcePlacement,
    ClusterResourcePlacementDisruptionBudget,
    ClusterSchedulingPolicySnapshot,
    MemberCluster,
    NominatedVictim,
    Nomination,
    ObjectMeta,
    PriorityClass,
)
from scheduler import Explanation, Profile
from scheduler.bindings.writes import mark_unscheduled
from scheduler.explain.readable import first_few
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.profile import CLUSTER_RESOURCES_FIT, default_profile
from scheduler.framework.queue_sort import (
    PriorityClasses,
    QueueItem,
    QueuePriority,
    QueueSortPlugin,
    TurnCause,
)
from scheduler.moves.budgets import available, budget_state
from scheduler.plugins.priority_sort import PrioritySort
from scheduler.preemption import (
    NEVER,
    PREEMPT_LOWER_PRIORITY,
    Candidates,
    PreemptionPlan,
    Preemptor,
    Room,
    budget_left,
    rooms_from_ledgers,
)
from scheduler.preemption.marks import PreemptedBy
from scheduler.preemption.victims import NEVER_REASON
from scheduler.room.capacity import ClusterCapacity, format_amount, held, shortfalls
from scheduler.room.quantity import QuantityError, parse_quantity
from workflows.models import MoveRequest

__all__ = [
    "PREEMPTED",
    "PREEMPTED_BY_ANNOTATION",
    "Preemption",
    "Yielded",
    "drop_nominations",
    "left_held",
    "nominations_of",
    "plan_for",
    "preempt",
    "preemptor_label",
    "said_victims",
    "victims_asked",
    "yield_room",
]

# On a victim's binding unscheduled for a preemptor: who, and both priorities, for `check`.
PREEMPTED_BY_ANNOTATION: Final = names.PREEMPTED_BY_ANNOTATION
PREEMPTED_REASON: Final = "Preempted"
# Victims a turn's line names per cluster before it counts the rest: lines go into the history.
VICTIMS_NAMED: Final = 3
PREEMPTED = MoveCause(said="moved for preemption", capacity_only=False, revives=True)


@dataclass
class Preemption:
    """What one turn's preemption did, for the report, the metric and the history."""

    plan: PreemptionPlan | None = None
    nominated: list[str] = field(default_factory=list)
    """Clusters nominated for the preemptor this turn."""
    priority_class: str = ""
    lines: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    """Said in the worker's log only: what a turn that changes nothing of the preemption sees
    (its lines would replace, in `explain`, those of the turn that chose the victims)."""
    under_way: bool = False
    """A nomination of the placement's is still held: it waits for its victims."""

    @property
    def waiting(self) -> bool:
        """The placement waits on victims: its workflow should look again once the
        nominations it holds would be stale (a victim that could not leave)."""
        return self.under_way or bool(self.nominated)


def preemptor_label(key: str) -> str:
    """`crp/checkout`, or `rp/shop/web` for a ResourcePlacement: how victims name it."""
    return placement_label(key)


def nominations_of(ledgers: Ledgers, placement: str) -> dict[str, Nomination]:
    """Cluster -> the nomination held there for `placement`."""
    return {
        cluster: nomination
        for cluster, ledger in ledgers.by_cluster.items()
        if (nomination := ledger.spec.nominations.get(placement)) is not None
    }


# --- the preemptor's side ---------------------------------------------------------------------


def preempt(
    client: HubClient,
    profile: Profile,
    key: str,
    placement: ClusterResourcePlacement,
    snapshot: ClusterSchedulingPolicySnapshot,
    explanation: Explanation,
    ledgers: Ledgers,
    own: Sequence[ClusterResourceBinding],
    clusters: Sequence[MemberCluster],
    requests: Mapping[str, Fraction],
    now: datetime,
) -> Preemption:
    """Plan and nominate, when the cycle left the placement short of room (see the module doc);
    nothing when it did not, when preemption is off, or when a preemption of it is under way."""
    under_way = nominations_of(ledgers, key)
    changed = [c for c, n in under_way.items() if _amounts(n.requests) != dict(requests)]
    if changed:
        # Its demand changed since it preempted: what it nominated no longer fits what it asks,
        # and a change of demand may preempt again.
        drop_nominations(client, key, changed)
        under_way = {c: n for c, n in under_way.items() if c not in changed}
    if under_way and explanation.shortage is not None:
        # The turn that nominated said so in its lines, naming the victims; a turn that waits
        # for them only logs it, so those lines stay the workflow's last moves (`explain`).
        return Preemption(
            notes=[f"preemption under way: {said_victims(under_way, sorted(under_way))}"],
            under_way=True,
        )
    done = plan_for(
        client,
        profile,
        key,
        placement,
        snapshot,
        explanation,
        ledgers,
        own,
        clusters,
        requests,
        now,
    )
    answer = done.plan
    if answer is None or not answer.clusters:
        return done
    by_name = {c.metadata.name: c for c in clusters}
    for chosen in answer.clusters:
        nomination = Nomination(
            priority=answer.priority,
            requests={r: format_amount(a) for r, a in requests.items()},
            victims=[
                NominatedVictim(binding=v.binding, placement=v.placement, priority=v.priority)
                for v in chosen.victims
            ],
            nominated_at=now,
        )
        member = by_name[chosen.cluster]
        made = nominate(
            client, chosen.cluster, key, nomination, member.status.resource_usage.allocatable
        )
        victims = first_few([v.binding for v in chosen.victims], VICTIMS_NAMED)
        if made:
            done.nominated.append(chosen.cluster)
            done.lines.append(
                f"preempting on {chosen.cluster}: {len(chosen.victims)} victim(s) ({victims}) "
                f"free {chosen.freed}"
            )
        else:
            done.lines.append(
                f"left {chosen.cluster}: its room changed since the victims ({victims}) were chosen"
            )
    return done


def said_victims(nominated: Mapping[str, Nomination], clusters: Sequence[str]) -> str:
    """e.g. "member-1 (victims low-0-member-1-x), member-3 (victims low-4-member-3-y)"."""
    return ", ".join(
        f"{c} (victims {first_few([v.binding for v in nominated[c].victims], VICTIMS_NAMED)})"
        for c in clusters
    )


def plan_for(
    client: HubClient,
    profile: Profile,
    key: str,
    placement: ClusterResourcePlacement,
    snapshot: ClusterSchedulingPolicySnapshot,
    explanation: Explanation,
    ledgers: Ledgers,
    own: Sequence[ClusterResourceBinding],
    clusters: Sequence[MemberCluster],
    requests: Mapping[str, Fraction],
    now: datetime,
) -> Preemption:
    """What the PostFilter plugins would preempt for the placement, the cycle having left it
    short of room as `explanation` says; reads the hub, writes nothing (`plan -f` shows it).
    `plan` None: nothing to ask them (not short of room, preemption off, nothing there of
    another placement's to take)."""
    shortage = explanation.shortage
    if not profile.post_filter or shortage is None or shortage.unplaced <= 0:
        return Preemption()
    candidates = sorted(
        {c for g in explanation.filtered if g.plugin == CLUSTER_RESOURCES_FIT for c in g.clusters}
    )
    occupied = {
        r.placement
        for c in candidates
        if (ledger := ledgers.by_cluster.get(c)) is not None
        for r in ledger.spec.reservations.values()
    } - {key}
    if not occupied:
        return Preemption()
    classes = _priority_classes(client)
    sorter = profile.queue_sorter
    mine = classes.priority(sorter, placement)
    if isinstance(sorter, PrioritySort) and mine.value <= classes.floor():
        # No placement can have a lower priority than this one: nothing to read or ask.
        return Preemption(priority_class=mine.priority_class or "")
    policy = classes.policies.get(mine.priority_class or "", PREEMPT_LOWER_PRIORITY)
    preemptor = Preemptor(
        placement=key,
        priority=mine.value,
        requests=dict(requests),
        short=shortage.unplaced,
        policy=policy or PREEMPT_LOWER_PRIORITY,
    )
    done = Preemption(priority_class=mine.priority_class or "")
    if preemptor.policy == NEVER:
        done.plan = PreemptionPlan(
            placement=key, priority=mine.value, still_short=shortage.unplaced, reason=NEVER_REASON
        )
        done.lines.append(f"no preemption: {NEVER_REASON}")
        return done

    reads = _Reads.of(client, occupied)
    priorities = {k: classes.priority(sorter, p).value for k, p in reads.placements.items()}
    by_name = {c.metadata.name: c for c in clusters}
    own_keys = {binding_key(b) for b in own if is_active(b)}
    rooms = rooms_from_ledgers(
        [(c, by_name[c].status.resource_usage.allocatable) for c in candidates if c in by_name],
        ledgers.by_cluster,
        reads.active,
        priorities,
        own=own_keys,
        nominee=key,
    )
    budgets = reads.budgets_left(rooms)
    candidates_given = Candidates(preemptor, tuple(rooms), budgets)
    answer = _post_filter(profile, clusters, now, snapshot, candidates_given)
    if isinstance(answer, str):
        done.lines.append(f"no preemption: {answer}")
        return done
    done.plan = answer
    if not answer.clusters:
        done.lines.append("no preemption: " + _rejections(answer))
    return done


# --- the victims' side ------------------------------------------------------------------------


@dataclass(frozen=True)
class Asked:
    """One of the placement's active bindings a nomination names as a victim."""

    binding: ClusterResourceBinding
    cluster: str
    preemptor: str
    nomination: Nomination

    @property
    def victim_priority(self) -> int:
        key = binding_key(self.binding)
        return next(v.priority for v in self.nomination.victims if v.binding == key)

    def mark(self) -> PreemptedBy:
        return PreemptedBy(
            preemptor=preemptor_label(self.preemptor),
            priority=self.nomination.priority,
            cluster=self.cluster,
            victim_priority=self.victim_priority,
        )

    def who(self) -> str:
        """e.g. "crp/checkout (priority 100000) on member-3"."""
        return self.mark().who()

    def reason(self) -> str:
        return f"preempted by {self.who()}"


def victims_asked(
    ledgers: Ledgers, placement: str, bindings: Iterable[ClusterResourceBinding]
) -> list[Asked]:
    """The placement's active bindings that a nomination on their cluster names as victims."""
    active = {binding_key(b): b for b in bindings if is_active(b)}
    asked = []
    for cluster, ledger in sorted(ledgers.by_cluster.items()):
        for preemptor, nomination in sorted(ledger.spec.nominations.items()):
            for victim in nomination.victims:
                binding = active.get(victim.binding)
                if (
                    binding is not None
                    and victim.placement == placement
                    and binding.spec.target_cluster == cluster
                    and preemptor != placement
                ):
                    asked.append(Asked(binding, cluster, preemptor, nomination))
    return asked


def left_held(
    ledgers: Ledgers, placement: str, bindings: Iterable[ClusterResourceBinding]
) -> dict[str, list[str]]:
    """Cluster -> keys of the placement's bindings a nomination there names that no longer
    consume room (unscheduled, being deleted, gone) but whose reservation is still held: a
    yield cut short between the binding's write and its release (a retried turn finishes it,
    rather than leave the preemptor waiting for the sweeps)."""
    active = {binding_key(b) for b in bindings if is_active(b)}
    out: dict[str, list[str]] = {}
    for cluster, ledger in sorted(ledgers.by_cluster.items()):
        for preemptor, nomination in sorted(ledger.spec.nominations.items()):
            for victim in nomination.victims:
                held_there = ledger.spec.reservations.get(victim.binding)
                if (
                    victim.placement == placement
                    and preemptor != placement
                    and victim.binding not in active
                    and held_there is not None
                    and held_there.placement == placement
                ):
                    out.setdefault(cluster, []).append(victim.binding)
    return out


@dataclass
class Yielded:
    """What a victim's turn gave up: a line for each asked binding, and how many it unscheduled."""

    lines: list[str] = field(default_factory=list)
    unscheduled: int = 0


def yield_room(
    client: HubClient,
    profile: Profile | None,
    placement: ClusterResourcePlacement,
    snapshot: ClusterSchedulingPolicySnapshot,
    asked: Sequence[Asked],
    clusters: list[MemberCluster],
    ledgers: Ledgers,
    requests: Mapping[str, Fraction] | None,
    now: Callable[[], datetime],
) -> Yielded:
    """Give the room the nominations ask for: move each asked binding where the placement's
    filters and room allow (the moves engine, within its budget), unschedule the rest (within
    its budget) and release their room; one line each."""
    asked, lines = _still_owed(client, profile, placement, asked)
    done = Yielded(lines)
    if not asked:
        return done
    kinds = kinds_for(placement.metadata.namespace)
    bindings = _bindings_of(client, placement)
    moves = _moves(profile, snapshot, asked, clusters, bindings, ledgers, requests, now())
    moved_to: dict[str, str] = {}
    if moves:
        outcome = apply_moves(
            client, placement, snapshot, moves, clusters, profile, now, cause=PREEMPTED
        )
        lines += outcome.lines
        moved_to = outcome.moved_to
        bindings = _bindings_of(client, placement)
    by_name = {b.metadata.name: b for b in bindings}
    budget = budget_of(client, placement, bindings)
    for item in asked:
        current = by_name.get(item.binding.metadata.name)
        if current is None or not is_active(current) or current.spec.target_cluster != item.cluster:
            moved = moved_to.get(item.binding.metadata.name)
            if moved is not None:
                _event(client, placement, item.binding, item, now(), f"moved to {moved}, ")
            continue  # moved above, or gone
        if not budget.allows_one():
            lines.append(
                f"kept {current.metadata.name} on {item.cluster} ({item.reason()}): the "
                f"disruption budget allows no disruption now"
            )
            continue
        _unschedule(client, current, item, kinds.binding)
        budget = budget.after_unschedule(available(current))
        release(client, item.cluster, [binding_key(current)])
        _event(client, placement, current, item, now())
        lines.append(f"unscheduled {current.metadata.name}: {item.reason()}")
        done.unscheduled += 1
    return done


def _still_owed(
    client: HubClient,
    profile: Profile | None,
    placement: ClusterResourcePlacement,
    asked: Sequence[Asked],
) -> tuple[list[Asked], list[str]]:
    """The asked bindings whose preemptor, read now, still wants the room and outranks the
    placement: not gone nor being deleted (its cleanup has not dropped its nominations yet), still
    capacity-aware, and of a strictly higher priority than this placement's as it is now (either
    may have been reclassed since the victims were chosen, or the ledger edited by hand). A line
    for each binding kept."""
    if not asked:
        return [], []
    classes = _priority_classes(client)
    sorter = (profile or default_profile()).queue_sorter

    def priority(of: ClusterResourcePlacement) -> int:
        return classes.priority(sorter, of).value

    mine = priority(placement)
    why_not: dict[str, str | None] = {}
    for preemptor in sorted({item.preemptor for item in asked}):
        namespace, name = split_key(preemptor)
        try:
            current = client.get(kinds_for(namespace).placement, name, namespace=namespace)
        except NotFoundError:
            why_not[preemptor] = "it is gone"
            continue
        except UnauthorizedError:
            why_not[preemptor] = None  # what the preemptor's turn could read, it judged
            continue
        theirs = priority(current)
        if current.metadata.deleting:
            why_not[preemptor] = "it is being deleted"
        elif requests_of(current) is None:
            why_not[preemptor] = f"it no longer declares {names.REQUESTS_ANNOTATION}"
        elif theirs <= mine:
            why_not[preemptor] = f"its priority {theirs} is not above this placement's {mine}"
        else:
            why_not[preemptor] = None
    owed, lines = [], []
    for item in asked:
        why = why_not[item.preemptor]
        if why is None:
            owed.append(item)
        else:
            lines.append(
                f"kept {item.binding.metadata.name} on {item.cluster}, nominated for "
                f"{preemptor_label(item.preemptor)}: {why}"
            )
    return owed, lines


def _moves(
    profile: Profile | None,
    snapshot: ClusterSchedulingPolicySnapshot,
    asked: Sequence[Asked],
    clusters: list[MemberCluster],
    bindings: list[ClusterResourceBinding],
    ledgers: Ledgers,
    requests: Mapping[str, Fraction] | None,
    now: datetime,
) -> list[MoveRequest]:
    """A move for each asked binding that has room elsewhere: to the cluster the placement's
    filters pass, that it holds nothing on, with the most room left (spreading, as the default
    score does), the name breaking ties. Bindings whose requests cannot be read are not moved."""
    if requests is None:
        return []
    feasible = feasible_clusters(snapshot, clusters, bindings, profile, now)
    held_on = {b.spec.target_cluster for b in bindings if not b.metadata.deleting}
    by_name = {c.metadata.name: c for c in clusters}
    planned: dict[str, dict[str, Fraction]] = {}
    moves = []
    for item in asked:
        best: tuple[Fraction, str] | None = None
        for name in sorted(feasible - held_on - set(planned) - {item.cluster}):
            member = by_name.get(name)
            if member is None:
                continue
            ledger = ledgers.by_cluster.get(name)
            taken = held(ledger) if ledger is not None else {}
            capacity = ClusterCapacity.of(member.status.resource_usage.allocatable, taken)
            if shortfalls(requests, capacity):
                continue
            share = min(
                (
                    (free - requests[r]) / capacity.allocatable[r]
                    for r in requests
                    if requests[r] > 0
                    and (free := capacity.free(r)) is not None
                    and capacity.allocatable.get(r)
                ),
                default=Fraction(0),
            )
            if best is None or share > best[0]:
                best = (share, name)
        if best is None:
            continue
        planned[best[1]] = dict(requests)
        moves.append(
            MoveRequest(
                binding=item.binding.metadata.name,
                source=item.cluster,
                target=best[1],
                reason=item.reason(),
            )
        )
    return moves


def _unschedule(
    client: HubClient,
    binding: ClusterResourceBinding,
    item: Asked,
    kind: type[ClusterResourceBinding],
) -> None:
    """Mark the victim Unscheduled, saying who took its room (both priorities, for `check`);
    a conflict (the rollout controller wrote its status) is read again, a few times."""
    mark = item.mark().text()
    for attempt in range(3):
        patch = mark_unscheduled(binding, item.reason())
        metadata = patch.merge_patch.setdefault("metadata", {})
        assert isinstance(metadata, dict)
        annotations = metadata.setdefault("annotations", {})
        assert isinstance(annotations, dict)
        annotations[PREEMPTED_BY_ANNOTATION] = mark
        try:
            apply_patch(client, patch)
            return
        except ConflictError:
            if attempt == 2:
                raise
            binding = client.get(kind, binding.metadata.name, namespace=binding.metadata.namespace)
            if not is_active(binding):
                return


def _event(
    client: HubClient,
    placement: ClusterResourcePlacement,
    binding: ClusterResourceBinding,
    item: Asked,
    now: datetime,
    how: str = "",
) -> None:
    """A Warning Event on the victim's placement, once per binding preempted (a retried turn
    finds it there); `how` it left, when it moved (e.g. "moved to member-4, ")."""
    namespace = placement.metadata.namespace or "default"
    digest = hashlib.sha256(f"{binding.metadata.uid}/{item.preemptor}".encode()).hexdigest()[:10]
    stamp = now.replace(microsecond=0)
    name = f"{placement.name}.preempted.{digest}"
    event = warning_event(
        placement,
        ObjectMeta(name=name, namespace=namespace),
        PREEMPTED_REASON,
        f"binding {binding.metadata.name} {how}{item.reason()}",
        stamp,
    )
    # There already (a retried turn), or a hub that takes no Events: the binding says it too.
    with contextlib.suppress(AlreadyExistsError, NotFoundError, UnauthorizedError):
        client.create(event)


def _bindings_of(
    client: HubClient, placement: ClusterResourcePlacement
) -> list[ClusterResourceBinding]:
    namespace = placement.metadata.namespace
    return list(
        client.list(
            kinds_for(namespace).binding,
            {names.PARENT_PLACEMENT_LABEL: placement.name},
            namespace=namespace,
        ).items
    )


# --- reads ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Classes:
    known: PriorityClasses
    policies: Mapping[str, str | None]

    def priority(
        self, sorter: QueueSortPlugin, placement: ClusterResourcePlacement
    ) -> QueuePriority:
        """The placement's priority as the profile's QueueSort plugin gives it (what orders its
        turns is what preemption compares)."""
        return sorter.queue_sort(QueueItem(placement.metadata, TurnCause.PLACEMENT, self.known))

    def floor(self) -> int:
        """The lowest priority PrioritySort gives any placement: the lowest class, or the
        default's (the global default class, else 0) for placements naming none or one that
        does not exist."""
        known = self.known
        default = known.values.get(known.global_default or "", 0)
        return min([default, *known.values.values()])


def _priority_classes(client: HubClient) -> _Classes:
    try:
        items = list(client.list(PriorityClass).items)
    except (NotFoundError, UnauthorizedError):
        items = []
    return _Classes(
        PriorityClasses.of(items), {pc.metadata.name: pc.preemption_policy for pc in items}
    )


@dataclass(frozen=True)
class _Reads:
    """The placements holding room on the candidate clusters, every active binding's key, and
    the budgets, read once for the plan."""

    placements: Mapping[str, ClusterResourcePlacement]
    active: frozenset[str]
    bindings_of: Mapping[str, list[ClusterResourceBinding]]
    budgets: Mapping[str, ClusterResourcePlacementDisruptionBudget]

    @classmethod
    def of(cls, client: HubClient, occupied: set[str]) -> _Reads:
        namespaces = sorted({ns for k in occupied if (ns := split_key(k)[0]) is not None})
        placements: dict[str, ClusterResourcePlacement] = {}
        bindings: list[ClusterResourceBinding] = []
        if any(split_key(k)[0] is None for k in occupied):
            kinds = kinds_for(None)
            placements |= {p.metadata.name: p for p in client.list(kinds.placement).items}
            bindings += client.list(kinds.binding).items
        for namespace in namespaces:
            kinds = kinds_for(namespace)
            try:
                items = client.list(kinds.placement, namespace=namespace).items
                bindings += client.list(kinds.binding, namespace=namespace).items
            except (NotFoundError, UnauthorizedError):
                continue  # their bindings stay where they are: never victims
            placements |= {placement_key(namespace, p.metadata.name): p for p in items}
        placements = {k: p for k, p in placements.items() if k in occupied}
        by_placement: dict[str, list[ClusterResourceBinding]] = {}
        for binding in bindings:
            owner = placement_key(
                binding.metadata.namespace or None,
                binding.metadata.labels.get(names.PARENT_PLACEMENT_LABEL, ""),
            )
            by_placement.setdefault(owner, []).append(binding)
        try:
            budgets = {
                b.metadata.name: b
                for b in client.list(ClusterResourcePlacementDisruptionBudget).items
            }
        except (NotFoundError, UnauthorizedError):
            budgets = {}
        return cls(
            placements=placements,
            active=frozenset(binding_key(b) for b in bindings if is_active(b)),
            bindings_of=by_placement,
            budgets=budgets,
        )

    def budgets_left(self, rooms: Iterable[Room]) -> dict[str, int | None]:
        """Placement -> disruptions its budget allows one after another (None: no budget)."""
        limits: dict[str, int] = {}
        for room in rooms:
            for occupant in room.occupants:
                limits[occupant.placement] = limits.get(occupant.placement, 0) + 1
        out: dict[str, int | None] = {}
        for key, limit in limits.items():
            placement = self.placements.get(key)
            if placement is None:
                continue
            namespace, _ = split_key(key)
            budget = None if namespace else self.budgets.get(placement.metadata.name)
            state = budget_state(budget, placement, self.bindings_of.get(key, []))
            out[key] = budget_left(state, limit)
        return out


def _post_filter(
    profile: Profile,
    clusters: Sequence[MemberCluster],
    now: datetime,
    snapshot: ClusterSchedulingPolicySnapshot,
    candidates: Candidates,
) -> PreemptionPlan | str:
    """The profile's PostFilter plugins in order, until one answers with a plan; else why
    none did (a plugin that fails says so, and nothing is preempted)."""
    state = CycleState(clusters=clusters, now=now)
    reasons = []
    last: PreemptionPlan | None = None
    for plugin in profile.post_filter:
        try:
            plan, status = plugin.post_filter(state, snapshot, candidates)
        except Exception as exc:  # a plugin's failure is reported, never a crashed turn
            return f"plugin {plugin.name} failed: {type(exc).__name__}: {exc}"
        if plan is not None:
            last = plan
        if status.is_success and plan is not None and plan.clusters:
            return plan
        reasons.append(f"{plugin.name}: {'; '.join(status.reasons) or status.code.value}")
    if last is not None:
        return last
    return "; ".join(reasons) or "no PostFilter plugin answered"


def _rejections(plan: PreemptionPlan, shown: int = 3) -> str:
    if plan.reason:
        return plan.reason
    if not plan.rejected:
        return "no cluster can be freed"
    listed = "; ".join(f"{r.cluster}: {r.reason}" for r in plan.rejected[:shown])
    more = f"; and {len(plan.rejected) - shown} more" if len(plan.rejected) > shown else ""
    return listed + more


def _amounts(requests: Mapping[str, str]) -> dict[str, Fraction]:
    try:
        return {r: a for r, q in requests.items() if (a := parse_quantity(q))}
    except QuantityError:
        return {}
