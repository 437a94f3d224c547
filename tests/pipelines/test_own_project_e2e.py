"""estflow in a user's own project: a wheel built from this repository, installed into a fresh
virtual environment outside the checkout, runs a pipeline that ``estflow init`` scaffolded from
the user's CSV (a 3-class string label, NA cells), with the venv's own ``estflow`` command, from
the project's directory, in the default environment.

The venv gets estflow from the wheel alone (``pip install --no-deps``); its dependencies
(TensorFlow, Beam, ...: gigabytes) are this checkout's venv's site-packages, appended to its
``sys.path`` by a ``.pth`` line. That folder holds the editable install's finder, but a ``.pth``
line only adds a folder to ``sys.path`` (the ``.pth`` files in it are not run), so the checkout
is not importable there: the test asserts every ``estflow`` module comes from the new venv.
"""

from __future__ import annotations

import csv
import json
import os
import random
import re
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CLASSES = ("Adelie", "Chinstrap", "Gentoo")
# What the wheel is built from: the files pyproject.toml names (as the Dockerfile copies them).
SOURCES = ("pyproject.toml", "README.md", "LICENSE", "dsl", "components", "pipelines")

pytestmark = pytest.mark.slow


def _env(**extra: str) -> dict[str, str]:
    """The default environment of a user's shell: nothing of pytest's or estflow's."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("ESTFLOW_", "PYTEST_")) and k not in ("PYTHONPATH",
                                                                      "VIRTUAL_ENV")}
    return env | extra


def _run(argv, cwd: Path, timeout: int = 900, **kwargs) -> subprocess.CompletedProcess:
    done = subprocess.run([str(a) for a in argv], cwd=cwd, env=_env(), capture_output=True,
                          text=True, timeout=timeout, **kwargs)
    assert done.returncode == 0, (f"{' '.join(map(str, argv))}: exit {done.returncode}\n"
                                  f"{done.stdout[-4000:]}\n{done.stderr[-4000:]}")
    return done


def _build_wheel(tmp: Path) -> Path:
    """``pip wheel`` of the checkout's files (tracked, and untracked ones git does not ignore),
    copied first, so that no build/ folder of an earlier build in the checkout can add to it."""
    listed = subprocess.run(["git", "ls-files", "-coz", "--exclude-standard", "--", *SOURCES],
                            cwd=REPO, capture_output=True, check=True).stdout.decode()
    source = tmp / "source"
    for rel in filter(None, listed.split("\0")):
        if (REPO / rel).is_file():
            (source / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / rel, source / rel)
    done = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", tmp / "wheels",
                 source], cwd=tmp, timeout=600)
    output = done.stdout + done.stderr
    # setuptools' warning screens ("Package ... is absent from the `packages` configuration")
    assert not re.search(r"\w+Warning\b|Package would be ignored|\*{20}", output), output
    (wheel,) = (tmp / "wheels").glob("estflow-*.whl")
    return wheel


def _check_wheel(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    for needed in ("estflow/dsl/__init__.py", "estflow/pipelines/cli/__init__.py",
                   "estflow/pipelines/cli/scaffold.py", "estflow/pipelines/cli/init.py",
                   "estflow/estimator/__init__.py", "estflow/components/train/__main__.py",
                   "estflow/components/ingest/__main__.py", "estflow/components/push/__main__.py",
                   "estflow/pipelines/examples/taxi.py",
                   "estflow/pipelines/examples/data/chicago_taxi/data.csv"):
        assert needed in names, needed
    outside = sorted(n for n in names if not n.startswith(("estflow/", "estflow-")))
    assert outside == []
    assert not [n for n in names if "/tests/" in n or "__pycache__" in n or "/docker/" in n]


def _venv(tmp: Path, wheel: Path) -> Path:
    """A fresh venv with estflow from ``wheel`` only; the dependencies from this checkout's
    venv through a .pth line."""
    venv = tmp / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", venv], cwd=tmp, timeout=300)
    python = venv / "bin" / "python"
    purelib = Path(_run([python, "-c", "import sysconfig; print(sysconfig.get_paths()"
                                       "['purelib'])"], cwd=tmp).stdout.strip())
    (purelib / "estflow_test_dependencies.pth").write_text(
        sysconfig.get_paths()["purelib"] + "\n")
    # this venv's pip, installing into the new one (ensurepip would take a minute)
    _run([sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "--no-index",
          wheel], cwd=tmp, timeout=300)
    return venv


def _penguins(path: Path, n: int = 344, seed: int = 0) -> None:
    """A penguins-like table: the label first, NA in numeric and string cells."""
    rng = random.Random(seed)
    shape = {"Adelie": (38.8, 18.3, 190, 3700, ("Torgersen", "Biscoe", "Dream")),
             "Chinstrap": (48.8, 18.4, 196, 3733, ("Dream",)),
             "Gentoo": (47.5, 15.0, 217, 5076, ("Biscoe",))}
    with open(path, "w", newline="") as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(("species", "island", "bill_length_mm", "bill_depth_mm",
                         "flipper_length_mm", "body_mass_g", "sex", "year"))
        for _ in range(n):
            species = rng.choice(CLASSES)
            bill, depth, flipper, mass, islands = shape[species]
            row = [species, rng.choice(islands), f"{rng.gauss(bill, 2.5):.1f}",
                   f"{rng.gauss(depth, 0.8):.1f}", str(int(rng.gauss(flipper, 6))),
                   str(int(rng.gauss(mass, 350))), rng.choice(("male", "female")),
                   str(rng.choice((2007, 2008, 2009)))]
            if rng.random() < 0.03:
                row[2:6] = ["NA"] * 4
            if rng.random() < 0.05:
                row[6] = rng.choice(("NA", ""))
            writer.writerow(row)


def _predictions(folder: Path) -> list[dict]:
    return [json.loads(line) for file in sorted(folder.glob("predictions-*.jsonl"))
            for line in file.read_text().splitlines()]


def test_a_wheel_in_a_fresh_venv_runs_a_pipeline_scaffolded_from_a_csv(tmp_path):
    wheel = _build_wheel(tmp_path / "build")
    _check_wheel(wheel)
    venv = _venv(tmp_path, wheel)
    project = tmp_path / "project"
    project.mkdir()

    # estflow comes from the wheel, not from the checkout
    where = _run([venv / "bin" / "python", "-c",
                  "import json, estflow, estflow.dsl, estflow.pipelines, estflow.components, "
                  "estflow.estimator; from importlib import metadata; print(json.dumps("
                  "[list(estflow.__path__), [m.__file__ for m in (estflow.dsl, "
                  "estflow.pipelines, estflow.components, estflow.estimator)], "
                  "str(metadata.distribution('estflow').locate_file(''))]))"], cwd=project)
    paths, files, dist = json.loads(where.stdout)
    for path in [*paths, *files, dist]:
        assert Path(path).resolve().is_relative_to(venv.resolve()), (path, venv)
    assert not any(Path(p).resolve().is_relative_to(REPO) for p in [*paths, *files])

    estflow = venv / "bin" / "estflow"
    _penguins(project / "penguins.csv")
    init = _run([estflow, "init", "penguins.csv", "--label", "species", "--max-steps", "150"],
                cwd=project)
    assert "label    species: 3 classes: Adelie, Chinstrap, Gentoo" in init.stdout
    assert "missing tokens (column_na_values): sex: '', 'NA'" in init.stdout
    assert (project / "penguins.py").is_file()

    run = _run([estflow, "run", "penguins.py"], cwd=project, timeout=1800)
    (version,) = [p for p in (project / "serving_models" / "penguins").iterdir()
                  if p.name.isdigit()]
    assert f"Pushed penguins version {version.name}" in run.stdout
    assert (version / "saved_model.pb").is_file()

    # :predict's outputs (the default): the predicted class's name
    _run([estflow, "predict", "serving_models/penguins", "--input", "penguins.csv",
          "--output", "predicted"], cwd=project)
    rows = _predictions(project / "predicted")
    assert len(rows) == 344
    assert {name for row in rows for name in row["classes"]} <= set(CLASSES)
    assert all(len(row["probabilities"]) == 3 for row in rows)

    # :classify's: every class name and its score
    _run([estflow, "predict", "serving_models/penguins", "--input", "penguins.csv",
          "--output", "scores", "--signature", "classify", "--keys", "species"], cwd=project)
    rows = _predictions(project / "scores")
    assert len(rows) == 344
    assert {tuple(row["classes"]) for row in rows} == {CLASSES}
    assert all(len(row["scores"]) == 3 for row in rows)
    right = sum(CLASSES[max(range(3), key=row["scores"].__getitem__)] == row["species"]
                for row in rows)
    assert right / len(rows) > 0.8  # it learnt something from its own CSV
