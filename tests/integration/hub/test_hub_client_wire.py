"""HubClient sends its requests on the official client's pool without the official client's
request layers (issue 35): what reaches the server must be what those layers sent, byte for byte.

A recording HTTP server on loopback answers every request with one MemberCluster and keeps the
request line, the headers in order and the body. Each HubClient call is held to the request the
official client builds from the same method, path, query, body and content type (its
ApiClient.param_serialize and call_api, as HubClient sent before)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import kubernetes.client
import pytest

from hub.client import AUTH_SETTINGS, JSON, JSON_PATCH, MERGE_PATCH, USER_AGENT, HubClient
from hub.errors import HubConfigError
from hub.types import ClusterResourceBinding, MemberCluster
from tests.integration.hub.hub_helpers import cluster

Seen = tuple[str, str, list[tuple[str, str]], bytes]
TOKEN = "wire-token"


class _Recorder(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as the API server

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        seen: list[Seen] = self.server.seen  # type: ignore[attr-defined]
        seen.append((self.command, self.path, list(self.headers.items()), body))
        reply = json.dumps(cluster("m").to_wire()).encode()
        self.send_response(200)
        self.send_header("Content-Type", JSON)
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _answer

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def recorder() -> Iterator[tuple[str, list[Seen]]]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    server.seen = []  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", server.seen  # type: ignore[attr-defined]
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def _official(url: str) -> Callable[..., None]:
    """Send a request the way the official client's layers do (HubClient's old transport)."""
    configuration = kubernetes.client.Configuration()
    configuration.host = url
    configuration.api_key = {"authorization": f"Bearer {TOKEN}"}
    configuration.retries = False
    api = kubernetes.client.ApiClient(configuration)
    api.user_agent = USER_AGENT

    def send(
        method: str,
        path: str,
        query: list[tuple[str, str]] | None = None,
        body: Any = None,
        content_type: str = JSON,
    ) -> None:
        headers = {"Accept": JSON}
        if body is not None:
            headers["Content-Type"] = content_type
        method, full, headers, _, _ = api.param_serialize(
            method, path, query_params=query or [], header_params=headers,
            auth_settings=AUTH_SETTINGS,
        )  # fmt: skip
        assert api.call_api(method, full, headers, body, _request_timeout=(5, 20)).response.data

    return send


def test_every_request_goes_out_as_the_official_client_sent_it(
    recorder: tuple[str, list[Seen]],
) -> None:
    url, seen = recorder
    clusters, bindings = MemberCluster.api_path(), ClusterResourceBinding.api_path()
    member = cluster("m", labels={"zone": "é-1"})
    labels = {"metadata": {"labels": {"env": "prod", "note": 'naïve, "quoted"'}}}
    ops = [{"op": "test", "path": "/metadata/name", "value": "m"}]
    with HubClient.from_url(url, token=TOKEN) as client:
        client.patch_unread(ClusterResourceBinding, "b-1", labels)
        client.patch(MemberCluster, "m", labels, resource_version="7")
        client.patch_unread(MemberCluster, "m", labels, resource_version="7", subresource="status")
        client.json_patch(MemberCluster, "m", ops)
        client.create(member)
        client.get(MemberCluster, "m")
        client.list(MemberCluster, {"env": "prod", "zone": "a b"}, "spec.x=y", limit=500)
        client.delete(MemberCluster, "m", resource_version="9", propagation="Background")
        client.delete_collection(MemberCluster, "env=prod")
    ours, seen[:] = list(seen), []

    send = _official(url)
    send("PATCH", f"{bindings}/b-1", body=labels, content_type=MERGE_PATCH)
    patched = {"metadata": {**labels["metadata"], "resourceVersion": "7"}}
    send("PATCH", f"{clusters}/m", body=patched, content_type=MERGE_PATCH)
    send("PATCH", f"{clusters}/m/status", body=patched, content_type=MERGE_PATCH)
    send("PATCH", f"{clusters}/m", body=ops, content_type=JSON_PATCH)
    send("POST", clusters, body=member.to_wire())
    send("GET", f"{clusters}/m")
    query = [("labelSelector", "env=prod,zone=a b"), ("fieldSelector", "spec.x=y")]
    send("GET", clusters, query=[*query, ("limit", "500")])
    options = {
        "apiVersion": "v1",
        "kind": "DeleteOptions",
        "preconditions": {"resourceVersion": "9"},
        "propagationPolicy": "Background",
    }
    send("DELETE", f"{clusters}/m", body=options)
    send("DELETE", clusters, query=[("labelSelector", "env=prod")],
         body={"apiVersion": "v1", "kind": "DeleteOptions"})  # fmt: skip

    assert len(ours) == len(seen) == 9
    for mine, theirs in zip(ours, seen, strict=True):
        assert mine == theirs
    assert ("authorization", f"Bearer {TOKEN}") in [(k.lower(), v) for k, v in ours[0][2]]


def test_an_untrusted_certificate_is_a_configuration_error(devhub: Any) -> None:
    """As before the request layers were skipped: the REST layer's TLS failure said which."""
    with (
        HubClient.from_url(devhub.tls_url, token=devhub.token) as client,
        pytest.raises(HubConfigError, match="certificate not trusted"),
    ):
        client.get(MemberCluster, "member-1")
