"""On Kubeflow, a pipeline declaring data checks runs the validate task after ingest, and the
train task waits for it: a blocking anomaly fails validate, so training never starts."""

import dataclasses

import yaml

import estflow.dsl as ef
from estflow.pipelines.examples import taxi
from estflow.pipelines.kubeflow.compiler import compile_pipeline


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


def _with_spans(last: int = 1):
    source = dataclasses.replace(taxi.pipeline.source, path="gs://b/trips/{span:%Y-%m-%d}/*.csv",
                                 spans=ef.Spans(last=last))
    return dataclasses.replace(taxi.pipeline, source=source, checks=ef.DataChecks())


def _compiled(pipeline, tmp_path, backend: str) -> dict:
    out = tmp_path / f"p-{backend}.yaml"
    compile_pipeline(pipeline, out, push_base_path="gs://bucket/models", kfp_backend=backend)
    return next(yaml.safe_load_all(out.read_text()))


def test_the_schedule_time_selects_the_span_where_the_backend_resolves_it(tmp_path):
    spec = _compiled(_with_spans(last=7), tmp_path, "2.17.0")
    assert spec["root"]["inputDefinitions"]["parameters"]["span"]["defaultValue"] == ""
    task = spec["components"]["comp-exit-handler-1"]["dag"]["tasks"]["fingerprint"]
    given = task["inputs"]["parameters"]
    assert given["schedule_time"]["runtimeValue"]["constant"] == \
        "{{$.pipeline_job_schedule_time_utc}}"
    assert given["span"]["componentInputParameter"] == "pipelinechannel--span"
    executor = spec["deploymentSpec"]["executors"]["exec-fingerprint"]["container"]
    source = "\n".join(executor["command"] + executor.get("args", []))
    assert "'--span', span" in source and "'--schedule-time', schedule_time" in source


def test_before_2_17_the_span_is_a_run_parameter_and_no_schedule_time_is_given(tmp_path):
    spec = _compiled(_with_spans(), tmp_path, "2.14.0")
    given = spec["components"]["comp-exit-handler-1"]["dag"]["tasks"]["fingerprint"][
        "inputs"]["parameters"]
    assert given["schedule_time"]["runtimeValue"]["constant"] == ""
    assert "span" in spec["root"]["inputDefinitions"]["parameters"]


def test_a_source_without_spans_has_no_span_parameter(tmp_path):
    spec = _compiled(taxi.pipeline, tmp_path, "2.17.0")
    assert "span" not in spec["root"]["inputDefinitions"]["parameters"]
    given = spec["components"]["comp-exit-handler-1"]["dag"]["tasks"]["fingerprint"][
        "inputs"]["parameters"]
    assert "schedule_time" not in given
