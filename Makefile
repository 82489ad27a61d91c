# Two set-up commands: `make demo` (install + main job) and `make test` (install dev deps + whole suite).
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
export OMP_NUM_THREADS ?= 1

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

.installed-core: $(BIN)/python pyproject.toml
	$(BIN)/pip install -q -e ".[ml]"
	touch $@

.installed-dev: $(BIN)/python pyproject.toml
	# torch first (CPU build), or a dependency would pull a CUDA build
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e ".[ml,graph,export,dev]"
	touch $@

.PHONY: demo test lint fast bench clean
demo: .installed-core
	$(BIN)/dlsched demo --out runs/demo

test: .installed-dev
	$(BIN)/python -m pytest tests

# the pinned ruff (dev extra) with the rules of pyproject.toml; .ci/run runs it before the tests
lint: .installed-dev
	$(BIN)/ruff check src tests

# the inner loop: every test but the slow ones (real control plane, PostgreSQL, Chromium, Dask,
# Prometheus, the long runs on ../shared); see README "Tests"
fast: .installed-dev
	$(BIN)/python -m pytest tests -m "not slow"

bench: .installed-dev
	$(BIN)/python benchmarks/bench_simulator.py
	$(BIN)/python benchmarks/bench_energy.py
	$(BIN)/python benchmarks/bench_topology.py
	$(BIN)/python benchmarks/bench_kernel.py
	$(BIN)/python benchmarks/bench_whole_command.py
	$(BIN)/python benchmarks/bench_report.py

clean:
	rm -rf $(VENV) .installed-core .installed-dev runs
