"""The decisions a turn publishes are predicted before they land (`active_after`): the bindings
the plan leaves, from the bindings it read and its writes. The prediction must equal the
bindings the hub really holds once `apply_binding_plan` has written that plan, over real
cycles on random fleets, policies and bindings in every state (tests/property/worlds.py)."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings

from activities.bindings import Tally, apply_binding_plan
from devhub import DevHub
from hub import names
from hub.client import HubClient
from hub.types import ClusterResourceBinding
from scheduler.bindings.published import active_after, active_decisions
from tests.property.worlds import PLACEMENT, World, worlds

EXAMPLES = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.function_scoped_fixture,
    ],
)


def _onto_hub(hub: HubClient, world: World) -> list[ClusterResourceBinding]:
    """The world's bindings written to the hub (a deleting one held by its finalizer), read back
    with the resourceVersions the plan will carry."""
    for planned in world.bindings:
        deleting = planned.metadata.deleting
        meta = planned.metadata.model_copy(
            update={"resource_version": None, "deletion_timestamp": None}
        )
        hub.create(planned.model_copy(update={"metadata": meta}))
        if deleting:
            hub.delete(ClusterResourceBinding, planned.name)
    return list(hub.list(ClusterResourceBinding, {names.PARENT_PLACEMENT_LABEL: PLACEMENT}))


@EXAMPLES
@given(world=worlds())
def test_the_prediction_is_what_the_hub_holds_after_the_plan(
    hub: HubClient, devhub: DevHub, world: World
) -> None:
    devhub.reset()
    read = _onto_hub(hub, world)
    result = world.run(bindings=read)
    apply_binding_plan(hub, result.plan, Tally())
    after = hub.list(ClusterResourceBinding, {names.PARENT_PLACEMENT_LABEL: PLACEMENT})
    assert active_after(read, result.plan) == active_decisions(after)
