"""Resources declarations (dsl/resources.py): validation naming the field, derived placement,
JSON round trip, and ``Pipeline.resources``."""

import dataclasses

import pytest

import estflow.dsl as ef
from estflow.dsl import placement
from estflow.dsl import resources as r
from estflow.dsl import serialization
from estflow.pipelines.examples import taxi
from estflow.pipelines.examples import taxi_gpu

EXAMPLES = [
    ef.Accelerator("nvidia-tesla-t4"),
    ef.Accelerator("tpu-v5-lite-podslice", count=4, tpu_topology="2x2"),
    ef.Toleration("dedicated", operator="Equal", value="ml", effect="NoExecute",
                  toleration_seconds=60),
    ef.Toleration(None, effect=None),
    ef.SecretEnv("db", {"user": "DB_USER", "password": "DB_PASSWORD"}, optional=True),
    ef.SecretVolume("gcp-sa", "/var/secrets/gcp"),
    ef.PvcMount("data", "/data", sub_path="taxi/2024"),
    ef.Resources(),
    ef.Resources(cpu_request="500m", cpu_limit="2", memory_request="512Mi", memory_limit="8Gi",
                 accelerator=ef.Accelerator("nvidia-l4", count=2), node_pool="gpu-pool",
                 tolerations=(ef.Toleration("dedicated", operator="Equal", value="ml"),),
                 secrets_as_env=(ef.SecretEnv("db", {"user": "DB_USER"}),),
                 secrets_as_volume=(ef.SecretVolume("gcp-sa", "/var/secrets/gcp"),),
                 pvcs=(ef.PvcMount("data", "/data"),), retries=2, retry_backoff="1m",
                 retry_backoff_factor=3, retry_backoff_max="2h", timeout_seconds=600,
                 caching=False, placement_parameters=True),
    ef.Resources(accelerator=ef.Accelerator("nvidia-l4"), gke_node_labels=False,
                 node_selector={"eks.amazonaws.com/nodegroup": "gpu"}, ephemeral_storage="20Gi"),
    taxi_gpu.pipeline,
]


@pytest.mark.parametrize("value", EXAMPLES, ids=lambda v: type(v).__name__)
def test_round_trip(value):
    text = serialization.to_json(value)
    assert serialization.from_json(text) == value
    assert serialization.to_json(serialization.from_json(text)) == text  # deterministic


def test_every_resources_class_has_an_example():
    declared = {name for name in r.__all__ if name in serialization._REGISTRY}
    assert declared == {type(v).__name__ for v in EXAMPLES[:-1]}


# --- accelerators -----------------------------------------------------------------------------

def test_gpu_kind_resource_selector_and_toleration():
    gpu = ef.Accelerator("nvidia-tesla-t4")
    assert (gpu.kind, gpu.resource_name) == ("gpu", "nvidia.com/gpu")
    assert placement.node_selector(gpu) == {"cloud.google.com/gke-accelerator": "nvidia-tesla-t4"}
    assert placement.tolerations(gpu) == (ef.Toleration("nvidia.com/gpu", operator="Exists",
                                                        effect="NoSchedule"),)


def test_tpu_kind_resource_selectors_and_toleration():
    tpu = ef.Accelerator("tpu-v5-lite-podslice", count=4, tpu_topology="2x2")
    assert (tpu.kind, tpu.resource_name) == ("tpu", "google.com/tpu")
    assert placement.node_selector(tpu) == {
        "cloud.google.com/gke-tpu-accelerator": "tpu-v5-lite-podslice",
        "cloud.google.com/gke-tpu-topology": "2x2"}
    assert [t.key for t in placement.tolerations(tpu)] == ["google.com/tpu"]


@pytest.mark.parametrize("kwargs, field", [
    (dict(type="tpu-v5-lite-podslice"), "tpu_topology"),
    (dict(type="tpu-v5-lite-podslice", tpu_topology="2by2"), "tpu_topology"),
    (dict(type="tpu-v5-lite-podslice", tpu_topology="2x2", count=8), "count"),
    (dict(type="nvidia-tesla-t4", tpu_topology="2x2"), "tpu_topology"),
    (dict(type="nvidia-tesla-t4", count=0), "count"),
    (dict(type="nvidia-tesla-t4", count=True), "count"),
    (dict(type="NVIDIA_TESLA_T4"), "type"),
    (dict(type="amd-mi300"), "type"),
    (dict(type=""), "type"),
])
def test_accelerator_errors_name_the_field(kwargs, field):
    with pytest.raises(ef.DslError) as info:
        ef.Accelerator(**kwargs)
    assert info.value.path == field
    assert f"`{field}`" in str(info.value)


# --- resources --------------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs, field", [
    (dict(cpu_request="2 cores"), "cpu_request"),
    (dict(cpu_request="0"), "cpu_request"),
    (dict(cpu_request="0.0001"), "cpu_request"),
    (dict(cpu_limit=2), "cpu_limit"),
    (dict(memory_request="8GB"), "memory_request"),
    (dict(memory_request="1.5Gi"), "memory_request"),
    (dict(memory_limit="512k"), "memory_limit"),
    (dict(memory_limit="0Mi"), "memory_limit"),
    (dict(cpu_request="4", cpu_limit="2"), "cpu_request"),
    (dict(memory_request="8Gi", memory_limit="8G"), "memory_request"),
    (dict(accelerator="nvidia-tesla-t4"), "accelerator"),
    (dict(node_pool="GPU pool"), "node_pool"),
    (dict(tolerations=(ef.SecretVolume("s", "/s"),)), "tolerations[0]"),
    (dict(secrets_as_env=ef.SecretEnv("s", {"k": "K"})), "secrets_as_env"),
    (dict(retries=-1), "retries"),
    (dict(retries=1.5), "retries"),
    (dict(retry_backoff="30"), "retry_backoff"),
    (dict(retry_backoff_max="1.5h"), "retry_backoff_max"),
    (dict(retry_backoff_factor=0.5), "retry_backoff_factor"),
    (dict(retry_backoff_factor=1.5), "retry_backoff_factor"),  # KFP/Argo read an integer
    (dict(retries=2, timeout_seconds=3600, retry_backoff_max="2h"), "retry_backoff_max"),
    (dict(node_selector={"bad key!": "x"}), "node_selector"),
    (dict(node_pool="gpu-pool", gke_node_labels=False), "node_pool"),
    (dict(ephemeral_storage="10GB"), "ephemeral_storage"),
    (dict(timeout_seconds=0), "timeout_seconds"),
    (dict(caching="yes"), "caching"),
    (dict(placement_parameters=None), "placement_parameters"),
    (dict(pvcs=(ef.PvcMount("a", "/data"),), secrets_as_volume=(ef.SecretVolume("b", "/data"),)),
     "pvcs[0].mount_path"),
    (dict(secrets_as_env=(ef.SecretEnv("a", {"x": "TOKEN"}), ef.SecretEnv("b", {"y": "TOKEN"}))),
     "secrets_as_env[1].key_to_env"),
])
def test_resources_errors_name_the_field(kwargs, field):
    with pytest.raises(ef.DslError) as info:
        ef.Resources(**kwargs)
    assert info.value.path == field


@pytest.mark.parametrize("cpu, millicores", [("2", 2000), ("0.5", 500), (".25", 250),
                                             ("500m", 500), ("1.5", 1500)])
def test_cpu_quantities(cpu, millicores):
    assert ef.Resources(cpu_request=cpu, cpu_limit=f"{millicores}m").cpu_request == cpu


@pytest.mark.parametrize("memory", ["8Gi", "512Mi", "2G", "1000M", "1073741824", "1Ti"])
def test_memory_quantities(memory):
    assert ef.Resources(memory_request=memory).memory_request == memory


def test_collections_become_tuples_and_secret_keys_are_sorted():
    resources = ef.Resources(tolerations=[ef.Toleration("a")],
                             secrets_as_env=[ef.SecretEnv("s", {"b": "B", "a": "A"})])
    assert resources.tolerations == (ef.Toleration("a"),)
    assert list(resources.secrets_as_env[0].key_to_env) == ["a", "b"]


@pytest.mark.parametrize("cls, kwargs, field", [
    (ef.Toleration, dict(key="k", operator="In"), "operator"),
    (ef.Toleration, dict(key=None, operator="Equal", value="v"), "key"),
    (ef.Toleration, dict(key="k", value="v"), "value"),
    (ef.Toleration, dict(key="k", operator="Equal"), "value"),
    (ef.Toleration, dict(key="k", effect="NoRun"), "effect"),
    (ef.Toleration, dict(key="k", toleration_seconds=30), "toleration_seconds"),
    (ef.Toleration, dict(key="bad key"), "key"),
    (ef.SecretEnv, dict(secret="Bad_Name", key_to_env={"k": "K"}), "secret"),
    (ef.SecretEnv, dict(secret="s", key_to_env={}), "key_to_env"),
    (ef.SecretEnv, dict(secret="s", key_to_env={"k": "1BAD"}), "key_to_env['k']"),
    (ef.SecretEnv, dict(secret="s", key_to_env={"k/x": "K"}), "key_to_env"),
    (ef.SecretVolume, dict(secret="s", mount_path="relative"), "mount_path"),
    (ef.SecretVolume, dict(secret="s", mount_path="/"), "mount_path"),
    (ef.PvcMount, dict(pvc_name="p", mount_path="/a/../b"), "mount_path"),
    (ef.PvcMount, dict(pvc_name="p", mount_path="/data", sub_path="/abs"), "sub_path"),
    (ef.PvcMount, dict(pvc_name="", mount_path="/data"), "pvc_name"),
])
def test_mount_secret_and_toleration_errors_name_the_field(cls, kwargs, field):
    with pytest.raises(ef.DslError) as info:
        cls(**kwargs)
    assert info.value.path == field


# --- placement --------------------------------------------------------------------------------

def test_placement_of_declared_values():
    derived = placement.Placement.of(ef.Accelerator("nvidia-l4", count=2), "gpu-pool")
    assert derived.to_outputs() == {
        "resource": "nvidia.com/gpu", "count": "2",
        "node_selector": {"cloud.google.com/gke-accelerator": "nvidia-l4",
                          "cloud.google.com/gke-nodepool": "gpu-pool"},
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists",
                         "effect": "NoSchedule"}]}
    assert placement.Placement.of(None, None).to_outputs() == {
        "resource": "", "count": "", "node_selector": {}, "tolerations": []}


def test_placement_from_run_parameters_names_the_parameter():
    with pytest.raises(ef.DslError) as info:
        placement.Placement.from_parameters("tpu-v6e-slice", "4", "", "", prefix="train_")
    assert info.value.path == "train_tpu_topology"


# --- Pipeline.resources -----------------------------------------------------------------------

def test_pipeline_resources_are_kept_in_step_order():
    p = dataclasses.replace(taxi.pipeline, resources={"push": ef.Resources(retries=1),
                                                      "ingest": ef.Resources(retries=2)})
    assert list(p.resources) == ["ingest", "push"]
    assert taxi.pipeline.resources == {}


@pytest.mark.parametrize("resources, field", [
    ({"trian": ef.Resources()}, "resources['trian']"),
    ({"train": {"cpu_request": "2"}}, "resources['train']"),
    ((("train", ef.Resources()),), "resources"),
])
def test_pipeline_resources_errors_name_the_field(resources, field):
    with pytest.raises(ef.DslError) as info:
        dataclasses.replace(taxi.pipeline, resources=resources)
    assert info.value.path == field


def test_push_resources_without_a_push_target_are_an_error():
    with pytest.raises(ef.DslErrors) as info:
        dataclasses.replace(taxi_gpu.pipeline, push=None)
    assert [e.path for e in info.value.errors] == ["resources['push']"]


def test_a_spec_without_resources_still_loads():
    """Specs written before `resources` existed read back with none."""
    data = serialization.to_dict(taxi.pipeline)
    del data["resources"]
    assert serialization.from_dict(data) == taxi.pipeline
