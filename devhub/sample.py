"""The sample fleet behind `make run`: MemberClusters that stay eligible while devhub runs.

KubeFleet's eligibility check (kubefleet-rules section 6) drops a cluster whose member agent has not
sent a heartbeat for five minutes. There is no member agent here, so devhub plays its part: it
creates the sample clusters when missing, writes their status through the status subresource
(create drops status, exactly as a real hub does) and refreshes `lastReceivedHeartbeat` every
minute. A cluster someone deleted, or whose MemberAgent status they removed to test
ineligibility, is left alone."""

from __future__ import annotations

import asyncio
import copy
import logging
from pathlib import Path
from typing import Any, Final

import yaml

from devhub.errors import ApiError
from devhub.store import Store, now_rfc3339
from hub.names import MEMBER_AGENT
from hub.types import MemberCluster

__all__ = [
    "DEFAULT_FLEET",
    "SAMPLE_PLACEMENTS",
    "apply_fleet",
    "keep_heartbeats",
    "read_fleet",
    "refresh_heartbeat",
]

log = logging.getLogger("devhub.sample")

# Package data: installed with the wheel, so `fleet-scheduler dev` finds them anywhere.
SAMPLES: Final = Path(__file__).resolve().parent / "samples"
DEFAULT_FLEET: Final = SAMPLES / "fleet.yaml"
SAMPLE_PLACEMENTS: Final = SAMPLES / "placements.yaml"
MEMBER_CLUSTERS: Final = f"{MemberCluster.PLURAL}.{MemberCluster.GROUP}"


def read_fleet(path: Path | None = None) -> list[dict[str, Any]]:
    source = path or DEFAULT_FLEET
    documents = [doc for doc in yaml.safe_load_all(source.read_text(encoding="utf-8")) if doc]
    for doc in documents:
        if doc.get("kind") != "MemberCluster":
            raise ValueError(f"{source}: only MemberCluster documents are supported, "
                             f"found {doc.get('kind')!r}")
    return documents


def _fresh_status(status: dict[str, Any], now: str) -> dict[str, Any]:
    fresh = copy.deepcopy(status)
    for agent in fresh.get("agentStatus", ()):
        if agent.get("type") == MEMBER_AGENT:
            agent["lastReceivedHeartbeat"] = now
        for condition in agent.get("conditions", ()):
            condition.setdefault("lastTransitionTime", now)
    for condition in fresh.get("conditions", ()):
        condition.setdefault("lastTransitionTime", now)
    for prop in (fresh.get("properties") or {}).values():
        prop.setdefault("observationTime", now)
    usage = fresh.get("resourceUsage")
    if isinstance(usage, dict):
        usage.setdefault("observationTime", now)
    return fresh


def apply_fleet(store: Store, documents: list[dict[str, Any]]) -> list[str]:
    """Create missing clusters with their sample status; refresh heartbeats of existing ones."""
    res = store.resources[MEMBER_CLUSTERS]
    now = now_rfc3339()
    names = []
    for doc in documents:
        name = doc["metadata"]["name"]
        names.append(name)
        try:
            current = store.get(res, name)
        except ApiError:
            body = {key: value for key, value in doc.items() if key != "status"}
            entry, _ = store.create(res, copy.deepcopy(body))
            with_status = entry.fresh()
            with_status["status"] = _fresh_status(doc.get("status") or {}, now)
            store.replace(res, name, with_status, subresource="status")
            continue
        refresh_heartbeat(store, current.obj["metadata"]["name"])
    return names


def refresh_heartbeat(store: Store, name: str) -> bool:
    """Set the MemberAgent's lastReceivedHeartbeat to now; False if there is nothing to refresh."""
    res = store.resources[MEMBER_CLUSTERS]
    try:
        entry = store.get(res, name)
    except ApiError:
        return False
    obj = entry.fresh()
    if obj["metadata"].get("deletionTimestamp"):
        return False
    agents = [a for a in (obj.get("status") or {}).get("agentStatus", ())
              if a.get("type") == MEMBER_AGENT]
    if not agents:
        return False
    for agent in agents:
        agent["lastReceivedHeartbeat"] = now_rfc3339()
    store.replace(res, name, obj, subresource="status")
    return True


async def keep_heartbeats(store: Store, names: list[str], interval: float) -> None:
    """Refresh the sample clusters' heartbeats every `interval` seconds until cancelled."""
    while True:
        await asyncio.sleep(interval)
        for name in names:
            try:
                refresh_heartbeat(store, name)
            except ApiError as exc:
                log.warning("devhub: could not refresh the heartbeat of %s: %s", name, exc)
