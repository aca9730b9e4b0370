"""What a scheduler process is told: its flags, parsed once into a frozen RunConfig.

`fleet-scheduler run` and `dev` parse their flags into one RunConfig (workers/cli/run.py) and
hand it on: `serve` (workers.worker) runs the components it names, the watcher reads its part
of it, and the activity-worker children `--processes N` starts are the same RunConfig made a
child's (`for_child`) and written back as flags (`workers.cli.run.run_argv`, which a property
test holds to be the inverse of the parser). Nothing else reads the flags.

The components are the three parts a process may run (docs/architecture.md, "Processes"):

- `workflows`: the workflow worker (placement workflows, the reconcile and rebalance
  workflows, local turns);
- `activities`: the activity worker (turns and cleanups), in this process or in `processes`
  child processes;
- `watcher`: the watcher, which lists and watches the hub and signals the workflows."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Final, Literal

from activities.decisions import DecisionSettings
from hub.names import FLEET_SYSTEM_NAMESPACE
from scheduler.moves.rebalance import PACK, Strategy
from workflows import names

__all__ = [
    "ADMISSION_AUTO",
    "ALL_COMPONENTS",
    "DEFAULT_ADMISSION_WINDOW",
    "DEFAULT_DEPLOYMENT_NAME",
    "DEFAULT_MAX_CACHED_WORKFLOWS",
    "DEFAULT_MAX_CONCURRENT_ACTIVITIES",
    "LOOPBACK",
    "AdmissionWindowSetting",
    "Component",
    "HubFlags",
    "RunConfig",
    "TemporalFlags",
    "VersionFlags",
    "parse_admission_window",
]


class Component(enum.StrEnum):
    WORKFLOWS = "workflows"
    ACTIVITIES = "activities"
    WATCHER = "watcher"


ALL_COMPONENTS: Final = frozenset(Component)

# Each activity holds a thread while it waits on the hub; 16 keeps a 2-core machine busy
# without letting one slow hub hold hundreds of threads.
DEFAULT_MAX_CONCURRENT_ACTIVITIES: Final = 16
# Workflows kept in memory between their tasks (the SDK's default); each costs about 170 KB
# (bench/workflow_cache.py), and one evicted replays its history on its next task.
DEFAULT_MAX_CACHED_WORKFLOWS: Final = 1000
# `--admission-window auto`: the watcher sizes its window from the drain rate it measures
# (control.admission); beside KubeFleet (no snapshotter) that is no window.
ADMISSION_AUTO: Final = "auto"
# `--admission-window`: auto, or a fixed number of turns (0: no window).
AdmissionWindowSetting = int | Literal["auto"]
# Turns of placements not yet scheduled at their generation that may be in Temporal at once, per
# priority key and better (control.admission.AdmissionWindow; 0: no window). Automatic by default,
# sized from the drain rate (control.admission): measured side by side in one run of
# bench/priority.py (bench/RESULTS.md, "Right by default"), 20 urgent placements behind 1,500
# had a p99 of 1.9 s with it (2.3 s without), and a plain burst of 1,000 ran 11% faster with it
# (27.4-29.2/s against 25.4-25.6/s), where a fixed window of 16 had cost a burst 20-40%.
# Beside KubeFleet (--no-snapshotter) "auto" means no window.
DEFAULT_ADMISSION_WINDOW: Final[AdmissionWindowSetting] = ADMISSION_AUTO
DEFAULT_DEPLOYMENT_NAME: Final = "fleet-scheduler"  # the Worker Deployment (workers.versioning)
LOOPBACK: Final = "127.0.0.1"


def parse_admission_window(text: str) -> AdmissionWindowSetting:
    """`--admission-window`'s value: `auto`, `off` (0) or a whole number of turns, as written
    (a negative number is returned for the caller to refuse). ValueError for anything else."""
    word = text.strip().lower()
    if word == ADMISSION_AUTO:
        return ADMISSION_AUTO
    if word == "off":
        return 0
    try:
        return int(word)
    except ValueError:
        raise ValueError(
            f"expected {ADMISSION_AUTO}, off or a number of turns (0: off), got {text!r}"
        ) from None


@dataclass(frozen=True)
class HubFlags:
    """How to reach the hub, as given: None means the client's own default ($KUBECONFIG, the
    pod's service account, ~/.kube/config; the current context)."""

    kubeconfig: Path | None = None
    context: str | None = None


@dataclass(frozen=True)
class TemporalFlags:
    """How to reach Temporal, as given; TLS and API keys come from the config profile or
    TEMPORAL_* variables (workers.temporal_client.load_target resolves them)."""

    address: str | None = None
    namespace: str | None = None
    profile: str | None = None


@dataclass(frozen=True)
class VersionFlags:
    """Worker Deployment versioning (workers.versioning): a build id makes a versioned worker."""

    build_id: str | None = None
    deployment_name: str = DEFAULT_DEPLOYMENT_NAME
    promote: bool = True


@dataclass(frozen=True)
class RunConfig:
    """One scheduler process's configuration. The defaults are a bare process's: every component
    in this process, no health server, no Schedules kept. `run`'s flags default otherwise (the
    health server on 0.0.0.0:8080, the reconcile Schedule every 300 s, one activity process per
    core beside the other components; workers/cli/run.py)."""

    components: frozenset[Component] = ALL_COMPONENTS
    # Activity-worker child processes; 0: the activities (if a component here) run in-process.
    processes: int = 0
    task_queue: str = names.DEFAULT_TASK_QUEUE
    # Standalone: our workflows create policy snapshots; False beside KubeFleet's hub agent.
    snapshotter: bool = True
    profile_file: Path | None = None  # the scheduler profile; None: KubeFleet's default
    # PrioritySort's fairness keys when no profile file is given (docs/priority.md).
    fairness: bool = False
    resource_placements: bool = True  # KubeFleet's --enable-resource-placement
    # KEP-5313 PlacementDecisions (docs/decisions.md): None is the default, on standalone and
    # off beside KubeFleet (`decisions`); where a ClusterResourcePlacement's go, and where the
    # ClusterProfiles they reference live.
    placement_decisions: bool | None = None
    decisions_namespace: str = FLEET_SYSTEM_NAMESPACE
    cluster_profile_namespace: str = FLEET_SYSTEM_NAMESPACE
    local_cycles_up_to: int | None = None  # None: the workers choose (workflows.starts)
    # Turns let into Temporal at once per key and better: ADMISSION_AUTO (sized from the drain
    # rate), or a number (0: no window). Standalone only: beside KubeFleet there is no window.
    admission_window: AdmissionWindowSetting = DEFAULT_ADMISSION_WINDOW
    # The Schedules this process keeps (control.schedules); 0: not managed here.
    reconcile_every_s: float = 0.0
    rebalance_every_s: float = 0.0
    rebalance_strategy: Strategy = PACK
    max_concurrent_activities: int = DEFAULT_MAX_CONCURRENT_ACTIVITIES
    max_cached_workflows: int = DEFAULT_MAX_CACHED_WORKFLOWS
    metrics_host: str = LOOPBACK
    metrics_port: int | None = None  # None: no health server; 0: a free port
    log_level: str = "INFO"
    hub: HubFlags = field(default_factory=HubFlags)
    temporal: TemporalFlags = field(default_factory=TemporalFlags)
    version: VersionFlags = field(default_factory=VersionFlags)

    def __post_init__(self) -> None:
        if not self.components:
            raise ValueError("no component to run: name at least one of "
                             + ", ".join(c.value for c in Component))
        if self.processes < 0:
            raise ValueError(f"processes must be 0 or more, got {self.processes}")
        if self.processes and Component.ACTIVITIES not in self.components:
            raise ValueError("activity processes run the activities component, which is off")
        window = self.admission_window
        if window != ADMISSION_AUTO and (not isinstance(window, int) or window < 0):
            raise ValueError(
                f"admission_window must be {ADMISSION_AUTO!r} or 0 or more, got {window!r}"
            )

    @property
    def decisions(self) -> DecisionSettings:
        """Where turns publish PlacementDecisions, and whether they do (off, a placement's
        cleanup still deletes any left from when they were on)."""
        on = self.snapshotter if self.placement_decisions is None else self.placement_decisions
        return DecisionSettings(
            namespace=self.decisions_namespace,
            profile_namespace=self.cluster_profile_namespace,
            publish=on,
        )

    @property
    def workflows(self) -> bool:
        return Component.WORKFLOWS in self.components

    @property
    def watcher(self) -> bool:
        return Component.WATCHER in self.components

    @property
    def activities_here(self) -> bool:
        """The activity worker runs in this process (not in children)."""
        return Component.ACTIVITIES in self.components and self.processes == 0

    @property
    def manages_schedules(self) -> bool:
        """Only a process with the workflows or the watcher keeps the Schedules: activity
        processes are many and the Schedules' workflows run elsewhere."""
        return self.workflows or self.watcher

    @property
    def reconciles(self) -> bool:
        """This process keeps the reconcile Schedule; its watcher then triggers one reconcile at
        start rather than signalling every placement."""
        return self.reconcile_every_s > 0 and self.manages_schedules

    def for_child(self) -> RunConfig:
        """The configuration of one of this process's activity-worker children: activities only,
        in-process, no Schedules, /metrics on a free loopback port (the parent serves them)."""
        return replace(
            self,
            components=frozenset({Component.ACTIVITIES}),
            processes=0,
            reconcile_every_s=0.0,
            rebalance_every_s=0.0,
            metrics_host=LOOPBACK,
            metrics_port=0,
        )
