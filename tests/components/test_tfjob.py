"""The TFJob train task: manifest shape, and submit/follow/delete through the real
``kubernetes`` client against a fake Kubernetes API server on 127.0.0.1
(tests/components/fake_k8s_api.py stands in for a cluster with the Kubeflow Training Operator,
which cannot run here)."""

import dataclasses
import json
from pathlib import Path

import pytest
from kubernetes import client as k8s

import estflow.dsl as ef
from estflow.components import tfjob
from estflow.pipelines.examples import taxi
from tests.components.fake_k8s_api import FakeKubernetes

GPU = ef.Resources(cpu_request="4", memory_request="16Gi", memory_limit="16Gi",
                   accelerator=ef.Accelerator("nvidia-tesla-t4", count=2), node_pool="gpu-pool",
                   tolerations=(ef.Toleration("dedicated", operator="Equal", value="ml"),),
                   pvcs=(ef.PvcMount("shared", "/mnt/shared"),),
                   secrets_as_env=(ef.SecretEnv("gcp", {"key": "GCP_KEY"}),),
                   retries=2, timeout_seconds=7200)
ARGS = ["--spec", "/mnt/shared/j/pipeline.json", "--transformed", "/mnt/shared/j/transformed",
        "--model", "/mnt/shared/j/model"]


def _api(fake: FakeKubernetes) -> k8s.CustomObjectsApi:
    config = k8s.Configuration()
    config.host = fake.host
    return k8s.CustomObjectsApi(k8s.ApiClient(config))


def _container(manifest, replica):
    return manifest["spec"]["tfReplicaSpecs"][replica]["template"]["spec"]["containers"][0]


def _as_k8s_pod_template(template: dict) -> dict:
    """Round trip through the client's V1PodTemplateSpec: a misspelled field would be dropped."""
    api = k8s.ApiClient()
    response = type("Response", (), {"data": json.dumps(template)})()
    return api.sanitize_for_serialization(api.deserialize(response, "V1PodTemplateSpec"))


# -- manifest ----------------------------------------------------------------------------------
def test_multi_worker_mirrored_manifest_is_a_worker_only_tfjob():
    cluster = ef.Cluster(workers=3, shared_dir="/mnt/shared")
    manifest = tfjob.tfjob_manifest("taxi-train-1", "ml", "img:1", cluster, GPU, ARGS)
    assert (manifest["apiVersion"], manifest["kind"]) == ("kubeflow.org/v1", "TFJob")
    assert manifest["metadata"]["namespace"] == "ml"
    specs = manifest["spec"]["tfReplicaSpecs"]
    assert list(specs) == ["Worker"]  # worker 0 is the chief, as in `estflow run --workers`
    assert specs["Worker"]["replicas"] == 3 and specs["Worker"]["restartPolicy"] == "OnFailure"
    assert manifest["spec"]["runPolicy"] == {"cleanPodPolicy": "Running", "backoffLimit": 2,
                                             "activeDeadlineSeconds": 7200}
    worker = _container(manifest, "Worker")
    assert worker["name"] == "tensorflow" and worker["image"] == "img:1"
    assert worker["command"] == ["python", "-m", "estflow.components.train"]
    assert worker["args"] == ARGS
    assert worker["resources"] == {"requests": {"cpu": "4", "memory": "16Gi"},
                                   "limits": {"memory": "16Gi", "nvidia.com/gpu": "2"}}
    assert worker["env"][0]["valueFrom"]["secretKeyRef"] == {"name": "gcp", "key": "key",
                                                             "optional": False}
    pod = specs["Worker"]["template"]["spec"]
    assert pod["nodeSelector"] == {"cloud.google.com/gke-accelerator": "nvidia-tesla-t4",
                                   "cloud.google.com/gke-nodepool": "gpu-pool"}
    assert pod["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
        {"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoSchedule"}]
    assert pod["volumes"] == [{"name": "pvc-0", "persistentVolumeClaim": {"claimName": "shared"}}]
    assert worker["volumeMounts"] == [{"name": "pvc-0", "mountPath": "/mnt/shared"}]
    template = specs["Worker"]["template"]
    assert _as_k8s_pod_template(template) == template  # every field is a real PodTemplateSpec one


def test_parameter_server_manifest_has_chief_workers_ps_and_evaluator():
    cluster = ef.Cluster(workers=2, parameter_servers=1, evaluator=True, shared_dir="gs://b/x",
                         ps_resources=ef.Resources(cpu_request="2", memory_request="8Gi"),
                         evaluator_resources=ef.Resources(cpu_request="1"))
    manifest = tfjob.tfjob_manifest("j", "ml", "img:1", cluster, GPU, ARGS)
    specs = manifest["spec"]["tfReplicaSpecs"]
    assert {k: v["replicas"] for k, v in specs.items()} == {
        "Chief": 1, "Worker": 2, "PS": 1, "Evaluator": 1}
    ps = _container(manifest, "PS")
    assert ps["resources"] == {"requests": {"cpu": "2", "memory": "8Gi"}}  # no GPU for a ps
    assert "nodeSelector" not in specs["PS"]["template"]["spec"]
    assert specs["PS"]["template"]["spec"]["volumes"]  # the PVC holding the spec, still
    assert _container(manifest, "Evaluator")["resources"] == {"requests": {"cpu": "1"}}
    assert _container(manifest, "Chief")["resources"]["limits"]["nvidia.com/gpu"] == "2"
    for replica, spec in specs.items():
        assert _container(manifest, replica)["name"] == "tensorflow"
        assert _as_k8s_pod_template(spec["template"]) == spec["template"]


# -- run_tfjob against the fake API server -----------------------------------------------------
def test_run_tfjob_follows_the_job_to_success_and_deletes_it():
    manifest = tfjob.tfjob_manifest("taxi-train-1", "ml", "img:1", ef.Cluster(workers=2),
                                    ef.Resources(), ARGS)
    lines = []
    with FakeKubernetes(("Created", "Running", "Running", "Succeeded")) as fake:
        job = tfjob.run_tfjob(_api(fake), manifest, poll_seconds=0, echo=lines.append)
    assert tfjob.job_state(job)[0] == "Succeeded"
    assert fake.methods() == ["POST", "GET", "GET", "GET", "GET", "DELETE"]
    assert fake.requests[0].path == "/apis/kubeflow.org/v1/namespaces/ml/tfjobs"
    assert fake.requests[0].body == manifest  # what the API server received
    assert fake.requests[-1].body["propagationPolicy"] == "Foreground"
    assert lines == [
        "TFJob ml/taxi-train-1: submitted (Worker x2)",
        "TFJob ml/taxi-train-1: Created: TFJob taxi-train-1 is created.",
        "TFJob ml/taxi-train-1: Running [Worker 1 active]: TFJob taxi-train-1 is running.",
        "TFJob ml/taxi-train-1: Succeeded: TFJob taxi-train-1 is succeeded.",
        "TFJob ml/taxi-train-1: deleted"]


def test_a_failed_job_fails_the_task_with_its_message_and_is_deleted():
    manifest = tfjob.tfjob_manifest("j", "ml", "img", ef.Cluster(workers=2), ef.Resources(),
                                    ARGS)
    script = ("Created", "Running", ("Failed", "TFJob j has failed because 1 Worker "
                                               "replica(s) failed."))
    with FakeKubernetes(script) as fake, pytest.raises(tfjob.TFJobError) as info:
        tfjob.run_tfjob(_api(fake), manifest, poll_seconds=0, echo=lambda line: None)
    assert str(info.value) == ("TFJob ml/j failed: TFJob j has failed because 1 Worker "
                               "replica(s) failed.")
    assert fake.methods()[-1] == "DELETE" and not fake.jobs


def test_timeout_and_interrupt_still_delete_the_job():
    manifest = tfjob.tfjob_manifest("j", "ml", "img", ef.Cluster(workers=2), ef.Resources(),
                                    ARGS)
    ticks = iter(range(100))
    with FakeKubernetes(("Created", "Running")) as fake, pytest.raises(
            tfjob.TFJobError, match=r"did not finish within 3s \(last state Running\)"):
        tfjob.run_tfjob(_api(fake), manifest, poll_seconds=1, timeout=3, echo=lambda _: None,
                        sleep=lambda _: None, clock=lambda: next(ticks))
    assert fake.methods()[-1] == "DELETE"

    def interrupted(_seconds):
        raise KeyboardInterrupt

    with FakeKubernetes(("Created", "Running")) as fake, pytest.raises(KeyboardInterrupt):
        tfjob.run_tfjob(_api(fake), manifest, echo=lambda _: None, sleep=interrupted)
    assert fake.methods() == ["POST", "GET", "DELETE"]


def test_a_refused_create_explains_the_missing_rbac():
    manifest = tfjob.tfjob_manifest("j", "ml", "img", ef.Cluster(workers=2), ef.Resources(),
                                    ARGS)
    with FakeKubernetes(forbid=True) as fake, pytest.raises(tfjob.TFJobError) as info:
        tfjob.run_tfjob(_api(fake), manifest, echo=lambda _: None)
    assert "HTTP 403" in str(info.value) and "needs RBAC" in str(info.value)
    assert fake.methods() == ["POST"]


# -- the entry point: stage, submit, copy back -------------------------------------------------
def _kubeconfig(path: Path, host: str) -> Path:
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "fake",
        "clusters": [{"name": "fake", "cluster": {"server": host}}],
        "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "u"}}],
        "users": [{"name": "u", "user": {"token": "t"}}]}))
    return path


def _replicas_write_the_model(manifest):
    """Plays the TFJob's chief: writes the model where the job's args say."""
    args = _container(manifest, "Worker")["args"]
    model = Path(args[args.index("--model") + 1])
    assert (Path(args[args.index("--transformed") + 1]) / "transform.json").is_file()
    assert Path(args[args.index("--spec") + 1]).is_file()
    (model / "export").mkdir(parents=True)
    (model / "train.json").write_text('{"global_step": 300}')


def test_main_stages_submits_and_copies_the_model_back(tmp_path, monkeypatch):
    shared = tmp_path / "shared"
    pipeline = dataclasses.replace(taxi.pipeline, run_config=ef.RunConfig(
        cluster=ef.Cluster(workers=2, shared_dir=str(shared))))
    spec = tmp_path / "pipeline.json"
    spec.write_text(pipeline.to_json())
    transformed = tmp_path / "transformed"
    transformed.mkdir()
    (transformed / "transform.json").write_text("{}")
    with FakeKubernetes(on_create=_replicas_write_the_model) as fake:
        monkeypatch.setenv("KUBECONFIG", str(_kubeconfig(tmp_path / "kubeconfig", fake.host)))
        code = tfjob.main(["--spec", str(spec), "--transformed", str(transformed), "--model",
                           str(tmp_path / "model"), "--image", "img:1", "--namespace", "ml",
                           "--name", "taxi-train-x", "--poll-seconds", "0"])
    assert code == 0
    assert json.loads((tmp_path / "model" / "train.json").read_text()) == {"global_step": 300}
    assert fake.methods()[0] == "POST" and fake.methods()[-1] == "DELETE"
    sent = fake.requests[0].body
    assert _container(sent, "Worker")["args"][1] == str(shared / "taxi-train-x" / "pipeline.json")
    assert ef.Pipeline.from_json((shared / "taxi-train-x" / "pipeline.json").read_text()) == \
        pipeline


def test_main_requires_a_shared_dir(tmp_path, capsys):
    spec = tmp_path / "pipeline.json"
    spec.write_text(dataclasses.replace(taxi.pipeline, run_config=ef.RunConfig(
        cluster=ef.Cluster(workers=2))).to_json())
    code = tfjob.main(["--spec", str(spec), "--transformed", str(tmp_path), "--model",
                       str(tmp_path / "m"), "--image", "img", "--namespace", "ml"])
    assert code == 1
    assert "needs run_config.cluster.shared_dir" in capsys.readouterr().err


# -- compiled for KFP: the train task submits the TFJob ----------------------------------------
def _multi_worker(**cluster):
    shared = ef.Resources(cpu_request="4", accelerator=ef.Accelerator("nvidia-tesla-t4"),
                          node_pool="gpu-pool", pvcs=(ef.PvcMount("shared", "/mnt/shared"),))
    return dataclasses.replace(taxi.pipeline, resources={"train": shared},
                               run_config=ef.RunConfig(cluster=ef.Cluster(**cluster)))


def test_compiled_train_task_runs_the_tfjob_submitter(tmp_path):
    from estflow.pipelines import kfp_compiler
    from tests.pipelines.kfp_ir import Ir

    path = tmp_path / "mw.yaml"
    kfp_compiler.compile_pipeline(_multi_worker(workers=2, shared_dir="/mnt/shared"), path,
                                  image="img:1")
    ir = Ir(path)
    source = "\n".join(ir.container("train")["command"])
    assert "from estflow.components import tfjob as step" in source
    assert "'--image', 'img:1'" in source and "'--model', model.path" in source
    assert "resources" not in ir.container("train")  # the replicas get the GPU, not the task
    train = ir.k8s("train")
    assert not train.node_selector.labels
    assert [p.constant for p in train.pvc_mount] == ["shared"]  # staging on the shared PVC
    assert "tfjob" not in "\n".join(ir.container("evaluate")["command"])


def test_compiling_a_tfjob_needs_the_shared_dir(tmp_path):
    from estflow.pipelines import kfp_compiler

    with pytest.raises(kfp_compiler.CompileError, match="shared_dir"):
        kfp_compiler.compile_pipeline(_multi_worker(workers=2), tmp_path / "x.yaml")
