"""On Kubeflow, a pipeline declaring data checks runs the validate task after ingest, and the
train task waits for it: a blocking anomaly fails validate, so training never starts."""

import dataclasses

import yaml

import estflow.dsl as ef
from estflow.pipelines.examples import taxi
from estflow.pipelines.kfp_compiler import compile_pipeline


def _dag(pipeline, tmp_path):
    out = tmp_path / "p.yaml"
    compile_pipeline(pipeline, out, push_base_path="gs://bucket/models")
    spec = next(yaml.safe_load_all(out.read_text()))
    return spec["components"]["comp-exit-handler-1"]["dag"]["tasks"]


def test_the_train_task_is_gated_by_the_data_checks(tmp_path):
    checked = dataclasses.replace(taxi.pipeline, checks=ef.DataChecks(drift_linf=0.2))
    tasks = _dag(checked, tmp_path)
    assert "ingest" in tasks["validate"]["dependentTasks"]
    assert "validate" in tasks["train"]["dependentTasks"]


def test_without_checks_there_is_no_validate_task(tmp_path):
    assert "validate" not in _dag(taxi.pipeline, tmp_path)
