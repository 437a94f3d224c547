"""estflow as a user or a remote worker gets it: a wheel built from this checkout, installed
into a fresh virtual environment outside it.

The venv gets estflow from the wheel alone (``pip install --no-deps``); its dependencies
(TensorFlow, Beam, ...: gigabytes) are this checkout's venv's site-packages, appended to its
``sys.path`` by a ``.pth`` line. That folder holds the editable install's finder, but a ``.pth``
line only adds a folder to ``sys.path`` (the ``.pth`` files in it are not run), so the checkout
is not importable there: :func:`estflow_paths` says where each estflow package came from.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# What the wheel is built from: the files pyproject.toml names (as the Dockerfile copies them).
SOURCES = ("pyproject.toml", "README.md", "LICENSE", "dsl", "components", "pipelines")


def user_env(**extra: str) -> dict[str, str]:
    """The default environment of a user's shell: nothing of pytest's or estflow's."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("ESTFLOW_", "PYTEST_")) and k not in ("PYTHONPATH",
                                                                      "VIRTUAL_ENV")}
    return env | extra


def run(argv, cwd: Path, timeout: int = 900, **kwargs) -> subprocess.CompletedProcess:
    """``argv`` in a user's environment; it must exit 0 (else its output is shown)."""
    done = subprocess.run([str(a) for a in argv], cwd=cwd, env=user_env(), capture_output=True,
                          text=True, timeout=timeout, **kwargs)
    assert done.returncode == 0, (f"{' '.join(map(str, argv))}: exit {done.returncode}\n"
                                  f"{done.stdout[-4000:]}\n{done.stderr[-4000:]}")
    return done


def build_wheel(tmp: Path) -> Path:
    """``pip wheel`` of the checkout's files (tracked, and untracked ones git does not ignore),
    copied first, so that no build/ folder of an earlier build in the checkout can add to it."""
    listed = subprocess.run(["git", "ls-files", "-coz", "--exclude-standard", "--", *SOURCES],
                            cwd=REPO, capture_output=True, check=True).stdout.decode()
    source = tmp / "source"
    for rel in filter(None, listed.split("\0")):
        if (REPO / rel).is_file():
            (source / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / rel, source / rel)
    done = run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", tmp / "wheels",
                source], cwd=tmp, timeout=600)
    output = done.stdout + done.stderr
    # setuptools' warning screens ("Package ... is absent from the `packages` configuration")
    assert not re.search(r"\w+Warning\b|Package would be ignored|\*{20}", output), output
    (wheel,) = (tmp / "wheels").glob("estflow-*.whl")
    return wheel


def venv_with(tmp: Path, wheel: Path) -> Path:
    """A fresh venv with estflow from ``wheel`` only; the dependencies from this checkout's
    venv through a .pth line."""
    venv = tmp / "venv"
    run([sys.executable, "-m", "venv", "--without-pip", venv], cwd=tmp, timeout=300)
    python = venv / "bin" / "python"
    purelib = Path(run([python, "-c", "import sysconfig; print(sysconfig.get_paths()"
                                      "['purelib'])"], cwd=tmp).stdout.strip())
    (purelib / "estflow_test_dependencies.pth").write_text(
        sysconfig.get_paths()["purelib"] + "\n")
    # this venv's pip, installing into the new one (ensurepip would take a minute)
    run([sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "--no-index",
         wheel], cwd=tmp, timeout=300)
    return venv


def estflow_paths(python: Path, cwd: Path) -> list[str]:
    """Where ``python`` imports estflow's packages and its distribution from."""
    where = run([python, "-c",
                 "import json, estflow, estflow.dsl, estflow.pipelines, estflow.components, "
                 "estflow.estimator; from importlib import metadata; print(json.dumps("
                 "[*estflow.__path__, *[m.__file__ for m in (estflow.dsl, "
                 "estflow.pipelines, estflow.components, estflow.estimator)], "
                 "str(metadata.distribution('estflow').locate_file(''))]))"], cwd=cwd)
    return json.loads(where.stdout)
