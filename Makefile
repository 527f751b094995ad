# The two commands of the README:
#   make run   -- set up and run the nightly analysis on the example data (dvc repro)
#   make test  -- set up and run the test suite
PYTHON ?= python3.11
VENV   ?= .venv
BIN    := $(VENV)/bin
UV_VERSION := 0.9.9
export PYTHONPATH := $(CURDIR)
export PATH := $(CURDIR)/$(BIN):$(PATH)
# The install compiles no bytecode: Python writes a module's .pyc the first time a process imports
# it, and the nights and the tests import about 4,700 of the venv's 19,000 modules (compiling them
# all at install, uv --compile-bytecode, took 36 s of the install's 45; docs/operations/performance.md).
# A shell that sets PYTHONDONTWRITEBYTECODE would make every process compile what it imports again.
unexport PYTHONDONTWRITEBYTECODE

.PHONY: run test setup browser services bench reset screenshots real-data

# uv installs the same pinned set as pip would (requirements.txt, constraints.txt), in a third of the time.
# The venv holds no pip of its own (ensurepip took 5 s): uv goes in by the interpreter's pip, or, where
# that has none, by a pip ensurepip puts in the venv.
$(BIN)/.installed: requirements.txt constraints.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv --without-pip $(VENV)
	$(PYTHON) -m pip --python $(BIN)/python install --quiet uv==$(UV_VERSION) 2>/dev/null \
	  || { $(BIN)/python -m ensurepip --default-pip >/dev/null && $(BIN)/python -m pip install --quiet uv==$(UV_VERSION); }
	$(BIN)/uv pip install --quiet --python $(BIN)/python -r requirements.txt -c constraints.txt
	$(BIN)/uv pip install --quiet --python $(BIN)/python --no-deps -e .     # the `regresslab` command, on this checkout
	touch $@

setup: $(BIN)/.installed

run: setup
	$(BIN)/regresslab check
	$(BIN)/regresslab run
	@echo "Night report: reports/index.html (one page per run in reports/runs/)   Accuracy: dvc metrics show   Data Docs: reports/validation/index.html"

# One screenshot per page type for the README, from the example night (after `make run`).
screenshots: browser
	mkdir -p reports/screenshots
	chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1200,900 \
	  --screenshot=reports/screenshots/index.png file://$(CURDIR)/reports/index.html
	chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1200,900 \
	  --screenshot=reports/screenshots/run.png file://$(CURDIR)/reports/runs/$$($(BIN)/python -c 'import glob, json; \
	  docs = [json.load(open(f)) for f in glob.glob("reports/runs/*.json")]; \
	  print(max(docs, key=lambda d: (d["verdict"] == "fail", bool(d["cause"]["known"]), d["score"]))["run_id"])').html
	chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1200,1600 \
	  --screenshot=reports/screenshots/commits.png file://$(CURDIR)/reports/commits/index.html
	chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1200,1000 \
	  --screenshot=reports/screenshots/system.png file://$(CURDIR)/$$(ls reports/systems/ledger-*/index.html | head -1)
	chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1200,1000 \
	  --screenshot=reports/screenshots/counter.png file://$(CURDIR)/$$($(BIN)/python -c 'import glob, json; \
	  from pipelines.reporting.counter_history import system_dir, slug; \
	  d = max((json.load(open(f)) for f in glob.glob("reports/runs/*.json")), key=lambda d: (d["verdict"] == "fail", d["score"] or 0)); \
	  print(system_dir(d["system"]).relative_to(system_dir(d["system"]).parents[2]) / "counters" / (slug(d["flagged_counters"][0]) + ".html"))')
	chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1200,1300 \
	  --screenshot=reports/screenshots/compare.png file://$(CURDIR)/$$(ls reports/compare/*.html | head -1)

# The report's browser test drives Debian's chromium through chromedriver.
browser:
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || { \
	  SUDO=$$(command -v sudo >/dev/null && [ "$$(id -u)" != 0 ] && echo sudo); \
	  $$SUDO apt-get install -y --no-install-recommends chromium chromium-driver \
	  || { $$SUDO apt-get update && $$SUDO apt-get install -y --no-install-recommends chromium chromium-driver; }; }

# The scale-out test starts Debian's PostgreSQL and Redis itself (tests/dags/test_celery_scale_out.py).
services:
	@ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 && command -v redis-server >/dev/null || { \
	  SUDO=$$(command -v sudo >/dev/null && [ "$$(id -u)" != 0 ] && echo sudo); \
	  $$SUDO apt-get install -y --no-install-recommends postgresql redis-server \
	  || { $$SUDO apt-get update && $$SUDO apt-get install -y --no-install-recommends postgresql redis-server; }; }

# One file per worker at a time, in the suite's order (tests/dags and tests/pipeline, the whole nights,
# first): xdist's default order, most tests first, left the long single-test files for the end.
test: setup browser services
	$(BIN)/python -m pytest -q -n 2 --dist loadfile --no-loadscope-reorder tests

bench: setup
	$(BIN)/python -m bench.bench_rules

# The whole pipeline on a real labelled set of the shared data (smd, nezha, hpc), in its own tree
# build/<set>/ (params.yaml with pull.source and evaluate.labels pointed at the set), stages in
# dvc.yaml's order; the set's metrics are copied to metrics/<set>/, beside the example's.
SHARED ?= $(CURDIR)/../shared
STAGES = $(shell $(BIN)/python -m pipelines.orchestration.stage_graph pull)
real-%: setup
	rm -rf build/$*
	mkdir -p build/$* metrics/$*
	$(BIN)/python -c 'import sys, yaml; p = yaml.safe_load(open("params.yaml")); \
	  p["pull"]["source"] = "$(SHARED)/data/$*/archives"; p["evaluate"]["labels"] = ["$(SHARED)/data/$*/target_labels.json"]; \
	  yaml.safe_dump(p, open("build/$*/params.yaml", "w"), sort_keys=False)'
	for stage in $(STAGES); do REGRESSLAB_ROOT=$(CURDIR)/build/$* $(BIN)/python -m pipelines.stages.$$stage || exit 1; done
	cp build/$*/metrics/* metrics/$*/
	@echo "Night report: build/$*/reports/index.html   Metrics: metrics/$*/"

real-data: real-smd real-nezha real-hpc

# Forget every derived file (raw copies included) of this checkout; the next `make run` starts over.
reset:
	rm -rf data/example data/raw data/interim data/processed data/quarantine reports/validation reports/runs reports/index.html reports/nights
