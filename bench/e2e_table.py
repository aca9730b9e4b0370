"""Markdown tables of bench/e2e.py outputs, for bench/RESULTS.md.

    python bench/e2e_table.py bench/out/k100-p100.txt bench/out/k100-p1000.txt ...

Each file holds the `name value` lines of one run. Prints one table of the headline figures
(one row per run) and, per run, every line it printed."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

COLUMNS = (
    ("K", "config.clusters"),
    ("P", "config.placements"),
    ("e2e /s", "e2e.placements_per_s"),
    ("burst s", "e2e.burst_s"),
    ("queue /s", "baseline.queue.placements_per_s"),
    ("ceiling /s", "baseline.ceiling.placements_per_s"),
    ("vs queue", "e2e.ratio.vs_queue"),
    ("vs ceiling", "e2e.ratio.vs_ceiling"),
    ("cycles", "e2e.burst.cycles"),
    ("steady p50 s", "e2e.steady.p50_s"),
    ("steady p99 s", "e2e.steady.p99_s"),
    ("load", "machine.load1.before_e2e"),
)
RSS = ("devhub", "temporal", "worker", "watcher", "queue", "ceiling_worker", "bench")
CHURN = (
    ("policy changes", "churn.policy.placements"),
    ("all rescheduled s", "churn.policy.scheduled_s"),
    ("quiet s", "churn.policy.quiet_s"),
    ("cycles", "churn.policy.cycles"),
    ("placements on the relabelled cluster", "churn.label.placements_sharing_cluster"),
    ("cycles", "churn.label.cycles"),
    ("quiet s", "churn.label.quiet_s"),
)
# CPU milliseconds per placement of each process during a burst: (phase, process).
CPU = (
    ("e2e", "temporal"),
    ("e2e", "worker"),
    ("e2e", "devhub"),
    ("e2e", "watcher"),
    ("ceiling", "temporal"),
    ("ceiling", "ceiling"),
    ("queue", "queue"),
    ("queue", "devhub"),
)


def read(path: Path) -> dict[str, str]:
    figures = {}
    for line in path.read_text().splitlines():
        name, _, value = line.partition(" ")
        if name and value and not name.startswith("#"):
            figures[name] = value
    return figures


def _per_placement(figures: dict[str, str], phase: str, process: str) -> str:
    seconds = figures.get(f"cpu.{phase}.burst.{process}_s")
    placements = figures.get("config.placements")
    if seconds is None or not placements:
        return "-"
    return f"{float(seconds) * 1000 / int(placements):.1f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+", type=Path)
    args = parser.parse_args()
    runs = [(path, read(path)) for path in args.files]
    print("| run | " + " | ".join(title for title, _ in COLUMNS) + " |")
    print("|---" * (len(COLUMNS) + 1) + "|")
    for path, figures in runs:
        cells = [figures.get(key, "-") for _, key in COLUMNS]
        print(f"| {path.stem} | " + " | ".join(cells) + " |")
    print()
    print("| run | " + " | ".join(f"{name} MB" for name in RSS) + " |")
    print("|---" * (len(RSS) + 1) + "|")
    for path, figures in runs:
        cells = [figures.get(f"rss.{name}.peak_mb", "-") for name in RSS]
        print(f"| {path.stem} | " + " | ".join(cells) + " |")
    print()
    print("| run | " + " | ".join(title for title, _ in CHURN) + " |")
    print("|---" * (len(CHURN) + 1) + "|")
    for path, figures in runs:
        if "churn.policy.placements" in figures:
            cells = [figures.get(key, "-") for _, key in CHURN]
            print(f"| {path.stem} | " + " | ".join(cells) + " |")
    print()
    print("| run | " + " | ".join(f"{phase}: {process}" for phase, process in CPU) + " |")
    print("|---" * (len(CPU) + 1) + "|")
    for path, figures in runs:
        print(
            f"| {path.stem} | " + " | ".join(_per_placement(figures, *pair) for pair in CPU) + " |"
        )
    for path, figures in runs:
        print(f"\n<details><summary>{path.stem}: every figure</summary>\n\n```")
        for name, value in figures.items():
            print(f"{name} {value}")
        print("```\n</details>")
    return 0


if __name__ == "__main__":
    sys.exit(main())
