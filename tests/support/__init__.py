"""What tests share, imported one way (`from tests.support.<module> import ...`):

- `waits`: polling a condition until it holds (`until`, `until_async`, `passes`,
  `consistently`, `consistently_async`); no test sleeps where it can wait for an event, and a
  quiet period is checked all along it;
- `hub`: the HubClient every integration test builds on the session's devhub (the `hub`
  fixture in tests/conftest.py), and its timeout;
- `temporal`: the Temporal dev server as tests start one (`start_temporal`);
- `stacks`: whole systems as tests start them: `fleet-scheduler dev` or `run` as processes
  (`DevProcess`, `RunProcess`), the in-process worker and watcher (`fleet_scheduler`)."""
