"""The reconcile's decisions, from what it read: start, finish, requeue, or leave alone."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hub import names
from hub.types import (
    ClusterResourcePlacement,
    ClusterSchedulingPolicySnapshot,
    MemberCluster,
    ResourcePlacement,
)
from scheduler import default_profile
from scheduler.requeue.reconcile import GONE_REASON, START_REASON, plan_reconcile
from scheduler.testing import binding, member_cluster, policy_snapshot
from tests.support.policies import prod_only

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def placement(name: str, generation: int = 1, policy: str = "PickAll") -> ClusterResourcePlacement:
    return ClusterResourcePlacement.from_wire(
        {
            "metadata": {
                "name": name,
                "generation": generation,
                "finalizers": [names.SCHEDULER_CLEANUP_FINALIZER],
            },
            "spec": {
                "resourceSelectors": [{"group": "", "version": "v1", "kind": "Namespace"}],
                "policy": {"placementType": policy},
            },
        }
    )


def scheduled(
    name: str, crp_generation: int = 1, namespace: str | None = None
) -> ClusterSchedulingPolicySnapshot:
    """The latest snapshot, reported on by the scheduler for its own and the placement's
    generation."""
    snapshot = policy_snapshot(
        name, {"placementType": "PickAll"}, crp_generation=crp_generation, namespace=namespace
    )
    status = {
        "observedCRPGeneration": crp_generation,
        "conditions": [
            {
                "type": names.SCHEDULED_CONDITION,
                "status": names.TRUE,
                "reason": "SchedulingPolicyFulfilled",
                "message": "",
                "observedGeneration": snapshot.metadata.generation,
                "lastTransitionTime": NOW.isoformat(),
            }
        ],
    }
    return type(snapshot).model_validate(
        {**snapshot.model_dump(mode="json", by_alias=True), "status": status}
    )


def clusters(*labels: str) -> list[MemberCluster]:
    return [member_cluster(f"c{i}", NOW, labels={"env": env}) for i, env in enumerate(labels)]


def plan(now: datetime = NOW, **overrides: object):  # type: ignore[no-untyped-def]
    read: dict[str, object] = {
        "placements": [placement("a"), placement("b")],
        "latest_snapshots": [scheduled("a"), scheduled("b")],
        "clusters": clusters("prod", "dev"),
        "bindings": [binding("a", "c0", "a-0"), binding("b", "c1", "b-0")],
        "running": {"a", "b"},
        "previous_clusters": None,
    }
    read.update(overrides)
    return plan_reconcile(**read, standalone=True, now=now)  # type: ignore[arg-type]


def test_nothing_changed_means_nothing_to_do_and_the_next_run_sees_the_same_fleet() -> None:
    first = plan()
    again = plan(previous_clusters=first.clusters)
    assert (again.start, again.finish, again.requeue) == ({}, {}, {})
    assert set(first.clusters) == {"c0", "c1"} and again.clusters == first.clusters


def test_a_placement_without_a_workflow_is_started_and_an_orphan_finished() -> None:
    result = plan(running={"a", "gone"})
    assert result.start == {"b": START_REASON}
    assert result.finish == {"gone": GONE_REASON}
    assert result.requeue == {}


def test_a_placement_whose_scheduling_lags_its_generation_is_requeued() -> None:
    result = plan(placements=[placement("a", generation=2), placement("b")])
    assert list(result.requeue) == ["a"]
    assert "not scheduled for its generation" in result.requeue["a"]


def test_a_relabelled_or_deleted_cluster_reaches_the_placements_kubefleet_would_requeue() -> None:
    before = plan().clusters
    relabelled = plan(clusters=clusters("staging", "dev"), previous_clusters=before)
    assert set(relabelled.requeue) == {"a", "b"}  # PickAll: every cluster change matters
    assert "cluster c0 changed" in relabelled.requeue["a"]
    gone = plan(clusters=clusters("prod"), previous_clusters=before)
    assert "binding b-c1-0 targets a cluster that is gone" in gone.requeue["b"]
    assert "cluster c1 left the fleet" in gone.requeue["a"]


def selecting(name: str, key: str) -> ClusterResourcePlacement:
    """A PickAll placement whose required affinity reads the label `key`."""
    wire = placement(name).to_wire()
    wire["spec"]["policy"]["affinity"] = {
        "clusterAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "clusterSelectorTerms": [
                    {"labelSelector": {"matchExpressions": [{"key": key, "operator": "Exists"}]}}
                ]
            }
        }
    }
    return ClusterResourcePlacement.from_wire(wire)


def test_with_a_profile_a_cluster_change_reaches_only_placements_it_may_change() -> None:
    """The records say which parts changed: a label only `a` reads reaches `a` (and `b`, which
    reads nothing, is left alone); a label nobody reads reaches nobody; a taint reaches both
    (every placement's tolerations are read)."""
    profile = default_profile()
    read = {"placements": [selecting("a", "env"), placement("b")], "profile": profile}
    base = [member_cluster("c0", NOW, labels={"env": "prod"}), clusters("x", "dev")[1]]
    before = plan(**read, clusters=base).clusters

    def changed_to(cluster: MemberCluster) -> dict[str, str]:
        return dict(plan(**read, clusters=[cluster, base[1]], previous_clusters=before).requeue)

    assert set(changed_to(member_cluster("c0", NOW, labels={"env": "staging"}))) == {"a"}
    unread = member_cluster("c0", NOW, labels={"env": "prod", "owner": "team-x"})
    assert changed_to(unread) == {}
    tainted = member_cluster("c0", NOW, labels={"env": "prod"}, taints=[("gpu", "true")])
    assert set(changed_to(tainted)) == {"a", "b"}
    # A digest a reconcile from before records left: what changed is unknown, KubeFleet's rule.
    older = {name: "0123456789abcdef" for name in before}
    assert set(plan(**read, clusters=base, previous_clusters=older).requeue) == {"a", "b"}


def test_a_binding_being_deleted_requeues_its_placement() -> None:
    deleting = binding("a", "c0", "a-0", deleting=NOW)
    result = plan(bindings=[deleting, binding("b", "c1", "b-0")])
    assert list(result.requeue) == ["a"]


def in_namespace(obj: ClusterResourcePlacement, namespace: str) -> ResourcePlacement:
    """`obj` as the ResourcePlacement of that name in `namespace`."""
    wire = obj.to_wire()
    wire["kind"] = ResourcePlacement.KIND
    wire["metadata"]["namespace"] = namespace
    return ResourcePlacement.from_wire(wire)


def test_resource_placements_are_reconciled_by_namespace_and_name() -> None:
    # "a" exists three times: a ClusterResourcePlacement and a ResourcePlacement in each of two
    # namespaces, each with its own snapshot, bindings and workflow.
    team_a = in_namespace(placement("a", generation=2), "team-a")  # scheduled for generation 1
    team_b = in_namespace(placement("a"), "team-b")
    snapshots = [
        scheduled("a"),
        scheduled("a", namespace="team-a"),
        scheduled("a", namespace="team-b"),
    ]
    gone = binding("a", "c9", "a-0", namespace="team-b")  # targets a cluster that is not there
    result = plan(
        placements=[placement("a"), team_a, team_b],
        latest_snapshots=snapshots,
        bindings=[binding("a", "c0", "a-0"), gone],
        running={"a", "team-a/a", "team-b/a", "team-c/old"},
    )
    assert result.start == {}
    assert result.finish == {"team-c/old": GONE_REASON}
    assert set(result.requeue) == {"team-a/a", "team-b/a"}
    assert "not scheduled for its generation" in result.requeue["team-a/a"]
    assert "targets a cluster that is gone" in result.requeue["team-b/a"]
    assert "a" not in result.requeue  # the CRP of the same name is fine
    started = plan(placements=[placement("a"), team_b], running={"a"}, latest_snapshots=[])
    assert started.start == {"team-b/a": START_REASON}


def test_with_resource_placements_off_their_running_workflows_are_left_alone() -> None:
    # Not read is not gone: finishing them would only make each run a cycle on a live RP.
    result = plan_reconcile(
        [placement("a")],
        [scheduled("a")],
        clusters("prod"),
        [],
        {"a", "team-a/web", "gone"},
        None,
        standalone=True,
        now=NOW,
        resource_placements=False,
    )
    assert result.finish == {"gone": GONE_REASON}


def annotated(name: str, **annotations: str) -> ClusterResourcePlacement:
    crp = placement(name)
    meta = crp.metadata.model_copy(update={"annotations": annotations})
    return crp.model_copy(update={"metadata": meta})


def test_a_decision_annotation_changed_while_no_event_came_is_requeued() -> None:
    """The reconcile sees what the watcher routes as a turn: a change to our requests,
    rebalance, affinity-enforcement or deadline annotations since its previous run."""
    first = plan(
        placements=[annotated("a", **{names.REQUESTS_ANNOTATION: "cpu=1"}), placement("b")]
    )
    assert set(first.annotations) == {"a"}  # only placements that have any
    again = plan(
        placements=[annotated("a", **{names.REQUESTS_ANNOTATION: "cpu=2"}), placement("b")],
        previous_annotations=first.annotations,
    )
    assert list(again.requeue) == ["a"]
    assert "decision annotations changed" in again.requeue["a"]
    dropped = plan(previous_annotations=first.annotations)
    assert list(dropped.requeue) == ["a"]
    added = plan(
        placements=[placement("a"), annotated("b", **{names.REBALANCE_ANNOTATION: "allowed"})],
        previous_annotations={},
    )
    assert list(added.requeue) == ["b"]
    priority_only = plan(
        placements=[placement("a"), annotated("b", **{names.PRIORITY_CLASS_ANNOTATION: "high"})],
        previous_annotations={},
    )
    assert priority_only.requeue == {}


def test_invariants_a_turn_repairs_requeue_their_placement() -> None:
    from scheduler.invariants import OVERCOMMIT, RESERVATION, STRANDED_SHORTAGE, Violation

    found = [
        Violation(RESERVATION, "binding a-c0 of placement a on cluster c0 has no reservation", "a"),
        Violation(STRANDED_SHORTAGE, "placement b says it is short of cpu=1, ...", "b"),
        Violation(OVERCOMMIT, "cluster c0: ...", cluster="c0"),
        Violation(RESERVATION, "binding x of placement gone ...", "gone"),
    ]
    result = plan(violations=found)
    assert result.requeue == {
        "a": "reconcile: binding a-c0 of placement a on cluster c0 has no reservation",
        "b": "reconcile: placement b says it is short of cpu=1, ...",
    }


def test_the_metric_counts_what_the_reconcile_could_not_repair_on_the_spot() -> None:
    from scheduler.invariants import OVERCOMMIT, STALE_RESERVATION, WORKFLOW, Violation
    from scheduler.requeue.reconcile import unrepaired

    found = [
        Violation(WORKFLOW, "placement b has no running workflow", "b"),
        Violation(WORKFLOW, "placement x has no running workflow", "x"),
        Violation(STALE_RESERVATION, "...", "gone", "c0"),
        Violation(STALE_RESERVATION, "...", "gone", "c1"),
        Violation(OVERCOMMIT, "cluster c0: ...", cluster="c0"),
    ]
    result = plan(running={"a"})  # b is started by this run; x is not a placement it read
    assert unrepaired(found, result, released=1) == {
        WORKFLOW: 1,
        STALE_RESERVATION: 1,
        OVERCOMMIT: 1,
    }


def test_a_priority_change_is_told_to_its_placement_only_and_a_default_change_to_all_others() -> (
    None
):
    from scheduler.requeue.reconcile import DEFAULT_PRIORITY_KEY as DEFAULT
    from scheduler.requeue.reconcile import priority_changed

    previous = {DEFAULT: "d1", "vip": "v1"}
    assert priority_changed({DEFAULT: "d1", "vip": "v2"}, previous, ["a", "vip"]) == {"vip"}
    assert priority_changed({DEFAULT: "d1"}, previous, ["a", "vip"]) == {"vip"}  # back to default
    assert priority_changed({DEFAULT: "d2", "vip": "v1"}, previous, ["a", "vip"]) == {"a"}
    assert priority_changed({DEFAULT: "d1", "vip": "v1"}, None, ["a", "vip"]) == set()


def test_a_record_tells_which_label_and_property_changed_whatever_their_names_hold() -> None:
    """Property names are free-form (KubeFleet sets none of their characters apart): names
    with the characters a record's own syntax might use still come back as themselves."""
    from scheduler.requeue.requeue_hints import _bucket, change_between_records, record_of

    odd = {"a|b": "1", "c,d=e": "2", '"quoted"': "3"}
    before = member_cluster("c0", NOW, labels={"env": "prod"}, properties=odd)
    after = member_cluster(
        "c0", NOW, labels={"env": "dev"}, properties={**odd, "c,d=e": "20"}
    )
    records = record_of(before, None), record_of(after, None)
    assert all(len(r) < 120 for r in records)  # a few dozen bytes, whatever the cluster holds
    change = change_between_records("c0", *records, NOW)
    assert change is not None
    assert "env" in change.labels and "c,d=e" in change.properties
    assert frozenset({"env", "zone"}) & change.labels >= {"env"}
    # A key is reported changed only when its bucket changed.
    unchanged = [k for k in odd if _bucket(k) != _bucket("c,d=e")]
    assert unchanged and not any(k in change.properties for k in unchanged)
    assert not (change.taints or change.resources or change.namespaces or change.eligibility)
    assert change_between_records("c0", "0123456789abcdef", record_of(after, None), NOW) is None


def test_a_dead_cluster_is_no_change_from_one_run_to_the_next() -> None:
    """Its eligibility reason counts the minutes since its last heartbeat: another figure each
    run, the same verdict. The record leaves the figures out, so the reconcile does not requeue
    every placement it reaches at every run."""
    dead = member_cluster("c0", NOW, heartbeat_age=timedelta(minutes=20))
    fleet = [dead, member_cluster("c1", NOW, labels={"env": "dev"})]
    for profile in (default_profile(), None):
        first = plan(profile=profile, clusters=fleet)
        later = NOW + timedelta(minutes=2)  # c1 is still fresh; c0 two minutes staler
        again = plan(later, profile=profile, clusters=fleet, previous_clusters=first.clusters)
        assert again.requeue == {}, profile


def fully_scheduled_status() -> dict[str, object]:
    """A placement status whose Scheduled condition is True (KubeFleet's rule leaves it alone)."""
    return {
        "conditions": [
            {
                "type": names.PLACEMENT_SCHEDULED_CONDITION,
                "status": names.TRUE,
                "reason": "Scheduled",
                "message": "",
                "observedGeneration": 1,
                "lastTransitionTime": NOW.isoformat(),
            }
        ]
    }


def test_a_cluster_change_reaches_an_enforcing_placement_only_where_it_holds_a_binding() -> None:
    """Fully scheduled PickN placements are left alone by KubeFleet's rule; one that enforces
    its affinity during execution (docs/enforcement.md) is requeued by a change to a cluster
    it is bound to, a taint added included, and only then."""
    from hub.types import Taint

    def enforcing(name: str) -> ClusterResourcePlacement:
        base = placement(name, policy="PickN").to_wire()
        base["metadata"]["annotations"] = {
            names.AFFINITY_ENFORCEMENT_ANNOTATION: "DuringExecution"
        }
        base["status"] = fully_scheduled_status()
        return ClusterResourcePlacement.from_wire(base)

    read = {"placements": [enforcing("a"), enforcing("b")]}
    before = plan(**read).clusters
    fleet = clusters("prod", "dev")
    tainted = fleet[0].spec.model_copy(
        update={"taints": [Taint(key="maintenance", value="true", effect="NoSchedule")]}
    )
    fleet[0] = fleet[0].model_copy(update={"spec": tainted})
    result = plan(**read, clusters=fleet, previous_clusters=before)
    assert set(result.requeue) == {"a"}  # a is bound to c0; b only to c1
    assert "cluster c0 changed" in result.requeue["a"]


def test_an_eligibility_reason_whose_figures_alone_changed_is_no_change_anywhere() -> None:
    """"Last received 10.00 minutes ago" and "3.00 minutes ago" are one verdict: neither the
    watcher's precise change nor the reconcile's records call it an eligibility change (the
    property in tests/property/test_requeue_hint_properties.py found them disagreeing)."""
    from scheduler import load_profile
    from scheduler.requeue.requeue_hints import ClusterChange, change_between_records, record_of

    profile = load_profile(
        "name: e\npluginConfig:\n  - {name: ClusterEligibility, args: "
        "{heartbeat_timeout_minutes: 2, health_timeout_minutes: 30}}\n"
    )
    old = member_cluster("c0", NOW, heartbeat_age=timedelta(minutes=10), joined=False)
    new = member_cluster("c0", NOW, heartbeat_age=timedelta(minutes=3), joined=False)
    reasons = {profile.ineligibility(c, NOW) for c in (old, new)}
    assert len(reasons) == 2  # the reasons differ, in their figures only
    assert not ClusterChange.between(old, new, profile.ineligibility, NOW).eligibility
    before = record_of(old, profile.ineligibility(old, NOW))
    after = record_of(new, profile.ineligibility(new, NOW))
    rough = change_between_records("c0", before, after, NOW)
    assert rough is None or not rough.eligibility
    eligible = member_cluster("c0", NOW)
    assert ClusterChange.between(old, eligible, profile.ineligibility, NOW).eligibility


def test_a_cluster_that_now_passes_reaches_an_enforcing_placement_with_a_lost_binding() -> None:
    """The reconcile's side of the watcher's route (control.routes): an enforcing PickN
    placement kept its binding on c0 (it lost env=prod, and no other cluster passed); a cluster
    it holds nothing on that now passes its filters requeues it. A placement without the
    annotation is left alone, as KubeFleet leaves it."""
    policy = prod_only(placementType="PickN", numberOfClusters=2)

    def fulfilled(name: str, enforced: bool) -> ClusterResourcePlacement:
        base = placement(name, policy="PickN").to_wire()
        base["spec"]["policy"] = policy
        if enforced:
            base["metadata"]["annotations"] = {
                names.AFFINITY_ENFORCEMENT_ANNOTATION: "DuringExecution"
            }
        base["status"] = fully_scheduled_status()
        return ClusterResourcePlacement.from_wire(base)

    read = {
        "placements": [fulfilled("a", True), fulfilled("b", False)],
        "bindings": [
            binding("a", "c0", "a-0"), binding("a", "c1", "a-0"),
            binding("b", "c0", "b-0"), binding("b", "c1", "b-0"),
        ],
    }  # fmt: skip
    before = plan(**read, clusters=clusters("retired", "prod", "dev")).clusters
    for profile in (None, default_profile()):
        found = plan(
            **read,
            clusters=clusters("retired", "prod", "prod"),
            previous_clusters=before,
            profile=profile,
        )
        assert found.requeue == {"a": "reconcile: cluster c2 changed since the last reconcile"}
        still = plan(
            **read,
            clusters=clusters("retired", "prod", "test"),
            previous_clusters=before,
            profile=profile,
        )
        assert still.requeue == {}


def versioned(cluster: MemberCluster, version: int) -> MemberCluster:
    meta = cluster.metadata.model_copy(update={"resource_version": str(version)})
    return cluster.model_copy(update={"metadata": meta})


def test_a_cluster_change_a_placement_already_decided_on_is_not_requeued_again() -> None:
    """The restart after a storm: the watcher ran `a` on the fleet as it is now (its last cycle
    read the clusters at hub version 40, the relabelled cluster's is 30), so the reconcile does
    not run it again; `b` decided before the change (20), and `c` has no known version (a
    workflow that has not recorded one, or a turn that failed): both are requeued."""
    before = plan(clusters=[versioned(c, 10) for c in clusters("prod", "dev")]).clusters
    fleet = [versioned(c, 30) for c in clusters("staging", "dev")]
    read = {
        "placements": [placement("a"), placement("b"), placement("c")],
        "latest_snapshots": [scheduled("a"), scheduled("b"), scheduled("c")],
        "running": {"a", "b", "c"},
        "clusters": fleet,
        "previous_clusters": before,
    }
    result = plan(**read, decided_at={"a": 40, "b": 20})
    assert set(result.requeue) == {"b", "c"}
    assert result.already_decided == {"a"}
    # Exactly at the cluster's version counts as having read it; one below does not.
    assert set(plan(**read, decided_at={"a": 30, "b": 29, "c": 30}).requeue) == {"b"}


def test_a_placement_is_requeued_for_a_cluster_it_may_have_judged_otherwise() -> None:
    """Whatever version a placement's last cycle read: a cluster that left, a cluster whose
    version is not a number, and a cluster that is ineligible now (or close enough to the
    heartbeat timeout that another worker's clock may have judged it so) requeue as before."""
    before = plan(clusters=[versioned(c, 10) for c in clusters("prod", "dev")]).clusters
    seen = {"a": 10_000, "b": 10_000}

    def requeued(fleet: list[MemberCluster], now: datetime = NOW) -> set[str]:
        return set(plan(now, clusters=fleet, previous_clusters=before, decided_at=seen).requeue)

    relabelled = clusters("staging", "dev")
    assert requeued([versioned(c, 30) for c in relabelled]) == set()
    assert requeued([versioned(clusters("prod", "dev")[1], 30)]) == {"a", "b"}  # c0 left
    not_a_number = relabelled[0].metadata.model_copy(update={"resource_version": "x7"})
    assert requeued(
        [relabelled[0].model_copy(update={"metadata": not_a_number}), relabelled[1]]
    ) == {"a", "b"}
    # The heartbeat (NOW) is fresh for a few minutes; shortly before it goes stale, and after,
    # the change requeues.
    assert requeued([versioned(c, 30) for c in relabelled], NOW + timedelta(minutes=1)) == set()
    assert requeued([versioned(c, 30) for c in relabelled], NOW + timedelta(minutes=30)) == {
        "a",
        "b",
    }


def test_heartbeats_after_the_turns_that_read_a_change_requeue_none_of_them() -> None:
    """The storm relabelled c0 at hub version 30 and `a`'s turn read it (its clusters' content
    version 30); then every cluster's heartbeat moved its resourceVersion (to 100+). Judged by
    the clusters' content versions (when what scheduling reads last changed), `a` read c0 as it
    is now and is left alone; `b`, whose turn was before the change, is requeued."""
    before = plan(clusters=[versioned(c, 10) for c in clusters("prod", "dev")]).clusters
    fleet = [versioned(c, 100 + i) for i, c in enumerate(clusters("staging", "dev"))]
    read = {
        "placements": [placement("a"), placement("b")],
        "latest_snapshots": [scheduled("a"), scheduled("b")],
        "running": {"a", "b"},
        "clusters": fleet,
        "previous_clusters": before,
        "decided_at": {"a": 30, "b": 20},
    }
    result = plan(**read, content_versions={"c0": 30, "c1": 5})
    assert set(result.requeue) == {"b"}
    assert result.already_decided == {"a"}
    # Without them, each cluster's own resourceVersion: the heartbeat requeues `a` too.
    assert set(plan(**read).requeue) == {"a", "b"}


def test_a_requeue_for_cluster_changes_alone_says_what_version_makes_it_moot() -> None:
    """The storm's placements whose turns have not run yet are requeued, with the version a
    cycle must read (the largest among the changes that reach it): a turn queued or running
    when the requeue arrives reads it, and no second turn is needed. A placement requeued for
    any other reason too, or for a cluster no version speaks for (gone, ineligible now), gets
    a requeue that always runs."""
    before = plan(clusters=[versioned(c, 10) for c in clusters("prod", "dev", "dev")]).clusters
    fleet = [versioned(c, 30 + i) for i, c in enumerate(clusters("staging", "test", "dev"))]
    read = {
        "placements": [placement("a"), placement("b")],
        "latest_snapshots": [scheduled("a"), scheduled("b")],
        "running": {"a", "b"},
        "previous_clusters": before,
        "decided_at": {"a": 20, "b": 20},
    }
    result = plan(**read, clusters=fleet)
    assert set(result.requeue) == {"a", "b"}
    assert result.unless_read == {"a": 31, "b": 31}
    # `b` also has a binding being deleted: its requeue runs whatever it read.
    result = plan(**read, clusters=fleet, bindings=[binding("b", "c0", "b-0", deleting=NOW)])
    assert result.unless_read == {"a": 31}
    # c1 left the fleet: nothing a cycle read makes that requeue moot.
    assert plan(**read, clusters=[fleet[0], fleet[2]]).unless_read == {}
    # Ineligible now (the heartbeat long stale): no version is enough either.
    assert plan(NOW + timedelta(minutes=30), **read, clusters=fleet).unless_read == {}
    # Without versions (KubeFleet's rule, no decided_at): no requeue is moot.
    assert plan(**{**read, "decided_at": None}, clusters=fleet).unless_read == {}
