"""What the deploy tests compare: the rendered Kustomize output, and the hub calls in the code.

`hub_calls()` answers "which (verb, resource) does fleet-scheduler ever ask the hub for?" from
the source, with types rather than grep: it type-checks activities/ and workers/ with mypy and a
small plugin that sees every call of a `HubClient` method together with the inferred type of its
kind argument (`client.list(ClusterSchedulingPolicySnapshot, ...)`, `client.create(binding)`),
and its `subresource` when one is passed. So `self._client.patch(...)`, a client passed down as
a parameter or a binding taken from a plan all count, and a call whose kind or subresource the
types cannot pin down is reported as unresolved instead of silently skipped.

The RBAC test compares that set with the ClusterRoles in the Kustomize output of each overlay."""

from __future__ import annotations

import ast
import functools
import importlib
import os
import shutil
import subprocess
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import yaml

from hub.types import KINDS

REPO: Final = Path(__file__).resolve().parents[2]
DEPLOY: Final = REPO / "deploy"
OVERLAYS: Final = DEPLOY / "overlays"
STANDALONE: Final = "standalone"
BESIDE_KUBEFLEET: Final = "beside-kubefleet"

# The packages whose code runs in the deployed pods and may call the hub.
SCANNED_PACKAGES: Final = ("activities", "control", "workers")
# Modules whose every HubClient call happens only with the snapshotter on (standalone mode):
# the policy snapshotter and the placement's Scheduled condition, both KubeFleet's placement
# controller's job beside its hub agent. Their calls are granted by the standalone-only role.
STANDALONE_ONLY_MODULES: Final = frozenset(
    {"activities/snapshotter.py", "activities/conditions.py"}
)
# ... and calls in the body of an `if` that tests an attribute of this name, positively
# (`if self._settings.snapshotter:`, also as one term of an `and`): KubeFleet's hub agent does
# that work beside it.
SNAPSHOTTER_FLAG: Final = "snapshotter"
# Functions that never run in a deployed pod, with the reason; their calls need no RBAC.
DEV_ONLY_FUNCTIONS: Final[Mapping[str, str]] = {
    "workers.cli.dev.apply_placements": "`fleet-scheduler dev --sample-placements` seeds a devhub",
}
# Calls whose kind argument is typed only as "some hub kind", and the constant (module:NAME)
# that lists the kinds they are made with.
ABSTRACT_KIND_SOURCES: Final[Mapping[str, str]] = {
    "control.watcher.Watcher._watch_kind": "control.watcher:ALL_WATCHED_KINDS",
    "activities.fleet_state._served": "activities.fleet_state:OPTIONAL_KINDS",
    "activities.fleet_state._listed": "activities.fleet_state:REQUIRED_KINDS",
    "activities.reconcile._priority_classes": "control.watcher:PRIORITY_KINDS",
    "workers.cli.dev.apply_placements": "workers.cli.dev:SAMPLE_KINDS",
    "activities.deadline.record_deadline_event": "activities.deadline:EVENT_KINDS",
    "activities.preemption._event": "activities.deadline:EVENT_KINDS",
    "activities.preemption._priority_classes": "control.watcher:PRIORITY_KINDS",
    "workers.cli.plan_profile.read_fleet_once": "workers.cli.plan_profile:READ_KINDS",
}

HUB_CLIENT: Final = "hub.client.HubClient"
# Functions outside the scanned packages that make HubClient calls for their caller, with the
# method they call on the `kind` they are given: a call to one counts as that method's call.
HUB_CALLING_FUNCTIONS: Final[Mapping[str, str]] = {
    "hub.informer.watch_forever": "list_then_watch",
}
STATUS: Final = "status"
# HubClient method -> the API verbs its requests use (kube-apiserver's RBAC verbs).
METHOD_VERBS: Final[Mapping[str, tuple[str, ...]]] = {
    "get": ("get",),
    "list": ("list",),
    "watch": ("watch",),
    "list_then_watch": ("list", "watch"),
    "create": ("create",),
    "update": ("update",),
    "update_status": ("update",),
    "patch": ("patch",),
    "patch_unread": ("patch",),
    "json_patch": ("patch",),
    "delete": ("delete",),
    "delete_collection": ("deletecollection",),
}
# Methods that always act on the status subresource.
STATUS_METHODS: Final = frozenset({"update_status"})
# HubClient members that send no API request.
NO_REQUEST: Final = frozenset(
    {"close", "host", "__enter__", "__exit__", "from_kubeconfig", "in_cluster", "from_env",
     "from_url"}
)
# mypy should not spend seconds on these: HubClient and the hub kinds are all the analysis needs.
SKIPPED_IMPORTS: Final = (
    "temporalio.*", "kubernetes.*", "aiohttp.*", "opentelemetry.*", "prometheus_client.*",
    "urllib3.*", "yaml.*", "pydantic.*", "pydantic_core.*", "cryptography.*", "google.*",
    "grpc.*", "devhub.*",
)
# With pydantic skipped, BaseModel's methods return Any; these keep the kind of their receiver.
SAME_KIND_METHODS: Final = frozenset({"model_copy"})

Permission = tuple[str, str, str]  # (API group, resource[/subresource], verb)


@dataclass(frozen=True, order=True)
class HubCall:
    """One HubClient call site and what it asks of the hub."""

    path: str  # relative to the repo
    line: int
    function: str  # fully qualified name of the enclosing top-level function or method
    method: str
    group: str
    resource: str  # plural, or plural/subresource

    def permissions(self) -> set[Permission]:
        return {(self.group, self.resource, verb) for verb in METHOD_VERBS[self.method]}

    def where(self) -> str:
        return f"{self.path}:{self.line} {self.method}"


@dataclass(frozen=True)
class CallScan:
    calls: tuple[HubCall, ...]  # dev-only calls excluded
    dev_only: tuple[HubCall, ...]
    unresolved: tuple[str, ...]  # "path:line why", one per call the types could not pin down
    errors: tuple[str, ...]  # mypy's own blocking errors, if any


def _kinds_by_fullname() -> dict[str, tuple[str, str]]:
    return {f"{k.__module__}.{k.__qualname__}": (k.GROUP, k.PLURAL) for k in KINDS}


def _kinds_with_subclasses() -> dict[str, list[tuple[str, str]]]:
    """Each kind's fullname -> that kind and every hub kind derived from it. A value typed
    `type[ClusterResourcePlacement]`, or an object typed `ClusterResourcePlacement`, may be a
    ResourcePlacement (its namespaced subclass): a call on it may need either's permissions."""
    return {
        f"{k.__module__}.{k.__qualname__}": [(s.GROUP, s.PLURAL) for s in KINDS if issubclass(s, k)]
        for k in KINDS
    }


def _source_files() -> list[Path]:
    files: list[Path] = []
    for package in SCANNED_PACKAGES:
        files.extend(sorted((REPO / package).rglob("*.py")))
    return files


@functools.cache
def hub_calls() -> CallScan:
    """Every HubClient call in SCANNED_PACKAGES, typed by mypy (a few seconds; cached)."""
    from mypy import build
    from mypy.modulefinder import BuildSource
    from mypy.nodes import CallExpr, Expression, MemberExpr
    from mypy.options import Options
    from mypy.plugin import FunctionContext, MethodContext, Plugin
    from mypy.types import (
        CallableType,
        Instance,
        LiteralType,
        NoneType,
        ProperType,
        Type,
        TypeType,
        get_proper_type,
    )

    kinds = _kinds_by_fullname()
    derived = _kinds_with_subclasses()
    calls: list[HubCall] = []
    dev_only: list[HubCall] = []
    unresolved: list[str] = []

    def kind_of(t: ProperType) -> list[tuple[str, str]] | None:
        """The kinds a call's kind argument may be: exactly the class when it names one; the
        class and its subclasses when it is a `type[X]` value or an `X` object."""
        if isinstance(t, CallableType) and t.is_type_obj():
            exact = kinds.get(t.type_object().fullname)
            return [exact] if exact is not None else None
        if isinstance(t, TypeType) and isinstance(t.item, Instance):
            return derived.get(t.item.type.fullname)
        if isinstance(t, Instance):
            return derived.get(t.type.fullname)
        return None

    def literal_str(t: ProperType) -> str | bool | None:
        """The string a str argument certainly holds; None for None; False when unknown."""
        if isinstance(t, NoneType):
            return None
        if isinstance(t, LiteralType) and isinstance(t.value, str):
            return t.value
        if isinstance(t, Instance) and t.last_known_value is not None:
            value = t.last_known_value.value
            return value if isinstance(value, str) else False
        return False

    def kind_of_copy(ctx: MethodContext, expr: Expression) -> list[tuple[str, str]] | None:
        """The kind of `obj.model_copy(...)`: the kind of `obj`."""
        if (
            isinstance(expr, CallExpr)
            and isinstance(expr.callee, MemberExpr)
            and expr.callee.name in SAME_KIND_METHODS
        ):
            receiver = ctx.api.lookup_type(expr.callee.expr)  # type: ignore[attr-defined]
            return kind_of(get_proper_type(receiver))
        return None

    def abstract_kinds(function: str) -> list[tuple[str, str]] | None:
        source = ABSTRACT_KIND_SOURCES.get(function)
        if source is None:
            return None
        module, _, name = source.partition(":")
        listed = getattr(importlib.import_module(module), name)
        return [(k.GROUP, k.PLURAL) for k in listed]

    def record(ctx: MethodContext, method: str) -> Type:
        path = Path(ctx.api.path).resolve()
        try:
            rel = path.relative_to(REPO).as_posix()
        except ValueError:
            return ctx.default_return_type
        if rel.split("/", 1)[0] not in SCANNED_PACKAGES or method in NO_REQUEST:
            return ctx.default_return_type
        line = ctx.context.line
        top = ctx.api.scope.top_level_function()  # type: ignore[attr-defined]
        function = top.fullname if top is not None else "<module>"
        where = f"{rel}:{line} ({function}) HubClient.{method}"
        if method not in METHOD_VERBS:
            unresolved.append(f"{where}: not in METHOD_VERBS; say which verbs it uses")
            return ctx.default_return_type
        names = list(ctx.callee_arg_names)
        kind_arg = "kind" if "kind" in names else "obj"
        types = ctx.arg_types[names.index(kind_arg)] if kind_arg in names else []
        kind = kind_of(get_proper_type(types[0])) if types else None
        if kind is None and types:
            kind = kind_of_copy(ctx, ctx.args[names.index(kind_arg)][0])
        found = kind if kind is not None else abstract_kinds(function)
        if not found:
            shown = str(types[0]) if types else "nothing"
            unresolved.append(
                f"{where}: cannot tell which hub kind {shown} is; pass a concrete kind, "
                "annotate the object, or list the function in ABSTRACT_KIND_SOURCES"
            )
            return ctx.default_return_type
        subresource: str | None = STATUS if method in STATUS_METHODS else None
        if "subresource" in names:
            sub_types = ctx.arg_types[names.index("subresource")]
            if sub_types:  # passed explicitly
                value = literal_str(get_proper_type(sub_types[0]))
                if value is False:
                    unresolved.append(f"{where}: subresource is not a literal string")
                    return ctx.default_return_type
                subresource = value if isinstance(value, str) else None
        for group, plural in found:
            resource = f"{plural}/{subresource}" if subresource else plural
            call = HubCall(rel, line, function, method, group, resource)
            (dev_only if function in DEV_ONLY_FUNCTIONS else calls).append(call)
        return ctx.default_return_type

    class HubCallPlugin(Plugin):
        def get_method_hook(self, fullname: str) -> Callable[[MethodContext], Type] | None:
            owner, _, method = fullname.rpartition(".")
            if owner == HUB_CLIENT:
                return functools.partial(record, method=method)
            return None

        def get_function_hook(self, fullname: str) -> Callable[[FunctionContext], Type] | None:
            method = HUB_CALLING_FUNCTIONS.get(fullname)
            if method is None:
                return None
            # A FunctionContext has every field `record` reads (path, scope, args, names).
            return functools.partial(record, method=method)  # type: ignore[arg-type]

    options = Options()
    options.python_version = (3, 11)
    options.export_types = False
    options.incremental = False
    options.follow_imports = "silent"
    options.ignore_missing_imports = True
    options.mypy_path = [str(REPO)]  # resolve hub, scheduler, ... from this checkout
    options.check_untyped_defs = True
    for pattern in SKIPPED_IMPORTS:
        options.per_module_options[pattern] = {"follow_imports": "skip"}
    sources = []
    for file in _source_files():
        parts = file.relative_to(REPO).with_suffix("").parts
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        sources.append(BuildSource(str(file), module))
    result = build.build(sources, options, extra_plugins=[HubCallPlugin(options)])
    blocking = tuple(e for e in result.errors if "error:" in e and "syntax" in e.lower())
    return CallScan(
        tuple(sorted(set(calls))),
        tuple(sorted(set(dev_only))),
        tuple(sorted(set(unresolved))),
        blocking,
    )


def _names_flag(test: ast.expr) -> bool:
    flag = test.attr if isinstance(test, ast.Attribute) else getattr(test, "id", None)
    return flag == SNAPSHOTTER_FLAG


def guarded_lines(path: Path) -> set[int]:
    """Lines in the body of `if <...>.snapshotter:` (or `if ....snapshotter and ...:`) blocks.

    Other shapes (an early `if not ....snapshotter: return`) are not recognised: their calls
    count for both modes, which the RBAC test then reports as needed beside KubeFleet too."""
    lines: set[int] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.If):
            continue
        tests = node.test.values if isinstance(node.test, ast.BoolOp) and isinstance(
            node.test.op, ast.And) else [node.test]
        if not any(_names_flag(test) for test in tests):
            continue
        for statement in node.body:
            lines.update(range(statement.lineno, (statement.end_lineno or statement.lineno) + 1))
    return lines


@functools.cache
def _guarded(path: str) -> frozenset[int]:
    return frozenset(guarded_lines(REPO / path))


def standalone_only(call: HubCall) -> bool:
    """Whether the call happens only with the snapshotter on (see STANDALONE_ONLY_MODULES)."""
    return call.path in STANDALONE_ONLY_MODULES or call.line in _guarded(call.path)


def required_permissions(calls: Iterable[HubCall]) -> set[Permission]:
    needed: set[Permission] = set()
    for call in calls:
        needed |= call.permissions()
    return needed


# --- Kustomize output -----------------------------------------------------------------------


def kubectl() -> str | None:
    return shutil.which("kubectl")


def render_directory(directory: Path) -> list[dict[str, Any]]:
    """The objects `kubectl kustomize <directory>` prints."""
    binary = kubectl()
    assert binary is not None
    done = subprocess.run(
        [binary, "kustomize", str(directory)],
        capture_output=True, text=True, timeout=60, check=False,
    )
    assert done.returncode == 0, f"kubectl kustomize {directory} failed: {done.stderr}"
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


def render_with_components(
    directory: Path, overlay: str, components: Iterable[str]
) -> list[dict[str, Any]]:
    """The objects of a kustomization made in `directory` (which must not exist yet) that
    builds on `deploy/overlays/<overlay>` with `deploy/components/<component>` added, as a user
    adds them to their own (deploy/README.md)."""
    directory.mkdir()
    (directory / "kustomization.yaml").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "kustomize.config.k8s.io/v1beta1",
                "kind": "Kustomization",
                "resources": [os.path.relpath(OVERLAYS / overlay, directory)],
                "components": [
                    os.path.relpath(DEPLOY / "components" / c, directory) for c in components
                ],
            }
        )
    )
    return render_directory(directory)


@functools.cache
def _render(overlay: str) -> tuple[dict[str, Any], ...]:
    return tuple(render_directory(OVERLAYS / overlay))


def render(overlay: str) -> list[dict[str, Any]]:
    """The objects `kubectl kustomize deploy/overlays/<overlay>` prints (a fresh copy)."""
    import copy

    return copy.deepcopy(list(_render(overlay)))


def container(deployment: Mapping[str, Any]) -> dict[str, Any]:
    """The one container of a Deployment's pod."""
    containers = deployment["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1, "one container per pod: fleet-scheduler"
    return dict(containers[0])


def by_kind(objects: Iterable[Mapping[str, Any]], kind: str) -> dict[str, Any]:
    """name -> object for every object of `kind`."""
    return {o["metadata"]["name"]: o for o in objects if o["kind"] == kind}


def one(objects: Iterable[Mapping[str, Any]], kind: str, name: str) -> dict[str, Any]:
    found = by_kind(objects, kind)
    assert name in found, f"no {kind} {name!r}; have {sorted(found)}"
    return dict(found[name])


def granted_permissions(
    objects: Iterable[Mapping[str, Any]], namespace: str, service_account: str
) -> set[Permission]:
    """What ClusterRoles bound to the service account allow, expanded to single permissions.

    Wildcards are not expanded: a "*" verb or resource appears as such, so a test can refuse it."""
    objects = list(objects)
    roles = by_kind(objects, "ClusterRole")
    bound: set[str] = set()
    for binding in by_kind(objects, "ClusterRoleBinding").values():
        subjects = binding.get("subjects") or []
        if any(
            s.get("kind") == "ServiceAccount"
            and s.get("name") == service_account
            and s.get("namespace") == namespace
            for s in subjects
        ):
            assert binding["roleRef"]["kind"] == "ClusterRole"
            bound.add(binding["roleRef"]["name"])
    granted: set[Permission] = set()
    for name in bound:
        assert name in roles, f"ClusterRoleBinding refers to missing ClusterRole {name!r}"
        for rule in roles[name].get("rules") or []:
            for group in rule.get("apiGroups") or []:
                for resource in rule.get("resources") or []:
                    for verb in rule.get("verbs") or []:
                        granted.add((group, resource, verb))
    return granted
