"""devhub: a local Kubernetes-compatible hub API server for the fleet CRDs.

The embedded hub behind `make run` and the API behind the integration tests: it serves the fleet
CRDs (generated from hub's models, as deploy/crds is) over real HTTP and behaves like
kube-apiserver in everything fleet-scheduler relies on (discovery, CRUD with optimistic
concurrency, patches, the status subresource, finalizers, watch with resourceVersions and
bookmarks, schema validation, bearer tokens, namespaces: the core Namespace kind and namespaced
fleet kinds; the built-in PriorityClass kind), durable in SQLite when given a data directory,
with fault injection for tests. It imports nothing of the scheduler."""

from devhub.embedded import DEFAULT_BOOKMARK_INTERVAL, DEFAULT_WATCH_WINDOW, DevHub
from devhub.errors import ApiError
from devhub.faults import Fault, Faults, Stats

__all__ = [
    "DEFAULT_BOOKMARK_INTERVAL",
    "DEFAULT_WATCH_WINDOW",
    "ApiError",
    "DevHub",
    "Fault",
    "Faults",
    "Stats",
]
