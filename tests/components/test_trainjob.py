"""Multi-worker training on Kubeflow Trainer v2 (``Cluster(job_kind="trainjob")``, the default):
TF_CONFIG computed from a pod's JobSet identity (pure functions), the TrainJob in both API forms
and estflow's ClusterTrainingRuntime validated against the real CRD schemas of Trainer 2.1.0
and 2.2.1 (tests/components/schemas/), and submit/follow/logs/cleanup against the fake
Kubernetes API server (tests/components/fake_k8s_api.py)."""

import json
from pathlib import Path

import pytest
import yaml

import estflow.dsl as ef
from estflow.components.tfjob import follow
from estflow.components.tfjob import manifests
from estflow.components.tfjob import node
from estflow.components.tfjob import tf_config as tfc
from estflow.components.tfjob.submitter import job_name
from estflow.components.tfjob.submitter import submitter_from_pod
from tests.components import crd_schemas
from tests.components.fake_k8s_api import FakeKubernetes
from tests.components.test_tfjob import ARGS
from tests.components.test_tfjob import GPU
from tests.components.test_tfjob import OWNER
from tests.components.test_tfjob import SUBMITTER
from tests.components.test_tfjob import clients
from tests.components.test_tfjob import replicas_write_the_model
from tests.components.test_tfjob import run_main
from tests.components.test_tfjob import submitter_pod

REPO = Path(__file__).resolve().parents[2]
RUNTIME_YAML = REPO / "pipelines" / "kubernetes" / "trainer-runtime.yaml"


def _pod_env(jobset: str, index: int, **extra) -> dict[str, str]:
    """What a pod of the JobSet has in its environment: Kubernetes' JOB_COMPLETION_INDEX and
    HOSTNAME, the runtime's downward-API variables, the TrainJob's trainer.env."""
    return {"JOB_COMPLETION_INDEX": str(index), "HOSTNAME": f"{jobset}-node-0-{index}",
            "JOBSET_NAME": jobset, "REPLICATED_JOB_NAME": "node", "JOB_INDEX": "0", **extra}


# -- TF_CONFIG from the JobSet identity (pure) ---------------------------------------------------
def test_multi_worker_mirrored_pods_are_the_workers_in_index_order():
    identity = tfc.identity_from_env(_pod_env("taxi-train-1a2b", 2))
    config = tfc.tf_config(identity, tfc.roles(3))
    assert config == {"cluster": {"worker": [
        "taxi-train-1a2b-node-0-0.taxi-train-1a2b:2222",
        "taxi-train-1a2b-node-0-1.taxi-train-1a2b:2222",
        "taxi-train-1a2b-node-0-2.taxi-train-1a2b:2222"]},
        "task": {"type": "worker", "index": 2}}


def test_parameter_server_roles_are_laid_out_chief_workers_ps_evaluator():
    laid_out = tfc.roles(2, parameter_servers=1, evaluator=True)
    assert laid_out == (("chief", 1), ("worker", 2), ("ps", 1), ("evaluator", 1))
    assert tfc.parse_roles(tfc.format_roles(laid_out)) == laid_out
    tasks = [tfc.tf_config(tfc.identity_from_env(_pod_env("j", i)), laid_out)["task"]
             for i in range(5)]
    assert tasks == [{"type": "chief", "index": 0}, {"type": "worker", "index": 0},
                     {"type": "worker", "index": 1}, {"type": "ps", "index": 0},
                     {"type": "evaluator", "index": 0}]
    config = tfc.tf_config(tfc.identity_from_env(_pod_env("j", 3)), laid_out, port=3000)
    assert config["cluster"]["ps"] == ["j-node-0-3.j:3000"]


def test_every_pod_of_the_jobset_derives_the_same_cluster_and_its_own_task():
    """As the runtime and the TrainJob set the environment: all pods agree, and TF_CONFIG is
    what estflow's train step parses (worker 0 is the chief)."""
    from estflow.estimator import distribute

    request = manifests.JobRequest("taxi-train-1a2b", "img", ef.Cluster(workers=3), GPU, ARGS,
                                   SUBMITTER)
    trainer_env = {e["name"]: e["value"] for e in
                   manifests.trainjob_manifests(request)[0]["spec"]["trainer"]["env"]
                   if "value" in e}
    configs = []
    for i in range(3):
        argv, env = node.command_for(_pod_env("taxi-train-1a2b", i, **trainer_env),
                                     list(ARGS), python="python")
        assert argv == ["python", "-m", "estflow.components.train", *ARGS]
        configs.append(json.loads(env["TF_CONFIG"]))
    assert len({json.dumps(c["cluster"], sort_keys=True) for c in configs}) == 1
    specs = [distribute.parse_tf_config(json.dumps(c)) for c in configs]
    assert [s.is_chief for s in specs] == [True, False, False]


@pytest.mark.parametrize("env, needle", [
    ({"JOB_COMPLETION_INDEX": "0"}, "JOBSET_NAME"),  # not a JobSet pod
    (_pod_env("j", 0, JOB_COMPLETION_INDEX="x"), "JOB_COMPLETION_INDEX"),
    (_pod_env("j", 1, HOSTNAME="j-worker-1"), "enableDNSHostnames"),
    (_pod_env("Bad_Name", 0), "DNS label"),
])
def test_an_environment_that_does_not_identify_the_pod_is_refused(env, needle):
    with pytest.raises(tfc.TFConfigError, match=needle):
        tfc.identity_from_env(env)


def test_an_index_outside_the_cluster_and_bad_roles_are_refused():
    with pytest.raises(tfc.TFConfigError, match="numNodes"):
        tfc.tf_config(tfc.identity_from_env(_pod_env("j", 2)), tfc.roles(2))
    for text in ("", "worker:0", "boss:1", "worker:1,worker:2"):
        with pytest.raises(tfc.TFConfigError, match="ESTFLOW_TF_ROLES"):
            tfc.parse_roles(text)


def test_the_node_entry_point_execs_the_train_step_with_tf_config(monkeypatch, capsys):
    for key, value in _pod_env("j", 1, ESTFLOW_TF_ROLES="worker:2").items():
        monkeypatch.setenv(key, value)
    calls = []
    assert node.main(["--spec", "s"], execute=lambda *a: calls.append(a)) == 0
    (path, argv, env), = calls
    assert argv[1:] == ["-m", "estflow.components.train", "--spec", "s"]
    assert json.loads(env["TF_CONFIG"])["task"] == {"type": "worker", "index": 1}
    monkeypatch.delenv("JOB_COMPLETION_INDEX")
    assert node.main([], execute=lambda *a: calls.append(a)) == 1
    assert "JOB_COMPLETION_INDEX" in capsys.readouterr().err


# -- the manifests ---------------------------------------------------------------------------------
def _trainjobs(cluster=None, resources=GPU, submitter=SUBMITTER):
    request = manifests.JobRequest("taxi-train-1a2b", "img:1", cluster or ef.Cluster(workers=3),
                                   resources, ARGS, submitter,
                                   deadline_seconds=manifests.job_deadline(
                                       resources.timeout_seconds))
    return manifests.trainjob_manifests(request)


def test_each_trainjob_form_is_valid_for_its_trainer_release_only():
    v22, v21 = _trainjobs()
    assert crd_schemas.errors("trainjob-v2.2.1", v22) == []
    assert crd_schemas.errors("trainjob-v2.1.0", v21) == []
    # Trainer 2.2 removed podTemplateOverrides, 2.1 does not know runtimePatches: one manifest
    # cannot serve Kubeflow 1.11 and 26.03, hence two forms and a strict create.
    assert any("podTemplateOverrides" in e for e in crd_schemas.errors("trainjob-v2.2.1", v21))
    assert any("runtimePatches" in e for e in crd_schemas.errors("trainjob-v2.1.0", v22))


def test_the_trainjob_carries_the_pods_settings():
    v22, v21 = _trainjobs()
    for manifest in (v22, v21):
        assert manifest["metadata"]["ownerReferences"] == [OWNER]
        assert manifest["spec"]["runtimeRef"] == {
            "name": "estflow-tensorflow", "apiGroup": "trainer.kubeflow.org",
            "kind": "ClusterTrainingRuntime"}
        trainer = manifest["spec"]["trainer"]
        assert trainer["numNodes"] == 3 and trainer["image"] == "img:1"
        assert trainer["command"] == ["python", "-m", "estflow.components.tfjob.node"]
        assert trainer["resourcesPerNode"] == {"requests": {"cpu": "4", "memory": "16Gi"},
                                               "limits": {"memory": "16Gi",
                                                          "nvidia.com/gpu": "2"}}
        env = {e["name"]: e for e in trainer["env"]}
        assert env["ESTFLOW_TF_ROLES"]["value"] == "worker:3"
        assert env["GCP_KEY"]["valueFrom"]["secretKeyRef"]["name"] == "gcp"
    template = v22["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"][
        "replicatedJobs"][0]["template"]["spec"]["template"]
    override = v21["spec"]["podTemplateOverrides"][0]
    assert override["targetJobs"] == [{"name": "node"}]
    assert v22["spec"]["activeDeadlineSeconds"] == 7200 - 600  # the copy-back's margin
    for pod in (template, override):
        assert pod["metadata"]["annotations"] == {"sidecar.istio.io/inject": "false"}
        spec = pod["spec"]
        assert spec["serviceAccountName"] == "pipeline-runner"
        assert spec["imagePullSecrets"] == [{"name": "regcred"}]
        assert spec["nodeSelector"]["cloud.google.com/gke-nodepool"] == "gpu-pool"
        assert spec["containers"] == [{"name": "node", "volumeMounts": [
            {"name": "pvc-0", "mountPath": "/mnt/shared"}]}]


def test_a_parameter_server_trainjob_has_one_pod_per_task():
    cluster = ef.Cluster(workers=2, parameter_servers=1, evaluator=True)
    v22, v21 = _trainjobs(cluster, ef.Resources())
    assert v22["spec"]["trainer"]["numNodes"] == 5
    assert crd_schemas.errors("trainjob-v2.2.1", v22) == []
    assert crd_schemas.errors("trainjob-v2.1.0", v21) == []


def test_pods_of_their_own_need_a_tfjob():
    with pytest.raises(ef.DslError, match="job_kind='tfjob'"):
        ef.Cluster(workers=2, parameter_servers=1, ps_resources=ef.Resources(cpu_request="2"))
    with pytest.raises(ef.DslError, match="job_kind"):
        ef.Cluster(workers=2, job_kind="pytorchjob")
    assert ef.Cluster(workers=2).job_kind == "trainjob"  # what Kubeflow 1.11+ installs


def test_the_runtime_is_valid_for_both_releases_and_shipped_as_yaml():
    from estflow.pipelines.kubeflow import compiler as kfp_compiler

    runtime = manifests.cluster_training_runtime(kfp_compiler.DEFAULT_IMAGE)
    assert crd_schemas.errors("clustertrainingruntime-v2.1.0", runtime) == []
    assert crd_schemas.errors("clustertrainingruntime-v2.2.1", runtime) == []
    assert "torch" not in runtime["spec"]["mlPolicy"]  # no framework policy: TF_CONFIG is ours
    job = runtime["spec"]["template"]["spec"]["replicatedJobs"][0]
    assert job["template"]["metadata"]["labels"] == {
        "trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}
    pod = job["template"]["spec"]["template"]
    assert pod["metadata"]["annotations"] == {"sidecar.istio.io/inject": "false"}
    env = {e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"]
           for e in pod["spec"]["containers"][0]["env"]}
    assert env["JOBSET_NAME"] == "metadata.labels['jobset.sigs.k8s.io/jobset-name']"
    assert runtime["spec"]["template"]["spec"]["ttlSecondsAfterFinished"] == 86400
    assert RUNTIME_YAML.read_text() == manifests.runtime_yaml(kfp_compiler.DEFAULT_IMAGE), (
        "pipelines/kubernetes/trainer-runtime.yaml is out of date: regenerate it with "
        "estflow.components.tfjob.manifests.runtime_yaml")
    assert yaml.safe_load(RUNTIME_YAML.read_text()) == runtime


@pytest.mark.parametrize("cluster", [
    ef.Cluster(workers=2, parameter_servers=1, evaluator=True),
    ef.Cluster(workers=3),
])
def test_the_runtime_job_succeeds_when_the_chief_does(cluster):
    """Parameter servers and a PS strategy's workers block in server.join(): a Job whose
    success needs every pod never completes (GPUs held to the deadline). The runtime's Job
    succeeds on the chief's index, a field both Trainer releases' runtime schemas declare."""
    runtime = manifests.cluster_training_runtime("img")
    [job] = runtime["spec"]["template"]["spec"]["replicatedJobs"]
    assert job["template"]["spec"]["successPolicy"] == {"rules": [{"succeededIndexes": "0"}]}
    assert job["template"]["spec"]["completionMode"] == "Indexed"  # successPolicy needs it
    first_role, _ = tfc.roles(cluster.workers, cluster.parameter_servers,
                                    cluster.evaluator)[0]
    assert first_role == ("chief" if cluster.parameter_servers else "worker")
    for release in ("v2.1.0", "v2.2.1"):
        schema = crd_schemas.crd(f"clustertrainingruntime-{release}")
        job_spec = (schema["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]
                    ["spec"]["properties"]["template"]["properties"]["spec"]["properties"]
                    ["replicatedJobs"]["items"]["properties"]["template"]["properties"]
                    ["spec"]["properties"])
        assert "succeededIndexes" in \
            job_spec["successPolicy"]["properties"]["rules"]["items"]["properties"]
        assert crd_schemas.errors(f"clustertrainingruntime-{release}", runtime) == []


# -- the submitter's identity ----------------------------------------------------------------------
def test_the_job_name_is_the_same_on_every_retry_of_the_task():
    first = submitter_from_pod(submitter_pod())
    retry = submitter_from_pod(submitter_pod(name="taxi-abc-system-container-impl-999",
                                             uid="pod-uid-2"))
    assert first.run_key == retry.run_key == "5b1e-run/taxi-abc.root.train.executor"
    assert job_name("taxi", first.run_key) == job_name("taxi", retry.run_key)
    assert job_name("taxi", "other-run/x") != job_name("taxi", first.run_key)
    assert job_name("taxi", None) != job_name("taxi", None)  # no run: random
    name = job_name("9 Chicago Taxi: the very long pipeline name indeed", first.run_key)
    assert name[0].isalpha() and len(f"{name}-node-0-99") <= 63
    assert first.owner_reference() == {"apiVersion": "v1", "kind": "Pod",
                                       "name": "taxi-abc-system-container-impl-123",
                                       "uid": "pod-uid-1"}


def test_a_job_in_another_namespace_is_not_owned_by_the_pod():
    other = submitter_from_pod(submitter_pod(), namespace="team-b")
    assert other.namespace == "team-b" and other.owner_reference() is None
    assert other.pod_settings() == {}  # the pod's service account is not team-b's


# -- submit / follow / cleanup against the fake API server ----------------------------------------
@pytest.mark.parametrize("release, posts, field", [
    ("trainjob-v2.2.1", 1, "runtimePatches"),
    ("trainjob-v2.1.0", 2, "podTemplateOverrides"),  # 2.2's form refused, then 2.1's
])
def test_run_job_sends_the_form_the_server_accepts(release, posts, field):
    lines = []
    with FakeKubernetes(("Created", "Running", "Succeeded"),
                        schemas={"trainjobs": release}) as fake:
        follow.run_job(clients(fake), follow.TRAINJOB, _trainjobs(), poll_seconds=0,
                       echo=lines.append)
    creates = [r for r in fake.job_requests() if r.method == "POST"]
    assert len(creates) == posts and field in creates[-1].body["spec"]
    assert all(r.query == {"fieldValidation": "Strict"} for r in creates)
    assert creates[-1].path == "/apis/trainer.kubeflow.org/v1alpha1/namespaces/ml/trainjobs"
    assert lines[0] == ("TrainJob ml/taxi-train-1a2b: submitted (3 nodes on runtime "
                        "estflow-tensorflow)")
    assert "TrainJob ml/taxi-train-1a2b: Running [node 3 active, 3 ready]" in lines
    assert "[taxi-train-1a2b-node-0-2] taxi-train-1a2b-node-0-2 step 100: loss 0.5" in lines
    assert lines[-1] == "TrainJob ml/taxi-train-1a2b: deleted"
    assert fake.methods()[-1] == "DELETE" and not fake.jobs


def test_a_failed_trainjob_is_kept_with_its_logs():
    lines = []
    with FakeKubernetes(("Running", ("Failed", "jobset failed: node-0 exited 1"))) as fake, \
            pytest.raises(follow.JobFailed, match="jobset failed: node-0 exited 1"):
        follow.run_job(clients(fake), follow.TRAINJOB, _trainjobs(), poll_seconds=0,
                       echo=lines.append)
    assert "DELETE" not in fake.methods() and fake.jobs
    assert any(line.startswith("[taxi-train-1a2b-node-0-0]") for line in lines)


def test_main_submits_a_trainjob_by_default_and_retries_a_failure(tmp_path, monkeypatch):
    """Kubeflow 1.11+: no Training Operator; the default submits a TrainJob. A failed one is
    submitted again, under the same name, up to resources['train'].retries times."""
    with FakeKubernetes([("Failed", "node-1 OOMKilled")], on_create=replicas_write_the_model,
                        schemas={"trainjobs": "trainjob-v2.1.0"},
                        resubmitted=("Running", "Succeeded"),
                        pods={"taxi-abc-system-container-impl-123": submitter_pod()}) as fake:
        code, _pipeline, _shared = run_main(tmp_path, monkeypatch, fake, "trainjob",
                                            resources={"train": ef.Resources(retries=1)})
    assert code == 0
    assert json.loads((tmp_path / "model" / "train.json").read_text()) == {"global_step": 300}
    created = [r.body for r in fake.job_requests() if r.method == "POST"]
    names = {body["metadata"]["name"] for body in created}
    assert len(names) == 1 and all(b["kind"] == "TrainJob" for b in created)
    assert list(fake.created.values()) == [2]  # the failed job, then its replacement
    assert [r.method for r in fake.job_requests()].count("DELETE") == 2  # failed one, then done
