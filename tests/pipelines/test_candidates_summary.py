"""The closing summary's line on candidates (``estflow run``'s "Candidates by ..."): a blessed
candidate whose metric is not a number (a NaN AUC: one class in the eval split) is said to have
no value to compare, never shown as ``nan``, and the run that picks none says why."""

from __future__ import annotations

import json
import math

from hypothesis import given
from hypothesis import strategies as st

from estflow.dsl.contracts import CANDIDATES_FILE
from estflow.dsl.contracts import Files
from estflow.pipelines.local.runner import RunResult
from estflow.pipelines.local.runner import _training_summary


def _result(tmp_path, rows, picked):
    evaluation, model = tmp_path / "evaluation", tmp_path / "model"
    evaluation.mkdir(exist_ok=True)
    model.mkdir(exist_ok=True)
    (evaluation / Files.METRICS).write_text(json.dumps({"head": "binary", "metrics": {}}))
    (model / Files.TRAIN_RESULT).write_text(json.dumps({"global_step": 10}))
    (evaluation / CANDIDATES_FILE).write_text(json.dumps(
        {"best_by": "auc", "higher_is_better": True, "picked": picked, "candidates": rows}))
    return RunResult(workdir=tmp_path, artifacts={"evaluation": evaluation, "model": model},
                     seconds={})


def _line(result) -> str:
    lines: list[str] = []
    _training_summary(result, lines.append)
    return next(line for line in lines if line.startswith("Candidates by"))


def test_a_blessed_candidate_without_a_number_is_not_called_unblessed(tmp_path):
    rows = [{"name": "dnn", "value": float("nan"), "blessed": True},
            {"name": "linear", "value": 0.7, "blessed": False}]
    line = _line(_result(tmp_path, rows, None))
    assert line == ("Candidates by auc: linear 0.7000 (not blessed), dnn (no auc to compare); "
                    "no blessed candidate has a auc to compare")
    assert "nan" not in line


def test_none_blessed_says_so(tmp_path):
    rows = [{"name": "dnn", "value": 0.6, "blessed": False},
            {"name": "linear", "value": 0.7, "blessed": False}]
    assert _line(_result(tmp_path, rows, None)).endswith("; none blessed")


_VALUES = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.none())


@given(values=st.lists(st.tuples(_VALUES, st.booleans()), min_size=2, max_size=4))
def test_every_candidate_is_listed_once_numbers_first_best_first(tmp_path_factory, values):
    tmp_path = tmp_path_factory.mktemp("summary")
    rows = [{"name": f"c{i}", "value": v, "blessed": b} for i, (v, b) in enumerate(values)]
    line = _line(_result(tmp_path, rows, None))
    listed = line.split(": ", 1)[1].rsplit("; ", 1)[0].split(", ")
    assert sorted(item.split(" ")[0] for item in listed) == sorted(r["name"] for r in rows)
    assert "nan" not in line and "inf" not in line
    finite = [r for r in rows if isinstance(r["value"], float) and math.isfinite(r["value"])]
    shown = [item.split(" ")[0] for item in listed][:len(finite)]
    assert [r["value"] for r in sorted(finite, key=lambda r: -r["value"])] == [
        next(r["value"] for r in rows if r["name"] == n) for n in shown]
