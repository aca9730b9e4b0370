"""The kinds devhub serves: the CRDs a hub would have installed.

By default they are generated from the models by `hub.crds`, the same generator that writes
deploy/crds (whose staleness a test checks), so an installed wheel needs no manifest files. A
test may serve other CRD files instead (`crd_dir`), e.g. an older or looser schema. The built-in
kinds devhub serves beside them (`devhub.namespaces`, `devhub.priorityclasses`) are described
the same way, as CRD-shaped documents, plus what only a built-in kind has: the lists a strategic
merge patch merges."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import yaml

from devhub.patch import MergeLists
from hub import crds

__all__ = ["Column", "Resource", "load_resources", "resource_from_crd"]

VERBS: Final = ("delete", "deletecollection", "get", "list", "patch", "create", "update", "watch")
STATUS_VERBS: Final = ("get", "patch", "update")


@dataclass(frozen=True)
class Column:
    name: str
    type: str
    json_path: str
    description: str = ""
    priority: int = 0
    format: str = ""
    # The cell when the path selects nothing. None prints as <none>, as for a CRD's columns; a
    # built-in kind's printer prints its Go field, so an omitted zero value shows as such.
    missing: Any = None


@dataclass(frozen=True)
class Resource:
    """One served kind: its API coordinates, schema and printer columns."""

    group: str
    version: str
    kind: str
    plural: str
    singular: str
    list_kind: str
    short_names: tuple[str, ...]
    categories: tuple[str, ...]
    namespaced: bool
    schema: Mapping[str, Any]
    columns: tuple[Column, ...]
    status_subresource: bool
    crd: Mapping[str, Any] = field(repr=False)
    # A built-in kind's lists that a strategic merge patch merges (see `devhub.patch`); None for
    # a custom resource, which the API server refuses strategic merge patches for.
    merge_lists: MergeLists | None = None

    @property
    def api_version(self) -> str:
        """`group/version`, or the bare version for the core (legacy) group: `v1`."""
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def built_in(self) -> bool:
        """Served by kube-apiserver itself, not through a CRD: it takes strategic merge patches
        and protobuf bodies, and its endpoint fills in a body's apiVersion and kind."""
        return self.merge_lists is not None

    @property
    def group_resource(self) -> str:
        """`plural.group`, or the bare plural for the core group: `namespaces`."""
        return f"{self.plural}.{self.group}" if self.group else self.plural


def resource_from_crd(
    crd: Mapping[str, Any], *, merge_lists: MergeLists | None = None
) -> Resource:
    """The kind `crd` defines; `merge_lists` makes it a built-in kind (see `Resource`)."""
    spec = crd["spec"]
    names = spec["names"]
    version = next(v for v in spec["versions"] if v.get("storage", True))
    columns = tuple(
        Column(
            name=col["name"],
            type=col["type"],
            json_path=col["jsonPath"],
            description=col.get("description", ""),
            priority=int(col.get("priority", 0)),
            format=col.get("format", ""),
        )
        for col in version.get("additionalPrinterColumns", ())
    )
    return Resource(
        group=spec["group"],
        version=version["name"],
        kind=names["kind"],
        plural=names["plural"],
        singular=names.get("singular", names["kind"].lower()),
        list_kind=names.get("listKind", names["kind"] + "List"),
        short_names=tuple(names.get("shortNames", ())),
        categories=tuple(names.get("categories", ())),
        namespaced=spec.get("scope") == "Namespaced",
        schema=version["schema"]["openAPIV3Schema"],
        columns=columns,
        status_subresource="status" in (version.get("subresources") or {}),
        crd=crd,
        merge_lists=merge_lists,
    )


def _crd_documents(crd_dir: Path | None) -> Iterable[Mapping[str, Any]]:
    if crd_dir is None:
        for text in crds.generate().values():
            yield yaml.safe_load(text)
        return
    files = sorted(crd_dir.glob("*.yaml")) if crd_dir.is_dir() else []
    if not files:
        raise FileNotFoundError(f"no CRD manifests (*.yaml) in {crd_dir}")
    for path in files:
        for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")):
            if isinstance(doc, dict) and doc.get("kind") == "CustomResourceDefinition":
                yield doc


def load_resources(crd_dir: Path | None = None) -> dict[tuple[str, str], Resource]:
    """(group, plural) -> Resource for every CRD in `crd_dir` (default: generated from the
    models)."""
    resources = {}
    for doc in _crd_documents(crd_dir):
        resource = resource_from_crd(doc)
        resources[(resource.group, resource.plural)] = resource
    return resources
