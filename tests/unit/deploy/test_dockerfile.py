"""deploy/Dockerfile and .dockerignore, checked by reading them (no Docker daemon here).

What can go wrong without anyone noticing until a cluster pulls the image: a package left out
of the build (the wheel imports fail at start-up), dev tools shipped, root as the user, or a
uid that differs from the manifests' runAsUser (the pod then refuses to start)."""

from __future__ import annotations

import json
import re
import tomllib
from dataclasses import dataclass, field
from typing import Final

import pytest
import yaml

from tests.support.deploy import DEPLOY, REPO

DOCKERFILE: Final = DEPLOY / "Dockerfile"
DOCKERIGNORE: Final = REPO / ".dockerignore"
BASE_IMAGE: Final = "python:3.11-slim"
DEV_TOOLS: Final = re.compile(r"\[dev\]|\bpytest\b|\bmypy\b|\bruff\b|\bhypothesis\b")
# What must never reach the build context, whatever the Dockerfile copies.
NEVER_IN_CONTEXT: Final = (
    ".venv/bin/python", ".git/HEAD", ".run/kubeconfig", "tests/conftest.py", "bench/e2e.py",
    "hub/__pycache__/client.cpython-311.pyc", "workers/__pycache__/cli.cpython-311.pyc",
)


@dataclass
class Stage:
    image: str
    name: str | None
    instructions: list[tuple[str, str]] = field(default_factory=list)

    def all(self, instruction: str) -> list[str]:
        return [args for name, args in self.instructions if name == instruction]


def instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    joined: list[str] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        joined.append(pending + line)
        pending = ""
    assert not pending, "the Dockerfile ends inside a continued line"
    out = []
    for line in joined:
        name, _, args = line.partition(" ")
        out.append((name.upper(), args.strip()))
    return out


def stages() -> tuple[dict[str, str], list[Stage]]:
    """Global ARG defaults, and the stages in order."""
    args: dict[str, str] = {}
    found: list[Stage] = []
    for name, rest in instructions(DOCKERFILE.read_text()):
        if name == "FROM":
            words = rest.split()
            image = re.sub(r"\$\{(\w+)\}", lambda m: args[m[1]], words[0])
            alias = words[2] if len(words) == 3 and words[1].upper() == "AS" else None
            found.append(Stage(image, alias))
        elif not found and name == "ARG":
            key, _, default = rest.partition("=")
            args[key] = default
        else:
            assert found, f"{name} before the first FROM"
            found[-1].instructions.append((name, rest))
    return args, found


def _pattern(glob: str) -> re.Pattern[str]:
    """Go's filepath.Match as Docker extends it: `*` stays within a segment, `**` crosses them."""
    out = ""
    for i, token in enumerate(re.split(r"(\*\*/|\*\*|\*|\?)", glob)):
        if i % 2 == 0:
            out += re.escape(token)
        else:
            out += {"**/": "(?:.*/)?", "**": ".*", "*": "[^/]*", "?": "[^/]"}[token]
    return re.compile(out)


def ignored(path: str) -> bool:
    """Docker's rule: a path is out when the last pattern matching it, or one of its parent
    directories, is not negated (`!`)."""
    parts = path.split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    verdict = False
    for raw in DOCKERIGNORE.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        pattern = _pattern(line.removeprefix("!").rstrip("/"))
        if any(pattern.fullmatch(prefix) for prefix in prefixes):
            verdict = not line.startswith("!")
    return verdict


def copied_sources(stage: Stage) -> list[str]:
    sources = []
    for args in stage.all("COPY"):
        if args.startswith("--from"):
            continue
        words = json.loads(args) if args.startswith("[") else args.split()
        sources.extend(w.rstrip("/") for w in words[:-1])
    return sources


def test_builds_on_python_311_slim_in_two_stages() -> None:
    _, found = stages()
    assert len(found) >= 2
    assert {stage.image for stage in found} == {BASE_IMAGE}
    build, runtime = found[0], found[-1]
    assert build.name is not None
    assert runtime.all("COPY") == [f"--from={build.name} /opt/fleet-scheduler /opt/fleet-scheduler"]
    assert not copied_sources(runtime), "the runtime stage takes nothing from the context"


def test_runs_as_the_non_root_uid_the_manifests_expect() -> None:
    _, found = stages()
    users = found[-1].all("USER")
    assert users, "the runtime stage must set USER"
    uid, _, gid = users[-1].partition(":")
    assert uid.isdigit() and int(uid) != 0, "a numeric uid lets runAsNonRoot verify it"
    for name in ("worker", "watcher"):
        manifest = yaml.safe_load((DEPLOY / "base" / f"{name}.yaml").read_text())
        context = manifest["spec"]["template"]["spec"]["securityContext"]
        assert (context["runAsUser"], context["runAsGroup"]) == (int(uid), int(gid or uid))


def test_entrypoint_is_the_cli_and_the_metrics_port_is_exposed() -> None:
    _, found = stages()
    runtime = found[-1]
    assert json.loads(runtime.all("ENTRYPOINT")[-1]) == ["fleet-scheduler"]
    assert runtime.all("EXPOSE") == ["9090"]
    env = " ".join(runtime.all("ENV"))
    assert "PATH=/opt/fleet-scheduler/bin:" in env
    assert "PYTHONDONTWRITEBYTECODE=1" in env  # the root filesystem is read-only in the pod


def test_installs_no_dev_tools() -> None:
    for stage in stages()[1]:
        for run in stage.all("RUN"):
            assert not DEV_TOOLS.search(run), f"dev tooling in the image: {run}"
    build = stages()[1][0]
    assert any("pip wheel --no-deps" in run for run in build.all("RUN"))


def test_installs_the_wheel_without_extras() -> None:
    build = stages()[1][0]
    installs = [run for run in build.all("RUN") if "pip install" in run]
    assert installs, "the build stage must pip install the wheel"
    for run in installs:
        target = run.split("pip install", 1)[1].split("&&", 1)[0].split()
        assert target == ["/wheels/*.whl"], f"install the bare wheel, no extras: {run}"


def test_copies_every_package_the_wheel_needs() -> None:
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    include = pyproject["tool"]["setuptools"]["packages"]["find"]["include"]
    packages = {pattern.rstrip("*") for pattern in include}
    readme = pyproject["project"]["readme"]
    sources = set(copied_sources(stages()[1][0]))
    assert packages | {"pyproject.toml", readme} == sources
    for source in sources:
        assert (REPO / source).exists(), f"COPY {source}: no such path"
        assert not ignored(source), f"COPY {source}: .dockerignore keeps it out of the context"
        assert not ignored(f"{source}/__init__.py") or not (REPO / source).is_dir()


@pytest.mark.parametrize("path", NEVER_IN_CONTEXT)
def test_dockerignore_keeps_local_state_out_of_the_context(path: str) -> None:
    assert ignored(path)
