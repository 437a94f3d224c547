"""A new step is one contract row and its folder: the row of ``tests/pipelines/new_step/``
(:data:`tests.pipelines.new_step.ROW`), added to a copy of the contract table, is planned,
compiled for KFP (the real kfp compiler) and run by the local runner with its row's facts
(its inputs and outputs, its default requests, its caching, its summary), with no other change
to estflow's code. Nothing is monkeypatched: the planner and the compiler take the table."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from estflow.dsl.contracts import Step
from estflow.dsl.contracts import UiOutput
from estflow.pipelines import loader
from estflow.pipelines.kubeflow import compiler as kfp_compiler
from estflow.pipelines.local import runner as local_runner
from estflow.pipelines.local import runs
from estflow.pipelines.plan import TRAINING_STEPS
from estflow.pipelines.plan import PlannedStep
from estflow.pipelines.plan import build_plan
from tests.pipelines import new_step
from tests.pipelines.kfp_ir import Ir

REPO = Path(__file__).resolve().parents[2]
# The contract table with the new row after evaluate (it reads the train step's model).
_AFTER = [s.name for s in TRAINING_STEPS].index("evaluate") + 1
TABLE = (*TRAINING_STEPS[:_AFTER], new_step.ROW, *TRAINING_STEPS[_AFTER:])


@pytest.fixture(scope="module")
def taxi():
    return loader.load("estflow.pipelines.examples.taxi")


def test_the_plan_takes_the_new_row_with_its_facts(taxi):
    plan = build_plan(taxi.pipeline, source_root="ROOT", steps=TABLE)
    assert [s.name for s in plan.steps] == ["ingest", "transform", "train", "evaluate",
                                            "score", "push"]
    score = plan.step("score")
    assert score.module == "tests.pipelines.new_step"
    assert score.inputs == (("model", "train"),) and score.outputs == ("scores",)
    assert (score.caching, score.requests, score.summary) == (False, ("3", "5Gi"),
                                                              new_step.SUMMARY)
    keyed = json.loads(dict(plan.fingerprint.options)["plan"])
    assert "score" in [s["name"] for s in keyed]  # the fingerprint step keys it too


def test_the_kfp_compile_takes_the_new_row_with_its_facts(taxi, tmp_path):
    compiled = kfp_compiler.compile_pipeline(taxi, tmp_path / "p.yaml", steps=TABLE,
                                             push_base_path="gs://bucket/models")
    assert compiled.tasks == ("ingest", "transform", "train", "evaluate", "score", "push")
    ir = Ir(compiled.path)
    resources = ir.container("score")["resources"]
    assert (resources["resourceCpuRequest"], resources["resourceMemoryRequest"]) == ("3", "5Gi")
    assert not ir.task("score").caching_options.enable_cache
    assert ir.task("train").caching_options.enable_cache
    assert ir.artifact_source("score", "model") == ("train", "model")
    assert ir.parameter_source("score", "cache_key") == ("fingerprint", "score_key")
    assert "from tests.pipelines import new_step as step" in "".join(
        ir.container("score")["command"])
    # the gate still holds push, not the ungated new step: from KFP 2.14 on (the default,
    # 2.17 included) push takes evaluate's blessed itself; before 2.14 it sits in the
    # condition (one group more)
    assert ir.enclosing_groups("score") == ir.enclosing_groups("evaluate")
    assert ir.parameter_source("push", "blessed")[0] == "evaluate"
    assert "blessed" not in ir.task("score").inputs.parameters
    newest = Ir(kfp_compiler.compile_pipeline(taxi, tmp_path / "n.yaml", steps=TABLE,
                                              push_base_path="gs://bucket/models",
                                              kfp_backend="2.17").path)
    assert newest.enclosing_groups("push") == newest.enclosing_groups("score")
    assert newest.parameter_source("push", "blessed")[0] == "evaluate"
    assert "blessed" not in newest.task("score").inputs.parameters
    gated = Ir(kfp_compiler.compile_pipeline(taxi, tmp_path / "g.yaml", steps=TABLE,
                                             push_base_path="gs://bucket/models",
                                             kfp_backend="2.13").path)
    assert len(gated.enclosing_groups("push")) == len(gated.enclosing_groups("score")) + 1
    assert "blessed" not in gated.task("push").inputs.parameters
    # a compile option names the new step like any other
    again = kfp_compiler.compile_pipeline(taxi, tmp_path / "q.yaml", steps=TABLE,
                                          push_base_path="gs://bucket/models",
                                          caching={"score": True})
    assert Ir(again.path).task("score").caching_options.enable_cache


def test_the_local_runner_runs_the_new_row_and_records_its_summary(taxi, tmp_path):
    """The planned row runs through ``python -m``; its summary file's scalars are the step's
    metrics in the run record. The model it reads comes from a stand-in train step (no
    TensorFlow here); the fingerprint step is left out (the steps then run unkeyed)."""
    planned = build_plan(taxi.pipeline, source_root="ROOT", steps=TABLE).step("score")
    train = PlannedStep(name="train", module="tests.pipelines.fake_step", inputs=(),
                        outputs=("model",), description="stand-in train",
                        options=(("name", "train"), ("writes", "model")))
    plan = dataclasses.replace(build_plan(taxi.pipeline, source_root="ROOT", steps=TABLE),
                               steps=(train, planned), fingerprint=None)
    record = runs.RunRecord.start(tmp_path / "run", taxi.pipeline.name, version="test")
    lines: list[str] = []
    result = local_runner.run_plan(plan, tmp_path / "run", echo=lines.append,
                                   env={"PYTHONPATH": str(REPO)}, record=record)
    summary = json.loads((result.artifacts["scores"] / new_step.SUMMARY).read_text())
    assert summary == {"pipeline": taxi.pipeline.name, "threshold": 0.5, "model_files": 1}
    assert record.data["steps"]["score"]["status"] == "ran"
    assert record.data["steps"]["score"]["metrics"] == summary
    assert any(line.startswith("==> step 2/2: score (score the trained model") for line in lines)


def test_a_row_contradicting_itself_is_refused_by_name():
    with pytest.raises(ValueError, match=r"step 'odd'.*caching: expected False for a step "
                                         r"with side_effects"):
        Step("odd", "m", (), ("x",), "odd", side_effects=True)
    with pytest.raises(ValueError, match=r"step 'odd'.*ui_outputs\['u'\]\.kind: expected one "
                                         r"of \['metrics', 'classification', 'html'\], "
                                         r"received 'plot'"):
        Step("odd", "m", (), ("x",), "odd", ui_outputs=(UiOutput("u", "plot", "x", "f.json"),))


def test_a_gate_on_a_step_without_a_result_is_refused_by_name(taxi):
    gated = dataclasses.replace(new_step.ROW, runs_if="train")
    with pytest.raises(ValueError, match=r"runs_if='train' for step 'score', expected an "
                                         r"earlier step with a result"):
        build_plan(taxi.pipeline, source_root="ROOT",
                   steps=(*TRAINING_STEPS[:4], gated, *TRAINING_STEPS[4:]))
