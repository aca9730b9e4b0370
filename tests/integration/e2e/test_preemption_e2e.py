"""Preemption end to end (issue 37, docs/priority.md "Preemption"): devhub, the Temporal dev
server, the worker and the watcher, nothing stood in. The issue's fleet: three clusters of 8 CPUs
filled by six `cpu=4` PickN-1 placements of a low class; a PickN-2 `cpu=4` placement of a class
100,000 higher arrives, takes exactly the room it needs, and `explain` says who took what from
whom. A sampler reads the hub every 0.1 s throughout: no cluster ever holds more than its room.
A class with `preemptionPolicy: Never` waits."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Final

import pytest
from temporalio.client import Client

from activities.capacity import Ledgers
from activities.preemption import nominations_of
from control.watcher import Watcher
from hub import names
from hub.client import HubClient
from hub.types import ClusterResourceBinding, ClusterResourcePlacement, ObjectMeta, PriorityClass
from scheduler.room.capacity import is_active
from tests.support.cli import run_cli
from tests.support.fleet import add_cluster, unique
from tests.support.hub import hub_client
from tests.support.waits import until_async

pytestmark = pytest.mark.asyncio(loop_scope="session")

LOW, URGENT = 1_000, 101_000
CPU: Final = 8  # each cluster's room
ASKS: Final = 4  # each binding's
SAMPLE_EVERY_S: Final = 0.1
# Generous: a loaded 2-core machine runs four test workers; the preemption itself takes a few
# turns (the urgent's, each victim's, the urgent's again).
SETTLE_S: Final = 90.0


def priority_class(name: str, value: int, policy: str = "PreemptLowerPriority") -> PriorityClass:
    return PriorityClass(metadata=ObjectMeta(name=name), value=value, preemption_policy=policy)


def placement(name: str, n: int, cls: str, pool: str) -> ClusterResourcePlacement:
    return ClusterResourcePlacement.from_wire(
        {
            "metadata": {
                "name": name,
                "annotations": {
                    names.REQUESTS_ANNOTATION: f"cpu={ASKS}",
                    names.PRIORITY_CLASS_ANNOTATION: cls,
                },
            },
            "spec": {
                "resourceSelectors": [
                    {"group": "", "version": "v1", "kind": "Namespace", "name": "app"}
                ],
                "policy": {
                    "placementType": "PickN",
                    "numberOfClusters": n,
                    "affinity": {
                        "clusterAffinity": {
                            "requiredDuringSchedulingIgnoredDuringExecution": {
                                "clusterSelectorTerms": [
                                    {"labelSelector": {"matchLabels": {"pool": pool}}}
                                ]
                            }
                        }
                    },
                },
            },
        }
    )


def active(hub: HubClient) -> dict[str, list[ClusterResourceBinding]]:
    """Placement -> its active bindings (Scheduled or Bound, not deleting)."""
    out: dict[str, list[ClusterResourceBinding]] = {}
    for binding in hub.list(ClusterResourceBinding).items:
        if is_active(binding):
            owner = binding.metadata.labels[names.PARENT_PLACEMENT_LABEL]
            out.setdefault(owner, []).append(binding)
    return out


@contextmanager
def sampled(kubeconfig: Path, clusters: tuple[str, ...]) -> Iterator[list[str]]:
    """Samples every active binding's requests per cluster every SAMPLE_EVERY_S until the block
    ends; yields the list of what was ever found above a cluster's room (empty: never)."""
    over: list[str] = []
    stop = threading.Event()
    counted = [0]

    def sample() -> None:
        with hub_client(kubeconfig) as reader:
            while not stop.wait(SAMPLE_EVERY_S):  # bounded by: the block's end sets `stop`
                used = dict.fromkeys(clusters, 0)
                for binding in reader.list(ClusterResourceBinding).items:
                    if is_active(binding) and binding.spec.target_cluster in used:
                        used[binding.spec.target_cluster] += ASKS  # every placement asks 4
                over.extend(f"{c}: {u} CPU" for c, u in used.items() if u > CPU)
                counted[0] += 1

    sampler = threading.Thread(target=sample, name="room-sampler", daemon=True)
    sampler.start()
    try:
        yield over
    finally:
        stop.set()
        sampler.join(timeout=30)
    assert counted[0] >= 1, "the sampler never read the hub"


async def explained(address: str, name: str, *said: str) -> str:
    """`fleet-scheduler explain NAME` once it says every one of `said` (regular expressions);
    before the placement's workflow has started, or has run that turn, it is asked again."""

    def check() -> str | None:
        done = run_cli("explain", name, "--temporal-address", address)
        out = done.stdout if done.returncode == 0 else done.stderr
        return out if all(re.search(s, out, re.MULTILINE) for s in said) else None

    return await until_async(check, what=f"explain {name} saying {said}", timeout=SETTLE_S,
                             blocking=True)  # fmt: skip


async def test_the_urgent_placement_takes_exactly_its_room_and_explain_says_from_whom(
    hub: HubClient, hub_kubeconfig: Path, system: Watcher, temporal_client: Client
) -> None:
    prefix = unique("pre")
    clusters = tuple(f"{prefix}-member-{i}" for i in (1, 2, 3))
    low_class, urgent_class, polite_class = (f"{prefix}-{c}" for c in ("low", "urgent", "polite"))
    hub.create(priority_class(low_class, LOW))
    hub.create(priority_class(urgent_class, URGENT))
    hub.create(priority_class(polite_class, URGENT, "Never"))
    for cluster in clusters:
        add_cluster(hub, cluster, labels={"pool": prefix}, allocatable={"cpu": str(CPU)})
    address = temporal_client.service_client.config.target_host

    with sampled(hub_kubeconfig, clusters) as over:
        lows = [f"{prefix}-low-{i}" for i in range(6)]
        for name in lows:
            hub.create(placement(name, 1, low_class, prefix))
        await until_async(
            lambda: sum(len(active(hub).get(n, [])) for n in lows) == 6,
            what="six low bindings", timeout=SETTLE_S, blocking=True,
        )  # fmt: skip
        urgent = f"{prefix}-urgent"
        hub.create(placement(urgent, 2, urgent_class, prefix))
        await until_async(
            lambda: len(active(hub).get(urgent, [])) == 2,
            what="the urgent placement's two bindings", timeout=SETTLE_S, blocking=True,
        )  # fmt: skip
        left = active(hub)
        assert sum(len(left.get(n, [])) for n in lows) == 4, left  # exactly two victims
        victims = sorted(n for n in lows if not left.get(n))
        assert len(victims) == 2, left
        assert not nominations_of(Ledgers.read(hub), urgent)  # turned into its reservations

        # The polite class never preempts: it waits, short, with nothing nominated for it.
        polite = f"{prefix}-polite"
        hub.create(placement(polite, 1, polite_class, prefix))
        await explained(address, polite, r"^short: not enough room", "preemptionPolicy: Never")
        assert not nominations_of(Ledgers.read(hub), polite)
        assert not active(hub).get(polite)
    assert not over, over[:5]

    # Who took what from whom: the victims' bindings, Unscheduled, say it...
    taken: dict[str, str] = {}  # cluster -> the victim's binding there
    for victim in victims:
        (gone,) = [
            b
            for b in hub.list(
                ClusterResourceBinding, {names.PARENT_PLACEMENT_LABEL: victim}
            ).items
            if not is_active(b)
        ]
        cluster = gone.spec.target_cluster
        assert gone.metadata.annotations[names.PREEMPTED_BY_ANNOTATION] == (
            f"crp/{urgent} (priority {URGENT}) on {cluster}, over priority {LOW}"
        )
        taken[cluster] = gone.metadata.name
    assert sorted(taken) == sorted(b.spec.target_cluster for b in active(hub)[urgent])

    # ...and so does `explain`: on the urgent placement, each cluster and victim binding...
    # (Under "moves before cycle N": the lines of the last turn that had any, whichever turn
    # of the preemption that was; they name each cluster and the victim's binding there.)
    await explained(
        address,
        urgent,
        *(rf"^  \S.*\b{cluster}\b.*\b{binding}\b" for cluster, binding in taken.items()),
    )
    # ...on each victim, its preemptor.
    for victim in victims:
        (cluster,) = [c for c, b in taken.items() if b.startswith(f"{victim}-")]
        await explained(
            address, victim, rf"preempted by crp/{urgent} \(priority {URGENT}\) on {cluster}"
        )
    left = active(hub)  # and nothing more was taken since
    assert sum(len(left.get(n, [])) for n in lows) == 4 and len(left[urgent]) == 2, left
