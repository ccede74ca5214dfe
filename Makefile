# Two commands for a fresh clone with only python3:  `make demo`  and  `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin
STAMP   = $(VENV)/.installed-$(shell cat pyproject.toml | $(PYTHON) -c "import sys,hashlib;print(hashlib.sha1(sys.stdin.buffer.read()).hexdigest()[:12])")

.PHONY: demo test test-fast test-testbed lint system-deps bench screenshots clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test,bench]'
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/nodewatch demo $(ARGS)

# `make test` = the fast suite, then (without ARGS) the testbed tier: real control planes of v1.20.2
# and of the newest release the Go module proxy serves, built on first use into
# ~/.cache/nodewatch/testbed (cold, on 2 cores: see docs/real-control-plane.md).
test: test-fast
	@if [ -z "$(ARGS)" ]; then $(MAKE) --no-print-directory test-testbed; fi

# Programs the tests use as a user would meet them: tmux (the TUI), groff (the man page), OpenSSH's
# client and server (the SSH front door and ForceCommand), Chromium (the web front door), Prometheus
# (promtool and the server) and Alertmanager (the alert tests). Installed with apt-get when
# missing and possible (root); otherwise the tests that need them say so and skip.
SYSTEM_PACKAGES = tmux openssh-client openssh-server chromium prometheus prometheus-alertmanager groff-base

system-deps:
	@missing=""; for p in $(SYSTEM_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "installing$$missing (apt-get)"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	  else echo "note: not root, so$$missing not installed: the tests that need them will skip"; fi; \
	fi

# The static checks (their settings are in pyproject.toml): pyflakes/bugbear and friends, the types,
# and the layers as import contracts. A few seconds; `make test` runs them first.
lint: $(STAMP)
	$(BIN)/ruff check --quiet .
	$(BIN)/mypy
	$(BIN)/lint-imports --no-cache

test-fast: $(STAMP) system-deps lint
	$(BIN)/python -m pytest -n 2 -q --durations=15 $(ARGS); rc=$$?; if [ $$rc -eq 5 ]; then echo "no tests ran" >&2; exit 1; fi; exit $$rc

# The tier runs on every release in TESTBED_VERSIONS (v1.20.2 from Debian's source package, and the
# newest release the Go module proxy served when this line was last changed: named exactly, so that a
# new upstream patch release never starts a cold 20-minute build in the middle of a CI run; bump it
# by hand, `nodewatch testbed build --version latest` says what the newest is). Each is built into
# the cache first if missing.
TESTBED_VERSIONS ?= 1.20 1.37.2

test-testbed: $(STAMP)
	@for v in $(TESTBED_VERSIONS); do $(BIN)/nodewatch testbed build --version $$v || exit 1; done
	NODEWATCH_TESTBED_VERSIONS="$$(echo $(TESTBED_VERSIONS) | tr ' ' ',')" \
	  $(BIN)/python -m pytest -q -m testbed -p no:xdist tests/testbed $(ARGS); rc=$$?; if [ $$rc -eq 5 ]; then echo "no testbed tests ran" >&2; exit 1; fi; exit $$rc

bench: $(STAMP)
	$(BIN)/python -m bench $(ARGS)

screenshots: $(STAMP)
	$(BIN)/python scripts/make_screenshots.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
