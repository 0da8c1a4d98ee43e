# Two commands do everything on a fresh machine, set-up included:
#   make demo   - build the environment if missing, then run the embedded demo
#   make test   - build the environment if missing, then run the tests
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
DEPS   := $(VENV)/.deps-installed
PKG    := $(VENV)/.pkg-installed
SRC    := $(shell find naru_eval model_adapters tasks -type f \( -name '*.py' -o -name '*.yaml' -o -name '*_yaml' -o -name '*.jsonl' \) 2>/dev/null) pyproject.toml

.PHONY: demo test test-fast lint format bench env clean

env: $(PKG)

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# Third-party dependencies (lmms-eval 0.7.3, torch 2.14.1 from this machine's disk, filelock<4).
$(DEPS): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet --upgrade "pip>=23" "setuptools>=77" wheel
	$(BIN)/python -m pip install --quiet ".[dev,offline-judge]"
	touch $@

# Our own package, reinstalled (not editable) whenever a source file changes: lmms-eval only
# finds the task YAMLs where a real install puts them (docs/registration.md).
$(PKG): $(DEPS) $(SRC)
	rm -rf build  # a stale build/lib would ship modules that were moved or deleted
	$(BIN)/python -m pip install --quiet --no-deps --no-build-isolation --force-reinstall .
	touch $@

demo: $(PKG)
	$(BIN)/naru-eval demo

test: $(PKG)
	$(BIN)/python -m pytest

test-fast: $(PKG)
	$(BIN)/python -m pytest -m "not slow"

# ruff; the import rule of docs/architecture.md (layers, no SDK in core, no cycle); the code's budgets
# (Any and dict[str, Any] counts, module sizes, one definition per class name, NARU_* through settings);
# mypy, zero errors
lint: $(DEPS)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python -m tests.helpers.imports
	$(BIN)/python -m tests.helpers.code_budget
	$(BIN)/mypy

format: $(DEPS)
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

bench: $(PKG)
	$(BIN)/python scripts/bench_scoring.py

clean:
	rm -rf $(VENV) build *.egg-info results/demo
