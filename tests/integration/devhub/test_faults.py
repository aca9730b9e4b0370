"""Fault injection and request statistics, driven from the test's own thread."""

from __future__ import annotations

import time

import pytest
import requests

from devhub import DevHub
from tests.integration.devhub.devhub_helpers import BINDINGS, CLUSTERS, Client, binding, cluster
from tests.support.waits import consistently


@pytest.mark.parametrize(("status", "reason"), [
    (500, "InternalError"), (503, "ServiceUnavailable"), (429, "TooManyRequests"),
    (409, "Conflict"),
])
def test_injected_statuses_are_returned_as_status_objects(
    api: Client, devhub: DevHub, status: int, reason: str
) -> None:
    devhub.faults.inject(verb="create", resource="memberclusters", status=status)
    response = api.post(CLUSTERS, cluster("m1"))
    assert response.status_code == status
    assert response.json()["reason"] == reason
    assert api.get(f"{CLUSTERS}/m1").status_code == 404  # a failed create stores nothing


def test_too_many_requests_says_when_to_retry(api: Client, devhub: DevHub) -> None:
    devhub.faults.inject(verb="list", status=429, retry_after=3)
    response = api.get(CLUSTERS)
    assert response.headers["Retry-After"] == "3"
    assert response.json()["details"]["retryAfterSeconds"] == 3


def test_faults_match_only_their_verb_and_resource(api: Client, devhub: DevHub) -> None:
    devhub.faults.inject(verb="create", resource="clusterresourcebindings", status=503)
    assert api.post(CLUSTERS, cluster("m1")).status_code == 201
    assert api.get(BINDINGS).status_code == 200
    assert api.post(BINDINGS, binding("b1")).status_code == 503


def test_a_resource_fault_covers_its_status_subresource(api: Client, devhub: DevHub) -> None:
    created = api.create(CLUSTERS, cluster("m1"))
    devhub.faults.inject(verb="update", resource="memberclusters/status", status=500)
    assert api.put(f"{CLUSTERS}/m1", created).status_code == 200
    assert api.put(f"{CLUSTERS}/m1/status", created).status_code == 500
    devhub.faults.clear()
    devhub.faults.inject(verb="update", resource="memberclusters", status=500)
    assert api.put(f"{CLUSTERS}/m1/status", created).status_code == 500


def test_count_limits_how_often_a_fault_fires(api: Client, devhub: DevHub) -> None:
    fault = devhub.faults.inject(verb="get", status=503, count=2)
    codes = [api.get(f"{CLUSTERS}/m1").status_code for _ in range(4)]
    assert codes == [503, 503, 404, 404]
    assert fault.hits == 2


@pytest.mark.parametrize(("share", "expected"), [(0.0, 0), (1.0, 20)])
def test_share_is_the_fraction_that_fails(
    api: Client, devhub: DevHub, share: float, expected: int
) -> None:
    devhub.faults.inject(verb="list", status=500, share=share)
    failures = sum(api.get(CLUSTERS).status_code == 500 for _ in range(20))
    assert failures == expected


def test_a_partial_share_fails_some_but_not_all(api: Client, devhub: DevHub) -> None:
    devhub.faults.inject(verb="list", status=500, share=0.5)
    failures = sum(api.get(CLUSTERS).status_code == 500 for _ in range(60))
    assert 5 < failures < 55


def test_removing_a_fault_restores_service(api: Client, devhub: DevHub) -> None:
    fault = devhub.faults.inject(verb="*", resource="*", status=500)
    assert api.get(CLUSTERS).status_code == 500
    fault.remove()
    assert api.get(CLUSTERS).status_code == 200


def test_a_hanging_request_holds_until_the_client_gives_up(api: Client, devhub: DevHub) -> None:
    devhub.faults.inject(verb="get", resource="memberclusters", hang=True)
    began = time.monotonic()
    with pytest.raises(requests.exceptions.ReadTimeout):
        api.get(f"{CLUSTERS}/m1", timeout=(2, 0.5))
    assert time.monotonic() - began >= 0.5
    assert api.get(CLUSTERS).status_code == 200  # other verbs are served meanwhile


def test_clearing_releases_hanging_requests(api: Client, devhub: DevHub) -> None:
    import threading

    devhub.faults.inject(verb="get", hang=True)
    results: list[int] = []
    thread = threading.Thread(
        target=lambda: results.append(api.get(f"{CLUSTERS}/m1", timeout=10).status_code))
    thread.start()

    def hanging() -> None:
        assert results == []

    consistently(hanging, duration=0.3, poll=0.05)
    devhub.faults.clear()
    thread.join(timeout=5)
    assert results == [404]


@pytest.mark.parametrize("kwargs", [
    {"verb": "explode"}, {"status": 418}, {"share": 1.5}, {"count": 0},
])
def test_bad_fault_specifications_are_refused(devhub: DevHub, kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        devhub.faults.inject(**kwargs)  # type: ignore[arg-type]


def test_stats_count_requests_by_verb_and_resource(api: Client, devhub: DevHub) -> None:
    created = api.create(CLUSTERS, cluster("m1"))
    api.post(CLUSTERS, cluster("m1"))  # refused, still a request
    api.get(f"{CLUSTERS}/m1")
    api.get(CLUSTERS)
    api.put(f"{CLUSTERS}/m1/status", created)
    api.delete(f"{CLUSTERS}/m1")
    stats = devhub.stats
    assert stats.count("create", "memberclusters") == 2
    assert stats.count("get", "memberclusters") == 1
    assert stats.count("list") == 1
    assert stats.count("update", "memberclusters/status") == 1
    assert stats.count("update", "memberclusters") == 1  # includes the subresource
    assert stats.count("delete", "memberclusters") == 1
    assert stats.count("create", "clusterresourcebindings") == 0
    assert stats.snapshot()[("create", "memberclusters")] == 2


def test_reset_clears_faults_and_stats(devhub: DevHub, api: Client) -> None:
    devhub.faults.inject(status=500)
    api.get(CLUSTERS)
    devhub.reset()
    assert devhub.faults.active() == []
    assert devhub.stats.count() == 0
    assert api.get(CLUSTERS).status_code == 200
