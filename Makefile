# estflow: `make demo` runs the taxi example end to end; `make test` runs the test suite.
# Both create .venv and install the project on first use.
PYTHON ?= python3
# The Python estflow needs: pyproject.toml's requires-python (a test keeps them equal).
PYTHON_VERSION ?= 3.11
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.estflow-installed
# Exits 0 for Python $(PYTHON_VERSION); prints the version it is (runs on Python 2 and 3).
IS_VERSION = -c 'import sys; v = "%d.%d" % sys.version_info[:2]; print(v); sys.exit(v != "$(PYTHON_VERSION)")'

.PHONY: install demo test test-fast lint bench goldens compile clean distclean image docs docs-build

# A wrong or missing $(PYTHON) stops before .venv exists; a failed creation leaves no .venv.
$(PY):
	@version=$$($(PYTHON) $(IS_VERSION) 2>/dev/null) || { \
	  if [ -z "$$version" ]; then echo "make: $(PYTHON) not found (or not a Python)." >&2; \
	  else echo "make: $(PYTHON) is Python $$version; estflow needs Python $(PYTHON_VERSION)." >&2; fi; \
	  echo "make: run make PYTHON=python$(PYTHON_VERSION) (or the path of a Python $(PYTHON_VERSION))." >&2; \
	  exit 1; }
	$(PYTHON) -m venv $(VENV) || { rm -rf $(VENV); exit 1; }
	$(PY) -m pip install --quiet --upgrade pip || { rm -rf $(VENV); exit 1; }

# A .venv made earlier by another Python (which make clean keeps) is named, with the way out.
$(STAMP): pyproject.toml | $(PY)
	@version=$$($(PY) $(IS_VERSION) 2>/dev/null) || { \
	  echo "make: $(VENV) was made with Python $${version:-unknown}; estflow needs Python $(PYTHON_VERSION)." >&2; \
	  echo "make: run make distclean (it removes $(VENV)), then make PYTHON=python$(PYTHON_VERSION)." >&2; \
	  exit 1; }
	$(PY) -m pip install --quiet --progress-bar off -e '.[test]' || { \
	  echo "make: installing estflow into $(VENV) failed; make distclean removes $(VENV) to start over." >&2; \
	  exit 1; }
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/estflow run pipelines/examples/taxi.py

compile: $(STAMP)
	$(VENV)/bin/estflow compile pipelines/examples/taxi.py -o taxi.yaml --push-base-path gs://estflow-examples/serving_models

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

# The documentation site (docs/pages/, docs/mkdocs.yml): docs serves it with live reload,
# docs-build builds it into docs/site/ and fails on any warning (a broken link or anchor).
docs: $(STAMP)
	$(VENV)/bin/mkdocs serve -f docs/mkdocs.yml

docs-build: $(STAMP)
	$(VENV)/bin/mkdocs build --strict -f docs/mkdocs.yml

# The images (pipelines/docker/): CPU, GPU, TPU and the small one for the report and placement
# tasks, tagged IMAGE_REPO:VERSION[-gpu|-tpu|-slim] (VERSION: pyproject's). Needs a Docker engine
# with BuildKit; push them, then compile with `--image IMAGE_REPO@sha256:...` to pin a digest.
IMAGE_REPO ?= ghcr.io/estflow/estflow
IMAGE_VERSION := $(shell sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml)
IMAGE_VARIANTS := Dockerfile: Dockerfile.gpu:-gpu Dockerfile.tpu:-tpu Dockerfile.slim:-slim

image:
	@docker info >/dev/null 2>&1 || { \
	  echo "make image: no Docker engine is reachable here ('docker info' failed), so no image was built." >&2; \
	  echo "make image: run it where a Docker engine (with BuildKit) runs; the Dockerfiles are in pipelines/docker/." >&2; \
	  exit 1; }
	@set -e; for variant in $(IMAGE_VARIANTS); do \
	  file=$${variant%%:*}; tag=$(IMAGE_REPO):$(IMAGE_VERSION)$${variant#*:}; \
	  echo "make image: building $$tag from pipelines/docker/$$file"; \
	  DOCKER_BUILDKIT=1 docker build -f pipelines/docker/$$file --build-arg IMAGE=$$tag -t $$tag .; \
	done

clean:
	rm -rf estflow_runs serving_models taxi.yaml .pytest_cache docs/site

# clean, and the virtual environment too (the next make creates it again).
distclean: clean
	rm -rf $(VENV)
