# Quick start: `make demo` (install + demo crawl), `make test` (install + lint + every test, what
# CI runs), `make check` (lint + the fast tier: unit and Spark tests, the inner loop).
PYTHON ?= python3.11
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: install demo test test-all check lint typecheck format unit e2e bench dist lock airflow-env airflow2-env clean

install: $(STAMP)

# Creates the venv, installs the project with its test extra (the runtime dependencies at the
# versions requirements.lock pins), and fetches the Delta and S3A jars (the tests crawl s3a://
# roots) from Maven Central once into ~/.cache/crawllib/ivy (later runs use the cached jars).
$(STAMP): pyproject.toml requirements.lock
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet --constraint requirements.lock -e '.[test]'
	$(BIN)/python -m crawllib.store.session --s3
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/crawl demo

lint: $(STAMP)
	$(BIN)/ruff check crawllib benchmarks jobs tests tools
	$(BIN)/ruff format --check crawllib benchmarks jobs tests tools
	$(BIN)/mypy
	$(BIN)/lint-imports

typecheck: $(STAMP)
	$(BIN)/mypy

format: $(STAMP)
	$(BIN)/ruff format crawllib benchmarks jobs tests tools
	$(BIN)/ruff check --fix crawllib benchmarks jobs tests tools

# Tests run over WORKERS pytest-xdist workers, each with its own SparkSession; a test file runs
# whole in one worker (tests/conftest.py). The tests wait on servers and politeness delays as much
# as they compute, so 3 workers beat 2 on 2 cores.
WORKERS ?= 3
XDIST   := -n $(WORKERS) --dist loadfile

# What CI runs: lint, then every test: unit, Spark, the end-to-end crawls, the Airflow DAGs, the
# standalone cluster with the EMR steps.
test: lint
	$(BIN)/pytest $(XDIST)

test-all: test

# The inner loop: lint, then the fast tier (unit and Spark tests, and the smoke crawls).
check: lint
	$(BIN)/pytest $(XDIST) -m "not slow"

unit: $(STAMP)
	$(BIN)/pytest tests/unit

e2e: $(STAMP)
	$(BIN)/pytest -m e2e

bench: $(STAMP)
	$(BIN)/python -m benchmarks

# dist/: wheel, crawllib.zip (--py-files), requirements.txt (requirements.lock less what the
# cluster brings), bootstrap.sh and crawllib-env.tar.gz (spark.archives; cached in
# ~/.cache/crawllib/env), see docs/emr.md.
dist:
	$(PYTHON) tools/build_dist.py --env

# requirements.lock again from pyproject's ranges, keeping its versions while they fit;
# `make lock UPGRADE=1` takes the newest the ranges allow.
lock:
	$(PYTHON) tools/build_dist.py --lock $(if $(UPGRADE),--upgrade)

# The Airflow DAGs' tests load them with Airflow, whose pins clash with ours (its Spark provider
# needs pyspark-client): so Airflow gets its own venv, with the Spark and Amazon (EMR) providers.
# tests/airflow runs this on first use.
AIRFLOW_VENV := .venv-airflow
AIRFLOW_PINS := apache-airflow==3.3.2 apache-airflow-providers-apache-spark==6.3.4 \
	apache-airflow-providers-amazon==9.39.0

airflow-env: $(AIRFLOW_VENV)/.installed

# tests/airflow/constraints.txt pins every package of that venv (pip freeze of a working one).
$(AIRFLOW_VENV)/.installed: Makefile tests/airflow/constraints.txt
	test -x $(AIRFLOW_VENV)/bin/python || $(PYTHON) -m venv $(AIRFLOW_VENV)
	$(AIRFLOW_VENV)/bin/pip install --quiet --upgrade pip
	$(AIRFLOW_VENV)/bin/pip install --quiet -c tests/airflow/constraints.txt $(AIRFLOW_PINS)
	touch $@

# The oldest Airflow the DAGs support, 2.10 (on Python 3.11 here; it runs on 3.8 to 3.12, and
# tests/airflow checks the DAG file with vermin for 3.8), with the newest providers it takes.
AIRFLOW2_VENV := .venv-airflow2
AIRFLOW2_PINS := apache-airflow==2.10.5 apache-airflow-providers-apache-spark==5.3.4 \
	apache-airflow-providers-amazon==9.17.0

airflow2-env: $(AIRFLOW2_VENV)/.installed

$(AIRFLOW2_VENV)/.installed: Makefile tests/airflow/constraints-2.10.txt
	test -x $(AIRFLOW2_VENV)/bin/python || $(PYTHON) -m venv $(AIRFLOW2_VENV)
	$(AIRFLOW2_VENV)/bin/pip install --quiet --upgrade pip
	$(AIRFLOW2_VENV)/bin/pip install --quiet -c tests/airflow/constraints-2.10.txt $(AIRFLOW2_PINS)
	touch $@

clean:
	rm -rf build dist *.egg-info .pytest_cache .ruff_cache .hypothesis
