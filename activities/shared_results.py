"""The process's store of shared filter and score answers, one per profile
(scheduler.framework.sharing): placements of one policy, cycled in this process against the
same clusters of the worker's cluster cache, reuse each other's plugin answers.

On by default; `FLEET_SCHEDULER_SHARED_RESULTS=0` turns it off (decisions are the same either
way; benches compare the two). The store is bounded (`DEFAULT_MAX_CELLS`, least recently used
out); `FLEET_SCHEDULER_SHARED_RESULTS_CELLS` sets another budget."""

from __future__ import annotations

import os
import threading
from typing import Final

from scheduler.framework.profile import Profile, default_profile
from scheduler.framework.sharing import DEFAULT_MAX_CELLS, SharedResults

__all__ = ["ENV_CELLS", "ENV_SWITCH", "shared_for"]

ENV_SWITCH: Final = "FLEET_SCHEDULER_SHARED_RESULTS"
ENV_CELLS: Final = "FLEET_SCHEDULER_SHARED_RESULTS_CELLS"

_lock = threading.Lock()
_stores: dict[int, tuple[Profile, SharedResults]] = {}


def shared_for(profile: Profile | None) -> SharedResults | None:
    """The store for `profile` (None: the default profile, as `schedule` takes it) in this
    process; None when switched off."""
    if os.environ.get(ENV_SWITCH, "1") == "0":
        return None
    profile = profile if profile is not None else default_profile()
    with _lock:
        found = _stores.get(id(profile))
        if found is not None and found[0] is profile:
            return found[1]
        cells = os.environ.get(ENV_CELLS, "")
        store = SharedResults(max_cells=int(cells) if cells.isdigit() else DEFAULT_MAX_CELLS)
        _stores[id(profile)] = (profile, store)  # holds the profile: its id is not reused
        return store
