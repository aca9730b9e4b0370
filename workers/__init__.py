"""Processes: the `fleet-scheduler` CLI and, later, the worker, watcher and snapshotter entry
points. Entry points only: logic lives in the packages they wire together."""
