# Quick start: `make demo` (install + demo crawl), `make test` (install + lint + the fast tier:
# unit and Spark tests, what CI runs), `make test-all` (lint + every test, nightly/before release).
PYTHON ?= python3.11
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: install demo test test-all check lint typecheck format unit e2e bench dist airflow-env clean

install: $(STAMP)

# Creates the venv, installs the project with its test extra, and fetches the Delta and S3A
# jars from Maven Central once into ~/.cache/crawllib/ivy (later runs use the cached jars).
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	$(BIN)/python -m crawllib.session
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/crawl demo

lint: $(STAMP)
	$(BIN)/ruff check crawllib jobs tests tools
	$(BIN)/ruff format --check crawllib jobs tests tools
	$(BIN)/mypy

typecheck: $(STAMP)
	$(BIN)/mypy

format: $(STAMP)
	$(BIN)/ruff format crawllib jobs tests tools
	$(BIN)/ruff check --fix crawllib jobs tests tools

# What CI runs (under 30 minutes on 2 cores): lint, then the fast tier (tests/conftest.py).
test: lint
	$(BIN)/pytest -m "not slow"

# Every test: also the end-to-end crawls, the Airflow DAGs, the standalone cluster (about an
# hour on 2 cores): nightly and before a release.
test-all: lint
	$(BIN)/pytest

# The inner loop: the same as `make test` (the fast tier).
check: test

unit: $(STAMP)
	$(BIN)/pytest tests/unit

e2e: $(STAMP)
	$(BIN)/pytest -m e2e

bench: $(STAMP)
	$(BIN)/python -m crawllib.bench

# dist/: wheel, crawllib.zip (--py-files), requirements.txt, bootstrap.sh and
# crawllib-env.tar.gz (spark.archives; cached in ~/.cache/crawllib/env), see README.
dist:
	$(PYTHON) tools/build_dist.py --env

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

clean:
	rm -rf build dist *.egg-info .pytest_cache .ruff_cache .hypothesis
