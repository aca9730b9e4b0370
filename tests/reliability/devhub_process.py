"""A durable devhub in its own process, whose faults a test drives over stdin.

`fleet-scheduler devhub` has no way to inject faults from outside, and an in-process DevHub
cannot be SIGKILLed. This script is both: a DevHub on a fixed port with `--data-dir`, plus a
line protocol so the test that started it can inject and clear faults and read their hits.

    python tests/reliability/devhub_process.py --port N --data-dir DIR --kubeconfig-out PATH

Every reply is one stdout line starting with REPLY_PREFIX and holding JSON. Once serving it
prints `{"ready": true, "port": N, "url": ...}`. Requests, one JSON object per stdin line:

    {"op": "inject", "verb": ..., "resource": ..., "status": ..., "share": ..., "count": ...,
     "hang": ...}                       -> {"ok": true, "fault": ID}
    {"op": "clear"}                     -> {"ok": true}
    {"op": "hits"}                      -> {"ok": true, "hits": {ID: n, ...}}
    {"op": "count", "verb": ..., "resource": ...}  -> {"ok": true, "count": n}

A bad request gets `{"ok": false, "error": ...}`, never a crash. The process runs until stdin
closes or SIGTERM/SIGKILL; its data survives in `--data-dir` for the next one on the same port."""

from __future__ import annotations

import argparse
import json
import signal
import sys
from pathlib import Path
from typing import Any, Final

from devhub import DevHub
from devhub.faults import Fault

REPLY_PREFIX: Final = "@@ "
# Watch bookmarks every second keep resumed watches close to the head.
BOOKMARK_INTERVAL_S: Final = 1.0
FAULT_FIELDS: Final = ("verb", "resource", "status", "share", "count", "hang", "retry_after")


def reply(payload: dict[str, Any]) -> None:
    sys.stdout.write(REPLY_PREFIX + json.dumps(payload) + "\n")
    sys.stdout.flush()


def handle(hub: DevHub, faults: dict[int, Fault], request: dict[str, Any]) -> dict[str, Any]:
    op = request.get("op")
    if op == "inject":
        fault = hub.faults.inject(**{k: request[k] for k in FAULT_FIELDS if k in request})
        fault_id = len(faults) + 1
        faults[fault_id] = fault
        return {"ok": True, "fault": fault_id}
    if op == "clear":
        hub.faults.clear()
        return {"ok": True}
    if op == "hits":
        return {"ok": True, "hits": {str(i): f.hits for i, f in faults.items()}}
    if op == "count":
        return {
            "ok": True,
            "count": hub.stats.count(request.get("verb", "*"), request.get("resource", "*")),
        }
    return {"ok": False, "error": f"unknown op {op!r}"}


def _exit_on_term(signum: int, frame: object) -> None:
    raise SystemExit(0)  # unwinds through main's finally, which stops the hub


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--kubeconfig-out", type=Path, required=True)
    parser.add_argument("--fault-seed", type=int, default=None)
    args = parser.parse_args()

    hub = DevHub(
        port=args.port,
        data_dir=args.data_dir,
        bookmark_interval=BOOKMARK_INTERVAL_S,
        fault_seed=args.fault_seed,
    ).start()
    signal.signal(signal.SIGTERM, _exit_on_term)
    try:
        hub.write_kubeconfig(args.kubeconfig_out)
        reply({"ready": True, "port": hub.port, "url": hub.url})
        faults: dict[int, Fault] = {}
        for line in sys.stdin:
            if not line.strip():
                continue
            try:
                request = json.loads(line)
                if not isinstance(request, dict):
                    raise ValueError("a request is a JSON object")
                reply(handle(hub, faults, request))
            except (ValueError, TypeError, KeyError) as exc:
                reply({"ok": False, "error": f"{type(exc).__name__}: {exc}"})
    finally:
        hub.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
