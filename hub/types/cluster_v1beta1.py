"""MemberCluster (cluster.kubernetes-fleet.io/v1beta1): the fields the scheduler reads.

Reference 1.10 lists them. Status is written by the member agent and the property provider; we
only read it, so unknown status fields are kept."""

from __future__ import annotations

from datetime import datetime
from typing import ClassVar

from pydantic import Field

from hub import names
from hub.types.meta import Condition, FleetModel, HubObject, crd_enum

__all__ = [
    "AgentStatus",
    "MemberCluster",
    "MemberClusterSpec",
    "MemberClusterStatus",
    "PropertyValue",
    "ResourceUsage",
    "Taint",
]


class Taint(FleetModel):
    key: str = Field(max_length=316)
    value: str | None = Field(default=None, max_length=63)
    effect: str = Field(json_schema_extra=crd_enum(names.EFFECT_NO_SCHEDULE))


class MemberClusterSpec(FleetModel):
    preserve_unknown_fields: ClassVar[bool] = True  # identity, heartbeatPeriodSeconds, ...

    heartbeat_period_seconds: int | None = Field(default=None, ge=1, le=600)
    taints: list[Taint] = Field(default_factory=list, max_length=100)


class PropertyValue(FleetModel):
    value: str
    observation_time: datetime | None = None


class ResourceUsage(FleetModel):
    capacity: dict[str, str] = Field(default_factory=dict)
    allocatable: dict[str, str] = Field(default_factory=dict)
    available: dict[str, str] = Field(default_factory=dict)
    observation_time: datetime | None = None


class AgentStatus(FleetModel):
    type: str
    conditions: list[Condition] = Field(default_factory=list)
    last_received_heartbeat: datetime | None = None

    def condition(self, type_: str) -> Condition | None:
        return next((c for c in self.conditions if c.type == type_), None)


class MemberClusterStatus(FleetModel):
    preserve_unknown_fields: ClassVar[bool] = True

    conditions: list[Condition] = Field(default_factory=list)
    properties: dict[str, PropertyValue] = Field(default_factory=dict)
    resource_usage: ResourceUsage = Field(default_factory=ResourceUsage)
    agent_status: list[AgentStatus] = Field(default_factory=list)
    namespaces: dict[str, str] | None = None

    def agent(self, type_: str) -> AgentStatus | None:
        return next((a for a in self.agent_status if a.type == type_), None)


class MemberCluster(HubObject):
    GROUP: ClassVar[str] = names.CLUSTER_GROUP
    KIND: ClassVar[str] = "MemberCluster"
    PLURAL: ClassVar[str] = "memberclusters"
    SINGULAR: ClassVar[str] = "membercluster"
    SHORT_NAMES: ClassVar[tuple[str, ...]] = ("cluster",)
    CATEGORIES: ClassVar[tuple[str, ...]] = ("fleet", "fleet-cluster")
    PRINTER_COLUMNS: ClassVar[tuple[tuple[str, str, str], ...]] = (
        ("Joined", "string", '.status.conditions[?(@.type=="Joined")].status'),
        ("Taints", "string", ".spec.taints[*].key"),
    )

    spec: MemberClusterSpec = Field(default_factory=MemberClusterSpec)
    status: MemberClusterStatus = Field(default_factory=MemberClusterStatus)
