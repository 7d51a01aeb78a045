# Two entry points (README): `make run` and `make test`. Each creates .venv and installs itself.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PROMPT ?= What is the capital of France?

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev,local]'
	touch $(STAMP)

.PHONY: install run test test-fast lint chromium
install: $(STAMP)

run: $(STAMP)
	$(BIN)/wakeful run "$(PROMPT)"

lint: $(STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench
	$(BIN)/mypy
	$(BIN)/lint-imports

# The inspector test drives Debian's Chromium; install it when missing and possible.
chromium:
	@command -v chromium >/dev/null 2>&1 || { command -v apt-get >/dev/null 2>&1 && \
	  { apt-get install -y -q chromium >/dev/null 2>&1 || \
	    { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q chromium >/dev/null 2>&1; }; }; } || \
	  echo "chromium unavailable: the inspector test skips locally (fails under CI=true)"

test: lint chromium
	$(BIN)/pytest -q

test-fast: $(STAMP)
	$(BIN)/pytest -q -m "not slow"
