"""devhub at fleet scale: create rate, listing 20,000 objects, watch fan-out, memory.

Runs `fleet-scheduler devhub` as its own process (as `make run` does) and drives it over real
HTTP with aiohttp, so the figures include JSON encoding, the event loop and the network stack.
Prints `devhub.<metric> <value>` lines:

    devhub.create_per_s              creates per second, N objects, C concurrent clients
    devhub.create_per_s_durable      the same with --data-dir (SQLite, WAL), 5,000 objects
    devhub.list_<N>_ms               one full list of N objects (median of several)
    devhub.list_<N>_paged_ms         the same list in pages of 500
    devhub.list_<N>_selector_ms      a label-selected list over N objects
    devhub.get_per_s                 single-object GETs per second
    devhub.watch_fanout_p50_ms       write-to-delivery latency to the slowest of W watchers
    devhub.watch_fanout_p99_ms
    devhub.rss_mb                    server resident memory with N objects
    devhub.rss_per_object_kb

Usage: python bench/devhub.py [--objects 20000] [--concurrency 32] [--watchers 8]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
import yaml

CLUSTERS = "/apis/cluster.kubernetes-fleet.io/v1beta1/memberclusters"
PAGE = 500
LIST_RUNS = 5
FANOUT_WRITES = 200
GET_REQUESTS = 2000
DURABLE_OBJECTS = 5000
STARTUP_TIMEOUT = 30.0


def member(index: int) -> dict[str, Any]:
    name = f"member-{index:05d}"
    return {
        "apiVersion": "cluster.kubernetes-fleet.io/v1beta1",
        "kind": "MemberCluster",
        "metadata": {"name": name, "labels": {
            "kubernetes-fleet.io/member-name": name,
            "topology.kubernetes.io/region": f"region-{index % 5}",
            "fleet.example.com/shard": str(index % 100),
        }},
        "spec": {"heartbeatPeriodSeconds": 60,
                 "taints": [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]
                 if index % 10 == 0 else []},
    }


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def report(metric: str, value: float) -> None:
    print(f"devhub.{metric} {value:.1f}" if value < 100 else f"devhub.{metric} {value:.0f}")
    sys.stdout.flush()


class Server:
    """`fleet-scheduler devhub` in a child process."""

    def __init__(self, workdir: Path, *, durable: bool = False) -> None:
        self.kubeconfig = workdir / "kubeconfig"
        durability = ["--data-dir", str(workdir / "data")] if durable else []
        self.process = subprocess.Popen(
            [sys.executable, "-m", "workers.cli", "--log-level", "WARNING", "devhub",
             "--hub-port", "0", "--kubeconfig-out", str(self.kubeconfig), *durability],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while not self.kubeconfig.exists():
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"devhub did not start: {self.process.communicate()[1]}")
            time.sleep(0.05)
        config = yaml.safe_load(self.kubeconfig.read_text())
        self.url = config["clusters"][0]["cluster"]["server"].replace("https://", "http://")
        self.token = config["users"][0]["user"]["token"]

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        self.process.communicate(timeout=30)


async def create_all(session: aiohttp.ClientSession, url: str, count: int,
                     concurrency: int) -> float:
    queue: asyncio.Queue[int] = asyncio.Queue()
    for index in range(count):
        queue.put_nowait(index)

    async def worker() -> None:
        while not queue.empty():
            index = queue.get_nowait()
            async with session.post(url + CLUSTERS, json=member(index)) as response:
                if response.status != 201:
                    raise RuntimeError(f"create failed: {response.status} {await response.text()}")

    began = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return count / (time.perf_counter() - began)


async def timed_list(session: aiohttp.ClientSession, url: str, params: dict[str, str],
                     expected: int | None) -> float:
    began = time.perf_counter()
    items = 0
    token = ""
    while True:
        query = dict(params)
        if token:
            query["continue"] = token
        async with session.get(url + CLUSTERS, params=query) as response:
            body = json.loads(await response.read())
        items += len(body["items"])
        token = body["metadata"].get("continue", "")
        if not token:
            break
    elapsed = (time.perf_counter() - began) * 1000
    if expected is not None and items != expected:
        raise RuntimeError(f"listed {items} objects, expected {expected}")
    return elapsed


async def get_rate(session: aiohttp.ClientSession, url: str, count: int,
                   concurrency: int) -> float:
    async def worker(offset: int) -> None:
        for index in range(offset, GET_REQUESTS, concurrency):
            async with session.get(f"{url}{CLUSTERS}/member-{index % count:05d}") as response:
                await response.read()

    began = time.perf_counter()
    await asyncio.gather(*(worker(i) for i in range(concurrency)))
    return GET_REQUESTS / (time.perf_counter() - began)


async def watch_fanout(session: aiohttp.ClientSession, url: str, watchers: int) -> list[float]:
    """Latency from a write's response to its event reaching the slowest watcher, per write."""
    async with session.get(url + CLUSTERS, params={"limit": "1"}) as response:
        rv = (await response.json())["metadata"]["resourceVersion"]
    arrivals: list[dict[str, float]] = [{} for _ in range(watchers)]
    ready = asyncio.Event()
    opened = 0

    async def watch(slot: int) -> None:
        nonlocal opened
        params = {"watch": "true", "resourceVersion": rv}
        async with session.get(url + CLUSTERS, params=params,
                               timeout=aiohttp.ClientTimeout(total=None)) as response:
            opened += 1
            if opened == watchers:
                ready.set()
            async for line in response.content:
                event = json.loads(line)
                arrivals[slot][event["object"]["metadata"]["resourceVersion"]] = time.perf_counter()
                if len(arrivals[slot]) >= FANOUT_WRITES:
                    return

    tasks = [asyncio.create_task(watch(i)) for i in range(watchers)]
    await asyncio.wait_for(ready.wait(), 30)
    written: dict[str, float] = {}
    for index in range(FANOUT_WRITES):
        patch = {"metadata": {"labels": {"bench/tick": str(index)}}}
        async with session.patch(f"{url}{CLUSTERS}/member-{index:05d}", data=json.dumps(patch),
                                 headers={"Content-Type": "application/merge-patch+json"}
                                 ) as response:
            body = await response.json()
            written[body["metadata"]["resourceVersion"]] = time.perf_counter()
        await asyncio.sleep(0.002)  # a realistic stream of writes, not one burst
    await asyncio.wait_for(asyncio.gather(*tasks), 60)
    return [
        max(slot[rv] for slot in arrivals) - at
        for rv, at in written.items()
    ]


async def run(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="devhub-bench-") as scratch:
        server = Server(Path(scratch))
        try:
            idle = rss_mb(server.process.pid)
            connector = aiohttp.TCPConnector(limit=args.concurrency + args.watchers + 4)
            headers = {"Authorization": f"Bearer {server.token}"}
            timeout = aiohttp.ClientTimeout(total=120)
            async with aiohttp.ClientSession(connector=connector, headers=headers,
                                             timeout=timeout) as session:
                n = args.objects
                report("create_per_s", await create_all(session, server.url, n, args.concurrency))
                loaded = rss_mb(server.process.pid)
                report("rss_mb", loaded)
                report("rss_per_object_kb", (loaded - idle) * 1024 / n)
                full = [await timed_list(session, server.url, {}, n) for _ in range(LIST_RUNS)]
                report(f"list_{n}_ms", statistics.median(full))
                paged = [await timed_list(session, server.url, {"limit": str(PAGE)}, n)
                         for _ in range(LIST_RUNS)]
                report(f"list_{n}_paged_ms", statistics.median(paged))
                selected = [await timed_list(session, server.url,
                                             {"labelSelector": "fleet.example.com/shard=7"}, None)
                            for _ in range(LIST_RUNS)]
                report(f"list_{n}_selector_ms", statistics.median(selected))
                report("get_per_s", await get_rate(session, server.url, n, args.concurrency))
                latencies = sorted(await watch_fanout(session, server.url, args.watchers))
                report("watch_fanout_watchers", args.watchers)
                report("watch_fanout_p50_ms", 1000 * latencies[len(latencies) // 2])
                report("watch_fanout_p99_ms", 1000 * latencies[int(len(latencies) * 0.99) - 1])
                report("rss_after_mb", rss_mb(server.process.pid))
        finally:
            server.stop()
    with tempfile.TemporaryDirectory(prefix="devhub-bench-") as scratch:
        server = Server(Path(scratch), durable=True)
        try:
            headers = {"Authorization": f"Bearer {server.token}"}
            async with aiohttp.ClientSession(headers=headers) as session:
                count = min(args.objects, DURABLE_OBJECTS)
                rate = await create_all(session, server.url, count, args.concurrency)
                report("create_per_s_durable", rate)
        finally:
            server.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", type=int, default=20_000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--watchers", type=int, default=8)
    args = parser.parse_args()
    if not sys.platform.startswith("linux"):
        print("bench/devhub.py reads /proc for memory figures; run it on Linux", file=sys.stderr)
        return 2
    asyncio.run(run(args))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
