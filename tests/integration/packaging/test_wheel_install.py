"""A wheel install works outside the repository, as a platform team would install it.

The project is built into a wheel, installed (with the `local` extra that `fleet-scheduler dev`
needs) into a new virtualenv in a temporary directory, and `fleet-scheduler dev` is run from
another directory with the sample fleet and placements: the CRDs come from the package's models
and the samples from its package data, never from a checkout's deploy/. The placements get
their bindings, and SIGTERM stops everything. Dependencies come from pip's cache when the
project's own install has filled it (make test does), else from the package index."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hub import names
from hub.types import ClusterResourceBinding, ClusterResourcePlacement
from tests.support.cli import DevProcess
from tests.support.waits import until

REPO = Path(__file__).resolve().parents[3]
INSTALL_TIMEOUT_S = 600

pytestmark = pytest.mark.slow


def run(*command: str | Path, cwd: Path) -> str:
    done = subprocess.run(
        [str(c) for c in command], cwd=cwd, capture_output=True, text=True,
        timeout=INSTALL_TIMEOUT_S, check=False,
    )  # fmt: skip
    assert done.returncode == 0, f"{command} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bin/ directory of a fresh virtualenv holding the installed wheel."""
    root = tmp_path_factory.mktemp("wheel-install")
    # Built from a copy of what the wheel is made of, so the build leaves nothing in the
    # checkout (setuptools writes build/ and *.egg-info next to pyproject.toml).
    source = root / "source"
    shutil.copytree(
        REPO, source,
        ignore=shutil.ignore_patterns(
            ".*", "build", "*.egg-info", "__pycache__", "tests", "bench", "docs", "deploy"
        ),
    )  # fmt: skip
    wheels = root / "wheels"
    run(sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", wheels, source, cwd=root)
    (wheel,) = wheels.glob("fleet_scheduler-*.whl")
    venv = root / "venv"
    run(sys.executable, "-m", "venv", venv, cwd=root)
    run(venv / "bin" / "python", "-m", "pip", "install", "-q", f"{wheel}[local]", cwd=root)
    return venv / "bin"


def test_the_installed_package_is_the_wheel_not_the_checkout(
    installed: Path, tmp_path: Path
) -> None:
    where = run(
        installed / "python", "-c",
        "import devhub.samples, hub, workers; print(hub.__file__); print(workers.__file__)",
        cwd=tmp_path,
    )  # fmt: skip
    for line in where.split():
        assert Path(line).is_relative_to(installed.parent), line
        assert not Path(line).is_relative_to(REPO), line
    # The base install has no dev tooling: the extras are what the image leaves out.
    assert not (installed / "pytest").exists()


def test_dev_runs_from_another_directory_and_schedules_the_samples(
    installed: Path, tmp_path: Path
) -> None:
    workdir = tmp_path / "elsewhere"
    program = [str(installed / "fleet-scheduler")]
    dev = DevProcess(workdir, "--sample-fleet", "--sample-placements", program=program).start()
    try:
        assert "sample fleet: 8 member clusters" in dev.stdout()
        with dev.hub() as hub:
            placements = hub.list(ClusterResourcePlacement).items
            assert len(placements) == 6

            def scheduled() -> set[str]:
                bindings = hub.list(ClusterResourceBinding).items
                label = names.PARENT_PLACEMENT_LABEL
                parents = {b.metadata.labels.get(label, "") for b in bindings}
                return parents if {"web-everywhere", "prod-only"} <= parents else set()

            # The worker in the installed package schedules: the PickAll and a PickN sample
            # placement have their bindings.
            until(scheduled, what="bindings for the sample placements", timeout=90)
    finally:
        code = dev.stop()
    assert code == 0, dev.stderr()[-3000:]
