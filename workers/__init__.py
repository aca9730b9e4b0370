"""The processes: `serve` (worker.py) runs the components a RunConfig names (the workflow
worker, the activity worker and its child processes, the watcher) beside the health and metrics
server; `cli/` is the `fleet-scheduler` command, one module per subcommand. What they run lives
below: control (the watcher), activities, workflows, scheduler."""
