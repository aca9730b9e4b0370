"""End to end with the real default profile: kubefleet-rules 1.12's example reproduced exactly, and
the plugins' effects on whole cycles (taints, eligibility, topology batching)."""

from __future__ import annotations

from datetime import timedelta

from hub import names
from scheduler import default_profile
from scheduler.testing import apply_plan, member_cluster, policy_snapshot
from tests.unit.scheduler.cycle_builders import NOW, converge, run

EXAMPLE_POLICY = {
    "placementType": "PickN",
    "numberOfClusters": 2,
    "affinity": {
        "clusterAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "clusterSelectorTerms": [
                    {"labelSelector": {"matchLabels": {"env": "prod"}}},
                ]
            },
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 20, "preference": {"labelSelector": {"matchLabels": {"tier": "gold"}}}}
            ],
        }
    },
}


def test_reference_example_1_12_end_to_end() -> None:
    snapshot = policy_snapshot("web", EXAMPLE_POLICY, index=0, crp_generation=3)
    clusters = [
        member_cluster("member-1", NOW, labels={"env": "prod", "tier": "gold"}),
        member_cluster("member-2", NOW, labels={"env": "prod", "tier": "gold"}),
        member_cluster("member-3", NOW, labels={"env": "prod"}),
        member_cluster("member-4", NOW, labels={"env": "dev"}),
    ]
    result = run(snapshot, clusters, profile=default_profile())
    assert result.error is None and not result.requeue
    write = result.plan.snapshot_status
    assert write is not None and write.name == "web-0"
    status = write.status.model_dump(mode="json", by_alias=True, exclude_none=True)
    assert status == {
        "observedCRPGeneration": 3,
        "conditions": [
            {
                "type": "Scheduled",
                "status": "True",
                "reason": "SchedulingPolicyFulfilled",
                "message": "found all cluster needed as specified by the scheduling policy, "
                "found 2 cluster(s)",
                "observedGeneration": 1,
                "lastTransitionTime": "2025-06-01T12:00:00Z",
            }
        ],
        "targetClusters": [
            {
                "clusterName": "member-2",
                "selected": True,
                "clusterScore": {"affinityScore": 20, "priorityScore": 0},
                "reason": 'Successfully scheduled resources for placement in "member-2" '
                "(affinity score: 20, topology spread score: 0): picked by scheduling policy",
            },
            {
                "clusterName": "member-1",
                "selected": True,
                "clusterScore": {"affinityScore": 20, "priorityScore": 0},
                "reason": 'Successfully scheduled resources for placement in "member-1" '
                "(affinity score: 20, topology spread score: 0): picked by scheduling policy",
            },
            {
                "clusterName": "member-3",
                "selected": False,
                "clusterScore": {"affinityScore": 0, "priorityScore": 0},
                "reason": 'Cluster "member-3" does not score high enough (affinity score: 0, '
                "topology spread score: 0)",
            },
            {
                "clusterName": "member-4",
                "selected": False,
                "reason": "ClusterUnschedulable, cluster does not match with any of the required "
                "cluster affinity terms",
            },
        ],
    }
    first = result.plan.create[0]
    assert first.metadata.name.startswith("web-member-2-") and len(first.metadata.name) == 21
    assert first.to_wire()["spec"] == {
        "state": "Scheduled",
        "resourceSnapshotName": "",
        "schedulingPolicySnapshotName": "web-0",
        "targetCluster": "member-2",
        "clusterDecision": write.status.target_clusters[0].to_wire(),
    }
    assert [g.plugin for g in result.explanation.filtered] == ["ClusterAffinity"]


def test_untolerated_taints_and_ineligible_clusters_are_filtered_with_their_reasons() -> None:
    snapshot = policy_snapshot("web", {"placementType": "PickAll"}, index=0)
    clusters = [
        member_cluster("tainted", NOW, taints=[("gpu", "true")]),
        member_cluster("stale", NOW, heartbeat_age=timedelta(minutes=10)),
        member_cluster("fine", NOW),
    ]
    result = run(snapshot, clusters, profile=default_profile())
    assert [b.spec.target_cluster for b in result.plan.create] == ["fine"]
    reasons = {g.clusters[0]: (g.plugin, g.reason) for g in result.explanation.filtered}
    assert reasons == {
        "stale": (
            "ClusterEligibility",
            "ClusterUnschedulable, cluster is not connected to the fleet: no recent heartbeat "
            "signals (last received 10.00 minutes ago)",
        ),
        "tainted": (
            "TaintToleration",
            "ClusterUnschedulable, taint &{Key:gpu Value:true Effect:NoSchedule} cannot be "
            "tolerated",
        ),
    }


def test_topology_spread_schedules_one_cluster_per_cycle_across_zones() -> None:
    policy = {
        "placementType": "PickN",
        "numberOfClusters": 3,
        "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone"}],
    }
    snapshot = policy_snapshot("web", policy, index=0)
    clusters = [
        member_cluster(f"{zone}-{i}", NOW, labels={"zone": zone}) for zone in "xyz" for i in (1, 2)
    ]
    results, bindings, final = converge(snapshot, clusters, profile=default_profile())
    assert [len(r.plan.create) for r in results] == [1, 1, 1]
    assert [r.requeue for r in results] == [True, True, False]
    zones = sorted(b.spec.target_cluster[0] for b in bindings)
    assert zones == ["x", "y", "z"]
    assert final.status.condition(names.SCHEDULED_CONDITION).status == "True"  # type: ignore[union-attr]
    # Once scheduled, another cycle changes nothing but a status refresh, then nothing at all.
    again = run(final, clusters, bindings, profile=default_profile())
    assert again.plan.binding_writes == 0
    bindings, final = apply_plan(bindings, final, again.plan)
    assert run(final, clusters, bindings, profile=default_profile()).plan.is_empty
