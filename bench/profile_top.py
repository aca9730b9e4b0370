"""Summarise a py-spy `--format raw` profile (collapsed stacks): where the samples are.

    python bench/profile_top.py FILE [--top 25] [--match TEXT]

Prints the functions with the most samples on the stack (inclusive) and as the innermost frame
(self), as percentages of all samples. Idle threads (waiting on a lock, a socket, a queue) are
counted too, so read `self` rows of `select`/`wait` as idle time, not work."""

from __future__ import annotations

import argparse
import collections
import re
import sys
from pathlib import Path

_LINE = re.compile(r"^(?P<stack>.*) (?P<count>\d+)$")


def frames(stack: str) -> list[str]:
    # py-spy raw frames: "function (file.py:line)"; drop the line so a function counts once.
    return [re.sub(r":\d+\)$", ")", frame) for frame in stack.split(";") if frame]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file", type=Path)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--match", default=None, help="only stacks containing this text")
    args = parser.parse_args()
    inclusive: collections.Counter[str] = collections.Counter()
    own: collections.Counter[str] = collections.Counter()
    total = 0
    for line in args.file.read_text().splitlines():
        found = _LINE.match(line)
        if found is None or (args.match and args.match not in line):
            continue
        count = int(found["count"])
        stack = frames(found["stack"])
        total += count
        for frame in set(stack):
            inclusive[frame] += count
        if stack:
            own[stack[-1]] += count
    if total == 0:
        print("no samples", file=sys.stderr)
        return 1
    for title, counter in (("inclusive", inclusive), ("self", own)):
        print(f"== {title} ({total} samples)")
        for frame, count in counter.most_common(args.top):
            print(f"{100 * count / total:5.1f}%  {frame[:150]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
