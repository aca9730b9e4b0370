"""`fleet-scheduler plan --all --config NEW.yaml` (and `plan [-n NS] NAME --config ...`): a
candidate profile against the current one on every placement, over real HTTP to devhub, as a
process; nothing written.

The hub is made to look like one fleet-scheduler has been running on with the default profile:
each placement has the policy snapshot the snapshotter plans and the bindings a default cycle
creates, so a candidate equal to the default changes nothing."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from activities.capacity import Ledgers, capacity_input, requests_of
from devhub import DevHub
from hub import names
from hub.client import HubClient
from hub.kinds import kinds_for
from hub.types import (
    CapacityLedger,
    CapacityLedgerSpec,
    MemberCluster,
    Namespace,
    ObjectMeta,
    Reservation,
)
from scheduler import CycleInput, Profile, load_profile, schedule
from scheduler.snapshots import plan_snapshot_sync
from scheduler.testing import member_cluster
from tests.support.cli import run_cli

WRITE_VERBS = ("create", "update", "patch", "delete", "deletecollection")
TIER = "fleet.example.com/tier"
# Without TaintToleration a NoSchedule taint no longer keeps a placement off a cluster.
NO_TAINTS = "name: no-taints\nplugins:\n  multiPoint:\n    disabled: [{name: TaintToleration}]\n"
# Preferred affinity outweighs room: ClusterAffinity counts three times in the sum.
AFFINITY_X3 = (
    "name: affinity-first\nscoreMode: weightedSum\n"
    "plugins:\n  score:\n    enabled: [{name: ClusterAffinity, weight: 3}]\n"
)
SAME_AS_DEFAULT = "name: same\n"


def fleet_documents(now: datetime) -> list[dict[str, Any]]:
    """Four clusters: gold-1 (preferred, nearly full), plain-1 and plain-2 (empty), tainted-1
    (gpu=true:NoSchedule); all with 100 CPUs, all reporting the namespace `shop`."""
    specs: list[tuple[str, dict[str, str], list[tuple[str, str | None]]]] = [
        ("gold-1", {TIER: "gold"}, []),
        ("plain-1", {}, []),
        ("plain-2", {}, []),
        ("tainted-1", {}, [("gpu", "true")]),
    ]
    documents = []
    for name, labels, taints in specs:
        cluster = member_cluster(
            name, now, labels=labels, taints=taints, allocatable={"cpu": "100"}
        )
        document = cluster.to_wire()
        document["status"]["namespaces"] = {"shop": ""}
        documents.append(document)
    return documents


def pick_n(name: str, *, requests: str | None = None) -> dict[str, Any]:
    """PickN of 1 preferring gold clusters (weight 50)."""
    metadata: dict[str, Any] = {"name": name}
    if requests is not None:
        metadata["annotations"] = {names.REQUESTS_ANNOTATION: requests}
    preferred = [{"weight": 50, "preference": {"labelSelector": {"matchLabels": {TIER: "gold"}}}}]
    return {
        "apiVersion": names.PLACEMENT_API_VERSION,
        "kind": "ClusterResourcePlacement",
        "metadata": metadata,
        "spec": {
            "resourceSelectors": [{"group": "", "version": "v1", "kind": "Namespace",
                                   "name": name}],
            "policy": {
                "placementType": "PickN",
                "numberOfClusters": 1,
                "affinity": {"clusterAffinity": {
                    "preferredDuringSchedulingIgnoredDuringExecution": preferred}},
            },
        },
    }  # fmt: skip


def pick_all(name: str, kind: str = "ClusterResourcePlacement") -> dict[str, Any]:
    return {
        "apiVersion": names.PLACEMENT_API_VERSION,
        "kind": kind,
        "metadata": {"name": name},
        "spec": {
            "resourceSelectors": [{"group": "", "version": "v1", "kind": "ConfigMap",
                                   "name": name}],
            "policy": {"placementType": "PickAll"},
        },
    }  # fmt: skip


@dataclass
class Fleet:
    hub: DevHub
    kubeconfig: Path
    tmp: Path

    def client(self) -> HubClient:
        return HubClient.from_kubeconfig(self.kubeconfig)

    def apply_and_schedule(
        self,
        document: dict[str, Any],
        namespace: str | None = None,
        profile: Profile | None = None,
    ) -> None:
        """Apply the placement and do what the snapshotter and one cycle would (with the
        default profile, or `profile`)."""
        client = self.client()
        try:
            kinds = kinds_for(namespace)
            body = kinds.placement.model_validate(
                {**document, "metadata": {**document["metadata"], "namespace": namespace}}
            )
            placement = client.create(body)
            requests = requests_of(placement)
            capacity = (
                capacity_input(requests, Ledgers.read(client), [])
                if requests is not None
                else None
            )
            snapshot = plan_snapshot_sync(placement, []).create
            assert snapshot is not None
            snapshot = client.create(snapshot)
            result = schedule(
                CycleInput(
                    snapshot=snapshot,
                    clusters=list(client.list(MemberCluster).items),
                    bindings=[],
                    now=datetime.now(UTC),
                    capacity=capacity,
                ),
                profile,
            )
            assert result.error is None, result.error
            for binding in result.plan.create:
                client.create(binding)
        finally:
            client.close()

    def profile(self, name: str, text: str) -> str:
        path = self.tmp / name
        path.write_text(text)
        return str(path)

    def plan(self, *args: str) -> Any:
        return run_cli("plan", *args, "--kubeconfig", str(self.kubeconfig))

    def writes(self) -> int:
        return sum(self.hub.stats.count(verb) for verb in WRITE_VERBS)

    def versions(self) -> dict[str, str | None]:
        """Every object's resourceVersion, by kind and key."""
        client = self.client()
        try:
            out: dict[str, str | None] = {}
            for kinds in (kinds_for(None), kinds_for("shop")):
                for kind in (kinds.placement, kinds.snapshot, kinds.binding):
                    for obj in client.list(kind).items:
                        key = f"{kind.KIND}/{obj.metadata.namespace}/{obj.name}"
                        out[key] = obj.metadata.resource_version
            return out
        finally:
            client.close()


@pytest.fixture
def fleet(devhub_factory: Callable[..., DevHub], tmp_path: Path) -> Iterator[Fleet]:
    hub = devhub_factory()
    path = tmp_path / "fleet.yaml"
    path.write_text(yaml.safe_dump_all(fleet_documents(datetime.now(UTC))))
    hub.load_sample_fleet(path, heartbeat_interval=None)
    yield Fleet(hub, hub.write_kubeconfig(tmp_path / "kubeconfig"), tmp_path)


def hold_gold(fleet: Fleet) -> None:
    """Another placement holds 90 of gold-1's 100 CPUs: room pushes a new binding elsewhere."""
    client = fleet.client()
    try:
        held = Reservation(placement="other", requests={"cpu": "90"},
                           reserved_at=datetime.now(UTC))
        client.create(CapacityLedger(metadata=ObjectMeta(name="gold-1"),
                                     spec=CapacityLedgerSpec(reservations={"other-gold": held})))
    finally:
        client.close()  # fmt: skip


def change_lines(output: str) -> dict[str, str]:
    """`+ cluster` / `- cluster` -> the rest of the line."""
    out = {}
    for line in output.splitlines():
        parts = line.strip().split("  ", 1)
        if len(parts) == 2 and parts[0][:2] in ("+ ", "- "):
            out[parts[0]] = parts[1]
    return out


def test_a_changed_weight_moves_a_pick_n_placement_and_says_why(fleet: Fleet) -> None:
    hold_gold(fleet)
    fleet.apply_and_schedule(pick_n("web", requests="cpu=1"))
    before, versions = fleet.writes(), fleet.versions()
    done = fleet.plan("--all", "--config", fleet.profile("x3.yaml", AFFINITY_X3))
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "against the current profile, the built-in default profile" in out
    changes = change_lines(out)
    # Default: room wins (gold-1 is 90% full); weighted: the preferred term counts three times.
    assert changes["+ gold-1"].startswith("picked (affinity 59, weighted total 159, was ")
    assert ", weighted total " in changes["+ gold-1"]
    assert ", was not picked: affinity " in changes["+ gold-1"]
    assert changes["- plain-2"] == (
        "not picked (affinity 99, placed there now, weighted total 100, was picked: affinity 99, "
        "placed there now)"
    )
    assert "web (PickN): +1 -1 clusters, only when it next evaluates clusters\n" in out
    assert "the change waits for a fresh requeue (requeue --fresh), a scale-up" in out
    assert "placements examined: 1" in out
    assert "placements changed: 1 (0 unchanged)" in out
    assert "bindings moved: 1 added, 1 removed" in out
    assert "  gold-1  +1 -0" in out and "  plain-2  +0 -1" in out
    assert fleet.writes() == before
    assert fleet.versions() == versions


def test_a_plugin_removed_adds_clusters_to_a_pick_all_placement(fleet: Fleet) -> None:
    fleet.apply_and_schedule(pick_all("everywhere"))
    fleet.apply_and_schedule(pick_n("web"))
    done = fleet.plan("--all", "--config", fleet.profile("no-taints.yaml", NO_TAINTS),
                      "--exit-code")  # fmt: skip
    assert done.returncode == 1, (done.stdout, done.stderr)
    out = done.stdout
    assert change_lines(out)["+ tainted-1"] == (
        "picked (was filtered by TaintToleration: taint gpu=true:NoSchedule cannot be "
        "tolerated)"
    )
    assert "&{Key:" not in out
    assert "everywhere (PickAll): +1 -0 clusters, at its next turn" in out
    # The PickN placement keeps gold-1 whichever: its best cluster is not the tainted one.
    assert "placements changed: 1 (1 unchanged)" in out
    assert "web (PickN)" not in out
    verbose = fleet.plan("--all", "--config", fleet.profile("no-taints.yaml", NO_TAINTS), "-v")
    assert "web (PickN): no change" in verbose.stdout


def test_an_enforcing_pick_all_placement_drops_what_the_candidate_filters(fleet: Fleet) -> None:
    """Two PickAll placements went everywhere while taints were not filtered. Back to the
    default profile, KubeFleet's placement keeps tainted-1 (IgnoredDuringExecution); the one
    that enforces its affinity during execution unschedules its binding there at its next turn
    (docs/enforcement.md), and plan says so, and why."""
    enforcing = pick_all("strict")
    enforcing["metadata"]["annotations"] = {
        names.AFFINITY_ENFORCEMENT_ANNOTATION: "DuringExecution"
    }
    for document in (enforcing, pick_all("loose")):
        fleet.apply_and_schedule(document, profile=load_profile(NO_TAINTS))
    done = fleet.plan("--all", "--config", fleet.profile("same.yaml", SAME_AS_DEFAULT),
                      "--current-config", fleet.profile("no-taints.yaml", NO_TAINTS))  # fmt: skip
    assert done.returncode == 0, (done.stdout, done.stderr)
    out = done.stdout
    assert "strict (PickAll): +0 -1 clusters, at its next turn" in out
    assert change_lines(out)["- tainted-1"] == (
        "lost (affinity enforced during execution): cluster has taint gpu=true:NoSchedule, "
        "which the placement does not tolerate (was kept: has a binding of this snapshot)"
    )
    assert "loose (PickAll)" not in out
    assert "placements changed: 1 (1 unchanged)" in out


def test_identical_profiles_change_nothing_and_exit_0(fleet: Fleet) -> None:
    hold_gold(fleet)
    fleet.apply_and_schedule(pick_n("web", requests="cpu=1"))
    fleet.apply_and_schedule(pick_all("everywhere"))
    same = fleet.profile("same.yaml", SAME_AS_DEFAULT)
    before, versions = fleet.writes(), fleet.versions()
    done = fleet.plan("--all", "--config", same, "--exit-code")
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert "placements changed: 0 (2 unchanged)" in done.stdout
    assert "bindings moved: 0 added, 0 removed" in done.stdout
    # The baseline named: the same file on both sides, too.
    both = fleet.plan("--all", "--config", same, "--current-config", same, "--exit-code")
    assert both.returncode == 0, both.stderr
    assert f"against the current profile, {same};" in both.stdout
    assert fleet.writes() == before
    assert fleet.versions() == versions


def test_a_resource_placement_is_compared_with_n(fleet: Fleet) -> None:
    client = fleet.client()
    try:
        client.create(Namespace(metadata={"name": "shop"}))
    finally:
        client.close()
    fleet.apply_and_schedule(pick_all("storefront", "ResourcePlacement"), namespace="shop")
    fleet.apply_and_schedule(pick_all("everywhere"))
    before = fleet.writes()
    done = fleet.plan("-n", "shop", "storefront", "--config",
                      fleet.profile("no-taints.yaml", NO_TAINTS))  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "shop/storefront (PickAll): +1 -0 clusters, at its next turn" in done.stdout
    assert "placements examined: 1" in done.stdout
    assert "everywhere" not in done.stdout
    every = fleet.plan("--all", "--config", fleet.profile("no-taints.yaml", NO_TAINTS))
    assert "shop/storefront (PickAll)" in every.stdout
    assert "everywhere (PickAll)" in every.stdout
    assert fleet.writes() == before


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--all", "--config", "{missing}"], "scheduler config (--config) "),
        (["--all", "--config", "{bad}"], "plugins.filter.enabled[0]: unknown plugin 'Nope'"),
        (["--all", "--config", "{good}", "--current-config", "{missing}"], "does not exist"),
        (["nope", "--config", "{good}"], "no ClusterResourcePlacement named 'nope' on the hub"),
        (["-n", "shop", "nope", "--config", "{good}"],
         "no ResourcePlacement named 'nope' in namespace 'shop'"),
        (["--all", "web", "--config", "{good}"], "--all covers every placement; leave out NAME"),
        (["--all", "-f", "{good}", "--config", "{good}"],
         "--all covers every placement; leave out -f FILE"),
        (["--all"], "give it with --config FILE"),
        ([], "give -f FILE (plan a placement), or --config FILE with --all or NAME"),
        (["-f", "{good}", "--exit-code"], "--exit-code applies to --all or NAME"),
    ],
    ids=["missing-config", "bad-config", "missing-current", "unknown-crp", "unknown-rp",
         "all-and-name", "all-and-file", "no-config", "nothing", "file-and-exit-code"],
)  # fmt: skip
def test_bad_input_is_one_line_and_exit_2(
    fleet: Fleet, args: list[str], expected: str
) -> None:
    files = {
        "missing": str(fleet.tmp / "missing.yaml"),
        "bad": fleet.profile("bad.yaml", "plugins:\n  filter:\n    enabled: [{name: Nope}]\n"),
        "good": fleet.profile("good.yaml", NO_TAINTS),
    }
    before = fleet.writes()
    done = fleet.plan(*(arg.format(**files) for arg in args))
    assert done.returncode == 2, (done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("fleet-scheduler plan: error: "), lines[0]
    assert expected in lines[0], lines[0]
    assert fleet.writes() == before


def test_an_unreachable_hub_is_one_line_and_exit_2(fleet: Fleet) -> None:
    config = fleet.profile("good.yaml", NO_TAINTS)
    port = fleet.hub.url.rsplit(":", 1)[1]
    fleet.hub.stop()
    done = fleet.plan("--all", "--config", config)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert done.stderr.startswith("fleet-scheduler plan: error: cannot read the hub at "), (
        done.stderr
    )
    assert port in done.stderr
    assert "Traceback" not in done.stderr


def test_placements_of_a_fleet_are_read_with_few_calls(fleet: Fleet) -> None:
    """Listing is per kind, not per placement: ten placements cost no more reads than one."""
    for index in range(10):
        fleet.apply_and_schedule(pick_all(f"p{index}"))
    lists = fleet.hub.stats.count("list")
    done = fleet.plan("--all", "--config", fleet.profile("no-taints.yaml", NO_TAINTS))
    assert done.returncode == 0, done.stderr
    assert "placements changed: 10 (0 unchanged)" in done.stdout
    assert "  tainted-1  +10 -0" in done.stdout
    assert fleet.hub.stats.count("list") - lists <= 8


def test_a_profile_that_is_not_utf8_is_bad_input_not_a_change(fleet: Fleet) -> None:
    """A profile saved in Latin-1 is bad input (exit 2, one line), not an unexpected failure:
    exit 1 is what `--exit-code` says when a decision would change, so CI would read a crash as
    "the profile moves placements"."""
    latin1 = fleet.tmp / "latin1.yaml"
    latin1.write_bytes("name: caf\u00e9\n".encode("latin-1"))
    fleet.apply_and_schedule(pick_all("everywhere"))
    for args in (["--config", str(latin1)],
                 ["--config", fleet.profile("good.yaml", NO_TAINTS), "--current-config",
                  str(latin1)]):  # fmt: skip
        done = fleet.plan("--all", *args, "--exit-code")
        assert done.returncode == 2, (done.stdout, done.stderr)
        assert done.stderr.startswith("fleet-scheduler plan: error: scheduler config "), done.stderr
        assert "latin1.yaml" in done.stderr and "UTF-8" in done.stderr, done.stderr


def test_the_report_stays_readable_when_a_placement_gains_hundreds_of_clusters(
    tmp_path: Path,
) -> None:
    """A candidate that stops filtering half a 1,000-cluster fleet adds 500 clusters to every
    PickAll placement: one line per cluster is 500 lines a placement (bench/plan_all.py's 1,000
    placements: half a million lines, 60 MB). Each placement lists a bounded few, says how
    many more, and `-v` lists them all."""
    from scheduler.testing import policy_snapshot
    from workers.cli.plan_profile import FleetReads, Work, compare_fleet, render_profile_plan

    now = datetime.now(UTC)
    clusters = [
        member_cluster(f"m-{i:04d}", now, taints=[("gpu", "true")] if i % 2 else [])
        for i in range(1000)
    ]
    inputs = [
        (name, CycleInput(snapshot=policy_snapshot(name, {"placementType": "PickAll"}),
                          clusters=[], bindings=[], now=now))
        for name in ("p1", "p2")
    ]  # fmt: skip
    candidate = tmp_path / "no-taints.yaml"
    candidate.write_text(NO_TAINTS)
    reads = FleetReads(clusters=clusters, placements={}, snapshots={}, bindings={})
    fleet = compare_fleet(reads, Work(inputs=inputs), None, candidate, processes=1)

    def report(verbose: bool) -> str:
        return render_profile_plan(fleet, candidate=candidate, baseline=None, skipped={},
                                   clusters=len(clusters), verbose=verbose)  # fmt: skip

    short = report(verbose=False)
    assert "p1 (PickAll): +500 -0 clusters, at its next turn" in short
    assert "bindings moved: 1000 added, 0 removed" in short
    assert len(short.splitlines()) <= 60, len(short.splitlines())
    assert "and 490 more (-v lists every cluster)" in short
    assert len(change_lines(report(verbose=True))) == 500
