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

.PHONY: install demo test test-fast lint bench goldens compile clean distclean image image-gpu docs docs-build

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
	$(VENV)/bin/estflow compile pipelines/examples/taxi.py -o taxi.yaml --push-base-path gs://estflow-examples/serving_models --image $(IMAGE_REPO):$(IMAGE_VERSION)

# Two processes (pytest-xdist): each test module on one of them (tests/conftest.py).
test: $(STAMP)
	$(PY) -m pytest -q -n 2 --dist loadfile --durations=30

test-fast: $(STAMP)
	$(PY) -m pytest -q -m "not slow"

lint: $(STAMP)
	$(VENV)/bin/ruff check dsl components pipelines tests
	$(VENV)/bin/lint-imports

bench: $(STAMP)
	$(PY) tests/benchmarks/run.py

goldens: $(STAMP)
	$(PY) -m estflow.pipelines.kubeflow.goldens

# The documentation site (docs/pages/, docs/mkdocs.yml): docs serves it with live reload,
# docs-build builds it into docs/site/ and fails on any warning (a broken link or anchor).
docs: $(STAMP)
	$(VENV)/bin/mkdocs serve -f docs/mkdocs.yml

docs-build: $(STAMP)
	$(VENV)/bin/mkdocs build --strict -f docs/mkdocs.yml

# The images (pipelines/docker/), tagged IMAGE_REPO:VERSION[-gpu|-tpu|-slim] (VERSION: pyproject's),
# built from a wheelhouse of the locked wheels (made here by pip, cached in WHEELHOUSE), so a
# build reaches no package index. IMAGE_BASE=local (default): the base is made here from
# Debian's packages (pipelines/docker/base.sh: debootstrap, as root; no Docker Hub), with the
# legacy builder and no network; the CPU and slim images (no Beam worker boot: images.md says
# what that leaves out). IMAGE_BASE=hub: the public bases (python slim, Beam's SDK image), all
# four, with BuildKit. Push them, then compile with `--image IMAGE_REPO@sha256:...`.
IMAGE_REPO ?= ghcr.io/estflow/estflow
IMAGE_VERSION := $(shell sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml)
IMAGE_BASE ?= local
WHEELHOUSE ?= $(HOME)/.cache/estflow/wheelhouse
LOCAL_BASE ?= estflow/base:bookworm
IMAGE_LOCKS := requirements.lock requirements-slim.lock requirements-build.lock
ifeq ($(IMAGE_BASE),local)
IMAGE_VARIANTS ?= Dockerfile: Dockerfile.slim:-slim
IMAGE_BUILD := DOCKER_BUILDKIT=0 docker build --network none \
  --build-arg PYTHON_IMAGE=$(LOCAL_BASE) --build-arg BEAM_SDK_IMAGE=$(LOCAL_BASE)
else
IMAGE_VARIANTS ?= Dockerfile: Dockerfile.gpu:-gpu Dockerfile.tpu:-tpu Dockerfile.slim:-slim
IMAGE_LOCKS += requirements-gpu.lock
IMAGE_BUILD := DOCKER_BUILDKIT=1 docker build
endif

# Stops a build where no Docker engine runs, saying so (make image and make image-gpu).
NEED_DOCKER = @docker info >/dev/null 2>&1 || { \
	  echo "make $@: no Docker engine is reachable here ('docker info' failed), so no image was built." >&2; \
	  echo "make $@: run it where a Docker engine runs; the Dockerfiles are in pipelines/docker/." >&2; \
	  exit 1; }

image: | $(PY)
	$(NEED_DOCKER)
	$(PY) -m pip wheel --quiet --progress-bar off --no-deps --wheel-dir $(WHEELHOUSE) \
	  $(addprefix -r pipelines/docker/,$(IMAGE_LOCKS))
	@if [ "$(IMAGE_BASE)" = local ]; then pipelines/docker/base.sh $(LOCAL_BASE); fi
	@set -e; for variant in $(IMAGE_VARIANTS); do \
	  file=$${variant%%:*}; tag=$(IMAGE_REPO):$(IMAGE_VERSION)$${variant#*:}; \
	  echo "make image: building $$tag from pipelines/docker/$$file"; \
	  tar -c --exclude=__pycache__ --exclude='*.pyc' pyproject.toml README.md LICENSE dsl \
	    components pipelines -C $(WHEELHOUSE) --transform 's,^\.,wheelhouse,' . \
	  | $(IMAGE_BUILD) -f pipelines/docker/$$file --build-arg IMAGE=$$tag -t $$tag -; \
	done

# The GPU image, IMAGE_REPO:VERSION-gpu (Dockerfile.gpu: the CPU image plus the CUDA libraries of
# tensorflow[and-cuda], pip wheels locked in requirements-gpu.lock), with either IMAGE_BASE. Not
# part of make image (nor of CI, which builds that): about 3 GB more to download and a far larger
# image. The CUDA wheels go to a wheelhouse of their own, GPU_WHEELHOUSE, so make image's build
# context stays as it was; this build's context holds both wheelhouses, merged as wheelhouse/.
GPU_WHEELHOUSE ?= $(HOME)/.cache/estflow/wheelhouse-gpu
GPU_IMAGE := $(IMAGE_REPO):$(IMAGE_VERSION)-gpu

image-gpu: | $(PY)
	$(NEED_DOCKER)
	$(PY) -m pip wheel --quiet --progress-bar off --no-deps --wheel-dir $(WHEELHOUSE) \
	  -r pipelines/docker/requirements.lock -r pipelines/docker/requirements-build.lock
	$(PY) -m pip wheel --quiet --progress-bar off --no-deps --wheel-dir $(GPU_WHEELHOUSE) \
	  -r pipelines/docker/requirements-gpu.lock
	@if [ "$(IMAGE_BASE)" = local ]; then pipelines/docker/base.sh $(LOCAL_BASE); fi
	@echo "make image-gpu: building $(GPU_IMAGE) from pipelines/docker/Dockerfile.gpu"
	tar -c --exclude=__pycache__ --exclude='*.pyc' pyproject.toml README.md LICENSE dsl \
	  components pipelines --transform 's,^\.,wheelhouse,' -C $(abspath $(WHEELHOUSE)) . \
	  -C $(abspath $(GPU_WHEELHOUSE)) . \
	| $(IMAGE_BUILD) -f pipelines/docker/Dockerfile.gpu --build-arg IMAGE=$(GPU_IMAGE) \
	  -t $(GPU_IMAGE) -

clean:
	rm -rf estflow_runs serving_models taxi.yaml .pytest_cache docs/site

# clean, and the virtual environment too (the next make creates it again).
distclean: clean
	rm -rf $(VENV)
