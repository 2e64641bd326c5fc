# The two commands of the quick start: `make demo` and `make test`. Both set up .venv first.
PY ?= python3
VENV := .venv
STAMP := $(VENV)/.installed-stamp

.PHONY: demo test lint coverage

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q -e '.[test,lint]'
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/python examples/demo.py

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests benchmarks examples
	$(VENV)/bin/ruff format --check src tests benchmarks examples
	$(VENV)/bin/mypy

# the suite in parallel (one worker a core), then the few tests that need the machine alone
test: $(STAMP) lint
	bash scripts/system-deps.sh
	$(VENV)/bin/pytest -n auto -m "not alone"
	$(VENV)/bin/pytest -m alone

# line coverage of src/mcpshim, the CLI's own processes included: artifacts/coverage/
# (pytest-cov combines the workers' and the subprocesses' data into COVERAGE_FILE)
coverage: export COVERAGE_FILE = $(CURDIR)/artifacts/coverage/.coverage
coverage: $(STAMP)
	bash scripts/system-deps.sh
	rm -rf artifacts/coverage && mkdir -p artifacts/coverage
	$(VENV)/bin/pytest -n auto --cov --cov-report=
	$(VENV)/bin/coverage report --format=total > artifacts/coverage/total.txt
	$(VENV)/bin/coverage html -q -d artifacts/coverage/html
	@echo "line coverage of src/mcpshim: $$(cat artifacts/coverage/total.txt) % (artifacts/coverage/html/index.html)"
