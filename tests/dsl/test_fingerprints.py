"""Step keys (estflow.dsl.fingerprints): each step's key covers what it reads, and only that."""

from __future__ import annotations

import dataclasses

import pytest

import estflow.dsl as ef
from estflow.dsl import fingerprints as fp
from estflow.dsl.contracts import STEPS
from estflow.dsl.contracts import TFJOB
from estflow.pipelines.examples import taxi

PLAN = [fp.StepKeyInput(s.name, tuple((a, next(p.name for p in STEPS if a in p.outputs))
                                  for a in s.inputs), s.outputs, s.reads, s.side_effects,
                    s.module) for s in STEPS if s.name != "tune"]  # the taxi example tunes nothing
FACTS = fp.Facts(estflow={"version": "1"}, source={"digest": "data-1"},
                 code={"derive.fn": "code-1"})


def _keys(pipeline=taxi.pipeline, facts=FACTS) -> dict[str, str]:
    return {name: k.key for name, k in fp.step_keys(pipeline, PLAN, facts).items()}


def _changed(a: dict, b: dict) -> list[str]:
    return [name for name in a if a[name] != b[name]]


def test_the_same_inputs_give_the_same_keys():
    assert _keys() == _keys(ef.Pipeline.from_json(taxi.pipeline.to_json()))


def test_a_model_change_keeps_ingest_and_transform():
    wider = dataclasses.replace(taxi.pipeline, model=dataclasses.replace(
        taxi.pipeline.model, dnn_hidden_units=(64, 32)))
    assert _changed(_keys(), _keys(wider)) == ["train", "evaluate", "push"]


def test_new_data_changes_every_key():
    facts = dataclasses.replace(FACTS, source={"digest": "data-2"})
    assert _changed(_keys(), _keys(facts=facts)) == [s.name for s in PLAN]


def test_a_threshold_change_reruns_only_evaluate_and_push():
    stricter = dataclasses.replace(taxi.pipeline, eval=dataclasses.replace(
        taxi.pipeline.eval, thresholds=(ef.Threshold("auc", lower_bound=0.9),)))
    assert _changed(_keys(), _keys(stricter)) == ["evaluate", "push"]


def test_the_derive_function_s_code_is_transform_s_and_so_everything_after_it():
    facts = dataclasses.replace(FACTS, code={"derive.fn": "2"})
    assert _changed(_keys(), _keys(facts=facts)) == ["transform", "train", "evaluate", "push"]


def test_estflow_s_version_changes_every_key():
    facts = dataclasses.replace(FACTS, estflow={"version": "2"})
    assert _changed(_keys(), _keys(facts=facts)) == [s.name for s in PLAN]


def test_a_weight_column_is_what_transform_reads_of_the_model():
    reads = next(s.reads for s in STEPS if s.name == "transform")
    projected = fp.project(taxi.pipeline, reads)
    assert isinstance(projected.model, ef.BaselineClassifier)  # a neutral stand-in
    assert projected.model.weight_column is None
    assert projected.derive == taxi.pipeline.derive  # transform runs the derive function
    assert projected.push is None and projected.train == ef.TrainSpec(max_steps=1)


def test_each_step_gets_only_what_it_reads():
    by_name = {s.name: fp.project(taxi.pipeline, s.reads) for s in STEPS}
    assert by_name["ingest"].source == taxi.pipeline.source
    assert by_name["transform"].source.path == fp.UNREAD
    assert by_name["train"].model == taxi.pipeline.model
    assert by_name["evaluate"].push.base_path == taxi.pipeline.push.base_path
    assert by_name["evaluate"].eval == taxi.pipeline.eval
    # only transform runs the derive function: the others get its outputs' names
    assert fp.callable_refs(by_name["ingest"]) == []
    assert [str(r) for r in fp.callable_refs(by_name["transform"])] == [
        "estflow.pipelines.examples.taxi:big_tipper"]
    for projected in by_name.values():  # every projection is a valid spec, round-tripping
        assert ef.Pipeline.from_json(projected.to_json()) == projected


def test_the_multi_worker_train_step_reads_what_train_reads():
    assert TFJOB.reads == next(s.reads for s in STEPS if s.name == "train")


def test_a_model_is_never_its_own_baseline():
    keys = fp.step_keys(taxi.pipeline, PLAN, FACTS)
    model = keys["train"].outputs["model"]
    itself = fp.step_keys(taxi.pipeline, PLAN, dataclasses.replace(
        FACTS, served={"version": 7, "fingerprint": model}))
    other = fp.step_keys(taxi.pipeline, PLAN, dataclasses.replace(
        FACTS, served={"version": 7, "fingerprint": "another model"}))
    assert itself["evaluate"].key == keys["evaluate"].key  # served = this model: no baseline
    assert other["evaluate"].key != keys["evaluate"].key  # a new baseline: evaluate again
    assert other["ingest"].key == keys["ingest"].key


def test_a_served_model_keys_its_evaluation_by_what_it_was_evaluated_against():
    """Night 1: model M is evaluated against the served version 7 and pushed as 8. Night 2,
    the same data: M is the served version 8, whose lineage says it was evaluated against 7;
    its evaluation keys as on night 1 (reused), not as against itself (evaluated again)."""
    model = fp.step_keys(taxi.pipeline, PLAN, FACTS)["train"].outputs["model"]
    seven = {"version": 7, "fingerprint": "the model before"}
    night1 = fp.step_keys(taxi.pipeline, PLAN, dataclasses.replace(
        FACTS, served={**seven, "evaluated_against": None}))
    night2 = fp.step_keys(taxi.pipeline, PLAN, dataclasses.replace(
        FACTS, served={"version": 8, "fingerprint": model, "evaluated_against": seven}))
    assert night2["evaluate"].key == night1["evaluate"].key
    assert night2["evaluate"].context["served"] == seven
    # what 7 itself was evaluated against plays no part in its role as the baseline
    other = fp.step_keys(taxi.pipeline, PLAN, dataclasses.replace(
        FACTS, served={**seven, "evaluated_against": {"version": 6, "fingerprint": "x"}}))
    assert other["evaluate"].key == night1["evaluate"].key


def test_push_and_what_follows_it_are_never_reused():
    plan = PLAN + [fp.StepKeyInput("after", (("pushed", "push"),), ("out",))]
    keys = fp.step_keys(taxi.pipeline, plan, FACTS)
    assert {n: k.cacheable for n, k in keys.items()} == {
        "ingest": True, "validate": False, "transform": True, "train": True, "evaluate": True, "push": False,
        "after": False}


def test_plan_steps_travel_as_json():
    assert fp.StepKeyInput.list_from_json(fp.StepKeyInput.list_to_json(PLAN)) == PLAN


@pytest.mark.parametrize("label, model, stand_in", [
    (ef.Label("y", dtype="string", vocabulary=("a", "b", "c")),
     ef.LinearClassifier(feature_columns=("x",), n_classes=3), ef.BaselineClassifier(n_classes=3)),
    (ef.Label("y", dtype="float"), ef.LinearRegressor(feature_columns=("x",)),
     ef.BaselineRegressor()),
])
def test_the_model_stand_in_fits_the_label(label, model, stand_in):
    pipeline = ef.Pipeline(name="p", source=ef.CsvSource("d.csv"), features=(ef.Numeric("x"),),
                           label=label, model=model, train=ef.TrainSpec(max_steps=1))
    assert fp.project(pipeline, ("name", "features", "label")).model == stand_in


def test_a_key_covers_a_function_s_code_not_where_it_is():
    """The same function loaded from another file, path and module (a renamed or copied
    pipeline, another checkout): the same keys; the step still gets the reference."""
    def moved(module: str, file: str) -> ef.Pipeline:
        ref = ef.CallableRef(module, "big_tipper", file=file)
        return dataclasses.replace(taxi.pipeline, derive=dataclasses.replace(
            taxi.pipeline.derive, fn=ref))

    here = fp.step_keys(moved("estflow_user_taxi", "/a/taxi.py"), PLAN, FACTS)
    there = fp.step_keys(moved("estflow_user_wide", "/ci/build-7/wide.py"), PLAN, FACTS)
    assert {n: k.key for n, k in here.items()} == {n: k.key for n, k in there.items()}
    assert there["transform"].spec.derive.fn.file == "/ci/build-7/wide.py"
    assert there["transform"].context["code"] == {"derive.fn": "code-1"}


def test_a_local_source_s_path_is_in_no_key_when_its_content_is():
    def at(path: str) -> ef.Pipeline:
        return dataclasses.replace(taxi.pipeline, source=ef.CsvSource(path))

    by_content = dataclasses.replace(FACTS, source={"digest": "data-1", "by_content": True})
    assert _keys(at("/a/data.csv"), by_content) == _keys(at("/b/data.csv"), by_content)
    # a source fingerprinted by metadata only (e.g. size and time): its path stays in the key
    assert _changed(_keys(at("/a/data.csv")), _keys(at("/b/data.csv"))) == [
        s.name for s in PLAN]
