"""Declared resources in the compiled IR, per task and per concern: cpu/memory (and the default
requests that keep every pod out of BestEffort), accelerators (GPU and TPU), GKE and free-form
node selectors, tolerations, secrets, PVCs, scratch space, retries (factor and window), timeout,
pod labels, and the placement parameters that let a run choose the accelerator and node pool.

Everything is read from the YAML parsed strictly (PipelineSpec, PlatformSpec, and each task's
``KubernetesExecutorConfig``), never as text.
"""

import dataclasses
import json
import re

import pytest

import estflow.dsl as ef
from estflow.dsl.contracts import TFJOB
from estflow.dsl.contracts import step_named
from estflow.dsl.placement import Placement
from estflow.pipelines import loader
from estflow.pipelines.kubeflow import compiler as kfp_compiler
from estflow.pipelines.kubeflow import goldens
from estflow.pipelines.kubeflow import tasks as kfp_tasks
from estflow.pipelines.kubeflow.settings import SMALL_REQUESTS
from tests.pipelines import kfp_local_fakes
from tests.pipelines.kfp_ir import Ir

TAXI = "estflow.pipelines.examples.taxi"
TAXI_GPU = "estflow.pipelines.examples.taxi_gpu"
STEP_NAMES = ("ingest", "transform", "train", "evaluate", "push")
GKE_GPU = "cloud.google.com/gke-accelerator"
GKE_TPU = "cloud.google.com/gke-tpu-accelerator"
GKE_TOPOLOGY = "cloud.google.com/gke-tpu-topology"
GKE_POOL = "cloud.google.com/gke-nodepool"


@pytest.fixture(scope="module")
def taxi():
    """The taxi example, pushing to a bucket (a Kubeflow task cannot reach its local one)."""
    pipeline = loader.load(TAXI).pipeline
    return dataclasses.replace(pipeline, push=dataclasses.replace(
        pipeline.push, base_path="gs://estflow-examples/serving_models"))


@pytest.fixture(scope="module")
def gpu(tmp_path_factory):
    """The taxi_gpu example (the golden's target), compiled."""
    path = tmp_path_factory.mktemp("kfp") / "taxi_gpu.yaml"
    return Ir(kfp_compiler.compile_pipeline(loader.load(TAXI_GPU), path).path)


def _compile(taxi, tmp_path, kfp_backend=kfp_compiler.DEFAULT_KFP_BACKEND, **resources) -> Ir:
    pipeline = dataclasses.replace(taxi, resources=resources)
    return Ir(kfp_compiler.compile_pipeline(pipeline, tmp_path / "p.yaml",
                                            kfp_backend=kfp_backend).path)


def _tolerations(config) -> list[tuple]:
    return [(t.key, t.operator, t.value, t.effect) for t in config.tolerations]


def _constant(parameter_spec) -> str:
    return parameter_spec.runtime_value.constant.string_value


# --- cpu and memory -----------------------------------------------------------------------------

def test_cpu_and_memory_requests_and_limits(taxi, tmp_path):
    ir = _compile(taxi, tmp_path, transform=ef.Resources(
        cpu_request="500m", cpu_limit="2", memory_request="512Mi", memory_limit="8Gi"))
    resources = ir.container("transform")["resources"]
    assert {k: v for k, v in resources.items() if k.startswith("resource")} == {
        "resourceCpuRequest": "500m", "resourceCpuLimit": "2",
        "resourceMemoryRequest": "512Mi", "resourceMemoryLimit": "8Gi"}
    # ...and the deprecated numeric fields older KFP backends read
    assert (resources["cpuRequest"], resources["cpuLimit"]) == (0.5, 2.0)
    assert resources["memoryLimit"] == pytest.approx(8 * 2**30 / 1e9)
    for name in set(STEP_NAMES) - {"transform"}:  # the others: the default requests only
        assert _requests(ir.container(name)) == step_named(name).requests
        assert not {"resourceCpuLimit", "resourceMemoryLimit"} & set(
            ir.container(name)["resources"])


def _requests(container) -> tuple[str, str]:
    resources = container.get("resources", {})
    return resources.get("resourceCpuRequest"), resources.get("resourceMemoryRequest")


def test_the_gpu_example_sizes_transform_and_train(gpu):
    assert gpu.container("transform")["resources"]["resourceCpuRequest"] == "2"
    assert gpu.container("transform")["resources"]["resourceMemoryRequest"] == "8Gi"
    assert gpu.container("train")["resources"]["resourceMemoryRequest"] == "16Gi"
    for name in ("ingest", "evaluate", "push"):
        assert _requests(gpu.container(name)) == step_named(name).requests
    for name in ("report", "train-placement"):
        assert _requests(gpu.container(name)) == SMALL_REQUESTS


@pytest.mark.parametrize("name", sorted(goldens.GOLDENS))
def test_no_task_runs_best_effort(name, tmp_path):
    """A pod with neither cpu nor memory request (nor limit) is BestEffort: scheduled anywhere,
    evicted first. Every task of the goldens, the report and placement tasks included, asks for
    both."""
    path = tmp_path / name
    goldens.render(goldens.GOLDENS[name], path)
    ir = Ir(path)
    for task in ir.tasks():
        resources = ir.container(task).get("resources", {})
        for kind in ("Cpu", "Memory"):
            assert {f"resource{kind}Request", f"resource{kind}Limit"} & set(resources), \
                (task, kind)


def test_a_declared_limit_without_request_leaves_the_request_to_kubernetes(taxi, tmp_path):
    """Kubernetes sets a missing request to the limit: no default request is added below a
    declared limit (which could be smaller than the default)."""
    ir = _compile(taxi, tmp_path, evaluate=ef.Resources(memory_limit="1Gi", cpu_limit="500m"))
    resources = ir.container("evaluate")["resources"]
    assert (resources["resourceCpuLimit"], resources["resourceMemoryLimit"]) == ("500m", "1Gi")
    assert "resourceCpuRequest" not in resources and "resourceMemoryRequest" not in resources


# --- accelerators, node selectors, tolerations ---------------------------------------------------

def test_a_declared_gpu_gives_the_gpu_resource_selectors_and_toleration(taxi, tmp_path):
    ir = _compile(taxi, tmp_path, train=ef.Resources(
        accelerator=ef.Accelerator("nvidia-l4", count=2), node_pool="gpu-pool",
        tolerations=(ef.Toleration("dedicated", operator="Equal", value="ml"),)))
    accelerator = ir.container("train")["resources"]["accelerator"]
    assert (accelerator["resourceType"], accelerator["resourceCount"]) == ("nvidia.com/gpu", "2")
    config = ir.k8s("train")
    assert dict(config.node_selector.labels) == {GKE_GPU: "nvidia-l4", GKE_POOL: "gpu-pool"}
    assert _tolerations(config) == [("nvidia.com/gpu", "Exists", "", "NoSchedule"),
                                    ("dedicated", "Equal", "ml", "NoSchedule")]
    for name in set(STEP_NAMES) - {"train"}:
        assert not ir.k8s(name).HasField("node_selector")
        assert not ir.k8s(name).tolerations


def test_a_declared_tpu_gives_the_tpu_resource_and_both_tpu_selectors(taxi, tmp_path):
    ir = _compile(taxi, tmp_path, train=ef.Resources(accelerator=ef.Accelerator(
        "tpu-v5-lite-podslice", count=4, tpu_topology="2x2")))
    accelerator = ir.container("train")["resources"]["accelerator"]
    assert (accelerator["resourceType"], accelerator["resourceCount"]) == ("google.com/tpu", "4")
    config = ir.k8s("train")
    assert dict(config.node_selector.labels) == {GKE_TPU: "tpu-v5-lite-podslice",
                                                 GKE_TOPOLOGY: "2x2"}
    assert _tolerations(config) == [("google.com/tpu", "Exists", "", "NoSchedule")]


def test_a_tpu_without_topology_is_a_declaration_error():
    with pytest.raises(ef.DslError) as info:
        ef.Accelerator("tpu-v5-lite-podslice", count=4)
    assert info.value.path == "tpu_topology"


def test_free_form_node_selector_without_gke_labels(taxi, tmp_path):
    """On EKS, AKS or on-premises no node carries GKE's labels: a GPU step selected by them
    stays Pending. gke_node_labels=False derives none; node_selector selects the nodes."""
    ir = _compile(taxi, tmp_path, train=ef.Resources(
        accelerator=ef.Accelerator("nvidia-tesla-t4"), gke_node_labels=False,
        node_selector={"eks.amazonaws.com/nodegroup": "gpu-nodes"},
        tolerations=(ef.Toleration("sku", operator="Equal", value="gpu"),)))
    config = ir.k8s("train")
    assert dict(config.node_selector.labels) == {"eks.amazonaws.com/nodegroup": "gpu-nodes"}
    assert _tolerations(config) == [("nvidia.com/gpu", "Exists", "", "NoSchedule"),
                                    ("sku", "Equal", "gpu", "NoSchedule")]
    accelerator = ir.container("train")["resources"]["accelerator"]
    assert (accelerator["resourceType"], accelerator["resourceCount"]) == ("nvidia.com/gpu", "1")
    with pytest.raises(ef.DslError) as info:
        ef.Resources(node_pool="gpu-pool", gke_node_labels=False)
    assert info.value.path == "node_pool"


def test_free_form_node_selector_adds_to_gke_labels(taxi, tmp_path):
    ir = _compile(taxi, tmp_path, transform=ef.Resources(
        node_pool="highmem", node_selector={"kubernetes.io/arch": "amd64"}))
    assert dict(ir.k8s("transform").node_selector.labels) == {
        GKE_POOL: "highmem", "kubernetes.io/arch": "amd64"}


def test_a_placement_task_keeps_the_free_form_selector(taxi, tmp_path):
    ir = _compile(taxi, tmp_path, train=ef.Resources(
        accelerator=ef.Accelerator("nvidia-l4"), gke_node_labels=False,
        node_selector={"agentpool": "gpupool"}, placement_parameters=True))
    _, _, selector, _ = _placement_function(ir)("nvidia-l4", "2", "", "")
    assert selector == {"agentpool": "gpupool"}
    with pytest.raises(ef.DslError) as info:  # no GKE node pool label off GKE
        _placement_function(ir)("nvidia-l4", "2", "", "gpu-pool")
    assert info.value.path == "train_node_pool"


def test_ephemeral_storage_is_a_sized_scratch_volume(taxi, tmp_path):
    """KFP's IR has no ephemeral-storage request; a sized emptyDir at /tmp bounds the scratch
    space Beam and TensorFlow write (the kubelet evicts a pod going over)."""
    ir = _compile(taxi, tmp_path, transform=ef.Resources(ephemeral_storage="50Gi"))
    [scratch] = ir.k8s("transform").empty_dir_mounts
    assert (scratch.volume_name, scratch.mount_path, scratch.size_limit) == (
        "estflow-scratch", "/tmp", "50Gi")
    assert not ir.k8s("ingest").empty_dir_mounts
    with pytest.raises(ef.DslError) as info:
        ef.Resources(ephemeral_storage="lots")
    assert info.value.path == "ephemeral_storage"


def test_a_node_pool_alone_selects_the_pool(taxi, tmp_path):
    ir = _compile(taxi, tmp_path, transform=ef.Resources(node_pool="highmem"))
    assert dict(ir.k8s("transform").node_selector.labels) == {GKE_POOL: "highmem"}
    assert not ir.k8s("transform").tolerations
    assert "accelerator" not in ir.container("transform")["resources"]


# --- secrets, volumes, retries, timeout, labels ------------------------------------------------

def test_secrets_as_env_and_volume_and_pvc_mounts(taxi, tmp_path):
    ir = _compile(taxi, tmp_path, kfp_backend="2.16", push=ef.Resources(  # sub_path: 2.16
        secrets_as_env=(ef.SecretEnv("db", {"user": "DB_USER", "password": "DB_PASSWORD"}),),
        secrets_as_volume=(ef.SecretVolume("gcp-sa", "/var/secrets/gcp", optional=True),),
        pvcs=(ef.PvcMount("models", "/mnt/models", sub_path="taxi"),)))
    config = ir.k8s("push")
    [env] = config.secret_as_env
    assert _constant(env.secret_name_parameter) == "db"
    assert {m.secret_key: m.env_var for m in env.key_to_env} == {"user": "DB_USER",
                                                                "password": "DB_PASSWORD"}
    assert not env.optional
    [volume] = config.secret_as_volume
    assert (_constant(volume.secret_name_parameter), volume.mount_path, volume.optional) == \
        ("gcp-sa", "/var/secrets/gcp", True)
    [pvc] = config.pvc_mount
    assert (_constant(pvc.pvc_name_parameter), pvc.mount_path, pvc.sub_path) == \
        ("models", "/mnt/models", "taxi")
    for name in set(STEP_NAMES) - {"push"}:
        assert not ir.k8s(name).secret_as_env and not ir.k8s(name).pvc_mount


def test_the_gpu_example_gives_push_its_secret(gpu):
    [env] = gpu.k8s("push").secret_as_env
    assert _constant(env.secret_name_parameter) == "serving-credentials"
    assert [(m.secret_key, m.env_var) for m in env.key_to_env] == [("token", "SERVING_TOKEN")]


def test_retries_where_declared(gpu):
    policy = gpu.task("ingest").retry_policy
    assert policy.max_retry_count == 3
    assert policy.backoff_duration.seconds == 30
    assert policy.backoff_factor == 2.0
    # No timeout declared: a day-long window (KFP's own default, 1 h, would never retry a
    # task whose first attempt ran longer than an hour).
    assert policy.backoff_max_duration.seconds == 24 * 3600
    for name in set(STEP_NAMES) - {"ingest"}:
        assert not gpu.task(name).HasField("retry_policy")


def test_the_retry_window_covers_every_attempt(taxi, tmp_path):
    """KFP's backoff_max_duration is Argo's backoff.maxDuration: no retry starts once that long
    has passed since the first attempt began. The window must cover all attempts."""
    ir = _compile(taxi, tmp_path, train=ef.Resources(retries=2, timeout_seconds=7200,
                                                     retry_backoff="1m"))
    policy = ir.task("train").retry_policy
    attempts = policy.max_retry_count + 1
    assert policy.backoff_max_duration.seconds >= attempts * 7200
    assert policy.backoff_max_duration.seconds == 3 * 7200 + 60 + 120  # plus the waits
    with pytest.raises(ef.DslError) as info:  # a declared window too short for the attempts
        ef.Resources(retries=2, timeout_seconds=7200, retry_backoff_max="1h")
    assert info.value.path == "retry_backoff_max" and "21600s" in str(info.value)
    declared = _compile(taxi, tmp_path, train=ef.Resources(
        retries=1, timeout_seconds=600, retry_backoff_max="30m")).task("train").retry_policy
    assert declared.backoff_max_duration.seconds == 1800


def test_the_backoff_factor_is_a_whole_number(taxi, tmp_path):
    """The KFP backend hands Argo an integer factor (2.4: int32(factor); 2.5+: a string Argo
    parses as an int): 1.5 would silently become 1 or fail the run."""
    with pytest.raises(ef.DslError) as info:
        ef.Resources(retries=2, retry_backoff_factor=1.5)
    assert info.value.path == "retry_backoff_factor"
    assert ef.Resources(retries=1, retry_backoff_factor=3.0).retry_backoff_factor == 3
    policy = _compile(taxi, tmp_path, ingest=ef.Resources(retries=1, retry_backoff_factor=3)
                      ).task("ingest").retry_policy
    assert policy.backoff_factor == 3.0 and float(policy.backoff_factor).is_integer()


@pytest.mark.parametrize("job_kind", ["tfjob", "trainjob"])
def test_a_multi_worker_train_task_is_not_retried_twice(taxi, tmp_path, job_kind):
    """The training job retries (a TFJob's backoffLimit restarts its replicas; a failed TrainJob
    is submitted again, components/tfjob/): a KFP retry of the submitting task on top would
    run up to (retries + 1)^2 attempts. The task keeps the timeout."""
    train = ef.Resources(retries=2, timeout_seconds=3600, cpu_request="4")
    pipeline = dataclasses.replace(
        taxi, resources={"train": train}, run_config=ef.RunConfig(cluster=ef.Cluster(
            workers=2, shared_dir="gs://bucket/shared", job_kind=job_kind)))
    compiled = kfp_compiler.compile_pipeline(pipeline, tmp_path / "p.yaml")
    ir = Ir(compiled.path)
    # A TFJob needs the Training Operator, which Kubeflow's default install leaves out
    assert any("Training Operator" in n for n in compiled.notes) == (job_kind == "tfjob")
    assert not ir.task("train").HasField("retry_policy")
    assert ir.k8s("train").active_deadline_seconds == 3600
    assert _requests(ir.container("train")) == TFJOB.requests  # not the replicas'


def test_timeout_where_declared(gpu):
    assert gpu.k8s("train").active_deadline_seconds == 4 * 3600
    for name in set(STEP_NAMES) - {"train"}:
        assert gpu.k8s(name).active_deadline_seconds == 0


def test_every_pod_is_labelled_with_its_task(gpu):
    for name in gpu.tasks():
        assert dict(gpu.k8s(name).pod_metadata.labels) == {
            "app.kubernetes.io/part-of": "estflow", "app.kubernetes.io/component": name}


# --- placement parameters --------------------------------------------------------------------

def test_placement_parameters_are_pipeline_parameters_defaulting_to_the_declaration(gpu):
    parameters = gpu.spec.root.input_definitions.parameters
    defaults = {n: p.default_value.string_value for n, p in parameters.items()
                if n.startswith("train_")}
    assert defaults == {"train_accelerator_type": "nvidia-tesla-t4",
                        "train_accelerator_count": "1", "train_tpu_topology": "",
                        "train_node_pool": "gpu-pool"}
    placement = gpu.task("train-placement")
    wired = {k: gpu.parameter_source("train-placement", k) for k in placement.inputs.parameters}
    assert wired == {"accelerator_type": ("pipeline", "train_accelerator_type"),
                     "accelerator_count": ("pipeline", "train_accelerator_count"),
                     "tpu_topology": ("pipeline", "train_tpu_topology"),
                     "node_pool": ("pipeline", "train_node_pool")}
    assert gpu.enclosing_groups("train-placement") == ["exit-handler-1"]


def test_train_takes_its_accelerator_selector_and_tolerations_from_the_placement_task(gpu):
    train = gpu.task("train")
    assert "train-placement" in train.dependent_tasks
    accelerator = gpu.container("train")["resources"]["accelerator"]
    for field, output in (("resourceType", "resource"), ("resourceCount", "count")):
        [channel] = re.fullmatch(r"\{\{\$\.inputs\.parameters\['(.+)'\]\}\}",
                                 accelerator[field]).groups()
        assert gpu.parameter_source("train", channel) == ("train-placement", output)
    config = gpu.k8s("train")
    assert not config.node_selector.labels
    assert gpu.k8s_parameter_source(config.node_selector.node_selector_json) == \
        ("train-placement", "node_selector")
    [toleration] = config.tolerations
    assert gpu.k8s_parameter_source(toleration.toleration_json) == \
        ("train-placement", "tolerations")


def _placement_function(ir):
    namespace: dict = {}
    exec(ir.container("train-placement")["command"][-1], namespace)
    return namespace["train_placement"]


@pytest.mark.parametrize("arguments, expected", [
    (("nvidia-tesla-t4", "1", "", "gpu-pool"),
     ("nvidia.com/gpu", "1", {GKE_GPU: "nvidia-tesla-t4", GKE_POOL: "gpu-pool"},
      [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}])),
    (("tpu-v5-lite-podslice", "4", "2x2", ""),
     ("google.com/tpu", "4", {GKE_TPU: "tpu-v5-lite-podslice", GKE_TOPOLOGY: "2x2"},
      [{"key": "google.com/tpu", "operator": "Exists", "effect": "NoSchedule"}])),
    (("", "1", "", "cpu-pool"), ("", "", {GKE_POOL: "cpu-pool"}, [])),
], ids=["gpu", "tpu", "cpu"])
def test_placement_task_body_turns_run_parameters_into_placement(gpu, arguments, expected):
    assert _placement_function(gpu)(*arguments) == expected


@pytest.mark.parametrize("arguments, parameter", [
    (("tpu-v5-lite-podslice", "4", "", ""), "train_tpu_topology"),
    (("amd-mi300", "1", "", ""), "train_accelerator_type"),
    (("nvidia-l4", "zero", "", ""), "train_accelerator_count"),
    (("nvidia-l4", "1", "", "GPU Pool"), "train_node_pool"),
])
def test_placement_task_rejects_bad_run_parameters_naming_them(gpu, arguments, parameter):
    with pytest.raises(ef.DslError) as info:
        _placement_function(gpu)(*arguments)
    assert info.value.path == parameter


def test_the_placement_derivation_is_the_compilers(taxi, tmp_path):
    """Declared values compile to what the placement task computes from the same values."""
    accelerator = ef.Accelerator("tpu-v5-lite-podslice", count=4, tpu_topology="2x2")
    ir = _compile(taxi, tmp_path, train=ef.Resources(accelerator=accelerator, node_pool="tpus"))
    from_parameters = Placement.from_parameters("tpu-v5-lite-podslice", "4", "2x2", "tpus")
    assert from_parameters == Placement.of(accelerator, "tpus")
    config = ir.k8s("train")
    assert dict(config.node_selector.labels) == dict(from_parameters.node_selector)
    assert [{"key": t.key, "operator": t.operator, "effect": t.effect}
            for t in config.tolerations] == from_parameters.to_outputs()["tolerations"]


def test_placement_parameters_without_a_declared_accelerator(taxi, tmp_path):
    """A CPU step can still be moved onto an accelerator by a run."""
    ir = _compile(taxi, tmp_path, transform=ef.Resources(placement_parameters=True))
    parameters = ir.spec.root.input_definitions.parameters
    assert parameters["transform_accelerator_type"].default_value.string_value == ""
    assert parameters["transform_node_pool"].default_value.string_value == ""
    assert "transform-placement" in ir.tasks()
    assert kfp_tasks.placement_task_name("transform") == "transform-placement"


def test_the_placement_task_runs_under_kfp_local(tmp_path):
    """kfp.local runs the placement task (it ignores the pod settings it feeds): a run's TPU
    parameters give the TPU placement; a TPU without topology fails the run, naming the
    parameter, before any step ran."""
    yaml_path = kfp_local_fakes.compile_with_stand_ins(loader.load(TAXI_GPU).pipeline, tmp_path)
    tpu = {"train_accelerator_type": "tpu-v5-lite-podslice", "train_accelerator_count": "4",
           "train_tpu_topology": "2x2", "train_node_pool": ""}
    status, ran, output = kfp_local_fakes.run(yaml_path, tmp_path, {"blessed": False}, **tpu)
    assert status == 0, output
    line = next(li for li in output.splitlines() if "estflow train placement: " in li)
    assert json.loads(line.split("estflow train placement: ", 1)[1]) == {
        "resource": "google.com/tpu", "count": "4",
        "node_selector": {GKE_TPU: "tpu-v5-lite-podslice", GKE_TOPOLOGY: "2x2"},
        "tolerations": [{"key": "google.com/tpu", "operator": "Exists", "effect": "NoSchedule"}]}
    assert "train" in ran

    (tmp_path / "steps.log").unlink()
    status, ran, output = kfp_local_fakes.run(yaml_path, tmp_path, {"blessed": False},
                                              **{**tpu, "train_tpu_topology": ""})
    assert status != 0
    assert "train_tpu_topology" in output
    assert "train" not in ran
