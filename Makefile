# autograd-tui developer tasks. Every target that needs the project sets up .venv first.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.DEFAULT_GOAL := install
.PHONY: install run test bench fuzz lint clean

# Create the virtualenv if it is missing (pip is used as shipped; no self-upgrade).
$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VENV): | $(BIN)/python

# Install the project (editable) with its dev, torch and models extras, at the exact versions of
# constraints.txt; re-run only when either file changes.
$(STAMP): pyproject.toml constraints.txt | $(BIN)/python
	$(BIN)/pip install -q -c constraints.txt -e '.[dev,torch,models]'
	$(LINK_TREE)
	touch $@

# Type checkers and IDEs cannot follow setuptools' editable finder (an import hook) from
# autograd_tui.engine and autograd_tui.scenarios to engine/ and scenarios/. $(VENV)/typecheck
# holds the installed layout as links into the checkout, for pyproject.toml's
# [tool.pyright] stubPath and [tool.mypy] mypy_path; `make install` refreshes it.
TYPECHECK := $(VENV)/typecheck
define LINK_TREE
@rm -rf $(TYPECHECK) && mkdir -p $(TYPECHECK)/autograd_tui
@for p in autograd_tui/*; do case $$p in *__pycache__) ;; *) ln -s "$(CURDIR)/$$p" $(TYPECHECK)/$$p;; esac; done
@ln -s "$(CURDIR)/engine" $(TYPECHECK)/autograd_tui/engine
@ln -s "$(CURDIR)/scenarios" $(TYPECHECK)/autograd_tui/scenarios
endef

install: $(STAMP)
	$(LINK_TREE)

# make run ARGS="run multi-device": any autograd-tui command line without typing .venv/bin/
run: $(STAMP)
	$(BIN)/autograd-tui $(ARGS)

# make test: the whole suite, then ruff; pytest prints the ten slowest tests at the end.
# One folder or file: make test-engine (tests/engine), make test-app, ...; or
# make test TESTS="tests/history tests/test_docs.py" (TESTS: pytest paths, default all).
# JOBS: pytest-xdist workers, one per core up to 4 (JOBS=0: one process, as plain pytest).
TESTS ?=
JOBS ?= $(shell n=$$(nproc 2>/dev/null || echo 1); [ $$n -gt 4 ] && n=4; echo $$n)
PYTEST := $(BIN)/python -m pytest -q --durations=10 -n $(JOBS)

test: $(STAMP)
	$(PYTEST) $(TESTS)
	$(BIN)/ruff check .

test-%: $(STAMP)
	$(PYTEST) tests/$*

bench: $(STAMP)
	$(BIN)/python -m bench

# The recordings fuzz suite at length (make test runs 300 cases; FUZZ_CASES=N for more).
fuzz: $(STAMP)
	FUZZ_CASES=$${FUZZ_CASES:-5000} FUZZ_APP_CASES=$${FUZZ_APP_CASES:-100} \
		$(BIN)/python -m pytest -q tests/history/test_fuzz_recordings.py

lint: $(STAMP)
	$(BIN)/ruff check .

clean:
	rm -rf build dist *.egg-info .pytest_cache .ruff_cache bench/results
	find . -path ./$(VENV) -prune -o -type d -name __pycache__ -exec rm -rf {} +
