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

.PHONY: install run test test-fast lint chromium tmux
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

# The chat's terminal test drives tmux; install it when missing and possible.
tmux:
	@command -v tmux >/dev/null 2>&1 || { command -v apt-get >/dev/null 2>&1 && \
	  { apt-get install -y -q tmux >/dev/null 2>&1 || \
	    { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q tmux >/dev/null 2>&1; }; }; } || \
	  echo "tmux unavailable: the chat's terminal test skips locally (fails under CI=true)"

test: lint chromium tmux
	$(BIN)/pytest -q

test-fast: $(STAMP)
	$(BIN)/pytest -q -m "not slow"
