# The two commands of the README:
#   make run   -- set up and run the nightly analysis on the example data (dvc repro)
#   make test  -- set up and run the test suite
PYTHON ?= python3.11
VENV   ?= .venv
BIN    := $(VENV)/bin
export PYTHONPATH := $(CURDIR)
export PATH := $(CURDIR)/$(BIN):$(PATH)

.PHONY: run test setup bench reset

$(BIN)/.installed: requirements.txt constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements.txt -c constraints.txt
	touch $@

setup: $(BIN)/.installed

run: setup
	$(BIN)/dvc repro
	@echo "Verdicts: reports/runs/*.json   Accuracy: metrics/detection.json (dvc metrics show)   Data Docs: reports/validation/index.html"

test: setup
	$(BIN)/python -m pytest -q tests

bench: setup
	$(BIN)/python bench/bench_rules.py

# Forget every derived file (raw copies included) of this checkout; the next `make run` starts over.
reset:
	rm -rf data/example data/raw data/interim data/processed data/quarantine reports/validation reports/runs reports/index.html
