"""The multi-worker train task with ``Cluster(job_kind="tfjob")``: TFJob manifests, validated
against the Training Operator's real CRD schema (v1.9.3, tests/components/schemas/), and
submit/follow/logs/cleanup through the real ``kubernetes`` client against a fake Kubernetes API
server on 127.0.0.1 (tests/components/fake_k8s_api.py stands in for a cluster with the
Training Operator, which cannot run here). The TrainJob side is in test_trainjob.py."""

import dataclasses
import json
from pathlib import Path

import pytest
from kubernetes import client as k8s

import estflow.dsl as ef
from estflow.components.tfjob import __main__ as tfjob
from estflow.components.tfjob import follow
from estflow.components.tfjob import manifests
from estflow.components.tfjob.submitter import Submitter
from estflow.components.tfjob.submitter import job_name
from estflow.pipelines.examples import taxi
from tests.components import crd_schemas
from tests.components.fake_k8s_api import FakeKubernetes

GPU = ef.Resources(cpu_request="4", memory_request="16Gi", memory_limit="16Gi",
                   accelerator=ef.Accelerator("nvidia-tesla-t4", count=2), node_pool="gpu-pool",
                   tolerations=(ef.Toleration("dedicated", operator="Equal", value="ml"),),
                   pvcs=(ef.PvcMount("shared", "/mnt/shared"),),
                   secrets_as_env=(ef.SecretEnv("gcp", {"key": "GCP_KEY"}),),
                   retries=2, timeout_seconds=7200)
ARGS = ("--spec", "/mnt/shared/j/pipeline.json", "--transformed", "/mnt/shared/j/transformed",
        "--model", "/mnt/shared/j/model")
SUBMITTER = Submitter(namespace="ml", pod_name="taxi-run-train-123", pod_uid="pod-uid-1",
                      service_account="pipeline-runner", image_pull_secrets=("regcred",),
                      run_key="run-1/taxi.root.train")
OWNER = {"apiVersion": "v1", "kind": "Pod", "name": "taxi-run-train-123", "uid": "pod-uid-1"}


def _request(cluster, resources=GPU, name="taxi-train-1", submitter=SUBMITTER):
    return manifests.JobRequest(name=name, image="img:1", cluster=cluster, resources=resources,
                                args=ARGS, submitter=submitter,
                                deadline_seconds=manifests.job_deadline(resources.timeout_seconds))


def _tfjob(name="j"):
    cluster = ef.Cluster(workers=2, job_kind="tfjob")
    return manifests.tfjob_manifest(_request(cluster, ef.Resources(), name))


def clients(fake: FakeKubernetes, **clock) -> follow.Clients:
    config = k8s.Configuration()
    config.host = fake.host
    api = k8s.ApiClient(config)
    return follow.Clients(custom=k8s.CustomObjectsApi(api), core=k8s.CoreV1Api(api), **clock)


def _container(manifest, replica):
    return manifest["spec"]["tfReplicaSpecs"][replica]["template"]["spec"]["containers"][0]


def _as_k8s_pod_template(template: dict) -> dict:
    """Round trip through the client's V1PodTemplateSpec: a misspelled field would be dropped."""
    api = k8s.ApiClient()
    response = type("Response", (), {"data": json.dumps(template)})()
    return api.sanitize_for_serialization(api.deserialize(response, "V1PodTemplateSpec"))


# -- manifest ------------------------------------------------------------------------------------
def test_multi_worker_mirrored_manifest_is_a_worker_only_tfjob():
    cluster = ef.Cluster(workers=3, shared_dir="/mnt/shared", job_kind="tfjob")
    manifest = manifests.tfjob_manifest(_request(cluster))
    assert crd_schemas.errors("tfjob-v1.9.3", manifest) == []
    assert (manifest["apiVersion"], manifest["kind"]) == ("kubeflow.org/v1", "TFJob")
    assert manifest["metadata"]["namespace"] == "ml"
    assert manifest["metadata"]["ownerReferences"] == [OWNER]  # a killed submitter's job goes
    specs = manifest["spec"]["tfReplicaSpecs"]
    assert list(specs) == ["Worker"]  # worker 0 is the chief, as in `estflow run --workers`
    assert specs["Worker"]["replicas"] == 3 and specs["Worker"]["restartPolicy"] == "OnFailure"
    assert manifest["spec"]["runPolicy"] == {"cleanPodPolicy": "Running", "backoffLimit": 2,
                                             "ttlSecondsAfterFinished": 86400,
                                             "activeDeadlineSeconds": 7200 - 600}
    worker = _container(manifest, "Worker")
    assert worker["name"] == "tensorflow" and worker["image"] == "img:1"
    assert worker["command"] == ["python", "-m", "estflow.components.train"]
    assert worker["args"] == list(ARGS)
    assert worker["resources"] == {"requests": {"cpu": "4", "memory": "16Gi"},
                                   "limits": {"memory": "16Gi", "nvidia.com/gpu": "2"}}
    assert worker["env"][0]["valueFrom"]["secretKeyRef"] == {"name": "gcp", "key": "key",
                                                             "optional": False}
    template = specs["Worker"]["template"]
    # Istio's sidecar never exits: without this the pods never finish in a profile namespace.
    assert template["metadata"]["annotations"] == {"sidecar.istio.io/inject": "false"}
    pod = template["spec"]
    assert pod["serviceAccountName"] == "pipeline-runner"  # not the namespace's default
    assert pod["imagePullSecrets"] == [{"name": "regcred"}]
    assert pod["nodeSelector"] == {"cloud.google.com/gke-accelerator": "nvidia-tesla-t4",
                                   "cloud.google.com/gke-nodepool": "gpu-pool"}
    assert pod["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
        {"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoSchedule"}]
    assert pod["volumes"] == [{"name": "pvc-0", "persistentVolumeClaim": {"claimName": "shared"}}]
    assert worker["volumeMounts"] == [{"name": "pvc-0", "mountPath": "/mnt/shared"}]
    assert _as_k8s_pod_template(template) == template  # every field is a real PodTemplateSpec one


def test_parameter_server_manifest_has_chief_workers_ps_and_evaluator():
    cluster = ef.Cluster(workers=2, parameter_servers=1, evaluator=True, shared_dir="gs://b/x",
                         ps_resources=ef.Resources(cpu_request="2", memory_request="8Gi"),
                         evaluator_resources=ef.Resources(cpu_request="1"), job_kind="tfjob")
    manifest = manifests.tfjob_manifest(_request(cluster))
    assert crd_schemas.errors("tfjob-v1.9.3", manifest) == []
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
        assert spec["template"]["metadata"]["annotations"]["sidecar.istio.io/inject"] == "false"
        assert _as_k8s_pod_template(spec["template"]) == spec["template"]


def test_the_schema_check_catches_a_misspelled_field():
    manifest = _tfjob()
    manifest["spec"]["runPolicy"]["ttlSecondsAfterFinish"] = 60  # the API server would drop it
    assert any("ttlSecondsAfterFinish" in e for e in crd_schemas.errors("tfjob-v1.9.3",
                                                                          manifest))


def test_outside_a_pod_there_is_no_owner_and_no_service_account():
    manifest = manifests.tfjob_manifest(_request(ef.Cluster(workers=2, job_kind="tfjob"),
                                                 submitter=Submitter(namespace="ml")))
    assert "ownerReferences" not in manifest["metadata"]
    assert "serviceAccountName" not in manifest["spec"]["tfReplicaSpecs"]["Worker"][
        "template"]["spec"]
    assert crd_schemas.errors("tfjob-v1.9.3", manifest) == []


# -- run_job against the fake API server ---------------------------------------------------------
def test_run_job_follows_the_job_to_success_copies_logs_then_deletes_it():
    manifest = _tfjob(name="taxi-train-1")
    lines = []
    with FakeKubernetes(("Created", "Running", "Running", "Succeeded")) as fake:
        job = follow.run_job(clients(fake), follow.TFJOB, [manifest], poll_seconds=0,
                             echo=lines.append)
    assert follow.tfjob_state(job)[0] == "Succeeded"
    assert fake.methods() == ["POST", "GET", "GET", "GET", "GET", "DELETE"]
    create = fake.job_requests()[0]
    assert create.path == "/apis/kubeflow.org/v1/namespaces/ml/tfjobs"
    assert create.query == {"fieldValidation": "Strict"}  # unknown fields refused, not dropped
    assert create.body == manifest  # what the API server received
    assert fake.job_requests()[-1].body["propagationPolicy"] == "Foreground"
    logs = [i for i, line in enumerate(lines) if line.startswith("[taxi-train-1-worker-")]
    assert lines[:4] == [
        "TFJob ml/taxi-train-1: submitted (Worker x2)",
        "TFJob ml/taxi-train-1: Created: taxi-train-1 is created.",
        "TFJob ml/taxi-train-1: Running [Worker 1 active]: taxi-train-1 is running.",
        "TFJob ml/taxi-train-1: Succeeded: taxi-train-1 is succeeded."]
    assert "[taxi-train-1-worker-1] taxi-train-1-worker-1 step 100: loss 0.5" in lines
    assert logs and max(logs) < lines.index("TFJob ml/taxi-train-1: deleted")  # logs first
    assert lines[-1] == "TFJob ml/taxi-train-1: deleted"


def test_a_failed_job_fails_the_task_with_its_message_logs_and_is_kept():
    manifest = _tfjob()
    script = ("Created", "Running", ("Failed", "TFJob j has failed because 1 Worker "
                                               "replica(s) failed."))
    lines = []
    with FakeKubernetes(script) as fake, pytest.raises(follow.JobFailed) as info:
        follow.run_job(clients(fake), follow.TFJOB, [manifest], poll_seconds=0,
                       echo=lines.append)
    assert str(info.value).startswith("TFJob ml/j failed: TFJob j has failed because 1 Worker "
                                      "replica(s) failed.")
    assert "DELETE" not in fake.methods() and fake.jobs  # kept, with its pods and logs
    assert "[j-worker-0] j-worker-0 step 100: loss 0.5" in lines  # in the task's log too


def test_timeout_and_interrupt_still_delete_the_job():
    manifest = _tfjob()
    ticks = iter(range(100))
    with FakeKubernetes(("Created", "Running")) as fake, pytest.raises(
            follow.JobError, match=r"did not finish within 3s \(last state Running\)"):
        follow.run_job(clients(fake, sleep=lambda _: None, clock=lambda: next(ticks)),
                       follow.TFJOB, [manifest], poll_seconds=1, timeout=3, echo=lambda _: None)
    assert fake.methods()[-1] == "DELETE"

    def interrupted(_seconds):
        raise KeyboardInterrupt

    with FakeKubernetes(("Created", "Running")) as fake, pytest.raises(KeyboardInterrupt):
        follow.run_job(clients(fake, sleep=interrupted), follow.TFJOB, [manifest],
                       echo=lambda _: None)
    assert fake.methods() == ["POST", "GET", "DELETE"]


def test_a_refused_create_explains_the_missing_rbac():
    with FakeKubernetes(forbid=True) as fake, pytest.raises(follow.JobError) as info:
        follow.run_job(clients(fake), follow.TFJOB, [_tfjob()], echo=lambda _: None)
    assert "HTTP 403" in str(info.value) and "needs RBAC" in str(info.value)
    assert fake.methods() == ["POST"]


def test_without_the_training_operator_the_error_points_at_trainjob():
    """Kubeflow 1.11+ has no tfjobs CRD: the create is a 404."""
    with FakeKubernetes(schemas={"trainjobs": "trainjob-v2.2.1"}) as fake, \
            pytest.raises(follow.JobError) as info:
        follow.run_job(clients(fake), follow.TFJOB, [_tfjob()], echo=lambda _: None)
    assert "HTTP 404" in str(info.value) and "job_kind='trainjob'" in str(info.value)


def test_a_retry_adopts_the_running_job_instead_of_submitting_a_second():
    manifest = _tfjob()
    second_pod = {**OWNER, "name": "taxi-run-train-456", "uid": "pod-uid-2"}
    with FakeKubernetes(("Created", "Running", "Running", "Succeeded")) as fake:
        api = clients(fake)
        api.custom.create_namespaced_custom_object("kubeflow.org", "v1", "ml", "tfjobs",
                                                   manifest)  # the first, killed, attempt
        lines = []
        follow.run_job(api, follow.TFJOB, [manifest], poll_seconds=0, echo=lines.append,
                       owner=second_pod)
        patch = next(r for r in fake.job_requests() if r.method == "PATCH")
    assert len([r for r in fake.job_requests() if r.method == "POST"]) == 2  # one refused
    assert "TFJob ml/j: submitted by an earlier attempt of this task (Created); following it" \
        in lines
    # it now outlives neither pod: garbage collection waits for both owners
    assert patch.body == {"metadata": {"ownerReferences": [OWNER, second_pod]}}


def test_a_retry_replaces_a_failed_job_of_the_same_name():
    manifest = _tfjob()
    with FakeKubernetes([("Failed", "OOMKilled")], resubmitted=("Running", "Succeeded")) as fake:
        api = clients(fake)
        api.custom.create_namespaced_custom_object("kubeflow.org", "v1", "ml", "tfjobs",
                                                   manifest)
        lines = []
        follow.run_job(api, follow.TFJOB, [manifest], poll_seconds=0, echo=lines.append)
    assert [r.method for r in fake.job_requests()][:5] == ["POST", "POST", "GET", "DELETE",
                                                           "GET"]
    assert any("deleting it and submitting again" in line for line in lines)


# -- the entry point: stage, submit, copy back ---------------------------------------------------
def kubeconfig(path: Path, host: str) -> Path:
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "fake",
        "clusters": [{"name": "fake", "cluster": {"server": host}}],
        "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "u"}}],
        "users": [{"name": "u", "user": {"token": "t"}}]}))
    return path


def submitter_pod(name="taxi-abc-system-container-impl-123", uid="pod-uid-1"):
    """The KFP task's pod, as the API returns it."""
    return {"metadata": {"name": name, "namespace": "ml", "uid": uid,
                         "labels": {"pipeline/runid": "5b1e-run"},
                         "annotations": {"workflows.argoproj.io/node-name":
                                         "taxi-abc.root.train.executor(1)"}},
            "spec": {"serviceAccountName": "pipeline-runner",
                     "imagePullSecrets": [{"name": "regcred"}],
                     "containers": [{"name": "main", "image": "img:1"}]}}


def replicas_write_the_model(manifest):
    """Plays the job's chief: writes the model where the job's args say."""
    spec = manifest["spec"]
    args = (spec["trainer"]["args"] if "trainer" in spec
            else _container(manifest, "Worker")["args"])
    model = Path(args[args.index("--model") + 1])
    assert (Path(args[args.index("--transformed") + 1]) / "transform.json").is_file()
    assert Path(args[args.index("--spec") + 1]).is_file()
    (model / "export").mkdir(parents=True, exist_ok=True)
    (model / "train.json").write_text('{"global_step": 300}')


def run_main(tmp_path, monkeypatch, fake, job_kind, *extra, resources=None):
    shared = tmp_path / "shared"
    pipeline = dataclasses.replace(taxi.pipeline, resources=resources or {},
                                   run_config=ef.RunConfig(
        cluster=ef.Cluster(workers=2, shared_dir=str(shared), job_kind=job_kind)))
    spec = tmp_path / "pipeline.json"
    spec.write_text(pipeline.to_json())
    transformed = tmp_path / "transformed"
    transformed.mkdir(exist_ok=True)
    (transformed / "transform.json").write_text("{}")
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig(tmp_path / "kubeconfig", fake.host)))
    monkeypatch.setenv("KFP_POD_NAME", "taxi-abc-system-container-impl-123")
    monkeypatch.setenv("NAMESPACE", "ml")
    code = tfjob.main(["--spec", str(spec), "--transformed", str(transformed), "--model",
                       str(tmp_path / "model"), "--image", "img:1", "--poll-seconds", "0",
                       *extra])
    return code, pipeline, shared


def test_main_stages_submits_a_tfjob_and_copies_the_model_back(tmp_path, monkeypatch):
    with FakeKubernetes(on_create=replicas_write_the_model,
                        pods={"taxi-abc-system-container-impl-123": submitter_pod()}) as fake:
        code, pipeline, shared = run_main(tmp_path, monkeypatch, fake, "tfjob")
    assert code == 0
    assert json.loads((tmp_path / "model" / "train.json").read_text()) == {"global_step": 300}
    assert fake.methods() == ["POST", "GET", "GET", "GET", "DELETE"]
    sent = fake.job_requests()[0].body
    name = sent["metadata"]["name"]
    assert name == job_name(pipeline.name, "5b1e-run/taxi-abc.root.train.executor")
    assert sent["metadata"]["ownerReferences"][0]["uid"] == "pod-uid-1"
    pod = sent["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]
    assert (pod["serviceAccountName"], pod["imagePullSecrets"]) == ("pipeline-runner",
                                                                   [{"name": "regcred"}])
    assert _container(sent, "Worker")["args"][1] == str(shared / name / "pipeline.json")
    assert ef.Pipeline.from_json((shared / name / "pipeline.json").read_text()) == pipeline


def test_the_job_ends_before_the_task_so_the_model_is_still_copied_back():
    """The train task and its job shared one deadline: a job using its whole window left the
    task no time to copy the model back. The job gets what is left of the task's timeout after
    staging, less the copy-back margin (10 minutes, or a quarter of a short timeout)."""
    assert manifests.job_deadline(None) is None
    assert manifests.job_deadline(7200) == 7200 - manifests.COPY_BACK_MARGIN_SECONDS == 6600
    assert manifests.job_deadline(7200, elapsed=120.5) == 6479
    assert manifests.job_deadline(1200) == 900  # a quarter of a short timeout
    with pytest.raises(ValueError, match="timeout_seconds=100.*staging took"):
        manifests.job_deadline(100, elapsed=80)


@pytest.mark.parametrize("job_kind, field", [("tfjob", ("runPolicy", "activeDeadlineSeconds")),
                                             ("trainjob", ("activeDeadlineSeconds",))])
def test_main_sends_a_job_deadline_shorter_than_the_task_timeout(tmp_path, monkeypatch,
                                                                 job_kind, field):
    with FakeKubernetes(on_create=replicas_write_the_model,
                        pods={"taxi-abc-system-container-impl-123": submitter_pod()}) as fake:
        code, _, _ = run_main(tmp_path, monkeypatch, fake, job_kind,
                              resources={"train": ef.Resources(timeout_seconds=3600)})
    assert code == 0
    sent = fake.job_requests()[0].body["spec"]
    for key in field:
        sent = sent[key]
    assert 3600 - 600 - 60 < sent <= 3600 - 600  # staging took a little of the task's time
    assert (tmp_path / "model" / "train.json").is_file()


def test_main_requires_a_shared_dir(tmp_path, capsys):
    spec = tmp_path / "pipeline.json"
    spec.write_text(dataclasses.replace(taxi.pipeline, run_config=ef.RunConfig(
        cluster=ef.Cluster(workers=2))).to_json())
    code = tfjob.main(["--spec", str(spec), "--transformed", str(tmp_path), "--model",
                       str(tmp_path / "m"), "--image", "img", "--namespace", "ml"])
    assert code == 1
    assert "needs run_config.cluster.shared_dir" in capsys.readouterr().err


# -- compiled for KFP: the train task submits the job --------------------------------------------
def _multi_worker(**cluster):
    shared = ef.Resources(cpu_request="4", accelerator=ef.Accelerator("nvidia-tesla-t4"),
                          node_pool="gpu-pool", pvcs=(ef.PvcMount("shared", "/mnt/shared"),))
    return dataclasses.replace(taxi.pipeline, resources={"train": shared},
                               run_config=ef.RunConfig(cluster=ef.Cluster(**cluster)),
                               push=ef.PushTarget("gs://estflow-examples/models", "taxi"))


def test_compiled_train_task_runs_the_job_submitter(tmp_path):
    from estflow.pipelines.kubeflow import compiler as kfp_compiler
    from tests.pipelines.kfp_ir import Ir

    path = tmp_path / "mw.yaml"
    kfp_compiler.compile_pipeline(_multi_worker(workers=2, shared_dir="/mnt/shared"), path,
                                  image="img:1")
    ir = Ir(path)
    source = "\n".join(ir.container("train")["command"])
    assert "from estflow.components import tfjob as step" in source
    # the replicas get the step's GPU variant; the submitting task runs the base image
    assert "'--image', 'img:1-gpu'" in source and "'--model', model.path" in source
    assert ir.container("train")["image"] == "img:1"
    task = ir.container("train").get("resources", {})
    assert "accelerator" not in task and task.get("cpuRequest", 0) < 4  # the replicas get them
    train = ir.k8s("train")
    assert not train.node_selector.labels
    assert [p.constant for p in train.pvc_mount] == ["shared"]  # staging on the shared PVC
    assert "tfjob" not in "\n".join(ir.container("evaluate")["command"])


def test_compiling_a_training_job_needs_the_shared_dir(tmp_path):
    from estflow.pipelines.kubeflow import compiler as kfp_compiler

    with pytest.raises(kfp_compiler.CompileError, match="shared_dir"):
        kfp_compiler.compile_pipeline(_multi_worker(workers=2), tmp_path / "x.yaml")
