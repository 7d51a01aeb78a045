# Two entry points (README): `make run` and `make test`. Each creates .venv and installs itself.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PROMPT ?= What is the capital of France?
# llama.cpp built for the CPU it compiles on (GGML_NATIVE) crashes in llama_decode on CPUs with AMX
# (llama-cpp-python 0.3.36 on a Xeon with amx_int8: a segmentation fault on the first token); the
# portable build (AVX2/FMA/F16C on x86-64) runs everywhere and the 135M model needs no more.
LLAMA_CMAKE_ARGS ?= -DGGML_NATIVE=OFF

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(BIN)/pip install -q -e '.[dev,local]'
	touch $(STAMP)

# How many pytest processes (pytest-xdist) `make test` runs. Most tests wait on subprocesses,
# servers and databases more than they compute. On 2 cores, 5 December (a machine 2.6x slower
# than the day before, when one process took 25 minutes): 3 processes with the bytecode below
# ran the whole suite in 16 minutes, 2 processes without it in 21.
TEST_JOBS ?= 3

.PHONY: install run test test-fast lint docs chromium tmux bytecode torture
install: $(STAMP)

# Compiled bytecode for the editable source tree. Where PYTHONDONTWRITEBYTECODE is set (this
# project's machines set it), Python never writes it, and every `wakeful` a test starts compiled
# the whole package again (~1 s of CPU each on a slow machine); compileall writes it regardless,
# and a stale file is never used (Python compares it with its source).
bytecode: $(STAMP)
	@$(BIN)/python -m compileall -q src

run: bytecode
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

# The chat's terminal test drives tmux; install it when missing and possible.
tmux:
	@command -v tmux >/dev/null 2>&1 || { command -v apt-get >/dev/null 2>&1 && \
	  { apt-get install -y -q tmux >/dev/null 2>&1 || \
	    { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q tmux >/dev/null 2>&1; }; }; } || \
	  echo "tmux unavailable: the chat's terminal test skips locally (fails under CI=true)"

# The docs site (mkdocs.yml: the guides in docs/, the API reference from the docstrings); a
# warning (a broken link, a page left out of the navigation, a name that no longer resolves)
# fails the build. The site goes to site/ (ignored by git); `mkdocs serve` previews it.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

# The suites issue 39 asks to pass with encryption at rest on, run again so (docs/encryption.md,
# "Suites run with encryption on"): the crash suite, the competing drivers and the follower.
ENCRYPTED_SUITES := tests/execution/test_crash.py tests/execution/test_competing.py \
  tests/store/test_commit_order.py

test: lint docs chromium tmux bytecode
	$(BIN)/pytest -q -n $(TEST_JOBS)
	WAKEFUL_TEST_ENCRYPTION=1 $(BIN)/pytest -q -n $(TEST_JOBS) $(ENCRYPTED_SUITES)

test-fast: bytecode
	$(BIN)/pytest -q -n $(TEST_JOBS) -m "not slow"

# The crash-torture run of docs/reliability.md: drivers SIGKILLed, a worker SIGSTOPped, store
# faults, on SQLite and PostgreSQL (a local server, $$WAKEFUL_TEST_PG); a few minutes. It prints
# a table of what it did and the anomalies it found (none, or it exits 1) with its seeds.
torture: bytecode
	$(BIN)/python bench/bench_torture.py
