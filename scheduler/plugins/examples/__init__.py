"""Example out-of-tree style plugins: how a third-party plugin is written and registered.

Nothing here is enabled by default; a profile enables a plugin by the name its distribution
registers in the `fleet_scheduler.plugins` entry-point group (see scheduler/README.md)."""
