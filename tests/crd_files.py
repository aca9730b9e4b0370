"""Our CRDs written to a directory with parts left out, as on a hub whose CRDs are of another
version: devhub serves them (`DevHub(crd_dir=...)`), so tests can store what ours refuse."""

from __future__ import annotations

from collections.abc import Collection, Iterable
from pathlib import Path
from typing import Any

import yaml

from hub import crds

__all__ = ["without_keys", "write_crds"]


def without_keys(node: Any, keys: Collection[str]) -> Any:
    """`node` with every mapping entry named in `keys` dropped, at any depth."""
    if isinstance(node, dict):
        return {k: without_keys(v, keys) for k, v in node.items() if k not in keys}
    if isinstance(node, list):
        return [without_keys(item, keys) for item in node]
    return node


def write_crds(
    directory: Path,
    *,
    drop: Collection[str] = (),
    only: Iterable[str] | None = None,
    leave_out: Collection[str] = (),
) -> Path:
    """Every CRD into `directory` but those named in `leave_out` (file names: a hub that does
    not serve them); those named in `only` (default: all) without the schema keys in `drop`.
    Returns `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    chosen = None if only is None else set(only)
    for name, text in crds.generate().items():
        if name in leave_out:
            continue
        if chosen is not None and name not in chosen:
            (directory / name).write_text(text, encoding="utf-8")
            continue
        crd = without_keys(yaml.safe_load(text), drop)
        (directory / name).write_text(crds.dump_crd(crd), encoding="utf-8")
    return directory
