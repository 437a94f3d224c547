# estflow: `make demo` runs the taxi example end to end; `make test` runs the test suite.
# Both create .venv and install the project on first use.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.estflow-installed

.PHONY: install demo test test-fast lint bench goldens compile clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

$(STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install --quiet --progress-bar off -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/estflow run pipelines/examples/taxi.py

compile: $(STAMP)
	$(VENV)/bin/estflow compile pipelines/examples/taxi.py -o taxi.yaml

test: $(STAMP)
	$(PY) -m pytest -q

test-fast: $(STAMP)
	$(PY) -m pytest -q -m "not slow"

lint: $(STAMP)
	$(VENV)/bin/ruff check dsl components pipelines tests
	$(VENV)/bin/lint-imports

bench: $(STAMP)
	$(PY) tests/benchmarks/run.py

goldens: $(STAMP)
	$(PY) -m estflow.pipelines.goldens

clean:
	rm -rf estflow_runs serving_models taxi.yaml .pytest_cache
