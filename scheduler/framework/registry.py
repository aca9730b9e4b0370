"""Where plugin factories come from: the built-in plugins, then the `fleet_scheduler.plugins`
entry-point group.

Third-party plugins register the way out-of-tree plugins register with kube-scheduler: a
distribution declares an entry point whose name is the plugin NAME and whose object is a
factory (usually the plugin class) called with the profile's keyword arguments:

    [project.entry-points."fleet_scheduler.plugins"]
    PreferLabel = "my_fleet_plugins.prefer_label:PreferLabel"

Entry points are looked up, and their modules imported, only when a profile names a plugin
that is not built in, so an installed but unused plugin can never break a cycle."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from importlib import metadata

from scheduler.framework.errors import ProfileError
from scheduler.framework.interfaces import Plugin

__all__ = ["ENTRY_POINT_GROUP", "PluginFactory", "builtin_plugins", "find_factory"]

ENTRY_POINT_GROUP = "fleet_scheduler.plugins"

PluginFactory = Callable[..., Plugin]


def builtin_plugins() -> Mapping[str, PluginFactory]:
    """The in-tree plugins keyed by NAME (imported lazily: `scheduler.plugins` is heavier)."""
    from scheduler.plugins import BUILTIN_PLUGINS

    return BUILTIN_PLUGINS


def find_factory(name: str, path: str) -> PluginFactory:
    """The factory of plugin `name`; `path` locates the YAML node naming it, for errors."""
    builtins = builtin_plugins()
    if name in builtins:
        return builtins[name]
    matches = [ep for ep in metadata.entry_points(group=ENTRY_POINT_GROUP) if ep.name == name]
    if not matches:
        known = ", ".join(sorted(builtins))
        raise ProfileError(
            path,
            f"unknown plugin {name!r}: not built in ({known}) and no entry point named "
            f"{name!r} in group {ENTRY_POINT_GROUP!r}",
        )
    values = sorted({ep.value for ep in matches})
    if len(values) > 1:
        raise ProfileError(
            path, f"plugin {name!r} is registered by several entry points: {', '.join(values)}"
        )
    try:
        factory = matches[0].load()
    except Exception as exc:  # an entry point's import can fail in any way
        raise ProfileError(
            path, f"cannot load plugin {name!r} from {values[0]}: {type(exc).__name__}: {exc}"
        ) from exc
    if not callable(factory):
        raise ProfileError(path, f"entry point {values[0]} for {name!r} is not callable")
    return factory  # type: ignore[no-any-return]
