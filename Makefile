# Fresh machine: `make demo` or `make test`. Both create .venv when it is missing.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
# The CPU build of torch; on a machine without a local wheel point pip at the CPU index:
#   make test TORCH_PIP_ARGS="--index-url https://download.pytorch.org/whl/cpu"
TORCH_PIP_ARGS ?=

.PHONY: demo test test-all bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed: $(BIN)/python pyproject.toml
	$(BIN)/pip install "torch==2.13.0" $(TORCH_PIP_ARGS)
	$(BIN)/pip install -e ".[test]"
	touch $@

demo: $(VENV)/.installed
	$(BIN)/python -m certify.demo

test: $(VENV)/.installed
	$(BIN)/python -m pytest -q -n 2

test-all: $(VENV)/.installed
	$(BIN)/python -m pytest -q -n 2 -m ""

# `certify bench` needs nothing more; the study scripts under benchmarks/ need the plotting/notebook extras
bench: $(VENV)/.installed
	$(BIN)/pip install -e ".[bench]"
	$(BIN)/certify bench
	@echo "run e.g. $(BIN)/certify bench lipschitz --quick --out bench-results (see docs/bench.md, benchmarks/README.md)"

clean:
	rm -rf $(VENV) build *.egg-info
