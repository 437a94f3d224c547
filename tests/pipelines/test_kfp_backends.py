"""Compiling for a KFP backend version (``kfp_backend``, ``estflow compile --kfp-backend``).

For each target, the taxi_gpu example (retries, placement parameters, a secret) plus a PVC is
compiled, parsed strictly into the PipelineSpec / PlatformSpec protos, and checked for what that
backend lacks (see :mod:`estflow.pipelines.kubeflow.backend` for where each threshold comes from in
the backend's source): an exit task taking ``PipelineTaskFinalStatus`` before 2.14, node
selectors / tolerations from task outputs before 2.5, a PVC subPath before 2.16, an optional
secret env before 2.15, a condition group inside the exit handler before 2.17 (from 2.14 on,
2.17 included, gated steps gate themselves instead). What the default target (2.16, Kubeflow
26.03's) compiles needs 2.14, which Kubeflow 1.10.x (KFP 2.4.1 / 2.5.0) rejects: the finding
this guards.
"""

import dataclasses
from pathlib import Path

import pytest
import yaml
from kfp.pipeline_spec import pipeline_spec_pb2

import estflow.dsl as ef
from estflow.pipelines import cli
from estflow.pipelines import loader
from estflow.pipelines.kubeflow import backend as kfp_backends
from estflow.pipelines.kubeflow import compiler as kfp_compiler
from tests.pipelines import kfp_local_fakes
from tests.pipelines.kfp_ir import Ir

TAXI = "estflow.pipelines.examples.taxi"
TAXI_GPU = "estflow.pipelines.examples.taxi_gpu"
# Targets: the Kubeflow releases' backends (1.10.0: 2.4.1; 1.10.1/2: 2.5.0; 1.11: 2.15.0;
# 26.03: 2.16.0, the default), the oldest supported (2.4.0), the first whose exit task reads the
# final status (2.14.0) and the newest (2.17.0).
TARGETS = ("2.4", "2.4.1", "2.5", "2.14", "2.15", "2.16", "2.17")


@pytest.fixture(scope="module")
def gpu_with_pvc():
    pipeline = loader.load(TAXI_GPU).pipeline
    push = dataclasses.replace(pipeline.resources["push"],
                               pvcs=(ef.PvcMount("models", "/mnt/models"),))
    return dataclasses.replace(pipeline, resources={**pipeline.resources, "push": push})


@pytest.fixture(scope="module", params=TARGETS)
def compiled(request, gpu_with_pvc, tmp_path_factory):
    path = tmp_path_factory.mktemp("backend") / f"taxi_gpu-{request.param}.yaml"
    result = kfp_compiler.compile_pipeline(gpu_with_pvc, path, kfp_backend=request.param)
    return kfp_backends.parse(request.param), result, Ir(path)


def _k8s_configs(ir: Ir):
    return {task: ir.k8s(task) for task in ir.tasks()}


def test_the_output_needs_no_newer_backend_than_the_target(compiled):
    target, result, ir = compiled
    needs = kfp_backends.required(ir.documents)
    assert needs <= target
    assert kfp_backends.parse(result.kfp_backend) == needs
    assert ir.spec.pipeline_info.description.endswith(
        f"Compiled for KFP backend >= {target}.")


def test_the_exit_task_takes_the_final_status_only_from_2_14(compiled):
    target, result, ir = compiled
    report = ir.task("report")
    status_inputs = [p for p in report.inputs.parameters.values()
                     if p.WhichOneof("kind") == "task_final_status"]
    definitions = ir.spec.components["comp-report"].input_definitions.parameters
    if target >= kfp_backends.BackendVersion(2, 14):
        assert len(status_inputs) == 1
        assert definitions["status"].parameter_type == \
            pipeline_spec_pb2.ParameterType.TASK_FINAL_STATUS
    else:  # a plain exit task: still runs however the steps ended
        assert not status_inputs and not definitions
        assert report.trigger_policy.strategy == \
            pipeline_spec_pb2.PipelineTaskSpec.TriggerPolicy.ALL_UPSTREAM_TASKS_COMPLETED
        assert any("takes no final status" in note for note in result.notes)
    assert list(report.dependent_tasks) == ["exit-handler-1"]


def test_the_exit_task_reads_a_dag_whose_state_the_backend_sets(compiled):
    """KFP 2.14-2.16 update a DAG's state only when a container task directly in it ends, so a
    dsl.If group inside the exit handler left its state RUNNING and the report logged UNKNOWN
    after every successful run (kubeflow/pipelines#11979). 2.17.0 (#13322) passes a finished
    group's state up, but a false condition is created CANCELED and no launcher updates the
    exit handler's DAG after it (2.17.0's driver and metadata client): a model that is not
    blessed left the run RUNNING and the report UNKNOWN. So from 2.14 on, on every backend,
    push sits in the exit handler's DAG itself and takes ``blessed`` as an input; before 2.14
    (the report reads no state) it is under dsl.If."""
    target, _, ir = compiled
    exit_handler = ir.enclosing_groups("evaluate")[0]
    used = kfp_backends.features_used(ir.documents)
    if target >= kfp_backends.BackendVersion(2, 14):
        assert ir.enclosing_groups("push") == [exit_handler]
        assert not [g for g in ir.groups() if g != exit_handler]
        assert ir.parameter_source("push", "blessed") == ("evaluate", "Output")
        assert not ir.task("push").HasField("trigger_policy") or \
            not ir.task("push").trigger_policy.condition
        assert kfp_backends.EXIT_HANDLER_STATE not in used
    else:  # before 2.14, where the report reads no state: push under dsl.If
        [condition] = [g for g in ir.enclosing_groups("push") if g != exit_handler]
        assert ir.enclosing_groups(condition) == [exit_handler]
        assert "blessed" not in ir.task("push").inputs.parameters
        assert kfp_backends.EXIT_HANDLER_STATE not in used


def test_the_docs_table_is_the_backend_rows():
    """docs/pages/kubeflow/compatibility.md shows each feature's threshold and evidence as
    backend.py has them, and each Kubeflow release's KFP backend as KUBEFLOW_RELEASES."""
    page = (Path(__file__).parents[2] / "docs/pages/kubeflow/compatibility.md").read_text()
    rows = {}
    for line in page.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| `") and len(cells) == 5:
            rows[cells[0].strip("`")] = cells
    assert set(rows) == {f.name for f in kfp_backends.FEATURES}
    for feature in kfp_backends.FEATURES:
        cells = rows[feature.name]
        assert cells[2] == str(feature.since), feature.name
        evidence = [e.removeprefix("kubeflow/pipelines") for e in feature.evidence
                    if e.startswith("kubeflow/pipelines#")]
        assert evidence or feature.since < kfp_backends.BackendVersion(2, 14), feature.name
        assert all(e in cells[3] for e in evidence), (feature.name, cells[3])
    releases = {}
    for line in page.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| 1.") or line.startswith("| 2"):
            for release in cells[0].split(","):
                releases[release.strip()] = cells[1]
    assert releases == {r: str(v) for r, v in kfp_backends.KUBEFLOW_RELEASES.items()}


def test_placement_is_constant_before_2_5(compiled):
    target, result, ir = compiled
    configs = _k8s_configs(ir)
    parameters = set(ir.spec.root.input_definitions.parameters)
    train = configs["train"]
    if target >= kfp_backends.BackendVersion(2, 5):
        assert train.node_selector.HasField("node_selector_json")
        assert "train_accelerator_type" in parameters and "train-placement" in ir.tasks()
        return
    for task, config in configs.items():
        assert not config.node_selector.HasField("node_selector_json"), task
        assert not any(t.HasField("toleration_json") for t in config.tolerations), task
    assert dict(train.node_selector.labels) == {
        "cloud.google.com/gke-accelerator": "nvidia-tesla-t4",
        "cloud.google.com/gke-nodepool": "gpu-pool"}
    accelerator = ir.container("train")["resources"]["accelerator"]
    assert (accelerator["resourceType"], accelerator["resourceCount"]) == ("nvidia.com/gpu", "1")
    assert not {p for p in parameters if p.startswith("train_")}
    assert "train-placement" not in ir.tasks()
    assert any("placement_parameters" in note for note in result.notes)


def test_secrets_and_pvcs_carry_the_names_every_backend_reads(compiled):
    """KFP 2.4 reads only the (deprecated) constant name fields, not the parameter forms."""
    _, _, ir = compiled
    [env] = ir.k8s("push").secret_as_env
    assert env.secret_name == "serving-credentials"
    [pvc] = ir.k8s("push").pvc_mount
    assert pvc.constant == "models"


def test_retries_note_on_2_4_0_only(compiled):
    target, result, ir = compiled
    assert ir.task("ingest").retry_policy.max_retry_count == 3  # harmless where ignored
    ignored = any("ignores retry policies" in note for note in result.notes)
    assert ignored == (target < kfp_backends.BackendVersion(2, 4, 1))


def test_the_default_target_uses_what_kubeflow_1_10_lacks(tmp_path):
    """What Kubeflow 1.10.x would reject: the default target's output needs 2.14 (the final
    status), which Kubeflow 1.11.0 (2.15) and 26.03 (2.16) run."""
    path = kfp_compiler.compile_pipeline(loader.load(TAXI_GPU), tmp_path / "p.yaml").path
    documents = list(yaml.safe_load_all(path.read_text()))
    used = kfp_backends.features_used(documents)
    assert {kfp_backends.FINAL_STATUS, kfp_backends.PARAMETERISED_PLACEMENT} <= used
    assert kfp_backends.required(documents) == kfp_backends.BackendVersion(2, 14)
    for release in ("1.10.0", "1.10.1", "1.10.2"):
        assert kfp_backends.KUBEFLOW_RELEASES[release] < kfp_backends.required(documents)
    for release in ("1.11.0", "26.03"):
        assert kfp_backends.KUBEFLOW_RELEASES[release] >= kfp_backends.required(documents)


def _with_storage(storage: ef.Resources):
    taxi = loader.load(TAXI).pipeline
    return dataclasses.replace(
        taxi, resources={"push": storage, "evaluate": storage},
        push=dataclasses.replace(taxi.push, base_path="/mnt/models/serving"))


def test_a_pvc_sub_path_is_an_error_before_2_16(tmp_path):
    """Drivers before 2.16 drop subPath (kubeflow/pipelines#12595) and mount the whole volume:
    multi-worker data written under the subdirectory is then "missing"."""
    pipeline = _with_storage(ef.Resources(
        pvcs=(ef.PvcMount("models", "/mnt/models", sub_path="taxi"),)))
    for target in ("2.4.1", "2.5", "2.14", "2.15"):
        with pytest.raises(kfp_compiler.CompileError,
                           match=r"sub_path \(models\).*2\.16\.0.*#12595.*--kfp-backend 2\.16"):
            kfp_compiler.compile_pipeline(pipeline, tmp_path / "p.yaml", kfp_backend=target)
        assert not (tmp_path / "p.yaml").exists()
    ir = Ir(kfp_compiler.compile_pipeline(pipeline, tmp_path / "p.yaml",
                                          kfp_backend="2.16").path)
    assert ir.k8s("push").pvc_mount[0].sub_path == "taxi"
    assert kfp_backends.PVC_SUB_PATH in kfp_backends.features_used(ir.documents)
    assert kfp_backends.required(ir.documents) == kfp_backends.BackendVersion(2, 16)


def test_an_optional_secret_env_is_an_error_before_2_15(tmp_path):
    """Drivers before 2.15 drop SecretAsEnv.optional (kubeflow/pipelines#12216): the pod then
    waits for the secret forever."""
    pipeline = _with_storage(ef.Resources(
        pvcs=(ef.PvcMount("models", "/mnt/models"),),
        secrets_as_env=(ef.SecretEnv("maybe", {"token": "TOKEN"}, optional=True),)))
    with pytest.raises(kfp_compiler.CompileError,
                       match=r"optional=True \(maybe\).*2\.15\.0.*#12216"):
        kfp_compiler.compile_pipeline(pipeline, tmp_path / "p.yaml", kfp_backend="2.14")
    ir = Ir(kfp_compiler.compile_pipeline(pipeline, tmp_path / "p.yaml",
                                          kfp_backend="2.15").path)
    assert ir.k8s("push").secret_as_env[0].optional
    assert kfp_backends.required(ir.documents) == kfp_backends.BackendVersion(2, 15)
    required = dataclasses.replace(pipeline, resources={
        step: dataclasses.replace(r, secrets_as_env=(ef.SecretEnv("maybe", {"token": "T"}),))
        for step, r in pipeline.resources.items()})
    ir = Ir(kfp_compiler.compile_pipeline(required, tmp_path / "p.yaml",
                                          kfp_backend="2.14").path)
    assert kfp_backends.SECRET_OPTIONAL not in kfp_backends.features_used(ir.documents)


@pytest.mark.parametrize("version, match", [
    ("2.3", "2.4.0 or newer"), ("1.10", "2.4.0 or newer"), ("latest", "MAJOR.MINOR"),
    ("", "MAJOR.MINOR"),
])
def test_invalid_backends(tmp_path, version, match):
    with pytest.raises(kfp_compiler.CompileError, match=match):
        kfp_compiler.compile_pipeline(loader.load(TAXI), tmp_path / "p.yaml",
                                      kfp_backend=version)


def test_parse_versions():
    assert kfp_backends.parse("2.5") == kfp_backends.BackendVersion(2, 5, 0)
    assert kfp_backends.parse("v2.14.3") == kfp_backends.BackendVersion(2, 14, 3)
    assert kfp_backends.parse("2.15.0-rc.1") == kfp_backends.BackendVersion(2, 15, 0)
    assert str(kfp_backends.parse("2.4")) == "2.4.0"
    with pytest.raises(ValueError):
        kfp_backends.parse("unknown")


def test_the_plain_exit_task_runs_under_kfp_local_after_a_failure(tmp_path):
    """The 2.4/2.5 form of the exit handler still runs however the steps ended."""
    yaml_path = kfp_local_fakes.compile_with_stand_ins(loader.load(TAXI).pipeline, tmp_path,
                                                       kfp_backend="2.5")
    status, ran, output = kfp_local_fakes.run(yaml_path, tmp_path,
                                              {"blessed": True, "fail": "train"})
    assert status != 0 and ran == ["ingest", "transform", "train"]
    assert "estflow pipeline chicago-taxi finished: UNKNOWN" in output


@pytest.mark.parametrize("blessed", [True, False])
def test_the_gated_push_runs_under_kfp_local_and_the_report_sees_success(tmp_path, blessed):
    """The form from 2.14 on (2.17 included): push always runs as a task and skips itself
    unless blessed; the exit handler's DAG then ends with its container tasks, and the report
    logs SUCCEEDED."""
    yaml_path = kfp_local_fakes.compile_with_stand_ins(loader.load(TAXI).pipeline, tmp_path,
                                                       kfp_backend="2.16")
    status, ran, output = kfp_local_fakes.run(yaml_path, tmp_path, {"blessed": blessed})
    assert status == 0, output
    assert ran == ["ingest", "transform", "train", "evaluate", *(["push"] if blessed else [])]
    assert ("estflow step push: skipped: blessed is False" in output) == (not blessed)
    assert "estflow pipeline chicago-taxi finished: SUCCEEDED" in output


def test_the_gated_push_failure_is_reported(tmp_path):
    yaml_path = kfp_local_fakes.compile_with_stand_ins(loader.load(TAXI).pipeline, tmp_path,
                                                       kfp_backend="2.14")
    status, ran, output = kfp_local_fakes.run(yaml_path, tmp_path,
                                              {"blessed": True, "fail": "push"})
    assert status != 0 and ran[-1] == "push"
    assert "estflow pipeline chicago-taxi finished: FAILED" in output


def test_cli_kfp_backend_option_prints_the_notes(tmp_path, capsys):
    out = tmp_path / "p.yaml"
    image = ["--image", "registry.example/estflow:1"]  # the default is not published
    assert cli.main(["compile", TAXI_GPU, "-o", str(out), "--kfp-backend", "2.5", *image]) == 0
    captured = capsys.readouterr()
    assert "needs KFP backend >= 2.5.0" in captured.out
    assert "note: the exit handler's report task takes no final status" in captured.err
    assert kfp_backends.required(list(yaml.safe_load_all(out.read_text()))) <= \
        kfp_backends.BackendVersion(2, 5)
    assert cli.main(["compile", TAXI, "-o", str(out), "--kfp-backend", "2.2", *image]) == 2
    assert "2.4.0 or newer" in capsys.readouterr().err
