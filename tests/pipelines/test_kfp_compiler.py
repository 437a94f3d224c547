"""The KFP compiler: strict IR, loads back in kfp, the DAG and its wiring, the blessing gate and
the exit handler, determinism, goldens. Resources per task: test_kfp_resources.py.

Assertions read the compiled YAML as data (parsed strictly into the KFP protos, see
:mod:`kfp_ir`), never as text, except the golden comparison, which is byte-for-byte on purpose.
"""

import dataclasses
import importlib.util
import inspect
import json
import re
import subprocess
import sys
import textwrap
import types
from importlib import metadata
from pathlib import Path

import kfp.components
import pytest
import yaml
from google.protobuf import json_format
from kfp import compiler
from kfp import dsl
from kfp.pipeline_spec import pipeline_spec_pb2

import estflow.components
import estflow.dsl as ef
from estflow.dsl.contracts import STEPS
from estflow.dsl.contracts import Files
from estflow.dsl.contracts import step_named
from estflow.pipelines import loader
from estflow.pipelines.kubeflow import compiler as kfp_compiler
from estflow.pipelines.kubeflow import components as kfp_components
from estflow.pipelines.kubeflow import goldens
from estflow.pipelines.kubeflow import tasks as kfp_tasks
from estflow.pipelines.plan import build_plan
from tests.pipelines import kfp_local_fakes
from tests.pipelines.kfp_ir import ROOT
from tests.pipelines.kfp_ir import Ir
from tests.pipelines.kfp_ir import as_golden
from tests.pipelines.kfp_ir import parse_strict

TAXI = "estflow.pipelines.examples.taxi"
IMAGE = "registry.example.com/team/estflow:test-1"
BUCKET = "gs://estflow-examples/serving_models"
STEP_NAMES = ("ingest", "transform", "train", "evaluate", "push")
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def taxi():
    """The taxi example pushing to a bucket (its own push target is a local directory, which
    a Kubeflow task cannot reach: see test_kfp_cache.py)."""
    loaded = loader.load(TAXI)
    loaded.pipeline = dataclasses.replace(loaded.pipeline, push=dataclasses.replace(
        loaded.pipeline.push, base_path=BUCKET))
    return loaded


@pytest.fixture(scope="module")
def compiled(taxi, tmp_path_factory):
    """The taxi example compiled with a non-default image: (path, YAML documents)."""
    path = tmp_path_factory.mktemp("kfp") / "taxi.yaml"
    result = kfp_compiler.compile_pipeline(taxi, path, image=IMAGE)
    assert result.path == path
    assert result.tasks == STEP_NAMES
    return path, list(yaml.safe_load_all(path.read_text()))


@pytest.fixture(scope="module")
def ir(compiled):
    return Ir(compiled[0])


@pytest.fixture(scope="module")
def spec(ir):
    """The PipelineSpec proto, parsed strictly (unknown or misspelled fields fail)."""
    return ir.spec


def _compile(pipeline, path, **options) -> Ir:
    return Ir(kfp_compiler.compile_pipeline(pipeline, path, **options).path)


# --- the IR is valid ----------------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(goldens.GOLDENS))
def test_yaml_is_a_pipeline_spec_then_a_platform_spec_both_strict(name, tmp_path):
    """Both goldens' targets: two documents, each parsed strictly, and every task's kubernetes
    executor config parses strictly into kfp-kubernetes' own proto."""
    path = tmp_path / name
    goldens.render(goldens.GOLDENS[name], path)
    documents = list(yaml.safe_load_all(path.read_text()))
    assert len(documents) == 2
    spec = parse_strict(documents[0], pipeline_spec_pb2.PipelineSpec())
    assert spec.schema_version == "2.1.0"
    platform = parse_strict(documents[1], pipeline_spec_pb2.PlatformSpec())
    assert list(platform.platforms) == ["kubernetes"]
    ir = Ir(path)
    assert kfp.components.load_component_from_file(str(path)).platform_spec == platform
    executors = documents[1]["platforms"]["kubernetes"]["deploymentSpec"]["executors"]
    assert set(executors) == {ir.executor_label(t) for t in ir.tasks()}
    for task in ir.tasks():
        assert ir.k8s(task).pod_metadata.labels["app.kubernetes.io/part-of"] == "estflow"


def test_strict_parse_rejects_a_misspelled_field(compiled):
    """The strict parse is a real check: one misspelled field fails it, in either document."""
    documents = json.loads(json.dumps(compiled[1]))
    steps = documents[0]["components"]["comp-exit-handler-1"]["dag"]["tasks"]
    steps["train"]["dependentTask"] = ["transform"]
    with pytest.raises(json_format.ParseError, match="dependentTask"):
        parse_strict(documents[0], pipeline_spec_pb2.PipelineSpec())
    executors = documents[1]["platforms"]["kubernetes"]["deploymentSpec"]["executors"]
    executors["exec-train"]["podMetadata"]["label"] = {}
    from kfp.kubernetes import kubernetes_executor_config_pb2 as k8s_pb2
    with pytest.raises(json_format.ParseError, match="label"):
        parse_strict(executors["exec-train"], k8s_pb2.KubernetesExecutorConfig())


def test_loads_back_with_kfp(compiled, taxi):
    component = kfp.components.load_component_from_file(str(compiled[0]))
    assert component.name == "chicago-taxi"
    inputs = component.component_spec.inputs
    assert set(inputs) == {"spec", "source_root", "beam_options"}
    assert ef.Pipeline.from_json(inputs["spec"].default) == taxi.pipeline
    assert inputs["source_root"].default == f"module:{TAXI}"
    assert component.platform_spec.platforms["kubernetes"]


# --- the tasks ----------------------------------------------------------------------------------

def test_one_task_per_planned_step_named_and_displayed_as_the_step(ir):
    tasks = ir.tasks()
    assert set(tasks) == set(STEP_NAMES) | {"report", "fingerprint"}
    for name in STEP_NAMES:
        assert tasks[name].task_info.name == name
        assert tasks[name].component_ref.name == f"comp-{name}"


def test_every_executor_runs_in_the_configured_image_without_installing_anything(ir):
    for name in ir.tasks():
        container = ir.container(name)
        small = name == "report" or name.endswith("-placement")  # no TF, no Beam: slim image
        assert container["image"] == (kfp_compiler.small_image_for(IMAGE) if small else IMAGE)
        command = container["command"]
        assert "python3 -m kfp.dsl.executor_main" in command[2]  # a lightweight component
        assert "pip install" not in " ".join(command)  # the image already has estflow and kfp
        assert not re.search(r"^\s*(import|from) (tensorflow|apache_beam)", command[-1], re.M)


def test_every_step_runs_its_estflow_entry_point(ir):
    for name in STEP_NAMES:
        container = ir.container(name)
        assert f"from estflow.components import {name} as step" in container["command"][-1]
        assert container["args"][-2:] == ["--function_to_execute", name]


def _task_function(ir, name, monkeypatch, main):
    """The function task ``name`` ships, with ``estflow.components.<name>`` faked by ``main``."""
    fake = types.ModuleType(f"estflow.components.{name}")
    fake.main = main
    monkeypatch.setitem(sys.modules, fake.__name__, fake)
    monkeypatch.setattr(estflow.components, name, fake, raising=False)
    namespace: dict = {}
    exec(ir.container(name)["command"][-1], namespace)
    return namespace[name]


@pytest.mark.parametrize("step_name", STEP_NAMES)
def test_task_body_calls_main_with_the_plans_argv(ir, taxi, step_name, monkeypatch, tmp_path):
    """Execute the Python a task ships, against a recording fake of the step module: it calls
    ``main`` with exactly ``PlannedStep.argv`` (the local runner's arguments) and raises when
    ``main`` returns non-zero."""
    calls = []
    exit_codes = iter([0, 3])
    function = _task_function(ir, step_name, monkeypatch,
                              lambda argv: calls.append(argv) or next(exit_codes))
    step = build_plan(taxi.pipeline, source_root="ROOT", beam_options="BEAM",
                      sdk_image=IMAGE).step(step_name)
    paths = {a: str(tmp_path / a) for a in [a for a, _ in step.inputs] + list(step.outputs)}
    if step_name == "evaluate":  # its task returns the blessing the step wrote
        _write_blessing(Path(paths["evaluation"]), True)
    kwargs = {"spec": "SPEC", "source_root": "ROOT", "beam_options": "BEAM",
              "cache_key": "KEY", "model_fingerprint": "FP", "run": "RUN",
              "source_digest": "DIGEST", "blessed": True}  # push's gate (KFP 2.14 on)
    kwargs.update({a: dsl.Artifact(uri=p) for a, p in paths.items()})
    kwargs.update(_ui_outputs(step_name, tmp_path))
    kwargs = {k: v for k, v in kwargs.items() if k in inspect.signature(function).parameters}
    function(**kwargs)
    assert calls == [step.argv("SPEC", paths, late={"model_fingerprint": "FP", "run": "RUN",
                                                    "source_digest": "DIGEST"})]
    with pytest.raises(RuntimeError, match=f"estflow step {step_name} exited with code 3"):
        function(**kwargs)


def _ui_outputs(step_name: str, folder: Path) -> dict:
    """The KFP UI artifacts a step's task fills (evaluate's), as the executor passes them."""
    return {name: kind(name=name, uri=str(folder / name))
            for name, kind in kfp_components.ui_outputs(step_named(step_name))}


def _write_blessing(folder: Path, blessed) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / Files.BLESSING).write_text(json.dumps({"blessed": blessed, "reasons": []}))


@pytest.mark.parametrize("blessed", [True, False])
def test_evaluate_task_returns_the_blessing_the_step_wrote(ir, monkeypatch, tmp_path, blessed):
    function = _task_function(ir, "evaluate", monkeypatch, lambda argv: 0)
    _write_blessing(tmp_path / "evaluation", blessed)
    artifacts = {a: dsl.Artifact(uri=str(tmp_path / a))
                 for a in ("examples", "model", "evaluation")}
    assert function(spec="SPEC", cache_key="KEY", **artifacts,
                    **_ui_outputs("evaluate", tmp_path)) is blessed
    assert inspect.signature(function).return_annotation is bool


@pytest.mark.parametrize("content, match", [
    (None, "wrote no blessing.json"),
    ({"blessed": "yes", "reasons": []}, "blessed is not a bool"),
])
def test_evaluate_task_fails_without_a_valid_blessing(ir, monkeypatch, tmp_path, content, match):
    """No blessing, no push: a missing or malformed blessing fails the task (never pushes)."""
    function = _task_function(ir, "evaluate", monkeypatch, lambda argv: 0)
    (tmp_path / "evaluation").mkdir()
    if content is not None:
        (tmp_path / "evaluation" / Files.BLESSING).write_text(json.dumps(content))
    artifacts = {a: dsl.Artifact(uri=str(tmp_path / a))
                 for a in ("examples", "model", "evaluation")}
    with pytest.raises((RuntimeError, TypeError), match=match):
        function(spec="SPEC", cache_key="KEY", **artifacts, **_ui_outputs("evaluate", tmp_path))


def test_evaluate_task_logs_the_kfp_ui_artifacts_as_the_evaluate_step_would(
        ir, monkeypatch, tmp_path):
    """The KFP UI shows an Artifact as a download; metrics, ROC, confusion matrix and the HTML
    report need system.Metrics / ClassificationMetrics / HTML outputs with their metadata. The
    task fills them from the files the step wrote, logging exactly what
    components.evaluate.log_to_kfp logs (its own implementation, on the same files)."""
    from estflow.components.evaluate import __main__ as evaluate_step

    function = _task_function(ir, "evaluate", monkeypatch, lambda argv: 0)
    evaluation = tmp_path / "evaluation"
    _write_blessing(evaluation, True)
    (evaluation / Files.KFP_METRICS).write_text(json.dumps(kfp_local_fakes.UI_METRICS))
    (evaluation / Files.KFP_CLASSIFICATION).write_text(
        json.dumps(kfp_local_fakes.UI_CLASSIFICATION))
    (evaluation / Files.REPORT).write_text(kfp_local_fakes.UI_REPORT)
    outputs = _ui_outputs("evaluate", tmp_path / "task")
    (tmp_path / "task").mkdir()  # the KFP executor creates the outputs' folder
    artifacts = {a: dsl.Artifact(uri=str(tmp_path / a)) for a in ("examples", "model")}
    function(spec="SPEC", cache_key="KEY", evaluation=dsl.Artifact(uri=str(evaluation)),
             **artifacts, **outputs)
    expected_metrics, expected_classification = dsl.Metrics(), dsl.ClassificationMetrics()
    evaluate_step.log_to_kfp(str(evaluation), expected_metrics, expected_classification)
    assert outputs["metrics"].metadata == expected_metrics.metadata == {
        "accuracy": 0.5, "auc": 0.75, "examples": 4}
    assert outputs["classification"].metadata == expected_classification.metadata
    assert set(outputs["classification"].metadata) == {"confidenceMetrics", "confusionMatrix"}
    assert Path(outputs["html_report"].path).read_text() == kfp_local_fakes.UI_REPORT


# --- the DAG ------------------------------------------------------------------------------------

def test_dependencies_follow_the_artifacts(ir):
    """Each step's input artifacts come from the step producing them (through the groups)."""
    producers = {a: s.name for s in STEPS for a in s.outputs}
    for contract in (s for s in STEPS if s.name in STEP_NAMES):  # validate: no checks here
        task = ir.task(contract.name)
        wired = {a: ir.artifact_source(contract.name, a) for a in task.inputs.artifacts}
        assert wired == {a: (producers[a], a) for a in contract.inputs}
    steps = {n: sorted(ir.task(n).dependent_tasks) for n in STEP_NAMES if n != "push"}
    assert steps == {"ingest": ["fingerprint"], "transform": ["fingerprint", "ingest"],
                     "train": ["fingerprint", "transform"],
                     "evaluate": ["fingerprint", "ingest", "train"]}


@pytest.fixture(scope="module")
def ir_213(taxi, tmp_path_factory):
    """Compiled for KFP 2.13, before the exit task reads the final status: push sits under a
    dsl.If. From 2.14 on (2.17 included) it gates itself in the exit handler's DAG, since a
    dsl.If there leaves the run's state RUNNING (:func:`ir_gated`;
    tests/pipelines/test_kfp_backends.py)."""
    path = tmp_path_factory.mktemp("kfp") / "taxi-2.13.yaml"
    return Ir(kfp_compiler.compile_pipeline(taxi, path, image=IMAGE, kfp_backend="2.13").path)


@pytest.fixture(scope="module", params=["2.14", None, "2.17"], ids=["2.14", "default", "2.17"])
def ir_gated(request, taxi, tmp_path_factory):
    """Compiled for 2.14, the default backend and 2.17: push gates itself (no dsl.If)."""
    path = tmp_path_factory.mktemp("kfp") / f"taxi-{request.param}.yaml"
    options = {"kfp_backend": request.param} if request.param else {}
    return Ir(kfp_compiler.compile_pipeline(taxi, path, image=IMAGE, **options).path)


def test_steps_run_inside_the_exit_handler_and_push_inside_the_blessing_condition(ir_213):
    ir = ir_213
    groups = ir.groups()
    assert set(groups) == {"exit-handler-1", "condition-2"}
    assert ir.dag_of("exit-handler-1") == ROOT
    assert groups["exit-handler-1"].task_info.name == "chicago-taxi"
    for name in STEP_NAMES:
        expected = ["condition-2", "exit-handler-1"] if name == "push" else ["exit-handler-1"]
        assert ir.enclosing_groups(name) == expected


def test_from_2_14_every_step_push_included_runs_directly_in_the_exit_handler(ir_gated):
    ir = ir_gated
    groups = ir.groups()
    assert set(groups) == {"exit-handler-1"}
    assert ir.dag_of("exit-handler-1") == ROOT
    assert groups["exit-handler-1"].task_info.name == "chicago-taxi"
    for name in STEP_NAMES:
        assert ir.enclosing_groups(name) == ["exit-handler-1"]


def test_push_runs_only_when_evaluate_blessed_the_model(ir_213):
    """Before 2.14: the condition group ``blessed`` on evaluate's output."""
    ir = ir_213
    assert "blessed" not in ir.task("push").inputs.parameters
    condition = ir.task("condition-2")
    assert condition.task_info.name == "blessed"
    match = re.fullmatch(r"inputs\.parameter_values\['([\w-]+)'\] == true",
                         condition.trigger_policy.condition)
    assert match, condition.trigger_policy.condition
    assert ir.parameter_source("condition-2", match.group(1)) == (
        "evaluate", kfp_components.RESULT_OUTPUT)
    assert sorted(condition.dependent_tasks) == ["evaluate", "fingerprint", "train"]
    evaluate = ir.spec.components["comp-evaluate"].output_definitions.parameters
    assert evaluate[kfp_components.RESULT_OUTPUT].parameter_type == \
        pipeline_spec_pb2.ParameterType.BOOLEAN


def test_from_2_14_push_takes_the_blessing_and_skips_itself_unless_blessed(
        ir_gated, taxi, monkeypatch, tmp_path):
    """From 2.14 on, 2.17 included: push takes evaluate's output as its ``blessed`` input, with
    no trigger condition; when it is False the task calls no step and marks its outputs
    skipped."""
    ir = ir_gated
    push = ir.task("push")
    assert ir.parameter_source("push", "blessed") == ("evaluate", kfp_components.RESULT_OUTPUT)
    assert not push.trigger_policy.condition
    assert sorted(push.dependent_tasks) == ["evaluate", "fingerprint", "train"]
    evaluate = ir.spec.components["comp-evaluate"].output_definitions.parameters
    assert evaluate[kfp_components.RESULT_OUTPUT].parameter_type == \
        pipeline_spec_pb2.ParameterType.BOOLEAN
    calls = []
    function = _task_function(ir, "push", monkeypatch, lambda argv: calls.append(argv) or 0)
    step = build_plan(taxi.pipeline, source_root="ROOT", sdk_image=IMAGE).step("push")
    paths = {a: str(tmp_path / a) for a in [a for a, _ in step.inputs] + list(step.outputs)}
    kwargs = {"spec": "SPEC", "cache_key": "KEY", "model_fingerprint": "FP", "run": "RUN",
              **{a: dsl.Artifact(uri=p) for a, p in paths.items()}}
    kwargs = {k: v for k, v in kwargs.items() if k in inspect.signature(function).parameters}
    function(blessed=False, **kwargs)
    assert calls == []
    for output in step.outputs:
        assert (Path(paths[output]) / kfp_tasks.SKIPPED_FILE).is_file()
    function(blessed=True, **kwargs)
    assert len(calls) == 1


def test_the_exit_handler_reports_the_final_status(ir):
    report = ir.task("report")
    assert ir.dag_of("report") == ROOT
    assert report.trigger_policy.strategy == \
        pipeline_spec_pb2.PipelineTaskSpec.TriggerPolicy.ALL_UPSTREAM_TASKS_COMPLETED
    assert list(report.dependent_tasks) == ["exit-handler-1"]
    assert report.inputs.parameters["status"].task_final_status.producer_task == \
        "exit-handler-1"
    status = ir.spec.components["comp-report"].input_definitions.parameters["status"]
    assert status.parameter_type == pipeline_spec_pb2.ParameterType.TASK_FINAL_STATUS
    assert not report.caching_options.enable_cache  # it reports this run, never a cached one


def test_report_body_logs_the_final_state(ir, capsys):
    namespace: dict = {}
    exec(ir.container("report")["command"][-1], namespace)
    status = dsl.PipelineTaskFinalStatus(
        state="FAILED", pipeline_job_resource_name="runs/123", pipeline_task_name="exit-handler-1",
        error_code=9, error_message="train exited with code 1")
    namespace["report"](status=status)
    human, line = capsys.readouterr().out.splitlines()
    assert human == "estflow pipeline chicago-taxi finished: FAILED (train exited with code 1)"
    assert json.loads(line) == {"pipeline": "chicago-taxi", "state": "FAILED",
                                "backend_state": "FAILED",
                                "pipeline_job": "runs/123", "task": "exit-handler-1",
                                "error_code": 9, "error_message": "train exited with code 1"}


# The states each backend passes: the open-source KFP backend (2.14+) the MLMD execution state
# of the exit handler's DAG (backend/src/v2/driver/resolve.go:
# producer.GetExecution().GetLastKnownState().String(); ml_metadata's Execution.State names);
# kfp.local SUCCEEDED/FAILED (kfp/local/orchestrator); Vertex AI SUCCEEDED/FAILED/CANCELLED.
@pytest.mark.parametrize("backend_state, state", [
    ("COMPLETE", "SUCCEEDED"), ("CACHED", "SUCCEEDED"), ("FAILED", "FAILED"),
    # a state the backend leaves unsettled (a task died before it reported): the report asks
    # the KFP API for the run's tasks; here it has no run id to ask with, so it says FAILED,
    # with why (tests/pipelines/test_exit_outcome.py covers the API's answers)
    ("CANCELED", "CANCELLED"), ("RUNNING", "FAILED"), ("UNKNOWN", "FAILED"),
    ("SUCCEEDED", "SUCCEEDED"), ("CANCELLED", "CANCELLED"),
])
def test_report_maps_every_backends_state_to_a_documented_one(ir, capsys, backend_state, state):
    """The report's docs promised SUCCEEDED/FAILED/CANCELLED while the open-source backend
    passes COMPLETE, CANCELED, ...: the report maps them, and logs the backend's own value."""
    namespace: dict = {}
    exec(ir.container("report")["command"][-1], namespace)
    namespace["report"](status=dsl.PipelineTaskFinalStatus(
        state=backend_state, pipeline_job_resource_name="runs/1", pipeline_task_name="x",
        error_code=None, error_message=None))
    human, line = capsys.readouterr().out.splitlines()[-2:]
    assert human.startswith(f"estflow pipeline chicago-taxi finished: {state}")
    assert json.loads(line)["state"] == state and state in kfp_tasks.REPORT_STATES
    assert json.loads(line)["backend_state"] == backend_state


def test_the_report_states_are_the_documented_ones():
    sentence = kfp_tasks.__doc__.split("one of :data:`REPORT_STATES`:")[1].split(".")[0]
    documented = re.findall(r"``([A-Z]+)``", sentence)
    assert tuple(documented) == kfp_tasks.REPORT_STATES
    assert set(kfp_tasks.STATE_NAMES.values()) | {"UNKNOWN"} == set(kfp_tasks.REPORT_STATES)
    readme = (REPO / "docs" / "pages" / "kubeflow" / "compatibility.md").read_text()
    assert ", ".join(f"`{s}`" for s in kfp_tasks.REPORT_STATES) in readme


def test_artifact_types(spec):
    expected = {"examples": "system.Dataset", "transformed": "system.Dataset",
                "model": "system.Model", "evaluation": "system.Artifact",
                "pushed": "system.Artifact", "fingerprints": "system.Artifact",
                "metrics": "system.Metrics",
                "classification": "system.ClassificationMetrics", "html_report": "system.HTML"}
    seen = {}
    for component in spec.components.values():
        if component.WhichOneof("implementation") == "dag":
            continue
        for side in (component.input_definitions, component.output_definitions):
            for name, artifact in side.artifacts.items():
                seen[name] = artifact.artifact_type.schema_title
    assert seen == expected


def test_spec_source_root_and_beam_options_are_pipeline_parameters(ir, taxi):
    parameters = ir.spec.root.input_definitions.parameters
    assert set(parameters) == {"spec", "source_root", "beam_options"}
    assert ef.Pipeline.from_json(parameters["spec"].default_value.string_value) == taxi.pipeline
    assert parameters["source_root"].default_value.string_value == f"module:{TAXI}"
    assert parameters["beam_options"].default_value.string_value == ""  # in-memory in the pod
    fingerprint = ir.task("fingerprint")
    assert {k: ir.parameter_source("fingerprint", k) for k in fingerprint.inputs.parameters} == {
        "spec": ("pipeline", "spec"), "source_root": ("pipeline", "source_root")}
    for name in STEP_NAMES:
        task = ir.task(name)
        wired = {k: ir.parameter_source(name, k) for k in task.inputs.parameters}
        # the part of the spec the step reads, and its cache key: from the fingerprint task
        expected = {"spec": ("fingerprint", f"{name}_spec"),
                    "cache_key": ("fingerprint", f"{name}_key")}
        if name == "push":
            expected["model_fingerprint"] = ("fingerprint", "model_fingerprint")
            expected["run"] = ("constant", dsl.PIPELINE_JOB_NAME_PLACEHOLDER)
            expected["blessed"] = ("evaluate", kfp_components.RESULT_OUTPUT)  # KFP 2.14 on
        if name == "ingest":  # it checks the source is still what the run started with
            expected["source_root"] = ("pipeline", "source_root")
            expected["source_digest"] = ("fingerprint", "source_digest")
        if name in ("ingest", "transform"):  # the Beam steps
            expected["beam_options"] = ("pipeline", "beam_options")
        assert wired == expected


def test_beam_runner_and_options_are_checked_and_become_the_parameters_default(taxi, tmp_path):
    ir = _compile(taxi, tmp_path / "dataflow.yaml", beam_runner="dataflow",
                  beam_options=["--project=my-project", "--region", "europe-west4",
                                "--temp_location=gs://bucket/tmp"])
    default = ir.spec.root.input_definitions.parameters["beam_options"].default_value
    assert default.string_value == ("--runner=DataflowRunner --project=my-project "
                                    "--region=europe-west4 --temp_location=gs://bucket/tmp")
    with pytest.raises(kfp_compiler.CompileError,
                       match=r"Beam options.*DataflowRunner.*missing --region, --temp_location"):
        kfp_compiler.compile_pipeline(taxi, tmp_path / "bad.yaml", beam_runner="dataflow",
                                      beam_options=["--project=my-project"])
    with pytest.raises(kfp_compiler.CompileError, match="unknown runner 'yarn'"):
        kfp_compiler.compile_pipeline(taxi, tmp_path / "bad.yaml", beam_runner="yarn")
    assert not (tmp_path / "bad.yaml").exists()


def test_caching_is_set_per_task_at_compile_time(ir, taxi, tmp_path):
    caching = {n: t.caching_options.enable_cache for n, t in ir.tasks().items()}
    assert caching == {"ingest": True, "transform": True, "train": True, "evaluate": True,
                       "push": False, "report": False, "fingerprint": False}
    tasks = _compile(taxi, tmp_path / "p.yaml", caching={"train": False}).tasks()
    assert not tasks["train"].caching_options.enable_cache
    assert tasks["transform"].caching_options.enable_cache


def test_caching_precedence_default_then_declared_then_option(taxi, tmp_path):
    declared = dataclasses.replace(taxi.pipeline, resources={
        "push": ef.Resources(caching=True), "train": ef.Resources(caching=False)})
    tasks = _compile(declared, tmp_path / "d.yaml").tasks()
    assert tasks["push"].caching_options.enable_cache
    assert not tasks["train"].caching_options.enable_cache
    tasks = _compile(declared, tmp_path / "o.yaml", caching={"push": False}).tasks()
    assert not tasks["push"].caching_options.enable_cache


def test_a_pipeline_without_push_target_has_no_push_task_and_no_gate(taxi, tmp_path):
    bare = dataclasses.replace(taxi.pipeline, push=None)
    result = kfp_compiler.compile_pipeline(bare, tmp_path / "p.yaml")
    assert result.tasks == STEP_NAMES[:-1]
    ir = Ir(result.path)
    assert set(ir.tasks()) == set(STEP_NAMES[:-1]) | {"report", "fingerprint"}
    assert set(ir.groups()) == {"exit-handler-1"}
    # a bare Pipeline has no module: relative data paths resolve in the task's working dir
    parameters = ir.spec.root.input_definitions.parameters
    assert parameters["source_root"].default_value.string_value == ""


def test_source_root_option(taxi, tmp_path):
    ir = _compile(taxi, tmp_path / "p.yaml", source_root="/data")
    assert ir.spec.root.input_definitions.parameters["source_root"].default_value.string_value \
        == "/data"


# --- determinism and goldens --------------------------------------------------------------------

def test_compiling_twice_gives_identical_bytes(taxi, tmp_path):
    first = kfp_compiler.compile_pipeline(taxi, tmp_path / "a.yaml").path.read_bytes()
    second = kfp_compiler.compile_pipeline(taxi, tmp_path / "b.yaml").path.read_bytes()
    assert first == second


@pytest.mark.parametrize("target", sorted(goldens.GOLDENS.values()))
def test_compiling_in_a_fresh_process_gives_identical_bytes(tmp_path, target):
    """No per-process state (hash seeds, ids, timestamps) reaches the output."""
    code = textwrap.dedent(f"""
        import sys
        from estflow.pipelines.kubeflow import compiler as kfp_compiler
        from estflow.pipelines import loader
        from estflow.pipelines.kubeflow import goldens
        kfp_compiler.compile_pipeline(loader.load({target!r}), sys.argv[1],
                                      **next(goldens.OPTIONS.get(n, {{}}) for n, t in
                                             goldens.GOLDENS.items() if t == {target!r}))
    """)
    outputs = []
    for seed in ("1", "2"):
        out = tmp_path / f"{seed}.yaml"
        subprocess.run([sys.executable, "-c", code, str(out)], check=True, cwd=tmp_path,
                       env={**kfp_local_fakes.env(), "PYTHONHASHSEED": seed})
        outputs.append(out.read_bytes())
    assert outputs[0] == outputs[1]


@pytest.mark.parametrize("name", sorted(goldens.GOLDENS))
def test_golden(name, tmp_path):
    fresh = tmp_path / name
    goldens.render(goldens.GOLDENS[name], fresh)
    golden = Path(__file__).parent / "goldens" / name
    assert as_golden(fresh.read_bytes()) == as_golden(golden.read_bytes()), (
        f"compiled output differs from {golden}; review the change, then regenerate with "
        "`python -m estflow.pipelines.kubeflow.goldens` (make goldens)")


def test_default_image_is_tagged_with_the_package_version():
    assert kfp_compiler.DEFAULT_IMAGE.endswith(":" + metadata.version("estflow"))


def test_dockerfile_installs_this_package():
    """The image the default names: built from the repository (``make image``); every path it
    copies exists, and it installs estflow (its locked dependencies include kfp, which
    lightweight components run with). The Dockerfiles' lint: tests/pipelines/test_dockerfiles.py."""
    from tests.pipelines.test_dockerfiles import parse

    instructions = parse((REPO / "pipelines" / "docker" / "Dockerfile").read_text())
    copied = [source for ins in instructions if ins.keyword == "COPY"
              and not ins.args.startswith("--from") for source in ins.args.split()[:-1]]
    assert {"pyproject.toml", "dsl", "components", "pipelines"} <= set(copied)
    # wheelhouse/: the locked wheels, which make image adds to the build context
    assert all((REPO / source).exists() for source in copied if source != "wheelhouse")
    assert any(ins.keyword == "RUN" and "--wheel-dir /tmp/estflow-wheel /tmp/estflow-src"
               in ins.args for ins in instructions)
    assert "kfp==" in (REPO / "pipelines" / "docker" / "requirements.lock").read_text()
    assert "ghcr.io/estflow/estflow:" + metadata.version("estflow") in \
        (REPO / "docs" / "pages" / "kubeflow" / "images.md").read_text()


# --- errors -------------------------------------------------------------------------------------

@pytest.mark.parametrize("output, image, match", [
    ("taxi.json", kfp_compiler.DEFAULT_IMAGE, "ending in .yaml or .yml"),
    ("missing/taxi.yaml", kfp_compiler.DEFAULT_IMAGE, "existing directory"),
    ("taxi.yaml", "", "container image reference"),
    ("taxi.yaml", "bad image", "container image reference"),
])
def test_invalid_options_raise_and_write_nothing(taxi, tmp_path, output, image, match):
    with pytest.raises(kfp_compiler.CompileError, match=match):
        kfp_compiler.compile_pipeline(taxi, tmp_path / output, image=image)
    assert list(tmp_path.iterdir()) == []


def test_caching_of_an_unknown_step_is_an_error(taxi, tmp_path):
    with pytest.raises(kfp_compiler.CompileError, match="trian"):
        kfp_compiler.compile_pipeline(taxi, tmp_path / "t.yaml", caching={"trian": False})


def test_generated_source_rejects_an_embedded_placeholder():
    step = build_plan(loader.load(TAXI).pipeline, source_root="x").step("ingest")
    broken = dataclasses.replace(step, options=(("flag", "a{{estflow-param:spec}}b"),))
    with pytest.raises(ValueError, match="placeholder"):
        kfp_components.render_source(broken)


# --- runs under kfp.local ----------------------------------------------------------------------

def _run_under_kfp_local(yaml_path: Path, tmp_path: Path, **arguments) -> None:
    subprocess.run([sys.executable, "-c", kfp_local_fakes.KFP_LOCAL_RUN, str(yaml_path),
                    str(tmp_path / "root"), json.dumps(arguments)], check=True, cwd=tmp_path,
                   env=kfp_local_fakes.env(), timeout=900)


@pytest.mark.parametrize("blessed", [True, False])
def test_kfp_local_runs_the_gate_and_the_exit_handler(taxi, tmp_path, blessed):
    """kfp.local.SubprocessRunner runs the compiled control flow (with stand-in steps): push
    runs only when evaluate's blessing is true, and the report task logs the final state."""
    yaml_path = kfp_local_fakes.compile_with_stand_ins(taxi.pipeline, tmp_path)
    status, ran, output = kfp_local_fakes.run(yaml_path, tmp_path, {"blessed": blessed})
    assert status == 0, output
    assert ran == list(STEP_NAMES if blessed else STEP_NAMES[:-1])
    assert "estflow pipeline chicago-taxi finished: SUCCEEDED" in output
    assert f"estflow step evaluate: blessed={blessed}" in output
    # The evaluate task's KFP UI artifacts, as kfp.local recorded them
    [executor_output] = (tmp_path / "root").glob("*/evaluate/executor_output.json")
    artifacts = json.loads(executor_output.read_text())["artifacts"]
    assert artifacts["metrics"]["artifacts"][0]["metadata"] == kfp_local_fakes.UI_METRICS
    classification = artifacts["classification"]["artifacts"][0]["metadata"]
    assert len(classification["confidenceMetrics"]) == 3
    assert classification["confusionMatrix"]["rows"] == [{"row": [1, 1]}, {"row": [0, 2]}]
    html = artifacts["html_report"]["artifacts"][0]["uri"]
    assert Path(html).read_text() == kfp_local_fakes.UI_REPORT


def test_kfp_local_reports_a_failed_run(taxi, tmp_path):
    yaml_path = kfp_local_fakes.compile_with_stand_ins(taxi.pipeline, tmp_path)
    status, ran, output = kfp_local_fakes.run(yaml_path, tmp_path, {"blessed": True, "fail": "train"})
    assert status != 0
    assert ran == ["ingest", "transform", "train"]
    assert "estflow pipeline chicago-taxi finished: FAILED" in output


@pytest.mark.slow
def test_ingest_task_runs_under_kfp_local(taxi, tmp_path):
    """The generated ingest component, run by kfp.local.SubprocessRunner: the embedded Python
    imports the real step, which reads the example's data through ``source_root``."""
    step = build_plan(taxi.pipeline, source_root=kfp_components.param_placeholder(
        "source_root")).step("ingest")
    component_yaml = tmp_path / "ingest.yaml"
    compiler.Compiler().compile(kfp_components.build_component(step, IMAGE),
                                str(component_yaml))
    _run_under_kfp_local(component_yaml, tmp_path, spec=taxi.pipeline.to_json(),
                         source_root=f"module:{TAXI}", source_digest="")
    [examples] = (tmp_path / "root").glob("ingest-*/ingest/examples")
    assert (examples / Files.INGEST_STATS).is_file()


def _steps_available() -> bool:
    return all(importlib.util.find_spec(s.module) is not None for s in STEPS)


@pytest.mark.slow
@pytest.mark.skipif(not _steps_available(), reason="not every estflow.components step exists yet")
def test_compiled_yaml_runs_end_to_end_under_kfp_local(taxi, tmp_path):
    """kfp.local.SubprocessRunner runs the compiled YAML itself (each task a subprocess running
    the embedded Python), with the ``spec`` parameter overridden for a short run."""
    yaml_path = kfp_compiler.compile_pipeline(taxi, tmp_path / "taxi.yaml").path
    small = dataclasses.replace(
        taxi.pipeline, train=ef.TrainSpec(max_steps=20, batch_size=64),
        push=ef.PushTarget(base_path=str(tmp_path / "serving"), model_name="chicago_taxi"))
    _run_under_kfp_local(yaml_path, tmp_path, spec=small.to_json())
    versions = [p for p in (tmp_path / "serving" / "chicago_taxi").iterdir() if p.name.isdigit()]
    assert len(versions) == 1 and (versions[0] / "saved_model.pb").is_file()
    # The real evaluate step's files, logged to the KFP UI's artifacts
    [executor_output] = (tmp_path / "root").glob("*/evaluate/executor_output.json")
    artifacts = json.loads(executor_output.read_text())["artifacts"]
    assert "auc" in artifacts["metrics"]["artifacts"][0]["metadata"]
    classification = artifacts["classification"]["artifacts"][0]["metadata"]
    assert classification["confidenceMetrics"] and classification["confusionMatrix"]["rows"]
    html = Path(artifacts["html_report"]["artifacts"][0]["uri"]).read_text()
    assert html.startswith("<!DOCTYPE html>")
