# Two commands do everything on a fresh clone: `make train` and `make test`.
# Each creates (or refreshes, when pyproject.toml changed) the virtual environment in .venv.

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# Torch is installed before the project so that pip does not pick a multi-GB build on its own.
# A CPU-only machine can ask for the small CPU wheel: make test TORCH_INDEX=https://download.pytorch.org/whl/cpu
TORCH ?= torch==2.13.0
TORCH_INDEX ?=
CONFIG ?= configs/base.yaml

# The suite runs in parallel processes (pytest-xdist), one thread each: the tiny models of the tests gain nothing
# from more threads per process, and two processes on two cores halve the wall-clock. TEST_WORKERS=0: one process.
TEST_WORKERS ?= auto
PYTEST := OMP_NUM_THREADS=1 $(abspath $(BIN))/python -m pytest --numprocesses $(TEST_WORKERS) --dist loadgroup
# The tests that compare float32 results across batch shapes (assert_close_in_float32: the backtest's and the
# ensemble's), run again at two threads a process (the suite ran them at one). The exactness core compares in float64,
# where the order of a sum moves nothing its tolerances see; the DDP comparison, the same tolerance across processes,
# runs once (its three DDP runs of two processes each are the slow tier's longest start-ups).
THREAD_TESTS ?= $(wildcard tests/tools/test_backtest.py tests/tools/test_ensemble.py)

.PHONY: train test test-slow test-experiments test-threads lint format clean

$(BIN)/.installed: pyproject.toml
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 10), "Python >= 3.10 is required, found " + sys.version.split()[0]'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -c 'import torch' 2>/dev/null || \
		$(BIN)/python -m pip install --quiet "$(TORCH)" $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX))
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $@

# configs/embedded_series.yaml: the embedded series' five channels as one sequence (why: its comment).
train: $(BIN)/.installed
	$(BIN)/python -m project.cli fit --config $(CONFIG) --config configs/embedded_series.yaml

# Two tiers. `make test`: the fast tier (the exactness core in float64, the data and distribution rules, a few cases
# of each refusal grid, one shared fit of each kind, the README's fit command in one fresh process), under two minutes
# on 2 cores. `make test-slow`: everything end to end (presets, loggers, the tools, signals and exact resume, DDP,
# notebooks, your own components, the README's commands, the rest of each refusal grid). CI runs both, and the
# studies' own tests. The marks: tests/conftest.py.
test: $(BIN)/.installed
	$(PYTEST) -m "not slow and not tools"

test-slow: $(BIN)/.installed
	$(PYTEST) -m "slow or tools"

# The studies' tests (experiments/tests), apart from the template's: deleting experiments/ deletes them too.
test-experiments: $(BIN)/.installed
	$(PYTEST) experiments/tests

test-threads: $(BIN)/.installed
	$(if $(THREAD_TESTS),OMP_NUM_THREADS=2 $(BIN)/python -m pytest -q $(THREAD_TESTS),@echo 'test-threads: no tests/tools, nothing to run')

# The formatter decides layout everywhere: no line is held out of it.
lint: $(BIN)/.installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	@! grep -rnE '# fmt: (skip|off)' --include='*.py' . --exclude-dir=.venv || \
		(echo 'lint: the lines above hold the formatter off; remove the fmt markers' && false)

format: $(BIN)/.installed
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

clean:
	rm -rf $(VENV) lightning_logs .pytest_cache
