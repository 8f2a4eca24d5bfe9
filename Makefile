# redis-lockmod. `make help` lists the targets.

PORT ?= 6379
CARGO ?= cargo
SO := target/release/libredis_lockmod.so
SO_DEBUG := target/debug/libredis_lockmod.so

.DEFAULT_GOAL := help
.PHONY: help deps build release run test test-cluster test-python test-rust-client unit integration lint fmt clean bench bench-quick

help: ## List the targets
	@grep -E '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*?## "}; {printf "  %-12s %s\n", $$1, $$2}'

deps: ## Install redis-server, redis-tools and libclang if missing
	@command -v redis-server >/dev/null && command -v clang >/dev/null || bash scripts/install-deps.sh

build: deps ## Build the module (debug): target/debug/libredis_lockmod.so
	$(CARGO) build --lib

release: deps ## Build the module (optimised): target/release/libredis_lockmod.so
	$(CARGO) build --lib --release

run: release ## Build, then run redis-server on PORT (default 6379) with the module, in the foreground
	bash scripts/run-server.sh $(SO) $(PORT)

# Rust test binaries run side by side through cargo-nextest when it is installed (the Rust
# toolchain of our machines has it; `cargo install cargo-nextest` elsewhere): the tests wait on
# servers far more than they compute, so TEST_JOBS tests at once (default 4, on any machine)
# take about 60% of the time cargo test takes running one binary at a time (measured on 2
# cores: 277 s against 481 s for one server's integration tests). Each test is then a process
# of its own. Without nextest, or with TEST_RUNNER=cargo, cargo test runs them as before.
TEST_JOBS ?= 4
TEST_RUNNER ?= $(shell $(CARGO) nextest --version >/dev/null 2>&1 && echo nextest || echo cargo)
ifeq ($(TEST_RUNNER),nextest)
RUN_TESTS = $(CARGO) nextest run --no-fail-fast --test-threads $(TEST_JOBS) --status-level slow --final-status-level slow
else
RUN_TESTS = $(CARGO) test
endif

# SERVER=redis|redis8|valkey|all (default all): the integration tests run once per server. With `all`,
# a server that is not installed is reported loudly and skipped; naming it explicitly fails.
SERVER ?= all

test: build ## Unit tests, then integration, Python and Rust client and docs example tests once per server, then Node and the monitoring run (SERVER=redis|redis8|valkey|all)
	$(CARGO) test --lib
	@set -e; if [ "$(SERVER)" = all ]; then servers="redis redis8 valkey"; else servers="$(SERVER)"; fi; \
	for s in $$servers; do \
	  bin=$$(bash scripts/server-bin.sh $$s); \
	  if [ -z "$$bin" ]; then \
	    if [ "$(SERVER)" = all ]; then echo "*** $$s is NOT installed: its tests did NOT run (scripts/install-deps.sh) ***" >&2; continue; fi; \
	    echo "*** SERVER=$$s is not installed (scripts/install-deps.sh) ***" >&2; exit 1; \
	  fi; \
	  echo "=== integration tests on $$s: $$bin ($$($$bin --version))"; \
	  SERVER=$$s $(RUN_TESTS) --test '*'; \
	  $(MAKE) --no-print-directory test-handover SERVER=$$s; \
	  $(MAKE) --no-print-directory test-python SERVER=$$s; \
	  $(MAKE) --no-print-directory test-rust-client SERVER=$$s; \
	  $(MAKE) --no-print-directory test-docs SERVER=$$s; \
	done
	$(MAKE) --no-print-directory test-node
	$(MAKE) --no-print-directory test-monitoring SERVER=$(if $(filter all,$(SERVER)),redis,$(SERVER))
	$(MAKE) --no-print-directory test-fenced-store SERVER=redis

# Redis 7.2's way of answering parked clients (docs/design.md, "A grant and its reply"), run
# on a later server, where the module takes it when LOCKMOD_TEST_ANSWER_ORDER=handover: CI has
# no 7.2. It runs the grants test binary (tests/grants/: answer_order, grant_race,
# grant_settle, grant_storm, replica_sync) with either runner. Redis 7.0 cannot take it (its
# way is tested by the suite itself), and a 7.2 takes it anyway; both say so and run nothing
# here.
.PHONY: test-handover
test-handover: build ## The answer races with Redis 7.2's hand-over forced on a later server (SERVER=redis|redis8|valkey)
	@set -e; s="$(SERVER)"; if [ "$$s" = all ]; then s=redis; fi; \
	bin=$$(bash scripts/server-bin.sh $$s); \
	if [ -z "$$bin" ]; then echo "*** SERVER=$$s is not installed (scripts/install-deps.sh) ***" >&2; exit 1; fi; \
	v=$$($$bin --version | sed -n 's/.* v=\([0-9.]*\) .*/\1/p'); \
	case "$$v" in \
	  6.*|7.0.*) echo "=== $$s $$v answers from its before-sleep event: Redis 7.2's hand-over cannot run there" ;; \
	  7.1.*|7.2.*) echo "=== $$s $$v takes Redis 7.2's hand-over itself: its integration tests ran it" ;; \
	  *) echo "=== Redis 7.2's hand-over forced on $$s $$v"; \
	     LOCKMOD_TEST_ANSWER_ORDER=handover SERVER=$$s $(RUN_TESTS) --test grants ;; \
	esac

# Servers CI does not have (docs/design.md, "Which servers are tested where"): every suite of
# `make test` on each binary given, e.g. binaries built from source:
#   make test-compat REDIS_72=/path/redis-7.2.4/src/redis-server REDIS_74=/path/redis-7.4.1/src/redis-server
# REDIS_72 must be a Redis (or Valkey) 7.2, REDIS_74 a Redis 7.4 or later; at least one must be
# given, and one not given is reported as not tested.
.PHONY: test-compat
test-compat: build python-env clients/node/node_modules/.package-lock.json ## Every suite on the Redis 7.2 / 7.4 binaries given (REDIS_72=path REDIS_74=path)
	@set -e; \
	if [ -z "$(REDIS_72)$(REDIS_74)" ]; then echo "*** make test-compat REDIS_72=<redis-server 7.2> REDIS_74=<redis-server 7.4>: no binary given, nothing tested ***" >&2; exit 1; fi; \
	for pair in "REDIS_72:$(REDIS_72):7.1.* 7.2.*" "REDIS_74:$(REDIS_74):7.3.* 7.4.* 7.[5-9].* [89].* [1-9][0-9].*"; do \
	  name=$${pair%%:*}; rest=$${pair#*:}; bin=$${rest%%:*}; want=$${rest#*:}; \
	  if [ -z "$$bin" ]; then echo "*** $$name not given: NOT tested ***" >&2; continue; fi; \
	  [ -x "$$bin" ] || { echo "*** $$name=$$bin is not an executable ***" >&2; exit 1; }; \
	  v=$$($$bin --version | sed -n 's/.* v=\([0-9.]*\) .*/\1/p'); ok=; \
	  for w in $$want; do case "$$v" in $$w) ok=1 ;; esac; done; \
	  [ -n "$$ok" ] || { echo "*** $$name=$$bin is version $$v, not the release $$name names ***" >&2; exit 1; }; \
	  so=$${LOCKMOD_MODULE:-$(CURDIR)/$(SO_DEBUG)}; \
	  echo "=== integration tests on $$bin ($$v)"; \
	  REDIS_SERVER=$$bin $(RUN_TESTS) --test '*'; \
	  if [ "$$name" = REDIS_74 ]; then \
	    echo "=== Redis 7.2's hand-over forced on $$bin ($$v)"; \
	    LOCKMOD_TEST_ANSWER_ORDER=handover REDIS_SERVER=$$bin $(RUN_TESTS) --test grants; \
	  fi; \
	  echo "=== Python library tests on $$bin ($$v)"; \
	  (cd clients/python && REDIS_SERVER=$$bin LOCKMOD_MODULE=$$so "$(abspath $(VENV))/bin/python" -m pytest -q -p no:cacheprovider -n $(TEST_JOBS) tests); \
	  echo "=== Node library tests on $$bin ($$v)"; \
	  (cd clients/node && REDIS_SERVER=$$bin LOCKMOD_MODULE=$$so node --test --test-concurrency=$(TEST_JOBS) --test-timeout=120000 test/*.test.js); \
	  echo "=== Rust client tests on $$bin ($$v)"; \
	  REDIS_SERVER=$$bin LOCKMOD_MODULE=$$so $(RUN_TESTS) -p redis-lockmod-client --lib --tests; \
	done

# The monitoring of issue 37 (docs/operations.md): promtool checks the Prometheus config and
# the alert rules and runs their unit tests, then tests/monitoring runs a server with the
# module, Debian's prometheus-redis-exporter with monitoring/redis_exporter.lua and Debian's
# Prometheus with monitoring/'s config, rules and dashboard queries (about 15 s). Once per
# `make test`, on one server: tests/ops/monitoring_script.rs runs the script on every server.
.PHONY: test-monitoring
test-monitoring: build python-env ## The monitoring/ files for real: promtool checks and tests, then a server, the redis exporter and Prometheus (SERVER=redis|redis8|valkey)
	@for b in prometheus promtool prometheus-redis-exporter; do \
	  command -v $$b >/dev/null || { echo "*** $$b is NOT installed: the monitoring tests did NOT run (scripts/install-deps.sh) ***" >&2; exit 1; }; \
	done
	cd monitoring && promtool check config prometheus.yml && promtool test rules alerts_test.yml
	@set -e; s="$(SERVER)"; if [ "$$s" = all ]; then s=redis; fi; \
	bin=$$(bash scripts/server-bin.sh $$s); \
	if [ -z "$$bin" ]; then echo "*** SERVER=$$s is not installed (scripts/install-deps.sh) ***" >&2; exit 1; fi; \
	echo "=== monitoring run on $$s: $$bin"; \
	REDIS_SERVER="$$bin" LOCKMOD_MODULE="$${LOCKMOD_MODULE:-$(CURDIR)/$(SO_DEBUG)}" \
	  "$(abspath $(VENV))/bin/python" -m pytest -q -p no:cacheprovider -s tests/monitoring

# The Node library (clients/node): npm ci (versions pinned in package-lock.json), then node's
# test runner against the debug module ($$LOCKMOD_MODULE wins), once per server as above.
.PHONY: test-node
test-node: build ## The Node library's tests (clients/node) once per server (SERVER=redis|redis8|valkey|all)
	@command -v npm >/dev/null || { echo "*** npm is NOT installed: the Node library tests did NOT run (scripts/install-deps.sh) ***" >&2; exit 1; }
	cd clients/node && npm ci --no-audit --no-fund --loglevel=error
	@set -e; if [ "$(SERVER)" = all ]; then servers="redis redis8 valkey"; else servers="$(SERVER)"; fi; \
	for s in $$servers; do \
	  bin=$$(bash scripts/server-bin.sh $$s); \
	  if [ -z "$$bin" ]; then \
	    if [ "$(SERVER)" = all ]; then echo "*** $$s is NOT installed: its Node tests did NOT run (scripts/install-deps.sh) ***" >&2; continue; fi; \
	    echo "*** SERVER=$$s is not installed (scripts/install-deps.sh) ***" >&2; exit 1; \
	  fi; \
	  echo "=== Node library tests on $$s: $$bin"; \
	  (cd clients/node && SERVER=$$s LOCKMOD_MODULE=$${LOCKMOD_MODULE:-$(CURDIR)/$(SO_DEBUG)} node --test --test-concurrency=$(TEST_JOBS) --test-timeout=120000 test/*.test.js); \
	done

# The Rust client crate (clients/rust): its unit tests and its integration tests (real servers:
# standalone, a Redis Cluster, Sentinel, and one lock shared with Python and Node holders, which
# need .venv and clients/node's packages) once per server. Its doctests run in test-docs.
test-rust-client: build python-env clients/node/node_modules/.package-lock.json ## The Rust client crate's tests (clients/rust) once per server (SERVER=redis|redis8|valkey|all)
	@set -e; if [ "$(SERVER)" = all ]; then servers="redis redis8 valkey"; else servers="$(SERVER)"; fi; \
	for s in $$servers; do \
	  bin=$$(bash scripts/server-bin.sh $$s); \
	  if [ -z "$$bin" ]; then \
	    if [ "$(SERVER)" = all ]; then echo "*** $$s is NOT installed: its Rust client tests did NOT run (scripts/install-deps.sh) ***" >&2; continue; fi; \
	    echo "*** SERVER=$$s is not installed (scripts/install-deps.sh) ***" >&2; exit 1; \
	  fi; \
	  echo "=== Rust client tests on $$s: $$bin"; \
	  SERVER=$$s LOCKMOD_MODULE=$${LOCKMOD_MODULE:-$(CURDIR)/$(SO_DEBUG)} $(RUN_TESTS) -p redis-lockmod-client --lib --tests; \
	done

# The cluster test binary (tests/cluster/: cluster, cluster_slots, failover), one test at a
# time: `make test` runs it too, among the others.
test-cluster: build ## Cluster and failover tests (a 3+3 node cluster per test) once per server
	@set -e; if [ "$(SERVER)" = all ]; then servers="redis redis8 valkey"; else servers="$(SERVER)"; fi; \
	for s in $$servers; do \
	  bin=$$(bash scripts/server-bin.sh $$s); \
	  if [ -z "$$bin" ]; then echo "*** $$s is NOT installed: its cluster tests did NOT run ***" >&2; continue; fi; \
	  echo "=== cluster tests on $$s: $$bin"; \
	  SERVER=$$s $(CARGO) test --test cluster -- --test-threads=1; \
	done

# The Python client's environment: the repository's .venv (scripts/install-deps.sh makes it too).
VENV ?= .venv
PY_LOCK := clients/python/requirements.lock

test-python: build python-env ## Python client tests (pytest, pinned deps in .venv) on SERVER=redis|redis8|valkey (default redis)
	@set -e; s="$(SERVER)"; if [ "$$s" = all ]; then s=redis; fi; \
	bin=$$(bash scripts/server-bin.sh $$s); \
	if [ -z "$$bin" ]; then echo "*** SERVER=$$s is not installed (scripts/install-deps.sh) ***" >&2; exit 1; fi; \
	echo "=== python client tests on $$s: $$bin"; \
	cd clients/python && REDIS_SERVER="$$bin" LOCKMOD_MODULE="$${LOCKMOD_MODULE:-$(CURDIR)/$(SO_DEBUG)}" \
	  "$(abspath $(VENV))/bin/python" -m pytest -q -p no:cacheprovider -n $(TEST_JOBS) tests

# Issue 35's fenced store under a nemesis (tests/nemesis/): about a minute, so `make test` runs
# it once, on Redis (SERVER=redis8|valkey runs it on another); FENCED_STORE_SECONDS changes
# how long the nemesis runs.
.PHONY: test-fenced-store
test-fenced-store: build python-env ## A fenced store under kills, pauses and partitions with Sentinel failover (~1 min; SERVER=redis|redis8|valkey)
	@set -e; s="$(SERVER)"; if [ "$$s" = all ]; then s=redis; fi; \
	bin=$$(bash scripts/server-bin.sh $$s); \
	if [ -z "$$bin" ]; then echo "*** SERVER=$$s is not installed (scripts/install-deps.sh) ***" >&2; exit 1; fi; \
	echo "=== fenced store under a nemesis on $$s: $$bin"; \
	cd tests/nemesis && REDIS_SERVER="$$bin" LOCKMOD_MODULE="$${LOCKMOD_MODULE:-$(CURDIR)/$(SO_DEBUG)}" \
	  "$(abspath $(VENV))/bin/python" -m pytest -q -s -p no:cacheprovider test_fenced_store.py

# The pinned dependencies and the package from ./clients/python, in .venv.
.PHONY: python-env
python-env:
	@if [ ! -x $(VENV)/bin/python ]; then python3 -m venv $(VENV); fi
	@$(VENV)/bin/python -m pip install -q --disable-pip-version-check -r $(PY_LOCK)
	@$(VENV)/bin/python -m pip install -q --disable-pip-version-check --no-build-isolation --no-deps --force-reinstall ./clients/python

# The Node library's pinned dependencies (ioredis), installed again only when the lock changes.
clients/node/node_modules/.package-lock.json: clients/node/package-lock.json
	@command -v npm >/dev/null || { echo "*** npm is NOT installed (scripts/install-deps.sh) ***" >&2; exit 1; }
	cd clients/node && npm ci --no-audit --no-fund --loglevel=error

# Every fenced block of README.md, docs/*.md and clients/*/README.md in Python, JavaScript or
# redis-cli form, run as written (tests/docs/test_docs.py says how, and the markers it reads);
# then the Rust ones (the Rust client's README, its API docs and docs/clients.md's Rust blocks)
# as the crate's doctests, against the servers scripts/doc-servers.sh starts.
.PHONY: test-docs
test-docs: build python-env clients/node/node_modules/.package-lock.json ## Run every documented example as written (tests/docs) on SERVER=redis|redis8|valkey (default redis)
	@set -e; s="$(SERVER)"; if [ "$$s" = all ]; then s=redis; fi; \
	bin=$$(bash scripts/server-bin.sh $$s); \
	if [ -z "$$bin" ]; then echo "*** SERVER=$$s is not installed (scripts/install-deps.sh) ***" >&2; exit 1; fi; \
	echo "=== documented examples on $$s: $$bin"; \
	REDIS_SERVER="$$bin" LOCKMOD_MODULE="$${LOCKMOD_MODULE:-$(CURDIR)/$(SO_DEBUG)}" \
	  "$(abspath $(VENV))/bin/python" -m pytest -q -p no:cacheprovider tests/docs; \
	echo "=== Rust examples (doctests) on $$s: $$bin"; \
	REDIS_SERVER="$$bin" LOCKMOD_MODULE="$${LOCKMOD_MODULE:-$(CURDIR)/$(SO_DEBUG)}" \
	  bash scripts/doc-servers.sh $(CARGO) test -p redis-lockmod-client --doc -- --test-threads=1

unit: ## Unit tests only (no server)
	$(CARGO) test --lib

lint: deps ## cargo fmt --check, clippy -D warnings, the Rust client's docs without warnings and its rust-version against Cargo.lock, the layering check (scripts/check-layers.py), promtool on monitoring/
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	RUSTDOCFLAGS="-D warnings" $(CARGO) doc -p redis-lockmod-client --no-deps --quiet
	python3 scripts/check-msrv.py --self-test
	python3 scripts/check-msrv.py redis-lockmod-client
	python3 scripts/check-layers.py --self-test
	python3 scripts/check-layers.py
	@command -v promtool >/dev/null || { echo "*** promtool is NOT installed: monitoring/ was NOT checked (scripts/install-deps.sh) ***" >&2; exit 1; }
	cd monitoring && promtool check config prometheus.yml && promtool test rules alerts_test.yml

fmt: ## Format the code
	$(CARGO) fmt --all

bench: release ## Full benchmark (about 7 min on 2 cores; --only N,M runs some parts): writes docs/benchmarks.md and docs/img/*.svg
	$(CARGO) run --release -p lockmod-bench -- --out docs

bench-quick: release ## Every benchmark part, tiny (< 1 min): checks it runs and mutual exclusion holds
	$(CARGO) run --release -p lockmod-bench -- --quick --out $${TMPDIR:-/tmp}/lockmod-bench-quick

clean: ## Remove build output
	$(CARGO) clean
