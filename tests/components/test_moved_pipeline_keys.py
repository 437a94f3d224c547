"""The step keys of a pipeline file follow its content, not its place: loaded as ``estflow
run`` loads it (pipelines/loader.py), planned, and keyed by the fingerprint step in process
(no TensorFlow). A copy under another name in another directory, its data beside it, keys
every step the same; an edit reruns exactly the steps that read what changed."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import pytest

from estflow.components import fingerprint as fingerprint_step
from estflow.pipelines import loader
from estflow.pipelines.plan import build_plan

STEPS = ["ingest", "transform", "train", "evaluate"]
AFTER_TRANSFORM = ["transform", "train", "evaluate"]


def _pipeline(source: str) -> str:
    return textwrap.dedent(f"""\
        import os

        import estflow.dsl as ef
        from my_features import scale


        def derive(columns):
            return {{"y2": scale(columns["x"]) * 2}}


        def unrelated():
            return 1


        pipeline = ef.Pipeline(
            name="moved", source=ef.CsvSource({source}),
            columns=(ef.Column("x", "float"),),
            derive=ef.Derive(derive, outputs=(ef.Column("y2", "float"),)),
            features=(ef.Numeric("x"),), label=ef.Label("y", dtype="int"),
            model=ef.LinearClassifier(feature_columns=("x",)),
            train=ef.TrainSpec(max_steps=10))
        """)


HELPERS = "def scale(x):\n    return x * 3\n\n\ndef other(x):\n    return x\n"


def _write(folder: Path, name: str, source: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "data.csv").write_text("x,y\n1,0\n2,1\n")
    (folder / "my_features.py").write_text(HELPERS)
    path = folder / f"{name}.py"
    path.write_text(_pipeline(source))
    return path


def _keys(path: Path, out: Path) -> dict[str, str]:
    loaded = loader.load(str(path))
    plan = build_plan(loaded.pipeline, source_root=loaded.local_source_root)
    found = fingerprint_step.run(loaded.pipeline, [s.plan_step() for s in plan.steps],
                                 str(out), loaded.local_source_root)
    return {name: step["key"] for name, step in found["steps"].items() if name in STEPS}


def _changed(a: dict, b: dict) -> list[str]:
    return [name for name in a if a[name] != b[name]]


@pytest.mark.parametrize("source", [
    "'data.csv'",  # relative to the pipeline file's directory (the source root)
    "os.path.join(os.path.dirname(__file__), 'data.csv')",  # absolute, inside the checkout
])
def test_a_copy_elsewhere_keys_every_step_the_same(tmp_path, source):
    first = _keys(_write(tmp_path / "project", "taxi", source), tmp_path / "fp1")
    copy = tmp_path / "other" / "checkout"
    copy.mkdir(parents=True)
    for name in ("data.csv", "my_features.py"):
        shutil.copy(tmp_path / "project" / name, copy / name)
    shutil.copy(tmp_path / "project" / "taxi.py", copy / "taxi_wide.py")
    assert _keys(copy / "taxi_wide.py", tmp_path / "fp2") == first


def test_an_edit_reruns_exactly_the_steps_that_read_it(tmp_path):
    path = _write(tmp_path / "p", "pipe", "'data.csv'")
    first = _keys(path, tmp_path / "fp1")
    text = path.read_text()

    path.write_text(text.replace("return 1", "return 2"))  # a function no step reads
    assert _keys(path, tmp_path / "fp2") == first
    path.write_text(text.replace("* 2}", "* 4}"))  # the derive function's body
    assert _changed(first, _keys(path, tmp_path / "fp3")) == AFTER_TRANSFORM
    path.write_text(text)
    helpers = tmp_path / "p" / "my_features.py"
    helpers.write_text(HELPERS.replace("return x\n", "return -x\n"))  # the helper's neighbour
    assert _keys(path, tmp_path / "fp4") == first
    helpers.write_text(HELPERS.replace("x * 3", "x * 5"))  # the helper it calls
    assert _changed(first, _keys(path, tmp_path / "fp5")) == AFTER_TRANSFORM
    (tmp_path / "p" / "data.csv").write_text("x,y\n1,0\n2,1\n3,1\n")  # the data
    assert _changed(first, _keys(path, tmp_path / "fp6")) == STEPS


def test_the_fingerprint_names_each_function_and_its_helpers(tmp_path):
    path = _write(tmp_path / "p", "pipe", "'data.csv'")
    loaded = loader.load(str(path))
    plan = build_plan(loaded.pipeline, source_root=loaded.local_source_root)
    found = fingerprint_step.run(loaded.pipeline, [s.plan_step() for s in plan.steps],
                                 str(tmp_path / "fp"), loaded.local_source_root)
    function = found["code"]["derive.fn"]
    assert function["function"] == "derive"
    assert set(function["parts"]) == {"derive", "my_features.scale"}
    assert found["steps"]["transform"]["context"]["code"] == {"derive.fn": function["digest"]}
    assert "code" not in found["steps"]["ingest"]["context"]
