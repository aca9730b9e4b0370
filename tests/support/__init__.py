"""What tests share, imported one way (`from tests.support.<module> import ...`):

- `waits`: polling a condition until it holds (`until`, `until_async`, `passes`,
  `consistently`, `consistently_async`), one awaitable with a bound (`within`); no test sleeps
  where it can wait for an event, no wait is unbounded, and a quiet period is checked all along
  it;
- `hub`: the HubClient every integration test builds on the session's devhub (the `hub`
  fixture in tests/conftest.py), and its timeout;
- `temporal`: the Temporal dev server as tests start one (`start_temporal`);
- `stacks`: the in-process worker and watcher (`fleet_scheduler`);
- `cli`: `fleet-scheduler dev` or `run` as processes (`DevProcess`, `RunProcess`), one command
  (`run_cli`), a failure as a user sees it (`assert_one_line_error`);
- `fleet`: the end-to-end tests' fleet in devhub, and readers of what happened;
- `history`: a placement's history, whichever way its turns ran;
- `policies`: placement policies many tests write (`prod_only`);
- `procs`: child processes a test can SIGKILL, reaped whatever happens;
- `deploy`: the deploy/ manifests rendered, and the hub calls the code makes.

A test file never imports another test file; tests/unit/test_tests_layout.py checks it."""
