"""The Plan: steps and their order, inputs wired to producers, options (Beam ones only on Beam
steps), the preprocess plan, and argv built from the contract table alone."""

from __future__ import annotations

import dataclasses

import pytest

from estflow.dsl import contracts
from estflow.dsl.contracts import BATCH_PREDICT
from estflow.dsl.contracts import FINGERPRINT
from estflow.dsl.contracts import PREPROCESS
from estflow.dsl.contracts import STEPS
from estflow.dsl.contracts import TFJOB
from estflow.dsl.contracts import Files
from estflow.dsl.contracts import step_named
from estflow.pipelines.examples import taxi
from estflow.pipelines.plan import Plan
from estflow.pipelines.plan import PlannedStep
from estflow.pipelines.plan import build_plan
from estflow.pipelines.plan import build_preprocess_plan
from estflow.pipelines.plan import late_input

BEAM = "--runner=FlinkRunner --flink_master=jm:8081"
NO_PUSH = dataclasses.replace(taxi.pipeline, push=None)


def _flags(argv: list[str]) -> list[str]:
    """The flags of ``--flag value`` pairs and of ``--flag=--value`` (a value starting with
    ``-`` is joined to its flag, so that argparse cannot take it for an option)."""
    pairs = [part for arg in argv for part in (
        arg.split("=", 1) if arg.startswith("--") and "=--" in arg else [arg])]
    assert len(pairs) % 2 == 0 and all(a.startswith("--") for a in pairs[::2]), argv
    assert not any(a.startswith("-") for a in argv if not a.startswith("--")), argv
    return [a[2:] for a in pairs[::2]]


def _paths(step: PlannedStep) -> dict[str, str]:
    return {a: f"/w/{a}" for a in [*(i for i, _ in step.inputs), *step.outputs]}


@pytest.mark.parametrize("pipeline, names", [
    (taxi.pipeline, ["ingest", "transform", "train", "evaluate", "push"]),
    (NO_PUSH, ["ingest", "transform", "train", "evaluate"]),
])
def test_steps_in_order_with_and_without_push(pipeline, names):
    plan = build_plan(pipeline, source_root="/data")
    assert [s.name for s in plan.steps] == names
    assert plan.pipeline is pipeline
    for step in plan.steps:
        assert step.module == step_named(step.name).module == f"estflow.components.{step.name}"
        assert step.outputs == step_named(step.name).outputs
        assert step.description == step_named(step.name).description


def test_each_input_is_wired_to_the_earlier_step_producing_it():
    plan = build_plan(taxi.pipeline, source_root="/data")
    assert {s.name: s.inputs for s in plan.steps} == {
        "ingest": (),
        "transform": (("examples", "ingest"),),
        "train": (("transformed", "transform"),),
        "evaluate": (("examples", "ingest"), ("model", "train")),
        "push": (("model", "train"), ("evaluation", "evaluate")),
    }
    seen: dict[str, str] = {}
    for step in plan.steps:
        for artifact, producer in step.inputs:
            assert seen[artifact] == producer  # produced before it is read
        seen.update({a: step.name for a in step.outputs})


def test_beam_options_go_to_the_beam_steps_only():
    plan = build_plan(taxi.pipeline, source_root="/data", beam_options=BEAM)
    with_beam = {s.name for s in plan.steps if "beam-options" in dict(s.options)}
    assert with_beam == {s.name for s in STEPS if s.beam} == {"ingest", "transform"}
    assert all(dict(s.options)["beam-options"] == BEAM for s in plan.steps
               if s.name in with_beam)
    no_beam = build_plan(taxi.pipeline, source_root="/data")
    assert not any("beam-options" in dict(s.options) for s in no_beam.steps)


def test_a_compiled_plan_gives_remote_beam_workers_its_own_image():
    """Dataflow/Flink/Spark workers must run the image the task runs (estflow and tf.Transform
    inside), not a default that nothing built: the Beam steps get ``--sdk-image``."""
    plan = build_plan(taxi.pipeline, source_root="/data", sdk_image="registry/estflow:1.2")
    images = {s.name: dict(s.options).get("sdk-image") for s in plan.steps}
    assert {n for n, i in images.items() if i} == {"ingest", "transform"}
    assert images["ingest"] == images["transform"] == "registry/estflow:1.2"
    local = build_plan(taxi.pipeline, source_root="/data")
    assert not any("sdk-image" in dict(s.options) for s in local.steps)


def test_source_root_goes_to_the_steps_declaring_it():
    plan = build_plan(taxi.pipeline, source_root="module:pkg.data")
    assert {s.name: s.options for s in plan.steps} == {
        # known when the run runs (late_input): the source's digest at the run's start, the
        # model's fingerprint and the run
        "ingest": (("source-root", "module:pkg.data"),
                   ("source-digest", late_input("source_digest"))),
        "transform": (), "train": (), "evaluate": (),
        "push": (("model-fingerprint", late_input("model_fingerprint")),
                 ("run", late_input("run"))),
    }


def test_argv_lists_spec_inputs_outputs_then_options_in_contract_order():
    plan = build_plan(taxi.pipeline, source_root="/data", beam_options=BEAM)
    assert plan.step("ingest").argv("/w/pipeline.json", {"examples": "/w/ex"}) == [
        "--spec", "/w/pipeline.json", "--examples", "/w/ex", "--source-root", "/data",
        f"--beam-options={BEAM}", "--source-digest", late_input("source_digest")]
    assert plan.step("ingest").argv("/w/pipeline.json", {"examples": "/w/ex"}, late={}) == [
        "--spec", "/w/pipeline.json", "--examples", "/w/ex", "--source-root", "/data",
        f"--beam-options={BEAM}"]  # a run-time input not given: its option left out
    evaluate = plan.step("evaluate")
    assert evaluate.argv("{}", {"examples": "/e", "model": "/m", "evaluation": "/v"}) == [
        "--spec", "{}", "--examples", "/e", "--model", "/m", "--evaluation", "/v"]


@pytest.mark.parametrize("plan", [
    build_plan(taxi.pipeline, source_root="/data", beam_options=BEAM),
    build_plan(NO_PUSH, source_root="/data"),
    build_preprocess_plan(taxi.pipeline, source_root="/data", beam_options=BEAM),
], ids=["all-steps", "no-push", "preprocess"])
def test_every_flag_in_argv_is_one_the_contract_step_declares(plan: Plan):
    contract = {s.name: s for s in (*STEPS, PREPROCESS)}
    for step in plan.steps:
        declared = contract[step.name]
        allowed = {"spec", *declared.inputs, *declared.outputs,
                   *(o.flag for o in declared.options)}
        flags = _flags(step.argv("spec.json", _paths(step)))
        assert set(flags) <= allowed, step.name
        assert len(flags) == len(set(flags)), step.name  # no flag twice
        assert flags[0] == "spec"
        assert flags[1:1 + len(declared.inputs) + len(declared.outputs)] == \
            [*declared.inputs, *declared.outputs]


def test_the_preprocess_plan_is_the_one_fused_step():
    plan = build_preprocess_plan(taxi.pipeline, source_root="/data", gzip_level=9,
                                 num_shards=4, beam_options=BEAM)
    (step,) = plan.steps
    assert (step.name, step.module, step.inputs, step.outputs, step.description) == (
        "preprocess", PREPROCESS.module, (), ("examples", "transformed"), PREPROCESS.description)
    assert step.module == "estflow.components.preprocess"
    assert step.argv("s.json", {"examples": "/e", "transformed": "/t"}) == [
        "--spec", "s.json", "--examples", "/e", "--transformed", "/t", "--source-root", "/data",
        "--gzip-level", "9", "--num-shards", "4", f"--beam-options={BEAM}"]


def test_the_preprocess_plan_defaults_and_no_beam_options():
    (step,) = build_preprocess_plan(taxi.pipeline, source_root="/data").steps
    assert step.options == (("source-root", "/data"), ("gzip-level", "1"), ("num-shards", "0"))


def test_from_step_takes_only_declared_options():
    train = step_named("train")
    with pytest.raises(ValueError, match="'train'") as info:
        PlannedStep.from_step(train, {"transformed": "transform"}, {"beam-options": BEAM})
    assert "beam-options" in str(info.value)
    planned = PlannedStep.from_step(contracts.TFJOB, {"transformed": "transform"},
                                    {"namespace": "ml", "image": "img:1"})
    assert planned.module == "estflow.components.tfjob"
    assert planned.options == (("image", "img:1"), ("namespace", "ml"))  # contract order


def test_from_step_needs_a_producer_for_every_input():
    with pytest.raises(ValueError, match="evaluate") as info:
        PlannedStep.from_step(step_named("evaluate"), {"examples": "ingest"}, {})
    assert "model" in str(info.value)


def test_each_rows_task_facts_are_those_the_compiler_and_runner_used_to_keep_in_tables():
    """The facts moved from step-name tables (the compiler's caching and gate, the KFP
    settings' requests, the local runner's summary files) into the rows, unchanged."""
    rows = {s.name: s for s in (*STEPS, BATCH_PREDICT)}
    assert {n: s.caching for n, s in rows.items()} == {
        "ingest": True, "validate": False, "transform": True, "tune": True, "train": True,
        "evaluate": True, "push": False, "batch_predict": False}
    assert {n: s.requests for n, s in rows.items()} == {
        "ingest": ("1", "2Gi"), "validate": ("500m", "1Gi"), "transform": ("1", "4Gi"),
        "tune": ("2", "4Gi"), "train": ("1", "4Gi"),
        "evaluate": ("1", "2Gi"), "push": ("500m", "1Gi"), "batch_predict": ("1", "4Gi")}
    assert (TFJOB.requests, FINGERPRINT.requests, FINGERPRINT.caching) == (
        ("250m", "512Mi"), ("100m", "256Mi"), False)
    assert {n: s.runs_if for n, s in rows.items() if s.runs_if} == {
        "push": "evaluate", "batch_predict": "evaluate"}
    assert {n: s.summary for n, s in rows.items() if s.summary} == {
        "ingest": Files.INGEST_STATS, "validate": Files.VALIDATION,
        "transform": Files.TRANSFORM_STATS, "tune": Files.METRICS,
        "train": Files.TRAIN_RESULT, "evaluate": Files.METRICS, "push": Files.PUSH_RESULT}
    assert TFJOB.summary == Files.TRAIN_RESULT
    # validate reads the served version's statistics at the push target
    assert [n for n, s in rows.items() if s.outside_storage] == ["ingest", "validate", "push"]
    assert [n for n, s in rows.items() if s.needs] == ["validate", "tune", "push", "batch_predict"]
