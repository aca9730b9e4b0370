"""devhub.patch.strategic_merge_patch with the Namespace's merge lists (what kubectl sends)."""

from __future__ import annotations

from typing import Any

import pytest

from devhub.namespaces import MERGE_LISTS
from devhub.patch import PatchError, strategic_merge_patch


def ns(**metadata: Any) -> dict[str, Any]:
    return {"metadata": {"name": "team-a", **metadata}, "spec": {"finalizers": ["kubernetes"]}}


def owner(uid: str, name: str = "o") -> dict[str, str]:
    return {"uid": uid, "name": name}


@pytest.mark.parametrize(("target", "patch", "expected"), [
    pytest.param(ns(labels={"a": "1", "b": "2"}), {"metadata": {"labels": {"a": None, "c": "3"}}},
                 ns(labels={"b": "2", "c": "3"}), id="maps-merge-and-null-deletes"),
    pytest.param(ns(finalizers=["x.io/a"]), {"metadata": {"finalizers": ["x.io/b", "x.io/a"]}},
                 ns(finalizers=["x.io/a", "x.io/b"]), id="primitive-list-is-a-set"),
    pytest.param(ns(finalizers=["x.io/a", "x.io/b"]),
                 {"metadata": {"$deleteFromPrimitiveList/finalizers": ["x.io/a"]}},
                 ns(finalizers=["x.io/b"]), id="delete-from-primitive-list"),
    pytest.param(ns(finalizers=["x.io/a"]),
                 {"metadata": {"$setElementOrder/finalizers": ["x.io/a"],
                               "finalizers": ["x.io/b"]}},
                 ns(finalizers=["x.io/a", "x.io/b"]), id="element-order-is-accepted"),
    pytest.param(ns(ownerReferences=[owner("1"), owner("2")]),
                 {"metadata": {"ownerReferences": [owner("2", "new"), owner("3"),
                                                   {"uid": "1", "$patch": "delete"}]}},
                 ns(ownerReferences=[owner("2", "new"), owner("3")]), id="merge-by-key"),
    pytest.param(ns(), {"spec": {"finalizers": []}}, {**ns(), "spec": {"finalizers": []}},
                 id="other-lists-are-replaced"),
    pytest.param(ns(labels={"a": "1"}), {"metadata": {"labels": {"$patch": "replace", "b": "2"}}},
                 ns(labels={"b": "2"}), id="replace-directive"),
    pytest.param(ns(labels={"a": "1"}), {"metadata": {"labels": {"$patch": "delete"}}},
                 ns(), id="delete-directive"),
    pytest.param(ns(labels={"a": "1"}, annotations={"n": "1"}),
                 {"metadata": {"$retainKeys": ["name", "labels"]}}, ns(labels={"a": "1"}),
                 id="retain-keys"),
])
def test_strategic_merge_patch(target: Any, patch: Any, expected: Any) -> None:
    assert strategic_merge_patch(target, patch, MERGE_LISTS) == expected


@pytest.mark.parametrize(("patch", "malformed"), [
    pytest.param([{"op": "add"}], True, id="not-an-object"),
    pytest.param({"metadata": {"$patch": "explode"}}, True, id="unknown-directive"),
    pytest.param({"metadata": {"ownerReferences": [{"name": "no-uid"}]}}, False,
                 id="missing-merge-key"),
])
def test_strategic_merge_patch_refuses(patch: Any, malformed: bool) -> None:
    with pytest.raises(PatchError) as refused:
        strategic_merge_patch(ns(), patch, MERGE_LISTS)
    assert refused.value.malformed is malformed
