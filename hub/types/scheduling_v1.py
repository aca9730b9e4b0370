"""The `scheduling.k8s.io/v1` PriorityClass: a named priority a placement may ask for, as a pod
does with `priorityClassName`.

Not a fleet kind: it has no CRD (`hub.types.KINDS` leaves it out), the API server serves it
itself, at /apis/scheduling.k8s.io/v1/priorityclasses, and creates `system-cluster-critical` and
`system-node-critical` at start. Unlike the fleet kinds its fields sit at the top level, not
under a spec. The model stays as lenient as the others: `preemption_policy` is a plain string,
so a policy added by a later Kubernetes still loads; the API server guarantees the rest (`value`
is an int32, at most one class is the global default)."""

from __future__ import annotations

from typing import ClassVar, Final

from hub.types.meta import HubObject

__all__ = [
    "HIGHEST_USER_DEFINABLE_PRIORITY",
    "PREEMPT_LOWER_PRIORITY",
    "PREEMPT_NEVER",
    "PriorityClass",
]

PREEMPT_LOWER_PRIORITY: Final = "PreemptLowerPriority"
PREEMPT_NEVER: Final = "Never"
# The highest value a class not named `system-...` may have; the system classes sit above it.
HIGHEST_USER_DEFINABLE_PRIORITY: Final = 1_000_000_000


class PriorityClass(HubObject):
    """A priority class as the API server stores it (`preemptionPolicy` is defaulted there)."""

    GROUP: ClassVar[str] = "scheduling.k8s.io"
    VERSION: ClassVar[str] = "v1"
    KIND: ClassVar[str] = "PriorityClass"
    PLURAL: ClassVar[str] = "priorityclasses"
    SINGULAR: ClassVar[str] = "priorityclass"
    SHORT_NAMES: ClassVar[tuple[str, ...]] = ("pc",)

    value: int  # an int32; immutable once created
    global_default: bool = False
    description: str = ""
    # PreemptLowerPriority or Never; None only in an object that never reached an API server.
    preemption_policy: str | None = None
