# Two commands for a fresh clone with only python3:  `make demo`  and  `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin
STAMP   = $(VENV)/.installed-$(shell cat pyproject.toml | $(PYTHON) -c "import sys,hashlib;print(hashlib.sha1(sys.stdin.buffer.read()).hexdigest()[:12])")

.PHONY: demo test bench screenshots clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test,bench]'
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/nodewatch demo $(ARGS)

test: $(STAMP)
	$(BIN)/python -m pytest -n 2 -q $(ARGS); rc=$$?; if [ $$rc -eq 5 ]; then echo "no tests ran" >&2; exit 1; fi; exit $$rc

bench: $(STAMP)
	$(BIN)/python -m bench $(ARGS)

screenshots: $(STAMP)
	$(BIN)/python scripts/make_screenshots.py

clean:
	rm -rf $(VENV) .pytest_cache
