# Two commands for a fresh clone with only python3:  `make demo`  and  `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin
STAMP   = $(VENV)/.installed-$(shell cat pyproject.toml | $(PYTHON) -c "import sys,hashlib;print(hashlib.sha1(sys.stdin.buffer.read()).hexdigest()[:12])")

.PHONY: demo test test-fast test-testbed bench screenshots clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test,bench]'
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/nodewatch demo $(ARGS)

# `make test` = the fast suite, then (without ARGS) the testbed tier: a real v1.20 control plane,
# built on first use into ~/.cache/nodewatch/testbed (about 4 minutes cold on 2 cores).
test: test-fast
	@if [ -z "$(ARGS)" ]; then $(MAKE) --no-print-directory test-testbed; fi

test-fast: $(STAMP)
	$(BIN)/python -m pytest -n 2 -q $(ARGS); rc=$$?; if [ $$rc -eq 5 ]; then echo "no tests ran" >&2; exit 1; fi; exit $$rc

test-testbed: $(STAMP)
	$(BIN)/nodewatch testbed build
	$(BIN)/python -m pytest -q -m testbed -p no:xdist tests/testbed $(ARGS); rc=$$?; if [ $$rc -eq 5 ]; then echo "no testbed tests ran" >&2; exit 1; fi; exit $$rc

bench: $(STAMP)
	$(BIN)/python -m bench $(ARGS)

screenshots: $(STAMP)
	$(BIN)/python scripts/make_screenshots.py

clean:
	rm -rf $(VENV) .pytest_cache
