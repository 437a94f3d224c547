"""TrainSpec.warm_start: the declaration's checks, and the train step's key covering the
served version it starts from (and only when warm start is declared)."""

from __future__ import annotations

import dataclasses

import pytest

import estflow.dsl as ef
from estflow.dsl import fingerprints as fp
from estflow.dsl.contracts import STEPS
from estflow.pipelines.examples import taxi

PLAN = [fp.StepKeyInput(s.name, tuple((a, next(p.name for p in STEPS if a in p.outputs))
                                  for a in s.inputs), s.outputs, s.reads, s.side_effects,
                    s.module) for s in STEPS]
FACTS = fp.Facts(estflow={"version": "1"}, source={"digest": "data-1"},
                 code={"derive.fn": "code-1"})
SERVED_1 = {"version": 1, "path": "/m/1", "fingerprint": "model-a"}
SERVED_2 = {"version": 2, "path": "/m/2", "fingerprint": "model-b"}
TARGET = ef.PushTarget("/srv", "taxi")


def _pipeline(warm_start=None, push=TARGET):
    return dataclasses.replace(taxi.pipeline, push=push, train=dataclasses.replace(
        taxi.pipeline.train, warm_start=warm_start))


def _keys(pipeline, served) -> dict[str, fp.StepKey]:
    return fp.step_keys(pipeline, PLAN, dataclasses.replace(FACTS, served=served))


def test_a_warm_started_train_step_is_keyed_by_the_served_version():
    warm = _pipeline(ef.WarmStart())
    none, first, second = (_keys(warm, s) for s in (None, SERVED_1, SERVED_2))
    assert none["train"].key != first["train"].key != second["train"].key
    assert first["train"].context["served"] == {"version": 1, "fingerprint": "model-a"}
    assert first["ingest"].key == second["ingest"].key  # nothing else reads it
    assert first["transform"].key == second["transform"].key
    # the step is given where the served version is (and its key covers it)
    spec = first["train"].spec
    assert (spec.push.base_path, spec.push.model_name) == ("/srv", "taxi")
    assert spec.train.warm_start == ef.WarmStart()


def test_without_warm_start_the_served_version_and_push_target_do_not_key_train():
    cold = _pipeline()
    assert _keys(cold, None)["train"].key == _keys(cold, SERVED_2)["train"].key
    moved = _pipeline(push=ef.PushTarget("/elsewhere", "taxi"))
    assert _keys(cold, SERVED_1)["train"].key == _keys(moved, SERVED_1)["train"].key
    assert _keys(cold, SERVED_1)["train"].spec.push is None
    assert "served" not in _keys(cold, SERVED_1)["train"].context


def test_the_warm_start_selection_keys_train():
    a = _keys(_pipeline(ef.WarmStart()), SERVED_1)["train"].key
    b = _keys(_pipeline(ef.WarmStart(optimizer_state=True)), SERVED_1)["train"].key
    assert a != b


def test_warm_start_round_trips_in_a_pipeline():
    pipeline = _pipeline(ef.WarmStart(vars_to_warm_start=["store/model/.*"],
                                      var_name_to_prev_var_name={"b": "old_b", "a": "old_a"}))
    again = ef.Pipeline.from_json(pipeline.to_json())
    assert again == pipeline
    assert again.train.warm_start.vars_to_warm_start == ("store/model/.*",)


@pytest.mark.parametrize("kwargs, field", [
    ({"source": "latest"}, "source"),
    ({"vars_to_warm_start": "store/(model"}, "vars_to_warm_start"),
    ({"vars_to_warm_start": ("ok", 3)}, "vars_to_warm_start[1]"),
    ({"vars_to_warm_start": 5}, "vars_to_warm_start"),
    ({"var_name_to_prev_var_name": {"a": ""}}, "var_name_to_prev_var_name"),
    ({"optimizer_state": "yes"}, "optimizer_state"),
    ({"vars_to_warm_start": None, "optimizer_state": True}, "optimizer_state"),
])
def test_bad_declarations_name_the_field(kwargs, field):
    with pytest.raises(ef.DslError) as err:
        ef.WarmStart(**kwargs)
    assert err.value.path == field


def test_train_spec_refuses_anything_but_a_warm_start():
    with pytest.raises(ef.DslError) as err:
        ef.TrainSpec(max_steps=1, warm_start="served")
    assert err.value.path == "warm_start"


def test_warm_start_needs_a_push_target():
    with pytest.raises(ef.DslErrors) as err:
        _pipeline(ef.WarmStart(), push=None)
    assert "train.warm_start" in str(err.value) and "push target" in str(err.value)


def test_settings_vars_add_the_optimizer_state():
    assert ef.WarmStart().settings_vars() == ".*"
    assert ef.WarmStart(optimizer_state=True).settings_vars() == (".*", "optimizers/")
    assert ef.WarmStart(vars_to_warm_start=("a", "b"), optimizer_state=True
                        ).settings_vars() == ("a", "b", "optimizers/")
