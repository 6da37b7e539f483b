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
# The tests that compare float32 results across process layouts and batch shapes, run again at two threads a
# process (the suite ran them at one).
THREAD_TESTS ?= tests/test_ddp.py tests/test_regimes.py $(wildcard tests/tools/test_backtest.py)

.PHONY: train test test-slow test-threads test-without-experiments test-without-tools test-without lint format clean

$(BIN)/.installed: pyproject.toml
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 10), "Python >= 3.10 is required, found " + sys.version.split()[0]'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -c 'import torch' 2>/dev/null || \
		$(BIN)/python -m pip install --quiet "$(TORCH)" $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX))
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $@

# The embedded series' five channels as one sequence: on its validation windows MAE 0.426 against 0.560 with the
# defaults' channel independence (seed 0), in about a third of the time (experiments/results/search/base_defaults.md).
TRAIN_OPTIONS ?= --model.network.init_args.channel_independent=false

train: $(BIN)/.installed
	$(BIN)/python -m project.cli fit --config $(CONFIG) $(TRAIN_OPTIONS)

# The suite less the tests marked slow (DDP processes, notebooks, SIGTERM, the longer tool runs); CI runs both.
test: $(BIN)/.installed
	$(PYTEST) -m "not slow"

test-slow: $(BIN)/.installed
	$(PYTEST) -m slow

test-threads: $(BIN)/.installed
	OMP_NUM_THREADS=2 $(BIN)/python -m pytest -q $(THREAD_TESTS)

# The template without its evidence: the tracked tree without experiments/, copied aside (nothing here is deleted).
# Only the tests that can tell it from the core alone run there: the tools' tests and those that look for what was
# deleted; every other test runs without experiments/ in test-without-tools, which keeps CI's serial run short.
WITHOUT_EXPERIMENTS_TESTS ?= tests/tools tests/test_core_without_tools.py tests/test_entry_points.py tests/test_readme.py
test-without-experiments: $(BIN)/.installed
	@$(MAKE) --no-print-directory test-without DELETED='experiments/' TESTS='$(WITHOUT_EXPERIMENTS_TESTS)'

# The core alone: without project/tools and tests/tools, and without experiments/, whose studies use the tools.
# The slow tests ran with everything in `make test-slow`.
test-without-tools: $(BIN)/.installed
	@$(MAKE) --no-print-directory test-without DELETED='experiments/ project/tools/ tests/tools/'

# The suite (or the TESTS named), less the slow tests, on a copy of the tracked tree without the folders DELETED names.
test-without:
	@core=$$(mktemp -d) && \
	git ls-files --cached --others --exclude-standard | grep -v $(foreach folder,$(DELETED),-e '^$(folder)') | \
		tar -cf - -T - | tar -xf - -C $$core && \
	echo "$(or $(TESTS),The suite) without $(DELETED), in $$core" && \
	cd $$core && $(PYTEST) -q -m "not slow" $(TESTS); status=$$?; rm -rf $$core; exit $$status

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
