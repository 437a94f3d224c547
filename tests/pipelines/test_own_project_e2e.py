"""estflow in a user's own project: a wheel built from this repository, installed into a fresh
virtual environment outside the checkout, runs a pipeline that ``estflow init`` scaffolded from
the user's CSV (a 3-class string label, NA cells), with the venv's own ``estflow`` command, from
the project's directory, in the default environment.

The wheel and the venv are :mod:`tests.wheel_venv`'s (estflow from the wheel alone, its
dependencies from this checkout's venv); the test asserts every ``estflow`` module comes from the
new venv.
"""

from __future__ import annotations

import csv
import json
import random
import zipfile
from pathlib import Path

import pytest

from tests.wheel_venv import REPO
from tests.wheel_venv import build_wheel
from tests.wheel_venv import estflow_paths
from tests.wheel_venv import run as _run
from tests.wheel_venv import venv_with

CLASSES = ("Adelie", "Chinstrap", "Gentoo")

pytestmark = pytest.mark.slow


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
    wheel = build_wheel(tmp_path / "build")
    _check_wheel(wheel)
    venv = venv_with(tmp_path, wheel)
    project = tmp_path / "project"
    project.mkdir()

    # estflow comes from the wheel, not from the checkout
    for path in estflow_paths(venv / "bin" / "python", project):
        assert Path(path).resolve().is_relative_to(venv.resolve()), (path, venv)
        assert not Path(path).resolve().is_relative_to(REPO), path

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
