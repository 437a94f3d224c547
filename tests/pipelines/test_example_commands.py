"""Every command in the example pipelines' docstrings works as written: each ``estflow
compile`` runs for real (the real kfp compiler, from a fresh directory holding the examples at
the path the docstrings use), and the others (``estflow run``, ``estflow submit``: they need
TensorFlow and minutes, or a KFP API) are parsed by the CLI's own parser, their pipeline
files checked to exist."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from estflow.pipelines import cli
from estflow.pipelines.examples import taxi
from estflow.pipelines.examples import taxi_gpu

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = (taxi, taxi_gpu)


def _commands(module) -> list[list[str]]:
    """The ``estflow ...`` commands of ``module``'s docstring (``\\``-continued lines
    joined), split as a shell splits them."""
    text = re.sub(r"\\\n\s*", " ", module.__doc__)
    return [shlex.split(line.strip()) for line in text.splitlines()
            if line.strip().startswith("estflow ")]


COMMANDS = [(module.__name__.rsplit(".", 1)[-1], argv) for module in EXAMPLES
            for argv in _commands(module)]


def test_every_example_documents_commands():
    assert {name for name, _ in COMMANDS} == {"taxi", "taxi_gpu"}
    assert {argv[1] for _, argv in COMMANDS} >= {"run", "compile", "submit"}


@pytest.mark.parametrize("argv", [argv for _, argv in COMMANDS if argv[1] == "compile"],
                         ids=lambda argv: shlex.join(argv))
def test_compile_commands_compile(argv, tmp_path):
    """Run as written, from a directory where the examples are at the documented path."""
    (tmp_path / "pipelines").symlink_to(REPO / "pipelines", target_is_directory=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ESTFLOW_")}
    done = subprocess.run([sys.executable, "-m", "estflow.pipelines", *argv[1:]], cwd=tmp_path,
                          env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    output = argv[argv.index("-o") + 1]
    documents = list(yaml.safe_load_all((tmp_path / output).read_text()))
    assert documents[0]["pipelineInfo"]["name"]
    if "--image" in argv:  # the image the command names is the steps' image
        image = argv[argv.index("--image") + 1]
        executors = documents[0]["deploymentSpec"]["executors"]
        assert image in {e["container"]["image"] for e in executors.values()}


def _compiled(name: str) -> dict[str, str]:
    """Output file -> image of ``name``'s documented compile commands."""
    return {argv[argv.index("-o") + 1]: argv[argv.index("--image") + 1]
            if "--image" in argv else "" for n, argv in COMMANDS
            if n == name and argv[1] == "compile"}


def test_the_gpu_example_compiles_onto_the_accelerator_images_and_submits_those_files(
        tmp_path, monkeypatch):
    """taxi_gpu trains on an accelerator: its documented compiles must put the train task on
    an accelerator image (the CPU one has no CUDA), read back from the compiled file, and its
    submits must send such a compiled file (``estflow submit FILE.py`` compiles on
    ``$ESTFLOW_IMAGE``)."""
    monkeypatch.chdir(REPO)
    compiled = {}
    for output in _compiled("taxi_gpu"):
        (argv,) = [a for n, a in COMMANDS if n == "taxi_gpu" and a[1] == "compile"
                   and a[a.index("-o") + 1] == output]
        path = tmp_path / output
        assert cli.main([*argv[1:], "-o", str(path)]) == 0
        spec = next(yaml.safe_load_all(path.read_text()))
        compiled[output] = next(e["container"]["image"] for label, e in
                                spec["deploymentSpec"]["executors"].items()
                                if label == "exec-train")
    assert compiled and all(image.endswith(("-gpu", "-tpu")) for image in compiled.values())
    submits = [argv for name, argv in COMMANDS if name == "taxi_gpu" and argv[1] == "submit"]
    assert submits
    for argv in submits:
        target = cli.build_parser().parse_args(argv[1:]).pipeline
        assert target in compiled, target
        if "train_accelerator_type=tpu-v5-lite-podslice" in argv:
            assert compiled[target].endswith("-tpu")


@pytest.mark.parametrize("argv", [argv for _, argv in COMMANDS if argv[1] != "compile"],
                         ids=lambda argv: shlex.join(argv))
def test_other_commands_parse(argv):
    """Parsed as the CLI parses them; a pipeline file they name is in the repository, or the
    output of a compile command documented beside them."""
    local = argv[1] in ("run", "preprocess", "runs")
    target = cli.build_parser(local_only=local).parse_args(argv[1:]).pipeline
    outputs = {out for name, _ in COMMANDS for out in _compiled(name)}
    assert target in outputs or (REPO / target).is_file(), target
