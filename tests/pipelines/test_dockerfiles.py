"""The images' Dockerfiles, linted (hadolint cannot be installed here: its rules that matter for
these files are written out below, with hadolint's rule ids where there is one), and checked
against the lock files, the Makefile's ``image`` target and the compiler's default image.

No Docker engine runs here, so no image is built by the tests; what a build would fail on
(a missing lock entry, an import error) is checked by the lock tests and the builds' own
``python -c "import ..."`` step.
"""

from __future__ import annotations

import dataclasses
import re
import subprocess
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


def lint(text: str) -> list[str]:
    """Problems of a Dockerfile, each ``line N: rule: what``."""
    instructions = parse(text)
    problems = []

    def report(ins: Instruction | None, rule: str, what: str) -> None:
        problems.append(f"line {ins.line if ins else '-'}: {rule}: {what}")

    for image in base_images(instructions):
        if "@sha256:" not in image and not _PINNED_TAG.search(image):
            report(None, "DL3006/DL3007", f"base image {image!r} is not pinned by digest or by "
                   "a full version tag (x.y.z)")
    if re.search(r":latest\b", text):
        report(None, "DL3007", "a `latest` tag")
    stages = [i for i, ins in enumerate(instructions) if ins.keyword == "FROM"]
    final = instructions[stages[-1]:] if stages else instructions
    users = [ins for ins in final if ins.keyword == "USER"]
    if not users or users[-1].args.split(":")[0] in ("root", "0"):
        report(users[-1] if users else None, "DL3002", "the image runs as root: end with a "
               "non-root USER")
    elif any(ins.keyword == "RUN" and ins.line > users[-1].line for ins in final):
        report(users[-1], "user-last", "RUN after the final USER")
    for ins in instructions:
        body = ins.args
        if ins.keyword == "ADD" and re.search(r"https?://", body):
            report(ins, "DL3020", "ADD of a URL: download in a RUN and verify it")
        if ins.keyword == "WORKDIR" and not body.startswith(("/", "$")):
            report(ins, "DL3000", f"relative WORKDIR {body!r}")
        if ins.keyword != "RUN":
            continue
        if "sudo " in body:
            report(ins, "DL3004", "sudo")
        if "apt-get install" in body:
            for needed, rule in (("--no-install-recommends", "DL3015"), (" -y", "DL3014"),
                                 ("apt-get update", "DL3009"),
                                 ("rm -rf /var/lib/apt/lists/*", "DL3009")):
                if needed not in body:
                    report(ins, rule, f"apt-get install without `{needed.strip()}` in the "
                           "same RUN (lists cleaned, no recommends)")
        for command in re.findall(r"pip install[^&;]*", body):
            if "--no-cache-dir" not in command:
                report(ins, "DL3042", f"`{command.strip()}` without --no-cache-dir")
            if not re.search(r"(-r|-c|--no-deps)\s", command + " "):
                report(ins, "lock", f"`{command.strip()}` resolves freely: install from a "
                       "lock (-r/-c) or --no-deps")
        if re.search(r"[^|]\|[^|]", body) and not any(
                i.keyword == "SHELL" and "pipefail" in i.args and i.line < ins.line
                for i in instructions):
            report(ins, "DL4006", "a pipe without `SHELL [..., \"-o\", \"pipefail\", ...]`")
    problems += _layer_order(instructions)
    return problems


def _layer_order(instructions: list[Instruction]) -> list[str]:
    """Dependencies (the lock and its install) in layers below the source."""
    copies = [ins for ins in instructions if ins.keyword == "COPY"]
    lock = [ins for ins in copies if ".lock" in ins.args]
    source = [ins for ins in copies
              if any(re.search(rf"(^|\s){d}(\s|/|$)", ins.args) for d in SOURCE_DIRS)
              and ".lock" not in ins.args]
    installs = [ins for ins in instructions if ins.keyword == "RUN" and ".lock" in ins.args]
    if not lock:
        return ["line -: lock: no lock file is copied: dependencies are not pinned"]
    if source and (max(i.line for i in lock) > min(i.line for i in source)
                   or not installs or max(i.line for i in installs) > min(
                       i.line for i in source)):
        return [f"line {source[0].line}: layers: the source is copied before the locked "
                "dependencies are installed (every code change reinstalls them)"]
    return []


# -- the linter, on what it must catch --------------------------------------------------------------
OLD_DOCKERFILE = """
FROM python:3.11-slim
WORKDIR /tmp/estflow-src
COPY pyproject.toml README.md LICENSE ./
COPY dsl dsl
COPY components components
RUN pip install --no-cache-dir . tensorflow[and-cuda]
WORKDIR /
"""


def test_the_linter_catches_what_the_old_image_did():
    problems = "\n".join(lint(OLD_DOCKERFILE))
    assert "DL3006/DL3007: base image 'python:3.11-slim'" in problems  # a moving tag
    assert "DL3002: the image runs as root" in problems
    assert "resolves freely" in problems and "no lock file" in problems


@pytest.mark.parametrize("bad, rule", [
    ("FROM python:latest\nUSER 1000\n", "DL3007"),
    ("FROM python:3.11.7-slim\nRUN apt-get update && apt-get install -y curl\nUSER 1000\n",
     "DL3009"),
    ("FROM python:3.11.7-slim\nCOPY dsl /src/dsl\nCOPY requirements.lock /tmp/\n"
     "RUN pip install --no-cache-dir -r /tmp/requirements.lock\nUSER 1000\n", "layers"),
    ("FROM python:3.11.7-slim\nUSER 1000\nRUN echo a | wc\n", "user-last"),
    ("FROM python:3.11.7-slim\nRUN curl -s x | sh\nUSER 0\n", "DL4006"),
])
def test_the_linter_rules(bad, rule):
    assert any(f": {rule}" in p for p in lint(bad)), lint(bad)


# -- estflow's Dockerfiles -----------------------------------------------------------------------
def _lock(name: str) -> dict[str, str]:
    pins = {}
    for line in (DOCKER / name).read_text().splitlines():
        if line and not line.startswith("#"):
            package, version = line.split("==")
            pins[package] = version
    return pins


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_dockerfile_passes_the_lint(name):
    assert lint((DOCKER / name).read_text()) == []


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
    for text in (DOCKER / "requirements.lock").read_text().splitlines()[2:]:
        assert re.fullmatch(r"[a-z0-9-]+==[\w.+!-]+", text), text


def test_make_image_builds_the_compilers_default_image():
    """The default image of `estflow compile` is what `make image` tags (it was built by
    nothing), and the shipped TrainJob runtime names it."""
    import tomllib

    from estflow.pipelines import kfp_compiler

    makefile = (REPO / "Makefile").read_text()
    repo = re.search(r"^IMAGE_REPO \?= (\S+)$", makefile, re.M)[1]
    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    assert kfp_compiler.DEFAULT_IMAGE == f"{repo}:{version}"
    assert "Dockerfile.gpu:-gpu" in makefile and "Dockerfile.slim:-slim" in makefile
    assert f"image: {kfp_compiler.DEFAULT_IMAGE}" in (DOCKER / "trainer-runtime.yaml").read_text()


def test_make_image_without_a_docker_engine_says_so(tmp_path):
    docker = tmp_path / "docker"  # a docker client whose engine is not running, as here
    docker.write_text("#!/bin/sh\necho 'Cannot connect to the Docker daemon' >&2\nexit 1\n")
    docker.chmod(0o755)
    done = subprocess.run(["make", "-s", "image"], cwd=REPO, capture_output=True, text=True,
                          env={"PATH": f"{tmp_path}:/usr/bin:/bin"}, timeout=60)
    assert done.returncode != 0
    assert "no Docker engine is reachable here" in done.stderr
    assert "no image was built" in done.stderr
