"""deploy/chart/fleet-scheduler, rendered and linted by Helm's own engine (helm-python-sdk, Helm
v4's Go SDK through ctypes; no helm binary), holds what the Kustomize overlays hold.

Each mode of the chart, released as `fleet-scheduler` in namespace `fleet-scheduler`, is compared
object by object with `kubectl kustomize deploy/overlays/<mode>`. The differences allowed are
named in ALLOWED_* below and nowhere else; anything else that differs fails with the place to
change. When a rule, a flag or an object is added to deploy/base, these tests say what the chart
lacks. The chart's own behaviour (values, schema, `fail` checks, ServiceMonitor, CRD policy) is
checked without kubectl."""

from __future__ import annotations

import argparse
import copy
import functools
import json
import re
import shlex
import tomllib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Final

import helm_python as helm
import pytest
import yaml

from hub import crds
from hub.types import KINDS
from tests.support.deploy import (
    BESIDE_KUBEFLEET,
    DEPLOY,
    REPO,
    STANDALONE,
    Permission,
    by_kind,
    container,
    kubectl,
    one,
    render,
    render_with_components,
)
from workers.cli import build_parser
from workers.cli.run import run_config
from workers.temporal_client import load_target

CHART: Final = DEPLOY / "chart" / "fleet-scheduler"
TEMPLATES: Final = "deploy/chart/fleet-scheduler/templates"
RELEASE: Final = "fleet-scheduler"
NAMESPACE: Final = "fleet-scheduler"  # the overlays' namespace: the chart renders into it
MODES: Final = (STANDALONE, BESIDE_KUBEFLEET)
KUBEFLEET_GROUP: Final = ".kubernetes-fleet.io"
ENTRYPOINT: Final = "fleet-scheduler"  # deploy/Dockerfile's ENTRYPOINT, when a pod sets no command
ENV_REF: Final = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)")
# Deployment -> what its `run` runs in its pod: (workflows, activities, watcher).
DEPLOYMENTS: Final = {
    "fleet-scheduler-worker": (True, False, False),
    "fleet-scheduler-activities": (False, True, False),
    "fleet-scheduler-watcher": (False, False, True),
}

# --- the differences between the chart and the overlays, all of them -------------------------

# Helm installs into the release namespace (`--create-namespace`) and does not own it.
ALLOWED_ONLY_IN_KUSTOMIZE: Final = {("Namespace", NAMESPACE)}
# Kustomize's ConfigMap name carries a content hash; the chart's is fixed and its pods carry a
# checksum/config annotation instead, so a changed value rolls them as well.
CONFIG_MAP_HASH: Final = re.compile(r"^(fleet-scheduler)-[a-z0-9]{10}$")
CHECKSUM_ANNOTATION: Final = "checksum/config"
# Helm's standard labels on every object; the instance label also in selectors and pod labels,
# so two releases never select each other's pods.
HELM_LABELS: Final = frozenset({
    "app.kubernetes.io/instance", "app.kubernetes.io/managed-by", "app.kubernetes.io/version",
    "helm.sh/chart",
})
INSTANCE_LABEL: Final = "app.kubernetes.io/instance"
# The chart says the pull policy; the base leaves the default (IfNotPresent for a tagged image).
IMAGE_PULL_POLICY: Final = "imagePullPolicy"
# Helm keeps the CRDs on `helm uninstall` (crds.keep).
KEEP: Final = {"helm.sh/resource-policy": "keep"}
# Only with serviceMonitor.enabled: the ServiceMonitor and the headless Service it selects.
SERVICE_MONITOR_OBJECTS: Final = {("Service", "fleet-scheduler-metrics"),
                                  ("ServiceMonitor", "fleet-scheduler")}


@functools.cache
def chart() -> helm.Chart:
    return helm.Chart.load(CHART)


@functools.cache
def _render_chart(values_json: str, release: str, namespace: str) -> tuple[dict[str, Any], ...]:
    manifests = chart().render(json.loads(values_json), name=release, namespace=namespace)
    objects: list[dict[str, Any]] = []
    for path, text in sorted(manifests.items()):
        if not path.endswith("NOTES.txt"):
            objects += [doc for doc in yaml.safe_load_all(text) if doc]
    return tuple(objects)


def render_chart(
    values: Mapping[str, Any] | None = None, *, release: str = RELEASE,
    namespace: str = NAMESPACE,
) -> list[dict[str, Any]]:
    """The objects the chart renders with `values` (a fresh copy; renders are cached)."""
    key = json.dumps(values or {}, sort_keys=True)
    return copy.deepcopy(list(_render_chart(key, release, namespace)))


def keys(objects: Iterable[Mapping[str, Any]]) -> set[tuple[str, str]]:
    return {(o["kind"], o["metadata"]["name"]) for o in objects}


@pytest.fixture
def kustomize() -> None:
    if kubectl() is None:
        pytest.skip("kubectl is not installed (make system-deps installs Debian's kubectl)")


def _drop_key(node: Any, key: str) -> Any:
    if isinstance(node, dict):
        return {k: _drop_key(v, key) for k, v in node.items() if k != key}
    if isinstance(node, list):
        return [_drop_key(v, key) for v in node]
    return node


def from_chart(obj: Mapping[str, Any]) -> dict[str, Any]:
    """A chart object with the allowed differences taken out, to compare with Kustomize's."""
    out = copy.deepcopy(dict(obj))
    meta = out["metadata"]
    labels = meta.get("labels") or {}
    meta["labels"] = {k: v for k, v in labels.items() if k not in HELM_LABELS}
    out = dict(_drop_key(out, INSTANCE_LABEL))
    annotations = out["metadata"].pop("annotations", None)
    if out["kind"] == "CustomResourceDefinition":
        assert annotations == KEEP, f"CRD {meta['name']}: {annotations}"
    else:
        assert annotations is None, f"{out['kind']} {meta['name']}: {annotations}"
    if out["kind"] == "Deployment":
        template = out["spec"]["template"]
        assert CHECKSUM_ANNOTATION in template["metadata"]["annotations"]
        del template["metadata"]["annotations"][CHECKSUM_ANNOTATION]
        for spec in template["spec"]["containers"]:
            spec.pop(IMAGE_PULL_POLICY)
    return out


def from_kustomize(obj: Mapping[str, Any], objects: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """A Kustomize object with its ConfigMap's hash suffix taken out (name and references)."""
    (hashed,) = by_kind(objects, "ConfigMap")
    fixed = CONFIG_MAP_HASH.sub(r"\1", hashed)
    return dict(json.loads(json.dumps(obj).replace(json.dumps(hashed), json.dumps(fixed))))


def differences(mine: Any, theirs: Any, path: str = "") -> list[str]:
    """Where two objects differ, as paths with both values."""
    if isinstance(mine, dict) and isinstance(theirs, dict):
        return [
            found
            for key in sorted(set(mine) | set(theirs))
            for found in differences(mine.get(key), theirs.get(key), f"{path}.{key}")
        ]
    if isinstance(mine, list) and isinstance(theirs, list) and len(mine) == len(theirs):
        return [
            found
            for i, (a, b) in enumerate(zip(mine, theirs, strict=True))
            for found in differences(a, b, f"{path}[{i}]")
        ]
    return [] if mine == theirs else [f"{path}: chart {mine!r}, kustomize {theirs!r}"]


def permissions(role: Mapping[str, Any]) -> set[Permission]:
    return {
        (group, resource, verb)
        for rule in role.get("rules") or []
        for group in rule.get("apiGroups") or []
        for resource in rule.get("resources") or []
        for verb in rule.get("verbs") or []
    }


# --- Helm's lint -----------------------------------------------------------------------------


# Every optional part on: Temporal's API key and client certificate, a ServiceMonitor, flags.
EVERYTHING_ON: Final = {
    "temporal": {"tls": {"enabled": True, "serverName": "t.example.com", "secretName": "tls"},
                 "apiKey": {"secretName": "key"}},
    "serviceMonitor": {"enabled": True, "labels": {"release": "prometheus"}, "interval": "30s"},
    "imagePullSecrets": ["registry"],
    "worker": {"extraArgs": ["--max-cached-workflows=2000"]},
}


@pytest.mark.parametrize("everything", [False, True], ids=["defaults", "everything-on"])
@pytest.mark.parametrize("mode", MODES)
def test_helm_lint_strict_is_clean(mode: str, everything: bool) -> None:
    values = {"mode": mode, **(EVERYTHING_ON if everything else {})}
    report = helm.lint(CHART, values, strict=True, namespace=NAMESPACE)
    assert report["errors"] == []
    # Severity 1 is information ("icon is recommended"); 2 and 3 are warnings and errors.
    serious = [m for m in report["messages"] if m["severity"] >= 2]
    assert serious == []


def test_the_schema_is_draft_07_and_the_defaults_pass_it() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text())
    assert schema["$schema"] == "http://json-schema.org/draft-07/schema#"
    assert schema["additionalProperties"] is False
    chart().validate_schema(chart().values)


# --- the same objects as the overlays --------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_the_same_objects_as_the_overlay(mode: str, kustomize: None) -> None:
    theirs = keys(render(mode)) - ALLOWED_ONLY_IN_KUSTOMIZE
    ours = {
        ("ConfigMap", CONFIG_MAP_HASH.sub(r"\1", name)) if kind == "ConfigMap" else (kind, name)
        for kind, name in keys(render_chart({"mode": mode}))
    }
    theirs = {
        ("ConfigMap", CONFIG_MAP_HASH.sub(r"\1", name)) if kind == "ConfigMap" else (kind, name)
        for kind, name in theirs
    }
    assert sorted(theirs - ours) == [], f"deploy/overlays/{mode} has these; add them to {TEMPLATES}"
    assert sorted(ours - theirs) == [], f"only the chart has these ({mode})"


@pytest.mark.parametrize("mode", MODES)
def test_the_same_rbac_rules_as_the_overlay(mode: str, kustomize: None) -> None:
    ours, theirs = render_chart({"mode": mode}), render(mode)
    for kind in ("ClusterRole", "Role"):
        for name, role in by_kind(theirs, kind).items():
            granted = permissions(one(ours, kind, name))
            missing = sorted(permissions(role) - granted)
            extra = sorted(granted - permissions(role))
            assert missing == [], (
                f"the chart's {kind} {name} lacks {missing}: add the rule to {TEMPLATES}/"
                f"{'rbac-standalone.yaml' if name.endswith('-standalone') else 'rbac.yaml'}"
            )
            assert extra == [], f"the chart's {kind} {name} grants more than deploy/base: {extra}"
    for kind in ("ClusterRoleBinding", "RoleBinding"):
        for name, binding in by_kind(theirs, kind).items():
            mine = one(ours, kind, name)
            assert (mine["roleRef"], mine["subjects"]) == (binding["roleRef"], binding["subjects"])


@pytest.mark.parametrize("mode", MODES)
def test_the_same_container_args_and_env_as_the_overlay(mode: str, kustomize: None) -> None:
    ours = by_kind(render_chart({"mode": mode}), "Deployment")
    for name, deployment in by_kind(render(mode), "Deployment").items():
        theirs, mine = container(deployment), container(ours[name])
        assert mine["args"] == theirs["args"], (
            f"{name}: deploy/overlays/{mode} runs {theirs['args']}, the chart {mine['args']}; "
            f"the chart's args are in {TEMPLATES}/_deployment.tpl"
        )
        assert mine.get("command") == theirs.get("command")
        names = [[e["name"] for e in c.get("env", [])] for c in (mine, theirs)]
        assert names[0] == names[1], name
        for field in ("ports", "startupProbe", "livenessProbe", "readinessProbe",
                      "securityContext", "resources", "volumeMounts"):
            assert mine.get(field) == theirs.get(field), f"{name}: {field}"
        pod = ours[name]["spec"]["template"]["spec"]
        their_pod = deployment["spec"]["template"]["spec"]
        assert pod["securityContext"] == their_pod["securityContext"], name


@pytest.mark.parametrize("mode", MODES)
def test_every_object_equals_the_overlays_but_for_the_named_differences(
    mode: str, kustomize: None
) -> None:
    """The whole of each object, with only ALLOWED_* taken out (RBAC rules compared as sets
    above, so their order and grouping may differ)."""
    ours = {(o["kind"], o["metadata"]["name"]): from_chart(o)
            for o in render_chart({"mode": mode})}
    objects = render(mode)
    for obj in objects:
        key = (obj["kind"], obj["metadata"]["name"])
        if key in ALLOWED_ONLY_IN_KUSTOMIZE:
            continue
        theirs = from_kustomize(obj, objects)
        mine = ours[(key[0], theirs["metadata"]["name"])]
        if key[0] in ("ClusterRole", "Role"):
            mine, theirs = {**mine, "rules": None}, {**theirs, "rules": None}
        assert mine == theirs, f"{key[0]} {key[1]} differs from deploy/overlays/{mode}:\n" + (
            "\n".join(differences(mine, theirs))
        )


# --- Temporal TLS and API key: the same as deploy/components ---------------------------------

COMPONENT_VALUES: Final = {
    "temporal-api-key": {"temporal": {"apiKey": {"secretName": "fleet-scheduler-temporal"}}},
    "temporal-mtls": {"temporal": {"tls": {"secretName": "fleet-scheduler-temporal-tls"}}},
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("component", sorted(COMPONENT_VALUES))
def test_temporal_secrets_reach_the_pods_as_the_components_put_them(
    mode: str, component: str, tmp_path: Path, kustomize: None
) -> None:
    assert {p.name for p in (DEPLOY / "components").iterdir()} == set(COMPONENT_VALUES)
    theirs = by_kind(render_with_components(tmp_path / "my-hub", mode, [component]), "Deployment")
    ours = by_kind(render_chart({"mode": mode, **COMPONENT_VALUES[component]}), "Deployment")
    assert set(ours) == set(theirs)
    for name, deployment in theirs.items():
        pod = ours[name]["spec"]["template"]["spec"]
        their_pod = deployment["spec"]["template"]["spec"]
        assert container(ours[name])["env"] == container(deployment)["env"], name
        assert container(ours[name])["volumeMounts"] == container(deployment)["volumeMounts"]
        assert pod["volumes"] == their_pod["volumes"], name


def test_tls_settings_reach_the_loader_the_process_uses() -> None:
    values = {"temporal": {"address": "temporal.example.com:7233",
                           "tls": {"enabled": True, "serverName": "frontend.example.com"}}}
    (config,) = by_kind(render_chart(values), "ConfigMap").values()
    target = load_target(env=config["data"])
    assert target.tls  # TLS on, with the system's roots
    assert target.address == "temporal.example.com:7233"
    assert config["data"]["TEMPORAL_TLS_SERVER_NAME"] == "frontend.example.com"
    # Secret keys of another name (a cert-manager Certificate's, say) are named in the paths.
    mtls = {"temporal": {"tls": {"secretName": "tls", "certKey": "client.pem",
                                 "keyKey": "client.key", "caKey": ""}}}
    for deployment in by_kind(render_chart(mtls), "Deployment").values():
        env = {e["name"]: e.get("value") for e in container(deployment)["env"]}
        assert env["TEMPORAL_TLS_CLIENT_CERT_PATH"].endswith("/client.pem")
        assert env["TEMPORAL_TLS_CLIENT_KEY_PATH"].endswith("/client.key")
        assert "TEMPORAL_TLS_SERVER_CA_CERT_PATH" not in env  # a public root: no CA file


# --- every command line parses with our CLI --------------------------------------------------


def parsed_command(
    objects: list[dict[str, Any]], deployment: Mapping[str, Any]
) -> argparse.Namespace:
    """The container's command line, $(VAR)s expanded as the kubelet does, through
    fleet-scheduler's own parser."""
    spec = container(deployment)
    command = spec.get("command") or [ENTRYPOINT]
    assert command == [ENTRYPOINT], f"the image's program is {ENTRYPOINT}, not {command}"
    (config,) = by_kind(objects, "ConfigMap").values()
    env = {**config["data"], **{e["name"]: e.get("value", "") for e in spec.get("env", [])}}
    args = []
    for arg in spec["args"]:
        for name in ENV_REF.findall(arg):
            assert name in env, f"{arg!r} refers to ${name}, which the container does not have"
        args.append(ENV_REF.sub(lambda m: env[m[1]], arg))
    try:
        return build_parser().parse_args(args)
    except SystemExit as exc:  # argparse's way of refusing
        raise AssertionError(f"fleet-scheduler refuses {command + args}") from exc


EXTRA_ARGS: Final = {
    "worker": ["--max-cached-workflows=2000"],
    "activities": ["--max-concurrent-activities=8"],
    "watcher": ["--reconcile-every=600"],
}


@pytest.mark.parametrize("extra", [False, True], ids=["defaults", "extraArgs"])
@pytest.mark.parametrize("mode", MODES)
def test_every_command_line_parses_with_our_cli(
    mode: str, extra: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    values: dict[str, Any] = {"mode": mode}
    if extra:
        values |= {component: {"extraArgs": args} for component, args in EXTRA_ARGS.items()}
    objects = render_chart(values)
    found = by_kind(objects, "Deployment")
    assert set(found) == set(DEPLOYMENTS)
    for name, runs in DEPLOYMENTS.items():
        args = parsed_command(objects, found[name])
        config = run_config(args)
        assert (config.workflows, config.activities_here, config.watcher) == runs, name
        assert args.no_snapshotter is (mode == BESIDE_KUBEFLEET)
        assert args.kubeconfig is None and args.temporal_address is None
    assert capsys.readouterr().err == ""  # no deprecated spelling
    if extra:
        parsed = {name: parsed_command(objects, found[name]) for name in DEPLOYMENTS}
        assert parsed["fleet-scheduler-worker"].max_cached_workflows == 2000
        assert parsed["fleet-scheduler-activities"].max_concurrent_activities == 8


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("publish", ["auto", "on", "off"])
def test_placement_decisions_values_reach_every_process(mode: str, publish: str) -> None:
    """docs/decisions.md: `auto` leaves the mode's default (on standalone, off beside
    KubeFleet); on, off and the namespaces reach every Deployment as our CLI reads them."""
    values = {
        "mode": mode,
        "placementDecisions": {
            "publish": publish, "namespace": "argocd", "clusterProfileNamespace": "inventory"
        },
    }  # fmt: skip
    objects = render_chart(values)
    for name in DEPLOYMENTS:
        config = run_config(parsed_command(objects, one(objects, "Deployment", name)))
        expected = {"auto": mode != BESIDE_KUBEFLEET, "on": True, "off": False}[publish]
        assert config.decisions.publish is expected, name
        assert (config.decisions.namespace, config.decisions.profile_namespace) == (
            "argocd", "inventory"
        )


def test_an_extra_arg_our_cli_refuses_is_caught() -> None:
    objects = render_chart({"watcher": {"extraArgs": ["--no-such-flag"]}})
    with pytest.raises(AssertionError, match="fleet-scheduler refuses"):
        parsed_command(objects, one(objects, "Deployment", "fleet-scheduler-watcher"))


# --- values the chart refuses ----------------------------------------------------------------

# (values, what the message must contain: the key's path)
REFUSED_BY_SCHEMA: Final = [
    ({"mode": "both"}, "/mode"),
    ({"worker": {"replicas": 0}}, "/worker/replicas"),
    ({"activities": {"replicas": -1}}, "/activities/replicas"),
    ({"watcher": {"replicas": 1.5}}, "/watcher/replicas"),
    ({"metricsPort": 0}, "/metricsPort"),
    ({"metricsPort": 65536}, "/metricsPort"),
    ({"image": {"tag": 1.2}}, "/image/tag"),
    ({"image": {"pullPolicy": "Sometimes"}}, "/image/pullPolicy"),
    ({"replicas": 3}, "'replicas'"),
    ({"worker": {"replica": 3}}, "'replica'"),
    ({"temporal": {"address": "temporal.example.com"}}, "/temporal/address"),
    ({"activities": {"autoscaling": {"targetCPUUtilizationPercentage": 150}}},
     "/activities/autoscaling/targetCPUUtilizationPercentage"),
    ({"worker": {"extraArgs": ["run"]}}, "/worker/extraArgs/0"),
    ({"serviceMonitor": {"enabled": "yes"}}, "/serviceMonitor/enabled"),
    ({"crds": {"install": "false"}}, "/crds/install"),
    ({"otel": {"protocol": "udp"}}, "/otel/protocol"),
    ({"placementDecisions": {"publish": "maybe"}}, "/placementDecisions/publish"),
    ({"placementDecisions": {"namespace": "Bad_NS"}}, "/placementDecisions/namespace"),
    ({"placementDecisions": {"clusterProfileNamespace": ""}},
     "/placementDecisions/clusterProfileNamespace"),
]
# Checks draft-07 cannot say (two values compared): the templates `fail`, naming the keys.
REFUSED_BY_TEMPLATES: Final = [
    ({"activities": {"autoscaling": {"minReplicas": 5, "maxReplicas": 3}}},
     "activities.autoscaling.minReplicas (5) is above activities.autoscaling.maxReplicas (3)"),
    ({"worker": {"replicas": 1}}, "worker.replicas is 1"),
    ({"activities": {"autoscaling": {"minReplicas": 1}}},
     "activities.autoscaling.minReplicas is 1"),
    ({"activities": {"replicas": 1, "autoscaling": {"enabled": False}}},
     "activities.replicas is 1"),
    ({"temporal": {"tls": {"secretName": "tls", "keyKey": ""}}}, "temporal.tls.keyKey"),
]


@pytest.mark.parametrize(("values", "named"), REFUSED_BY_SCHEMA, ids=lambda v: str(v))
def test_the_schema_refuses_a_bad_value_naming_its_key(values: dict[str, Any], named: str) -> None:
    with pytest.raises(helm.HelmValuesError, match=re.escape(named)):
        chart().validate_schema(chart().merge_values(values))
    with pytest.raises(helm.HelmValuesError, match=re.escape(named)):  # install refuses it too
        chart().render(values, name=RELEASE, namespace=NAMESPACE)


@pytest.mark.parametrize(("values", "message"), REFUSED_BY_TEMPLATES, ids=lambda v: str(v))
def test_the_templates_refuse_what_the_schema_cannot_say(
    values: dict[str, Any], message: str
) -> None:
    chart().validate_schema(chart().merge_values(values))  # the schema lets it through
    with pytest.raises(helm.HelmRenderError, match=re.escape(message)):
        chart().render(values, name=RELEASE, namespace=NAMESPACE)


def test_one_replica_is_fine_without_disruption_budgets() -> None:
    objects = render_chart({"podDisruptionBudget": {"enabled": False},
                            "worker": {"replicas": 1}})
    assert by_kind(objects, "PodDisruptionBudget") == {}
    assert one(objects, "Deployment", "fleet-scheduler-worker")["spec"]["replicas"] == 1


# --- CRDs ------------------------------------------------------------------------------------


def generated_crds() -> dict[str, dict[str, Any]]:
    return {
        (crd := yaml.safe_load(text))["metadata"]["name"]: crd for text in crds.generate().values()
    }


@pytest.mark.parametrize("mode", MODES)
def test_the_charts_crds_are_the_generated_ones(mode: str) -> None:
    """The same as deploy/crds (both written by `make crds`; tests/unit/hub/test_crds.py fails
    when either is stale), kept on uninstall; beside KubeFleet, fleet-scheduler's own only."""
    rendered = by_kind(render_chart({"mode": mode}), "CustomResourceDefinition")
    generated = generated_crds()
    expected = {crds.crd_name(k) for k in KINDS
                if mode == STANDALONE or not k.GROUP.endswith(KUBEFLEET_GROUP)}
    assert set(rendered) == expected
    for name, crd in rendered.items():
        assert crd["metadata"].pop("annotations") == KEEP
        labels = crd["metadata"].pop("labels")
        assert labels["app.kubernetes.io/part-of"] == "fleet-scheduler"
        assert crd == generated[name], f"{name} differs from hub.crds' (run `make crds`)"


def test_crds_can_be_left_out_or_deletable() -> None:
    assert by_kind(render_chart({"crds": {"install": False}}), "CustomResourceDefinition") == {}
    for crd in by_kind(render_chart({"crds": {"keep": False}}),
                       "CustomResourceDefinition").values():
        assert "annotations" not in crd["metadata"]


# --- values that change what is rendered -----------------------------------------------------


def test_the_image_and_build_id_follow_the_project_version_or_the_values() -> None:
    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    assert chart().metadata["appVersion"] == version
    cases: list[tuple[dict[str, Any], str, str]] = [
        ({}, f"fleet-scheduler:{version}", version),
        ({"image": {"repository": "registry.example.com/fs", "tag": "1.2.3"}},
         "registry.example.com/fs:1.2.3", "1.2.3"),
        ({"image": {"tag": "1.2.3"}, "buildId": "1.2.3-rc1"}, "fleet-scheduler:1.2.3", "1.2.3-rc1"),
    ]
    for values, image, build_id in cases:
        objects = render_chart(values)
        (config,) = by_kind(objects, "ConfigMap").values()
        assert config["data"]["FLEET_BUILD_ID"] == build_id
        for deployment in by_kind(objects, "Deployment").values():
            assert container(deployment)["image"] == image


def test_ports_follow_the_values() -> None:
    objects = render_chart({"metricsPort": 9191, "temporal": {"address": "t.example.com:7234"}})
    (policy,) = by_kind(objects, "NetworkPolicy").values()
    assert policy["spec"]["ingress"] == [{"ports": [{"protocol": "TCP", "port": 9191}]}]
    egress = {p["port"] for rule in policy["spec"]["egress"] for p in rule["ports"]}
    assert 7234 in egress and 7233 not in egress
    for deployment in by_kind(objects, "Deployment").values():
        assert parsed_command(objects, deployment).metrics_port == 9191
        assert container(deployment)["ports"][0]["containerPort"] == 9191
        annotations = deployment["spec"]["template"]["metadata"]["annotations"]
        assert annotations["prometheus.io/port"] == "9191"


def test_another_release_name_and_namespace_name_everything_after_them() -> None:
    objects = render_chart(release="hub-a", namespace="ops")
    assert {"hub-a-fleet-scheduler-worker", "hub-a-fleet-scheduler-watcher"} <= set(
        by_kind(objects, "Deployment"))
    for binding in by_kind(objects, "ClusterRoleBinding").values():
        assert binding["subjects"] == [
            {"kind": "ServiceAccount", "name": "hub-a-fleet-scheduler", "namespace": "ops"}
        ]
    for obj in objects:
        if obj["kind"] not in ("ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition"):
            assert obj["metadata"]["namespace"] == "ops", obj["kind"]


def test_the_activity_autoscaler_follows_the_values() -> None:
    objects = render_chart({"activities": {"autoscaling": {
        "minReplicas": 3, "maxReplicas": 40, "targetCPUUtilizationPercentage": 60}}})
    (hpa,) = by_kind(objects, "HorizontalPodAutoscaler").values()
    assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (3, 40)
    assert hpa["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"] == 60
    off = render_chart({"activities": {"autoscaling": {"enabled": False}}})
    assert by_kind(off, "HorizontalPodAutoscaler") == {}


def selects(selector: Mapping[str, str], labels: Mapping[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


def test_the_service_monitor_scrapes_every_pods_metrics_port() -> None:
    assert not keys(render_chart()) & SERVICE_MONITOR_OBJECTS  # off by default
    objects = render_chart({"serviceMonitor": {
        "enabled": True, "labels": {"release": "kube-prometheus-stack"}, "interval": "30s"}})
    assert keys(objects) & SERVICE_MONITOR_OBJECTS == SERVICE_MONITOR_OBJECTS
    service = one(objects, "Service", "fleet-scheduler-metrics")
    monitor = one(objects, "ServiceMonitor", "fleet-scheduler")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    assert selects(monitor["spec"]["selector"]["matchLabels"], service["metadata"]["labels"])
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": [NAMESPACE]}
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint == {"port": "metrics", "path": "/metrics", "interval": "30s"}
    (port,) = service["spec"]["ports"]
    assert port["name"] == "metrics" and port["targetPort"] == "metrics"
    for deployment in by_kind(objects, "Deployment").values():
        labels = deployment["spec"]["template"]["metadata"]["labels"]
        assert selects(service["spec"]["selector"], labels)
        assert {p["name"] for p in container(deployment)["ports"]} == {"metrics"}
    # The NetworkPolicy lets Prometheus in on that port already.
    (policy,) = by_kind(objects, "NetworkPolicy").values()
    assert policy["spec"]["ingress"][0]["ports"][0]["port"] == port["port"]


# --- the chart's README ----------------------------------------------------------------------

# Maps whose keys are the user's (Kubernetes resources, labels): one row, not one per key.
OPAQUE_MAPS: Final = frozenset({"resources", "labels"})


def leaf_keys(values: Mapping[str, Any], prefix: str = "") -> set[str]:
    found: set[str] = set()
    for key, value in values.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict) and value and key not in OPAQUE_MAPS:
            found |= leaf_keys(value, f"{path}.")
        else:
            found.add(path)
    return found


def test_the_charts_readme_lists_every_value_with_its_default() -> None:
    readme = (CHART / "README.md").read_text()
    rows = dict(re.findall(r"^\| `([\w.]+)` \| `([^`]*)` \|", readme, flags=re.MULTILINE))
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert set(rows) == leaf_keys(values)
    for key, shown in rows.items():
        value: Any = values
        for part in key.split("."):
            value = value[part]
        if not isinstance(value, dict):
            assert yaml.safe_load(shown or '""') == value, f"README says {key} is {shown}"


# --- the docs' helm commands -----------------------------------------------------------------

DOCS_WITH_HELM: Final = (REPO / "README.md", REPO / "docs" / "install.md",
                         DEPLOY / "README.md", CHART / "README.md")


def set_value(values: dict[str, Any], assignment: str) -> None:
    """One `--set key.path=value` as Helm reads it: integers and booleans typed, else a string."""
    path, _, text = assignment.partition("=")
    value: Any = text
    if re.fullmatch(r"-?[0-9]+", text):
        value = int(text)
    elif text in ("true", "false"):
        value = text == "true"
    *parents, last = path.split(".")
    for part in parents:
        values = values.setdefault(part, {})
    values[last] = value


def helm_installs(text: str) -> list[list[str]]:
    joined = text.replace("\\\n", " ")
    return [
        shlex.split(line.strip())
        for line in joined.splitlines()
        if line.strip().startswith("helm install ")
    ]


@pytest.mark.parametrize("doc", DOCS_WITH_HELM, ids=lambda p: str(p.relative_to(REPO)))
def test_the_docs_helm_install_commands_render(doc: Path) -> None:
    installs = helm_installs(doc.read_text())
    assert installs, f"{doc.relative_to(REPO)} shows no `helm install`"
    for words in installs:
        release, path = words[2], words[3]
        assert (REPO / path).resolve() == CHART.resolve(), words
        namespace = words[words.index("-n") + 1]
        values: dict[str, Any] = {}
        for i, word in enumerate(words):
            if word == "--set":
                set_value(values, words[i + 1])
        objects = render_chart(values, release=release, namespace=namespace)
        assert by_kind(objects, "Deployment"), words
