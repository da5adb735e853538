# Quick start: `make demo` (install + demo crawl), `make test` (install + lint + all tests).
PYTHON ?= python3.11
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: install demo test lint format unit e2e bench dist clean

install: $(STAMP)

# Creates the venv, installs the project with its test extra, and fetches the Delta jars
# from Maven Central once into ~/.cache/crawllib/ivy (later runs use the cached jars).
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	$(BIN)/python -m crawllib.session
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/crawl demo

lint: $(STAMP)
	$(BIN)/ruff check crawllib jobs tests
	$(BIN)/ruff format --check crawllib jobs tests

format: $(STAMP)
	$(BIN)/ruff format crawllib jobs tests
	$(BIN)/ruff check --fix crawllib jobs tests

test: lint
	$(BIN)/pytest

unit: $(STAMP)
	$(BIN)/pytest tests/unit

e2e: $(STAMP)
	$(BIN)/pytest -m e2e

bench: $(STAMP)
	$(BIN)/python -m crawllib.bench

clean:
	rm -rf build dist *.egg-info .pytest_cache .ruff_cache .hypothesis
