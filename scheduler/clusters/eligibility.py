"""Cluster eligibility: may a member cluster receive new placements right now?

Reference section 6, after KubeFleet's `pkg/scheduler/clustereligibilitychecker/checker.go`.
Used by the ClusterEligibility filter, by PickFixed and by the member-cluster watcher, so the
reasons are user-visible decision text and must read exactly as KubeFleet's.

"now" is an argument, never a clock read, so a cycle stays a pure function of its inputs. Go
measures elapsed time as a `time.Duration` (int64 nanoseconds, saturating), and a missing
timestamp is Go's zero time (year 1), which saturates to about 153722867.28 minutes; we
reproduce both so the minutes in a reason are the same figures KubeFleet would write."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from hub import names
from hub.types import MemberCluster
from scheduler.clusters.facts import ClusterFacts, aware, build

__all__ = [
    "DEFAULT_HEALTH_TIMEOUT",
    "DEFAULT_HEARTBEAT_TIMEOUT",
    "REASON_AGENT_NOT_JOINED",
    "REASON_AGENT_NOT_ONLINE",
    "REASON_HEALTH_UNKNOWN",
    "REASON_LEFT_FLEET",
    "REASON_NO_RECENT_HEARTBEAT",
    "REASON_UNHEALTHY",
    "EligibilityChecker",
]

DEFAULT_HEARTBEAT_TIMEOUT = timedelta(minutes=5)
DEFAULT_HEALTH_TIMEOUT = timedelta(minutes=5)

_NOT_CONNECTED = "cluster is not connected to the fleet: "
REASON_LEFT_FLEET = "cluster has left the fleet"
REASON_AGENT_NOT_ONLINE = _NOT_CONNECTED + "member agent not online yet"
REASON_NO_RECENT_HEARTBEAT = (
    _NOT_CONNECTED + "no recent heartbeat signals (last received {minutes:.2f} minutes ago)"
)
REASON_AGENT_NOT_JOINED = _NOT_CONNECTED + "member agent not joined yet"
REASON_HEALTH_UNKNOWN = _NOT_CONNECTED + "health condition from member agent is not available"
REASON_UNHEALTHY = (
    _NOT_CONNECTED
    + "unhealthy for a prolonged period of time (last transitioned {minutes:.2f} minutes ago)"
)

_GO_ZERO_TIME = datetime(1, 1, 1, tzinfo=UTC)
_MAX_DURATION_NS = (1 << 63) - 1
_MIN_DURATION_NS = -(1 << 63)
_NS_PER_MINUTE = 60_000_000_000


class EligibilityChecker:
    """Checks the six conditions of kubefleet-rules section 6, in order; the first failure decides.

    Stateless apart from its two timeouts, so one instance may serve every cycle."""

    def __init__(
        self,
        heartbeat_timeout: timedelta = DEFAULT_HEARTBEAT_TIMEOUT,
        health_timeout: timedelta = DEFAULT_HEALTH_TIMEOUT,
    ) -> None:
        self._heartbeat_timeout = heartbeat_timeout
        self._health_timeout = health_timeout

    def check(self, cluster: MemberCluster, now: datetime) -> str | None:
        """None if the cluster is eligible, else KubeFleet's ineligibility reason."""
        return self.check_facts(build(cluster), now)

    def check_facts(self, facts: ClusterFacts, now: datetime) -> str | None:
        """`check` on a cluster's facts (a cycle reads them from `scheduler.clusters.facts`'s
        cache)."""
        if facts.deleting:
            return REASON_LEFT_FLEET
        if not facts.has_agent:
            return REASON_AGENT_NOT_ONLINE
        now = aware(now)
        stale = _elapsed_beyond(facts.heartbeat, now, self._heartbeat_timeout)
        if stale is not None:
            return REASON_NO_RECENT_HEARTBEAT.format(minutes=_go_minutes(stale))
        if not facts.joined:
            return REASON_AGENT_NOT_JOINED
        if facts.healthy is None:
            return REASON_HEALTH_UNKNOWN
        if facts.healthy != names.TRUE:
            unhealthy = _elapsed_beyond(facts.healthy_since, now, self._health_timeout)
            if unhealthy is not None:
                return REASON_UNHEALTHY.format(minutes=_go_minutes(unhealthy))
        return None


    def check_all(self, facts: Sequence[ClusterFacts], now: datetime) -> list[str | None]:
        """`check_facts` of each cluster. A cluster that is plainly eligible (an agent that
        joined, is healthy and beat within the timeout) is told apart with one comparison of
        its heartbeat against `now - timeout`, computed once; any other asks `check_facts`."""
        now = aware(now)
        recent = now - self._heartbeat_timeout
        check, true = self.check_facts, names.TRUE
        return [
            None
            if (
                f.healthy == true
                and f.joined
                and f.heartbeat is not None
                and f.heartbeat >= recent
                and not f.deleting
                and f.has_agent
            )
            else check(f, now)
            for f in facts
        ]


def _elapsed_beyond(moment: datetime | None, now: datetime, timeout: timedelta) -> int | None:
    """Go's `time.Since(moment) > timeout`: the elapsed nanoseconds if so, else None."""
    if moment is not None and aware(moment) >= now - timeout:
        return None  # the common case, decided without nanosecond arithmetic
    elapsed = _since(moment, now)
    return elapsed if elapsed > _timedelta_ns(timeout) else None


def _timedelta_ns(delta: timedelta) -> int:
    return (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1_000


def _since(moment: datetime | None, now: datetime) -> int:
    """Go's time.Since in nanoseconds, saturating like time.Time.Sub; None is Go's zero time."""
    elapsed = _timedelta_ns(aware(now) - aware(moment or _GO_ZERO_TIME))
    return max(_MIN_DURATION_NS, min(_MAX_DURATION_NS, elapsed))


def _go_minutes(duration_ns: int) -> float:
    """Go's Duration.Minutes(): whole minutes plus the remainder, truncating toward zero."""
    whole = abs(duration_ns) // _NS_PER_MINUTE
    rest = abs(duration_ns) % _NS_PER_MINUTE
    sign = -1 if duration_ns < 0 else 1
    return float(sign * whole) + float(sign * rest) / 60e9
