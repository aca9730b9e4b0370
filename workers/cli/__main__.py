"""`python -m workers.cli`: the `fleet-scheduler` command."""

from workers.cli import main

main()
