"""The exit handler's ``report`` task ends SUCCEEDED or FAILED, never UNKNOWN, on KFP backends
2.14-2.17 (issue 34, item 3): for a blessed model, one not blessed, a failing push, and a task
killed before it reports.

What the backends do, read in kubeflow/pipelines at tag 2.17.0 (commit
4a3592cb2dd0a91a4652ab93893ec8beda1f3158); the same code at 2.14.0 (38c49cc125db), 2.15.0
(8fe8d7bdd88f) and 2.16.0 (e4ebca310f40):

* ``backend/src/v2/driver/resolve.go`` (``resolveInputParameter``, the ``TaskFinalStatus``
  case): the exit task's ``PipelineTaskFinalStatus.state`` is the MLMD last-known state of the
  exit handler's DAG execution (``producer.GetExecution().GetLastKnownState().String()``),
  ``pipeline_job_resource_name`` is ``opts.RunName``, the Argo workflow's name
  (``argocompiler/argo.go``: ``runResourceName`` = ``{{workflow.name}}``), not the run id, and
  the error is empty (a TODO). A constant ``{{$.pipeline_job_uuid}}`` resolves to
  ``opts.RunID`` (``{{workflow.uid}}``, which the API server replaces with the run's id:
  ``apiserver/template/v2_template.go``, ``ReplaceUID``): the compiler passes the report the
  run id so.
* ``backend/src/v2/metadata/client.go``: ``CreateExecution`` starts every execution RUNNING;
  ``UpdateDAGExecutionsState`` moves a DAG to COMPLETE or FAILED, and its only caller is the
  launcher's deferred publish (``backend/src/v2/component/launcher_v2.go``). A pod killed
  before that (SIGKILL, eviction, ``activeDeadlineSeconds``, an image never pulled) leaves the
  exit handler's DAG RUNNING, and the report is passed ``RUNNING``.
* ``backend/api/v2beta1/run.proto``: ``Run.run_details.task_details`` (``PipelineTaskDetail``:
  ``display_name``, ``state`` a ``RuntimeState``, ``error`` a ``google.rpc.Status``,
  ``child_tasks``); ``RuntimeState`` is RUNTIME_STATE_UNSPECIFIED, PENDING, RUNNING,
  SUCCEEDED, SKIPPED, FAILED, CANCELING, CANCELED, PAUSED. The API server builds the task
  details from the Argo workflow's nodes (``apiserver/server/api_converter.go``,
  ``toModelTasks``; ``apiserver/model/run.go``, ``ToV2``: Argo's Failed and Error are FAILED),
  so a pod that died is FAILED there though MLMD says RUNNING; ``toApiPipelineTaskDetail``
  sets no ``pod_name`` (no pod to look up: a task still RUNNING once the exit handler has
  ended is taken as gone).
* ``backend/src/v2/compiler/argocompiler/dag.go``: the exit task runs as the Argo exit
  lifecycle hook of the exit handler's DAG task (template ``exit-hook-root-report``; Argo
  names its node ``exit-handler-1.onExit``); a container task is a ``<task>-driver`` pod and a
  ``<task>`` DAG whose pod node is ``executor``; the entrypoint runs ``root-driver`` and
  ``root``. A task whose driver finds its condition false is created CANCELED
  (``CreateExecution``, ``NotTriggered``) and no launcher updates the DAG after it: hence no
  ``dsl.If`` around the exit handler's children on 2.14+ (checked on the IR below).
* ``sdk/python/kfp/dsl/task_final_status.py``: ``PipelineTaskFinalStatus(state,
  pipeline_job_resource_name, pipeline_task_name, error_code, error_message)``; kfp 2.17.3's
  executor (``kfp/dsl/executor.py``) reads the driver's camelCase JSON into it.
* kfp.local (kfp 2.17.3, ``kfp/local/orchestrator/orchestrator_utils.py``) passes SUCCEEDED or
  FAILED (a task's process killed by SIGKILL is a failed task) and resolves
  ``{{$.pipeline_job_uuid}}`` (``kfp/local/placeholder_utils.py``).

The tests: the whole compiled pipeline under kfp.local's SubprocessRunner (stand-in steps,
:mod:`kfp_local_fakes`) for each backend and each case, the SIGKILL one included; the IR of
each backend read back (the report's wiring, no condition anywhere); and what kfp.local cannot
play, a backend passing RUNNING: the report task's own code, taken from each backend's IR, run
as its pod runs it (``sh -ec`` + ``kfp.dsl.executor_main`` with the executor input the 2.17
driver writes) or called in-process, against a fake KFP API on 127.0.0.1
(:class:`fake_kfp_api.FakeKfpApi`, started and stopped by each test) serving run details where
a task FAILED, stayed RUNNING, showed late, or all ended; and with the API unreachable or
refusing. The report never prints UNKNOWN as the outcome.

Not blessed: the report says SUCCEEDED; the push task says ``not pushed`` (an exit task can
take no input from a task inside its exit handler, and the API's task details carry no output
parameter, so the report cannot tell a skipped push from a done one).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from kfp import dsl
from kfp.pipeline_spec import pipeline_spec_pb2

from estflow.pipelines import loader
from estflow.pipelines.kubeflow import backend as kfp_backends
from estflow.pipelines.kubeflow import compiler as kfp_compiler
from estflow.pipelines.kubeflow import tasks as kfp_tasks
from tests.pipelines import exit_outcome_fakes as fakes
from tests.pipelines import kfp_local_fakes
from tests.pipelines.fake_kfp_api import FakeKfpApi
from tests.pipelines.fake_kfp_api import task
from tests.pipelines.kfp_ir import ROOT
from tests.pipelines.kfp_ir import Ir

TAXI = "estflow.pipelines.examples.taxi"
BACKENDS = ("2.14", "2.15", "2.16", "2.17")
HEADLINE = re.compile(r"estflow pipeline chicago-taxi finished: ([A-Z]+)")
EXIT_HANDLER = "exit-handler-1"
RUN_ID = "6f0c1e2a-5b1d-4c8e-9a57-0d3e2f1b7c44"
Policy = pipeline_spec_pb2.PipelineTaskSpec.TriggerPolicy


def outcomes(output: str) -> list[str]:
    """The states the report's headlines name (each must be SUCCEEDED or FAILED)."""
    return HEADLINE.findall(output)


# --- kfp.local: the whole pipeline --------------------------------------------------------------

@pytest.fixture(scope="module", params=BACKENDS)
def stand_ins(request, tmp_path_factory):
    """The taxi pipeline compiled for a backend with stand-in steps, each of which can be
    SIGKILLed (``spec["kill"]``)."""
    folder = tmp_path_factory.mktemp(f"kfp-{request.param}")
    yaml_path = kfp_local_fakes.compile_with_stand_ins(loader.load(TAXI).pipeline, folder,
                                                       kfp_backend=request.param)
    fakes.add_kill_switch(folder)
    return folder, yaml_path


def _run(stand_ins, tmp_path: Path, spec: dict) -> tuple[int, list[str], str]:
    folder, yaml_path = stand_ins
    run_folder = tmp_path / "run"
    run_folder.mkdir()
    (run_folder / kfp_local_fakes.PACKAGE).symlink_to(folder / kfp_local_fakes.PACKAGE)
    return kfp_local_fakes.run(yaml_path, run_folder, spec)


def test_blessed_run_reports_succeeded(stand_ins, tmp_path):
    status, ran, output = _run(stand_ins, tmp_path, {"blessed": True})
    assert status == 0, output[-4000:]
    assert ran == ["ingest", "transform", "train", "evaluate", "push"]
    assert outcomes(output) == ["SUCCEEDED"]
    assert "not pushed" not in output


def test_not_blessed_run_reports_succeeded_and_not_pushed(stand_ins, tmp_path):
    status, ran, output = _run(stand_ins, tmp_path, {"blessed": False})
    assert status == 0, output[-4000:]
    assert ran == ["ingest", "transform", "train", "evaluate"]
    assert "estflow step push: skipped: blessed is False (not pushed)" in output
    assert outcomes(output) == ["SUCCEEDED"]


def test_failing_push_reports_failed(stand_ins, tmp_path):
    status, ran, output = _run(stand_ins, tmp_path, {"blessed": True, "fail": "push"})
    assert status != 0
    assert ran == ["ingest", "transform", "train", "evaluate", "push"]
    assert outcomes(output) == ["FAILED"]


def test_a_task_killed_before_it_reports_is_reported_failed(stand_ins, tmp_path):
    """train's process SIGKILLs itself once started: it writes no executor output and exits
    with no code of its own; nothing after it runs, and the report says FAILED."""
    status, ran, output = _run(stand_ins, tmp_path, {"blessed": True, "kill": "train"})
    assert status != 0
    assert ran == ["ingest", "transform", "train"]
    [train] = (tmp_path / "run" / "root").glob("*/train")
    assert not (train / "executor_output.json").exists()
    assert outcomes(output) == ["FAILED"]


# --- the IR of each backend, read back ----------------------------------------------------------

def _compile_with_user_steps(version: str, folder: Path) -> Ir:
    """The taxi pipeline with user steps gated on a result and on the blessing, compiled for
    KFP backend ``version``."""
    pipeline = dataclasses.replace(loader.load(TAXI).pipeline, steps=fakes.USER_STEPS)
    path = folder / f"taxi-{version}.yaml"
    kfp_compiler.compile_pipeline(pipeline, path, image="registry.example.com/estflow:1",
                                  push_base_path="gs://bucket/models", kfp_backend=version)
    return Ir(path)


@pytest.fixture(scope="module", params=BACKENDS)
def compiled(request, tmp_path_factory):
    return kfp_backends.parse(request.param), _compile_with_user_steps(
        request.param, tmp_path_factory.mktemp("ir"))


def _conditions(ir: Ir) -> dict[str, str]:
    """Every task of every DAG whose trigger policy has a condition (a dsl.If)."""
    found = {}
    for name, spec in {**ir.tasks(), **ir.groups()}.items():
        if spec.trigger_policy.condition:
            found[name] = spec.trigger_policy.condition
    return found


def test_the_report_is_the_exit_task_taking_the_final_status_and_the_run_id(compiled):
    target, ir = compiled
    report = ir.task(kfp_tasks.REPORT)
    assert ir.dag_of(kfp_tasks.REPORT) == ROOT
    assert report.trigger_policy.strategy == Policy.ALL_UPSTREAM_TASKS_COMPLETED
    assert list(report.dependent_tasks) == [EXIT_HANDLER]
    assert report.inputs.parameters["status"].task_final_status.producer_task == EXIT_HANDLER
    run_id = report.inputs.parameters[kfp_tasks.RUN_ID_INPUT].runtime_value.constant
    assert run_id.string_value == dsl.PIPELINE_JOB_ID_PLACEHOLDER == "{{$.pipeline_job_uuid}}"
    inputs = ir.spec.components["comp-report"].input_definitions.parameters
    assert inputs["status"].parameter_type == pipeline_spec_pb2.ParameterType.TASK_FINAL_STATUS
    assert inputs[kfp_tasks.RUN_ID_INPUT].parameter_type == \
        pipeline_spec_pb2.ParameterType.STRING
    assert inputs[kfp_tasks.RUN_ID_INPUT].is_optional  # called without it: no API lookup
    assert not report.caching_options.enable_cache
    assert ir.groups()[EXIT_HANDLER].component_ref.name == "comp-exit-handler-1"
    assert kfp_backends.required(ir.documents) <= target


def test_no_condition_group_around_the_exit_handlers_children(compiled):
    """From 2.14 on no task or group carries a condition (the 2.17 driver creates a false
    condition's DAG CANCELED and nothing updates the exit handler's DAG after it): every step,
    gated ones included, sits directly in the exit handler's DAG and takes its gate as an
    input."""
    target, ir = compiled
    assert _conditions(ir) == {}
    assert set(ir.groups()) == {EXIT_HANDLER}
    for step in ("ingest", "transform", "train", "evaluate", "push", "business-check",
                 "record", "announce"):
        assert ir.enclosing_groups(step) == [EXIT_HANDLER], step
    assert ir.parameter_source("push", "blessed") == ("evaluate", "Output")
    assert kfp_backends.EXIT_HANDLER_STATE not in kfp_backends.features_used(ir.documents)


def test_the_condition_check_finds_dsl_if_groups(tmp_path):
    """The contrast: for 2.13 (the report reads no final status) gated steps run in dsl.If
    groups, which the check above finds."""
    ir = _compile_with_user_steps("2.13", tmp_path)
    assert _conditions(ir)
    assert ir.enclosing_groups("push")[0] != EXIT_HANDLER


# --- a backend passing RUNNING: the report's code from the IR, against a fake KFP API -----------

@pytest.fixture(scope="module", params=BACKENDS)
def report_ir(request, tmp_path_factory):
    path = tmp_path_factory.mktemp("report") / f"taxi-{request.param}.yaml"
    kfp_compiler.compile_pipeline(loader.load(TAXI), path, push_base_path="gs://bucket/models",
                                  image="registry.example.com/estflow:1",
                                  kfp_backend=request.param)
    return Ir(path)


@pytest.fixture
def report(report_ir, monkeypatch):
    """The compiled report function, with a short settling time."""
    monkeypatch.setenv(kfp_tasks.SETTLE_ENV, "0.5")
    monkeypatch.delenv("KF_PIPELINES_SA_TOKEN_PATH", raising=False)
    namespace: dict = {}
    exec(report_ir.container(kfp_tasks.REPORT)["command"][-1], namespace)
    return namespace[kfp_tasks.REPORT]


def _status(state: str) -> dsl.PipelineTaskFinalStatus:
    return dsl.PipelineTaskFinalStatus(state=state, pipeline_job_resource_name=fakes.WORKFLOW,
                                       pipeline_task_name=EXIT_HANDLER, error_code=None,
                                       error_message=None)


def _reported(capsys) -> tuple[str, str, dict]:
    out = capsys.readouterr().out
    assert outcomes(out) and set(outcomes(out)) <= {"SUCCEEDED", "FAILED"}, out
    assert "UNKNOWN" not in out.splitlines()[-2]
    return outcomes(out)[-1], out, json.loads(out.splitlines()[-1])


def _api_with_run(details: list[dict] | None = None, **options) -> FakeKfpApi:
    api = FakeKfpApi(**options)
    run = {"run_id": RUN_ID, "display_name": "taxi", "state": "RUNNING"}
    if details is not None:
        run["run_details"] = {"task_details": details}
    api.runs[RUN_ID] = run
    return api


@pytest.mark.parametrize("state", ["RUNNING", "UNKNOWN", "NEW", ""])
def test_a_task_failed_without_reporting_is_reported_failed(report, capsys, monkeypatch, state):
    """The backend passes RUNNING (or another state it leaves unset): the API shows train
    FAILED (its pod evicted), so the report says FAILED and why."""
    details = fakes.task_details({"train": "FAILED", "evaluate": "RUNTIME_STATE_UNSPECIFIED",
                                  "push": "RUNTIME_STATE_UNSPECIFIED"},
                                 errors={"train": "pod evicted: the node was low on memory"},
                                 exit_handler="FAILED")
    with _api_with_run(details) as api:
        monkeypatch.setenv("KF_PIPELINES_ENDPOINT", api.url)
        report(status=_status(state), run_id=RUN_ID)
    outcome, out, summary = _reported(capsys)
    assert outcome == "FAILED"
    assert "train FAILED: pod evicted: the node was low on memory" in out
    assert summary["state"] == "FAILED" and summary["backend_state"] == state
    assert summary["run_id"] == RUN_ID and summary["tasks"]["train"] == "FAILED"
    assert ("GET", f"/apis/v2beta1/runs/{RUN_ID}") in api.requests


def test_a_task_stuck_running_is_reported_failed(report, capsys, monkeypatch):
    """train's pod is gone but the API still shows it RUNNING past the settling time."""
    details = fakes.task_details({"train": "RUNNING", "evaluate": "PENDING"},
                                 exit_handler="RUNNING")
    with _api_with_run(details) as api:
        monkeypatch.setenv("KF_PIPELINES_ENDPOINT", api.url)
        report(status=_status("RUNNING"), run_id=RUN_ID)
    outcome, out, summary = _reported(capsys)
    assert outcome == "FAILED"
    assert "task(s) evaluate, exit-handler-1, train still PENDING/RUNNING 0.5s after the exit " \
        "handler ended: the pod is gone without reporting" in out
    assert summary["tasks"]["train"] == "RUNNING"
    assert len([r for r in api.requests if r[1].startswith("/apis/v2beta1/runs/")]) > 1


def test_the_api_lagging_behind_is_waited_for(report, capsys, monkeypatch):
    """The persistence agent copies the workflow's nodes a little late: the first answer shows
    train RUNNING, the next one FAILED (``run_script``)."""
    monkeypatch.setenv(kfp_tasks.SETTLE_ENV, "30")
    with _api_with_run() as api:
        api.run_script = [
            {"run_details": {"task_details": fakes.task_details({"train": "RUNNING"})}},
            {"run_details": {"task_details": fakes.task_details(
                {"train": "FAILED"}, errors={"train": "OOMKilled"}, exit_handler="FAILED")}}]
        monkeypatch.setenv("KF_PIPELINES_ENDPOINT", api.url)
        report(status=_status("RUNNING"), run_id=RUN_ID)
    outcome, out, _ = _reported(capsys)
    assert outcome == "FAILED" and "train FAILED: OOMKilled" in out
    assert "shows task(s) train still RUNNING; asking again" in out


def test_every_task_ended_is_reported_succeeded(report, capsys, monkeypatch):
    """A DAG the backend left RUNNING though every task ended (a launcher that could not update
    it): SUCCEEDED. A failed attempt of a retried task (``executor(0)``) is not a failure: its
    retry node carries the outcome; the report's own nodes are running."""
    details = [*fakes.task_details({}), task("executor(0)", "FAILED", error="retried"),
               task("executor(1)", "SUCCEEDED")]
    with _api_with_run(details) as api:
        monkeypatch.setenv("KF_PIPELINES_ENDPOINT", api.url)
        report(status=_status("RUNNING"), run_id=RUN_ID)
    outcome, out, summary = _reported(capsys)
    assert outcome == "SUCCEEDED"
    assert "the KFP API shows every task of run" in out
    assert "report" not in summary["tasks"] and fakes.WORKFLOW not in summary["tasks"]
    assert summary["tasks"]["push"] == "SUCCEEDED"


def test_a_canceled_task_is_reported_failed(report, capsys, monkeypatch):
    with _api_with_run(fakes.task_details({"evaluate": "CANCELED"})) as api:
        monkeypatch.setenv("KF_PIPELINES_ENDPOINT", api.url)
        report(status=_status("RUNNING"), run_id=RUN_ID)
    outcome, out, _ = _reported(capsys)
    assert outcome == "FAILED" and "evaluate CANCELED" in out


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_an_unreachable_api_is_reported_failed_with_the_reason(report, capsys, monkeypatch):
    url = f"http://127.0.0.1:{_closed_port()}"
    monkeypatch.setenv("KF_PIPELINES_ENDPOINT", url)
    report(status=_status("RUNNING"), run_id=RUN_ID)
    outcome, out, summary = _reported(capsys)
    assert outcome == "FAILED"
    assert f"the KFP API at {url} cannot be reached to read run {RUN_ID}'s tasks " \
           "(ConnectionRefusedError" in out
    assert summary["kfp_api"] == url


def test_the_default_api_is_the_in_cluster_service(report, capsys, monkeypatch):
    monkeypatch.delenv("KF_PIPELINES_ENDPOINT", raising=False)
    monkeypatch.setattr(socket, "create_connection", _refuse)
    report(status=_status("RUNNING"), run_id=RUN_ID)
    outcome, out, summary = _reported(capsys)
    assert outcome == "FAILED"
    assert summary["kfp_api"] == kfp_tasks.KFP_API == "http://ml-pipeline.kubeflow:8888"
    assert "cannot be reached" in out


def _refuse(address, timeout=None):
    assert address == ("ml-pipeline.kubeflow", 8888) and timeout
    raise ConnectionRefusedError(111, "Connection refused")


def test_an_api_refusing_is_reported_failed_with_a_hint(report, capsys, monkeypatch):
    """Multi-user Kubeflow without a pipelines token: 401, at once (no waiting)."""
    with _api_with_run(fakes.task_details({}), users={"alice": {"team"}}) as api:
        monkeypatch.setenv("KF_PIPELINES_ENDPOINT", api.url)
        report(status=_status("RUNNING"), run_id=RUN_ID)
    outcome, out, _ = _reported(capsys)
    assert outcome == "FAILED"
    assert "refused to show run" in out and "HTTP 401" in out
    assert "audience pipelines.kubeflow.org" in out


def test_an_api_listing_no_task_is_reported_failed(report, capsys, monkeypatch):
    with _api_with_run([]) as api:
        monkeypatch.setenv("KF_PIPELINES_ENDPOINT", api.url)
        report(status=_status("RUNNING"), run_id=RUN_ID)
    outcome, out, _ = _reported(capsys)
    assert outcome == "FAILED" and f"lists no task of run {RUN_ID}" in out


def test_no_run_id_is_reported_failed(report, capsys):
    report(status=_status("RUNNING"))
    outcome, out, _ = _reported(capsys)
    assert outcome == "FAILED" and "no run id" in out


@pytest.mark.parametrize("state, outcome", [("COMPLETE", "SUCCEEDED"), ("CACHED", "SUCCEEDED"),
                                            ("FAILED", "FAILED"), ("SUCCEEDED", "SUCCEEDED")])
def test_a_final_state_is_reported_without_asking_the_api(report, capsys, monkeypatch, state,
                                                          outcome):
    with _api_with_run(fakes.task_details({"train": "FAILED"})) as api:
        monkeypatch.setenv("KF_PIPELINES_ENDPOINT", api.url)
        report(status=_status(state), run_id=RUN_ID)
    assert _reported(capsys)[0] == outcome
    assert api.requests == []


def test_the_report_pod_resolves_running_as_the_driver_passes_it(report_ir, tmp_path):
    """The report task's container as its pod runs it: the IR's ``sh -ec`` command and args,
    ``{{$}}`` the executor input the driver writes (the final status as protojson, camelCase,
    error empty; the run id resolved), the API at ``KF_PIPELINES_ENDPOINT``."""
    container = report_ir.container(kfp_tasks.REPORT)
    executor_input = {
        "inputs": {"parameterValues": {
            "status": {"state": "RUNNING", "pipelineJobResourceName": fakes.WORKFLOW,
                       "pipelineTaskName": EXIT_HANDLER, "error": {}},
            kfp_tasks.RUN_ID_INPUT: RUN_ID}},
        "outputs": {"outputFile": str(tmp_path / "executor_output.json")}}
    args = [json.dumps(executor_input) if a == "{{$}}" else a for a in container["args"]]
    details = fakes.task_details({"push": "FAILED"}, errors={"push": "pod deleted"},
                                 exit_handler="FAILED")
    with _api_with_run(details) as api:
        env = {**kfp_local_fakes.env(), "KF_PIPELINES_ENDPOINT": api.url,
               kfp_tasks.SETTLE_ENV: "0.5",
               "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]])}
        result = subprocess.run([*container["command"], *args], env=env, capture_output=True,
                                text=True, timeout=120, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-4000:]
    assert outcomes(result.stdout) == ["FAILED"], result.stdout
    assert "push FAILED: pod deleted" in result.stdout
    [summary] = [json.loads(line) for line in result.stdout.splitlines()
                 if line.startswith('{"backend_state"')]
    assert summary["pipeline_job"] == fakes.WORKFLOW and summary["run_id"] == RUN_ID
