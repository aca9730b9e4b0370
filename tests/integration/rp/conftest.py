"""The ResourcePlacement scheduler tests drive `fleet-scheduler dev` with the CLI tests' helpers
(tests/integration/cli)."""

from __future__ import annotations

import sys
from pathlib import Path

# Test directories are not packages here (pytest's default import mode puts each test file's
# own directory on sys.path), so share the CLI helpers by path.
CLI_TESTS = Path(__file__).resolve().parent.parent / "cli"
if str(CLI_TESTS) not in sys.path:
    sys.path.insert(0, str(CLI_TESTS))
