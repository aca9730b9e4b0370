"""`fleet-scheduler plan -f FILE`: the real scheduler on a placement that is not applied, or on
an edited copy of one that is, against devhub's sample fleet over real HTTP; nothing written.

The hub state for an applied placement is made the way the scheduler makes it (the snapshot the
snapshotter plans, the bindings a cycle creates), so `plan` is checked against a hub that looks
like one fleet-scheduler has been running on."""

from __future__ import annotations

import copy
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from devhub import DevHub, sample
from hub import names
from hub.client import HubClient
from hub.types import (
    ClusterResourceBinding,
    ClusterResourcePlacement,
    ClusterSchedulingPolicySnapshot,
    MemberCluster,
    Namespace,
)
from scheduler import CycleInput, schedule
from scheduler.snapshots import plan_snapshot_sync
from tests.support.cli import beside_make_run, run_cli

WRITE_VERBS = ("create", "update", "patch", "delete", "deletecollection")
PROD = "fleet.example.com/environment"


def sample_environments() -> dict[str, str]:
    return {
        doc["metadata"]["name"]: doc["metadata"]["labels"].get(PROD, "")
        for doc in sample.read_fleet()
    }


SAMPLE_ENVIRONMENTS = sample_environments()


def _with_labels(doc: dict[str, Any], labels: dict[str, str]) -> dict[str, Any]:
    """`doc` with its required term's matchLabels replaced (what the snapshotter refuses)."""
    affinity = doc["spec"]["policy"]["affinity"]["clusterAffinity"]
    terms = affinity["requiredDuringSchedulingIgnoredDuringExecution"]["clusterSelectorTerms"]
    terms[0]["labelSelector"]["matchLabels"] = labels
    return doc


def placement(name: str, n: int, *, environment: str = "prod") -> dict[str, Any]:
    return {
        "apiVersion": "placement.kubernetes-fleet.io/v1beta1",
        "kind": "ClusterResourcePlacement",
        "metadata": {"name": name},
        "spec": {
            "resourceSelectors": [
                {"group": "", "version": "v1", "kind": "Namespace", "name": name}
            ],
            "policy": {
                "placementType": "PickN",
                "numberOfClusters": n,
                "affinity": {"clusterAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                    "clusterSelectorTerms": [
                        {"labelSelector": {"matchLabels": {PROD: environment}}}
                    ]}}},
            },
        },
    }


@pytest.fixture
def fleet(devhub_factory: Callable[..., DevHub], tmp_path: Path) -> tuple[DevHub, Path]:
    hub = devhub_factory()
    hub.load_sample_fleet()
    return hub, hub.write_kubeconfig(tmp_path / "kubeconfig")


def write(tmp_path: Path, document: Any, name: str = "placement.yaml") -> Path:
    path = tmp_path / name
    path.write_text(document if isinstance(document, str) else yaml.safe_dump(document))
    return path


def writes(hub: DevHub) -> int:
    return sum(hub.stats.count(verb) for verb in WRITE_VERBS)


def apply_and_schedule(kubeconfig: Path, document: dict[str, Any]) -> list[str]:
    """Apply the placement and do what the snapshotter and one cycle would: make its snapshot,
    create the bindings the scheduler picks. Returns the picked clusters."""
    client = HubClient.from_kubeconfig(kubeconfig)
    try:
        crp = client.create(ClusterResourcePlacement.model_validate(document))
        snapshot = plan_snapshot_sync(crp, []).create
        assert snapshot is not None
        snapshot = client.create(snapshot)
        result = schedule(
            CycleInput(
                snapshot=snapshot,
                clusters=list(client.list(MemberCluster).items),
                bindings=[],
                now=datetime.now(UTC),
            )
        )
        for binding in result.plan.create:
            client.create(binding)
        return sorted(b.spec.target_cluster for b in result.plan.create)
    finally:
        client.close()


def objects(kubeconfig: Path) -> tuple[int, int, int]:
    client = HubClient.from_kubeconfig(kubeconfig)
    try:
        return (
            len(client.list(ClusterResourcePlacement).items),
            len(client.list(ClusterSchedulingPolicySnapshot).items),
            len(client.list(ClusterResourceBinding).items),
        )
    finally:
        client.close()


def fates(output: str) -> dict[str, str]:
    """CLUSTER -> FATE from the cluster table `plan` prints."""
    table: dict[str, str] = {}
    rows = iter(output.splitlines())
    for line in rows:
        if line.startswith("CLUSTER") and "FATE" in line:
            fate_at = line.index("FATE")
            break
    for line in rows:
        if not line.strip():
            break
        table[line.split()[0]] = line[fate_at:].split("  ")[0].strip()
    return table


def test_unapplied_placement_is_planned_and_nothing_is_written(
    fleet: tuple[DevHub, Path], tmp_path: Path
) -> None:
    hub, kubeconfig = fleet
    before = writes(hub)
    done = run_cli("plan", "-f", str(write(tmp_path, placement("web", 2))),
                   "--kubeconfig", str(kubeconfig))
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "plan for placement web (not applied); nothing was written" in out
    assert "policy snapshot: web-0, new (the placement has no policy snapshot yet)" in out
    table = fates(out)
    # Equal scores: KubeFleet breaks the tie towards the larger name (kubefleet-rules 4.4).
    assert sorted(c for c, fate in table.items() if fate == "picked") == [
        "member-japaneast-1", "member-westeurope-1"]
    assert len(table) == len(SAMPLE_ENVIRONMENTS)  # every cluster of the fleet, with its fate
    detail = {line.split()[0]: line for line in out.splitlines() if line.startswith("member-")}
    assert table["member-westeurope-2"] == "filtered"
    assert "TaintToleration" in detail["member-westeurope-2"]
    for cluster, environment in SAMPLE_ENVIRONMENTS.items():
        if environment != "prod":
            assert table[cluster] == "filtered", cluster
            assert "ClusterAffinity" in detail[cluster], detail[cluster]
    assert "policy snapshots: create web-0" in out
    assert "bindings: 2 bindings created, 0 patched, 0 unscheduled" in out
    assert objects(kubeconfig) == (0, 0, 0)
    assert writes(hub) == before


def test_edited_copy_keeps_current_picks_and_adds_one(
    fleet: tuple[DevHub, Path], tmp_path: Path
) -> None:
    hub, kubeconfig = fleet
    applied = placement("api", 2)
    current = apply_and_schedule(kubeconfig, applied)
    state, before = objects(kubeconfig), writes(hub)

    edited = copy.deepcopy(applied)
    edited["spec"]["policy"]["numberOfClusters"] = 3  # not part of the policy hash
    done = run_cli("plan", "-f", str(write(tmp_path, edited)), "--kubeconfig", str(kubeconfig))
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "(same policy as the applied placement)" in out
    assert "policy snapshot: api-0, same policy, refreshed" in out
    assert "read: 8 member clusters, 2 bindings" in out
    assert "outcome: PickN 3/3 picked, fully scheduled" in out
    table = fates(out)
    for cluster in current:
        assert table[cluster] in {"kept", "picked"}, (cluster, table)
    assert "bindings: 1 bindings created, 0 patched, 0 unscheduled" in out
    assert objects(kubeconfig) == state
    assert writes(hub) == before


def test_edited_policy_makes_a_new_snapshot_and_moves_the_placement(
    fleet: tuple[DevHub, Path], tmp_path: Path
) -> None:
    hub, kubeconfig = fleet
    applied = placement("jobs", 2)
    current = apply_and_schedule(kubeconfig, applied)
    state, before = objects(kubeconfig), writes(hub)

    edited = placement("jobs", 1, environment="staging")
    done = run_cli("plan", "-f", str(write(tmp_path, edited)), "--kubeconfig", str(kubeconfig))
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "edited copy of the applied placement, with a different policy" in out
    assert "policy snapshot: jobs-1, new (the policy differs from jobs-0's)" in out
    assert f"policy snapshots: label jobs-0 {names.IS_LATEST_SNAPSHOT_LABEL}=false; " \
           "create jobs-1" in out
    table = fates(out)
    picked = [c for c, fate in table.items() if fate == "picked"]
    assert len(picked) == 1 and picked[0] not in current
    for cluster in current:  # prod clusters no longer match the required term
        assert table[cluster] == "filtered"
    assert "bindings: 1 bindings created, 0 patched, 2 unscheduled" in out
    assert objects(kubeconfig) == state
    assert writes(hub) == before


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("spec: [unclosed", "not YAML"),
        ({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}},
         "expected apiVersion placement.kubernetes-fleet.io/v1beta1"),
        ({**placement("bad", 2), "spec": {"policy": {"numberOfClusters": "many"}}},
         "spec.policy.numberOfClusters"),
        ("---\n" + yaml.safe_dump(placement("a", 1)) + "---\n" + yaml.safe_dump(placement("b", 1)),
         "found 2 documents"),
        ({k: v for k, v in placement("x", 1).items() if k != "metadata"}, "metadata"),
        (_with_labels(placement("bad-key", 1), {"bad key": "prod"}),
         "labelSelector.matchLabels: invalid label key 'bad key'"),
    ],
    ids=["not-yaml", "wrong-kind", "wrong-type", "two-documents", "no-name", "bad-label-key"],
)
def test_a_file_that_is_not_a_valid_placement_is_one_line_and_exit_2(
    fleet: tuple[DevHub, Path], tmp_path: Path, content: Any, expected: str
) -> None:
    hub, kubeconfig = fleet
    before = writes(hub)
    done = run_cli("plan", "-f", str(write(tmp_path, content)), "--kubeconfig", str(kubeconfig))
    assert done.returncode == 2, (done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("fleet-scheduler plan: error: ")
    assert expected in lines[0]
    assert "Traceback" not in done.stderr
    assert writes(hub) == before


def test_missing_file_is_one_line_and_exit_2(fleet: tuple[DevHub, Path], tmp_path: Path) -> None:
    _, kubeconfig = fleet
    done = run_cli("plan", "-f", str(tmp_path / "nope.yaml"), "--kubeconfig", str(kubeconfig))
    assert done.returncode == 2
    assert done.stderr.strip() == (
        f"fleet-scheduler plan: error: {tmp_path / 'nope.yaml'}: no such file"
    )


def test_a_resource_placement_is_planned_in_its_namespace(
    fleet: tuple[DevHub, Path], tmp_path: Path
) -> None:
    # The sample fleet reports `shop` on four clusters; a namespaced PickAll goes only there
    # (NamespaceAffinity), minus the tainted, and `-n` names the namespace the file leaves out.
    hub, kubeconfig = fleet
    client = HubClient.from_kubeconfig(kubeconfig)
    try:
        client.create(Namespace(metadata={"name": "shop"}))
    finally:
        client.close()
    document = placement("storefront", 2)
    document["kind"] = "ResourcePlacement"
    document["spec"]["policy"] = {"placementType": "PickAll"}
    path = write(tmp_path, document)
    before = writes(hub)
    done = run_cli("plan", "-f", str(path), "-n", "shop", "--kubeconfig", str(kubeconfig))
    assert done.returncode == 0, done.stderr
    table = fates(done.stdout)
    with_shop = {"member-eastus-1", "member-eastus-3", "member-westeurope-1", "member-japaneast-1"}
    assert {c for c, fate in table.items() if fate.startswith("picked")} == with_shop
    assert "NamespaceAffinity" in done.stdout
    assert "shop/storefront" in done.stdout
    assert writes(hub) == before
    # Without a namespace there is nothing to plan it in.
    missing = run_cli("plan", "-f", str(path), "--kubeconfig", str(kubeconfig))
    assert missing.returncode == 2
    assert "needs a namespace" in missing.stderr


def test_a_capacity_aware_placement_shows_each_clusters_room_and_what_is_short(
    fleet: tuple[DevHub, Path], tmp_path: Path
) -> None:
    """docs/capacity.md: the plan shows allocatable, allocated and requested per cluster, and
    reads the ledgers (another placement holds 60 of eastus-1's 94 CPUs)."""
    from hub.types import CapacityLedger, CapacityLedgerSpec, ObjectMeta, Reservation

    hub, kubeconfig = fleet
    client = HubClient.from_kubeconfig(kubeconfig)
    try:
        held = Reservation(placement="other", requests={"cpu": "60"}, reserved_at=datetime.now(UTC))
        client.create(
            CapacityLedger(
                metadata=ObjectMeta(name="member-eastus-1"),
                spec=CapacityLedgerSpec(reservations={"other-eastus-1": held}),
            )
        )
    finally:
        client.close()
    document = placement("web", 3)
    document["metadata"]["annotations"] = {names.REQUESTS_ANNOTATION: "cpu=40"}
    before = writes(hub)
    done = run_cli("plan", "-f", str(write(tmp_path, document)), "--kubeconfig", str(kubeconfig))
    assert done.returncode == 0, done.stderr
    out = done.stdout
    table = fates(out)
    assert sorted(c for c, fate in table.items() if fate == "picked") == [
        "member-eastus-2", "member-westeurope-1"]  # fmt: skip
    fates_part = out[: out.index("ALLOCATABLE")]
    detail = {
        line.split()[0]: line for line in fates_part.splitlines() if line.startswith("member-")
    }
    assert table["member-eastus-1"] == "filtered"
    assert "ClusterResourcesFit" in detail["member-eastus-1"]
    assert "not enough room: cpu: 40 requested, 34 free" in detail["member-eastus-1"]
    room = out[out.index("ALLOCATABLE") :]
    rows = {line.split()[0]: line.split()[1:] for line in room.splitlines()[1:] if line.strip()}
    assert rows["member-eastus-1"] == ["cpu=94", "cpu=60", "cpu=40"]
    assert rows["member-japaneast-1"] == ["cpu=38", "0", "cpu=40"]
    assert (
        "short: not enough room for 1 binding(s) of cpu=40: cpu short on 2 cluster(s) "
        "(at most 38 free); missing cpu=40" in out
    )
    assert writes(hub) == before


def test_plan_beside_make_run_reads_its_kubeconfig(
    devhub_factory: Callable[..., DevHub], tmp_path: Path
) -> None:
    """In the repository root, after `make run`, `plan -f FILE` needs no --kubeconfig: with no
    KUBECONFIG it reads .run/kubeconfig, as `explain` finds make run's Temporal."""
    hub = devhub_factory()
    hub.load_sample_fleet()
    hub.write_kubeconfig(tmp_path / ".run" / "kubeconfig")
    path = write(tmp_path, placement("web", 2))
    done = run_cli("plan", "-f", str(path), cwd=tmp_path, env=beside_make_run(tmp_path))
    assert done.returncode == 0, done.stderr
    assert "plan for placement web (not applied); nothing was written" in done.stdout
    assert len(fates(done.stdout)) == len(SAMPLE_ENVIRONMENTS)


def test_kubeconfig_and_its_flag_win_over_make_runs(
    devhub_factory: Callable[..., DevHub], tmp_path: Path
) -> None:
    hub = devhub_factory()
    hub.load_sample_fleet()
    hub.write_kubeconfig(tmp_path / ".run" / "kubeconfig")
    path = write(tmp_path, placement("web", 2))
    elsewhere = tmp_path / "elsewhere" / "kubeconfig"
    environment = {**beside_make_run(tmp_path), "KUBECONFIG": str(elsewhere)}
    done = run_cli("plan", "-f", str(path), cwd=tmp_path, env=environment)
    assert done.returncode == 2, done.stdout
    assert f"cannot use kubeconfig '{elsewhere}'" in done.stderr
    flagged = run_cli(
        "plan", "-f", str(path), "--kubeconfig", str(elsewhere), cwd=tmp_path,
        env=beside_make_run(tmp_path),
    )  # fmt: skip
    assert flagged.returncode == 2, flagged.stdout
    assert f"kubeconfig '{elsewhere}' does not exist" in flagged.stderr



def test_context_applies_to_the_kubeconfig_of_the_environment(
    fleet: tuple[DevHub, Path], tmp_path: Path
) -> None:
    """--context without --kubeconfig picks a context of $KUBECONFIG (it used to be dropped)."""
    _, kubeconfig = fleet
    path = write(tmp_path, placement("web", 2))
    environment = {**beside_make_run(tmp_path), "KUBECONFIG": str(kubeconfig)}
    done = run_cli("plan", "-f", str(path), "--context", "no-such-context", env=environment)
    assert done.returncode == 2, done.stdout
    assert "no-such-context" in done.stderr


# --- preemption (docs/priority.md, "Preemption"): what a turn would take, shown before anything
# is applied. The fleet: three clusters of 8 CPUs, each holding two `cpu=4` bindings of a
# low class; the planned placement asks `cpu=4` on two clusters.

ROOMY = ("member-1", "member-2", "member-3")
LOW, URGENT = 1_000, 101_000


def full_fleet(kubeconfig: Path) -> None:
    """The clusters, the classes, and six low placements bound two per cluster with their room
    reserved (as their turns would leave them)."""
    from hub.types import CapacityLedger, CapacityLedgerSpec, ObjectMeta, PriorityClass, Reservation
    from tests.support.fleet import add_cluster

    now = datetime.now(UTC)
    client = HubClient.from_kubeconfig(kubeconfig)
    try:
        for name, value, policy in (
            ("batch", LOW, "PreemptLowerPriority"),
            ("release-critical", URGENT, "PreemptLowerPriority"),
            ("polite", URGENT, "Never"),
        ):
            client.create(
                PriorityClass(metadata=ObjectMeta(name=name), value=value, preemption_policy=policy)
            )
        held: dict[str, dict[str, Reservation]] = {c: {} for c in ROOMY}
        for cluster in ROOMY:
            add_cluster(client, cluster, allocatable={"cpu": "8"})
        for i in range(6):
            cluster = ROOMY[i // 2]
            document: dict[str, Any] = {
                "metadata": {"name": f"low-{i}", "annotations": asks(4, "batch")},
                "spec": {
                    "resourceSelectors": [
                        {"group": "", "version": "v1", "kind": "Namespace", "name": "app"}
                    ],
                    "policy": {"placementType": "PickFixed", "clusterNames": [cluster]},
                },
            }
            crp = client.create(ClusterResourcePlacement.model_validate(document))
            snapshot = plan_snapshot_sync(crp, []).create
            assert snapshot is not None
            snapshot = client.create(snapshot)
            result = schedule(
                CycleInput(
                    snapshot=snapshot,
                    clusters=list(client.list(MemberCluster).items),
                    bindings=[],
                    now=now,
                )
            )
            (binding,) = result.plan.create
            client.create(binding)
            held[cluster][binding.metadata.name] = Reservation(
                placement=crp.name, requests={"cpu": "4"}, reserved_at=now
            )
        for cluster, reservations in held.items():
            client.create(
                CapacityLedger(
                    metadata=ObjectMeta(name=cluster),
                    spec=CapacityLedgerSpec(reservations=reservations),
                )
            )
    finally:
        client.close()


def asks(cpu: int, priority_class: str) -> dict[str, str]:
    return {
        names.REQUESTS_ANNOTATION: f"cpu={cpu}",
        names.PRIORITY_CLASS_ANNOTATION: priority_class,
    }


def urgent(name: str, n: int, priority_class: str, cpu: int = 4) -> dict[str, Any]:
    document = placement(name, n)
    document["spec"]["policy"].pop("affinity")
    document["metadata"]["annotations"] = asks(cpu, priority_class)
    return document


@pytest.fixture
def full(hub: HubClient, hub_kubeconfig: Path, devhub: DevHub) -> Path:
    full_fleet(hub_kubeconfig)
    return hub_kubeconfig


def plan_of(kubeconfig: Path, tmp_path: Path, document: dict[str, Any], *more: str) -> str:
    done = run_cli(
        "plan", "-f", str(write(tmp_path, document)), "--kubeconfig", str(kubeconfig), *more
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def victim_rows(output: str) -> list[list[str]]:
    rows = iter(output.splitlines())
    for line in rows:
        if line.startswith("CLUSTER") and "VICTIM" in line:
            break
    else:
        return []
    return [line.split() for line in rows if line.startswith("member-")]


def test_a_placement_short_of_room_shows_the_victims_it_would_take_and_writes_nothing(
    full: Path, devhub: DevHub, tmp_path: Path
) -> None:
    before = writes(devhub)
    out = plan_of(full, tmp_path, urgent("checkout", 2, "release-critical"))
    assert "short: not enough room for 2 binding(s) of cpu=4" in out
    assert (
        f"preemption (priority {URGENT}): 2 lower-priority binding(s) on 2 cluster(s) would "
        "give their room; nothing is preempted by plan" in out
    ), out
    rows = victim_rows(out)
    assert len(rows) == 2, out  # one cpu=4 binding per cluster: exactly the room asked for
    freed = sorted(row[0] for row in rows)
    assert len(set(freed)) == 2 and set(freed) <= set(ROOMY)
    for cluster, victim, owner, priority, frees in rows:
        assert owner.startswith("crp/low-") and victim.startswith(owner.removeprefix("crp/"))
        assert (priority, frees) == (str(LOW), "cpu=4")
        assert ROOMY.index(cluster) == int(owner[-1]) // 2  # the victim is on that cluster
    assert "not freed" not in out  # the third cluster is not needed, not refused
    assert f"  preemption: nominate room on {', '.join(freed)}" in out
    assert writes(devhub) == before  # no nomination, no unscheduled binding


@pytest.mark.parametrize(
    ("priority_class", "why"),
    [
        pytest.param("polite", "its PriorityClass has preemptionPolicy: Never", id="never"),
        pytest.param("batch", "only equal or higher priority", id="equal-priority"),
    ],
)
def test_a_placement_that_would_preempt_nothing_says_why(
    full: Path, devhub: DevHub, tmp_path: Path, priority_class: str, why: str
) -> None:
    before = writes(devhub)
    out = plan_of(full, tmp_path, urgent("gentle", 2, priority_class))
    (line,) = [line for line in out.splitlines() if line.startswith("preemption")]
    assert line.startswith("preemption: none, ") and why in out, out
    if priority_class == "batch":  # each cluster refused, and why
        refused = [line for line in out.splitlines() if line.startswith("  not freed: ")]
        assert len(refused) == len(ROOMY) and all(why in r for r in refused), out
    assert not victim_rows(out)
    assert "  preemption: nominate" not in out
    assert writes(devhub) == before


def test_a_profile_without_default_preemption_preempts_nothing(full: Path, tmp_path: Path) -> None:
    profile = tmp_path / "profile.yaml"
    profile.write_text(
        "name: no-preemption\nplugins:\n  postFilter:\n    disabled: [{name: DefaultPreemption}]\n"
    )
    out = plan_of(
        full, tmp_path, urgent("checkout", 2, "release-critical"), "--config", str(profile)
    )
    assert "preemption: none, the profile has no PostFilter plugin (preemption is off)" in out
    assert not victim_rows(out)


def test_room_already_nominated_is_shown_as_a_preemption_under_way(
    full: Path, tmp_path: Path
) -> None:
    from hub.types import CapacityLedger, NominatedVictim, Nomination

    client = HubClient.from_kubeconfig(full)
    try:
        ledger = client.get(CapacityLedger, "member-2")
        victim = sorted(ledger.spec.reservations)[0]
        nomination = Nomination(
            priority=URGENT,
            requests={"cpu": "4"},
            victims=[NominatedVictim(binding=victim, placement="low-2", priority=LOW)],
            nominated_at=datetime.now(UTC),
        )
        ledger.spec.nominations["checkout"] = nomination
        client.update(ledger)
    finally:
        client.close()
    out = plan_of(full, tmp_path, urgent("checkout", 2, "release-critical"))
    assert (
        "preemption: under way, room is nominated for this placement on member-2; a turn would "
        "not choose again" in out
    ), out
    assert victim_rows(out) == [["member-2", victim, "crp/low-2", str(LOW), "(nominated)"]]
    assert "  preemption: nominate" not in out


def test_a_placement_that_fits_shows_no_preemption(full: Path, tmp_path: Path) -> None:
    out = plan_of(full, tmp_path, urgent("small", 1, "release-critical", cpu=0))
    assert "preemption" not in out
