"""Fan-out as a declaration (estflow.dsl.steps): ``fn.map(**lists)`` declares one user step
mapped over items (``over``: one JSON object per item of the parameters that vary), each
parameter checked as a plain call checks it, the lists of one length, at least one item; a
mapped step takes no ``when`` and no ``when`` reads its result; the names its items run as
(``<step>_<i>``, ``<out>_<i>``) must be free; the spec round-trips exactly."""

from __future__ import annotations

import dataclasses
import json

import pytest

import estflow.dsl as ef
from estflow.dsl import serialization
from estflow.dsl.steps import UserStep
from estflow.pipelines import loader


@ef.step
def score(evaluation: ef.Input[ef.Evaluation], scores: ef.Output[ef.Dataset],
          threshold: float = 0.5, table: str = "t", tags: list | None = None) -> dict:
    return {}


@ef.step
def gate_me(scores: ef.Input[ef.Dataset]) -> dict:
    return {}


@ef.step(when=ef.blessed())
def gated(evaluation: ef.Input[ef.Evaluation], threshold: float = 0.5) -> None:
    pass


@ef.step
def scores_1(evaluation: ef.Input[ef.Evaluation]) -> None:  # the name of score's item output
    pass


@pytest.fixture(scope="module")
def taxi() -> ef.Pipeline:
    return loader.load("estflow.pipelines.examples.taxi").pipeline


def test_map_declares_one_step_with_its_items():
    mapped = score.map(threshold=[0.3, 0.5, 0.7], table="daily")
    assert isinstance(mapped, UserStep) and mapped.mapped
    assert mapped.name == "score"
    assert mapped.items == [{"threshold": 0.3}, {"threshold": 0.5}, {"threshold": 0.7}]
    assert mapped.arguments() == {"table": "daily", "tags": None}
    assert mapped.item_arguments(2) == {"table": "daily", "tags": None, "threshold": 0.7}
    assert json.loads(mapped.over) == mapped.items
    assert not score(threshold=0.3).mapped and score(threshold=0.3).over == ""
    two = score.map(threshold=(0.1, 0.2), table=["a", "b"])
    assert two.items == [{"table": "a", "threshold": 0.1}, {"table": "b", "threshold": 0.2}]
    assert two.arguments() == {"tags": None}


def test_a_mapped_step_round_trips_exactly(taxi):
    pipeline = dataclasses.replace(
        taxi, steps=(score.map(threshold=[0.3, 0.7], tags=[["x"], [1, None]]), gate_me))
    text = pipeline.to_json()
    again = ef.Pipeline.from_json(text)
    assert again == pipeline and again.to_json() == text
    step = again.steps[0]
    assert step.item_arguments(1)["tags"] == [1, None]
    assert serialization.from_json(serialization.to_json(step)) == step


@pytest.mark.parametrize("arguments, path, fragment", [
    ({"threshold": [0.3, 0.5], "table": ["a"]}, "steps['score'].table", "a list of 2 items"),
    ({"threshold": []}, "steps['score'].threshold", "at least one item"),
    ({"table": "daily"}, "steps['score'].map", "at least one parameter given as a list"),
    ({"threshhold": [0.3]}, "steps['score'].threshhold", "did you mean 'threshold'?"),
    ({"threshold": [0.3, float("nan")]}, "steps['score'].threshold[1]", "a finite number"),
    ({"threshold": [0.3], "table": object()}, "steps['score'].table", "a JSON value"),
])
def test_bad_maps_are_refused_naming_the_parameter(arguments, path, fragment):
    with pytest.raises(ef.DslError) as caught:
        score.map(**arguments)
    assert caught.value.path == path
    assert fragment in str(caught.value)


def test_lists_of_different_lengths_name_both_lengths():
    with pytest.raises(ef.DslError) as caught:
        score.map(threshold=[0.3, 0.5, 0.7], table=["a", "b"])
    text = str(caught.value)
    assert "a list of 3 items" in text and "2 items" in text
    assert "'threshold': 3" in text and "'table': 2" in text


def test_a_mapped_step_takes_no_when():
    with pytest.raises(ef.DslError) as caught:
        gated.map(threshold=[0.3, 0.5])
    assert caught.value.path == "steps['gated'].when"
    assert "no when on a mapped step" in str(caught.value)
    with pytest.raises(ef.DslError, match="no when on a mapped step"):
        dataclasses.replace(score.map(threshold=[0.3]), when=ef.blessed())
    with pytest.raises(ef.DslError, match="a JSON list of objects"):
        dataclasses.replace(score.declaration(), over='[1, 2]')


def test_no_when_reads_a_mapped_step_and_item_names_must_be_free(taxi):
    later = ef.step(when=ef.result("score")["rows"] > 0)(gate_me.python_func)
    with pytest.raises(ef.DslErrors) as caught:
        dataclasses.replace(taxi, steps=(score.map(threshold=[0.3, 0.5]), later, scores_1))
    errors = {e.path: e for e in caught.value.errors}
    assert sorted(errors) == ["steps[0]", "steps[1].when.step"]
    assert "not mapped" in errors["steps[1].when.step"].expected
    assert errors["steps[0]"].received == ["scores_1"]
    assert "score_0, score_1" in errors["steps[0]"].expected


def test_a_reader_of_a_mapped_step_reads_its_collected_output(taxi):
    pipeline = dataclasses.replace(taxi, steps=(score.map(threshold=[0.3, 0.5]), gate_me))
    assert [s.name for s in pipeline.steps] == ["score", "gate_me"]
