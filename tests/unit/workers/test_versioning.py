"""A worker's version: what it polls as, and the names Temporal would refuse."""

from __future__ import annotations

import pytest
from temporalio.common import VersioningBehavior

from workers.versioning import DEFAULT_DEPLOYMENT_NAME, WorkerVersion


def test_a_version_polls_versioned_and_auto_upgrades() -> None:
    version = WorkerVersion(build_id="0.2.0-rc1")  # an image tag, dots and all
    config = version.deployment_config()
    assert version.label == f"{DEFAULT_DEPLOYMENT_NAME}.0.2.0-rc1"
    assert config.use_worker_versioning
    assert config.version.deployment_name == DEFAULT_DEPLOYMENT_NAME
    assert config.default_versioning_behavior == VersioningBehavior.AUTO_UPGRADE


@pytest.mark.parametrize(
    ("build_id", "deployment"),
    [
        pytest.param("", "fleet", id="empty-build-id"),
        pytest.param("x" * 256, "fleet", id="long-build-id"),
        pytest.param("v1", "my.fleet", id="dot-in-deployment"),
        pytest.param("v1", "", id="empty-deployment"),
    ],
)
def test_names_temporal_cannot_take_are_refused_with_a_reason(
    build_id: str, deployment: str
) -> None:
    with pytest.raises(ValueError, match="give 1-255 characters"):
        WorkerVersion(build_id=build_id, deployment=deployment)
