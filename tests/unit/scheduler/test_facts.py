"""scheduler.clusters.facts: compact per-cluster facts, cached by object identity across cycles."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hub import names
from scheduler.clusters import facts
from scheduler.testing import member_cluster

NOW = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)


def test_the_same_object_gets_the_same_facts_and_a_changed_one_new_facts() -> None:
    facts.forget()
    cluster = member_cluster("a", NOW, labels={"env": "prod"}, taints=[("gpu", "true")])
    first = facts.facts_of(cluster)
    assert facts.facts_of(cluster) is first
    assert (first.name, dict(first.labels), first.joined) == ("a", {"env": "prod"}, True)
    assert [(t.key, t.value) for t in first.taints] == [("gpu", "true")]
    relabelled = cluster.model_copy(
        update={"metadata": cluster.metadata.model_copy(update={"labels": {"env": "dev"}})}
    )
    assert dict(facts.facts_of(relabelled).labels) == {"env": "dev"}
    assert facts.facts_of(cluster) is first  # the old object keeps its own facts


def test_facts_read_what_the_model_says() -> None:
    stale = member_cluster(
        "b", NOW, heartbeat_age=timedelta(minutes=10), properties={names.NODE_COUNT_PROPERTY: "3"}
    )
    built = facts.build(stale)
    agent = stale.status.agent(names.MEMBER_AGENT)
    assert agent is not None
    assert built.heartbeat == agent.last_received_heartbeat
    assert built.properties == {names.NODE_COUNT_PROPERTY: "3"}
    assert built.deleting is False and built.has_agent is True


def test_prepare_keeps_the_cache_near_the_fleet_it_is_given() -> None:
    facts.forget()
    for generation in range(5):  # every cluster replaced five times over
        fleet = [member_cluster(f"c{i}", NOW, labels={"g": str(generation)}) for i in range(100)]
        prepared = facts.prepare(fleet)
        assert [f.name for f in prepared] == [f"c{i}" for i in range(100)]
        assert all(f.labels["g"] == str(generation) for f in prepared)
    assert facts.cached() <= 2 * 100 + 64
