"""The push step's KServe InferenceService manifest against KServe's real CRD schema.

The schemas are KServe v0.16.0's and v0.20.0's (tests/pipelines/schemas/README.md says where
they come from), validated strictly like ``kubectl apply`` with server-side field validation: unknown fields fail.
What this guards: the manifest used to leave ``runtimeVersion`` unset, so KServe ran its default
``tensorflow/serving:2.6.2``, which cannot load a TF 2.21 export ("Op type not registered
'DisableCopyOnRead'"); TF Serving 2.12+ loads it.
"""

import copy
import dataclasses
import json
import re
import tomllib
from pathlib import Path

import jsonschema
import pytest
import yaml

import estflow.dsl as ef
from estflow.dsl import specs

REPO = Path(__file__).resolve().parents[2]
SCHEMAS = Path(__file__).parent / "schemas"
TAGS = ("v0.16.0", "v0.20.0")
_DNS_1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")


def _strict(schema):
    """``schema`` with unknown fields refused wherever the CRD declares the fields."""
    if isinstance(schema, dict):
        out = {k: _strict(v) for k, v in schema.items()}
        if "properties" in out and not out.get("x-kubernetes-preserve-unknown-fields") \
                and "additionalProperties" not in out:
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [_strict(v) for v in schema]
    return schema


@pytest.fixture(scope="module", params=TAGS)
def validator(request):
    document = json.loads((SCHEMAS / f"kserve-{request.param}-inferenceservice.json").read_text())
    assert document["x-estflow-source"]["tag"] == request.param
    schema = _strict(document["schema"])
    jsonschema.Draft4Validator.check_schema(schema)
    return jsonschema.Draft4Validator(schema)


@pytest.fixture(scope="module")
def push():
    from estflow.components import push as push_step  # the step writes the manifest

    return push_step


def _manifest(push, **target):
    target = ef.PushTarget("gs://bucket/models", "chicago_taxi", kserve_manifest=True, **target)
    return yaml.safe_load(push.kserve_manifest(target, "gs://bucket/models/chicago_taxi/kserve/"
                                                       "7-only", 7))


@pytest.mark.parametrize("target", [
    {}, {"kserve_namespace": "ml"}, {"kserve_service_account": "kserve-gcs"},
    {"kserve_runtime_version": "2.20.0-gpu", "kserve_namespace": "ml-prod",
     "kserve_service_account": "sa.storage"},
    {"kserve_rollout": True, "kserve_canary_percent": 10, "kserve_rollout_timeout": 300},
    {"kserve_gpus": 1},
], ids=["defaults", "namespace", "service-account", "all", "rollout-canary", "gpu"])
def test_the_manifest_is_a_valid_inference_service(push, validator, target):
    manifest = _manifest(push, **target)
    errors = sorted(validator.iter_errors(manifest), key=lambda e: list(e.path))
    assert not errors, [f"{'.'.join(map(str, e.path))}: {e.message}" for e in errors]
    assert (manifest["apiVersion"], manifest["kind"]) == ("serving.kserve.io/v1beta1",
                                                          "InferenceService")
    assert _DNS_1035.match(manifest["metadata"]["name"])  # what the apiserver requires
    model = manifest["spec"]["predictor"]["model"]
    assert model["modelFormat"] == {"name": "tensorflow", "version": "2"}
    assert model["storageUri"] == "gs://bucket/models/chicago_taxi/kserve/7-only"
    assert model["args"] == ["--model_name=chicago_taxi"]  # served under the model's name
    if "kserve_service_account" in target:
        assert manifest["spec"]["predictor"]["serviceAccountName"] == \
            target["kserve_service_account"]


def test_the_strict_validation_is_a_real_check(push, validator):
    """A misplaced or misspelled field fails, as kubectl apply would refuse it."""
    manifest = _manifest(push)
    wrong = copy.deepcopy(manifest)
    wrong["spec"]["predictor"]["model"]["runtime_version"] = "2.20.0"
    assert any("runtime_version" in e.message for e in validator.iter_errors(wrong))
    wrong = copy.deepcopy(manifest)
    del wrong["spec"]["predictor"]["model"]["modelFormat"]["name"]
    assert list(validator.iter_errors(wrong))
    wrong = copy.deepcopy(manifest)
    wrong["spec"]["predictor"]["model"]["runtimeVersion"] = 2.2
    assert list(validator.iter_errors(wrong))


def test_the_runtime_version_is_always_set_and_loads_a_tf_2_21_export(push):
    """KServe's default TF Serving (2.6.2) cannot load the export: the manifest always names
    TF Serving >= 2.12, by default the release matched to the TensorFlow estflow trains with."""
    model = _manifest(push)["spec"]["predictor"]["model"]
    assert model["runtimeVersion"] == specs.DEFAULT_TF_SERVING_VERSION
    major, minor = map(int, specs.DEFAULT_TF_SERVING_VERSION.split(".")[:2])
    assert (major, minor) >= specs.MIN_TF_SERVING_VERSION == (2, 12)
    assert _manifest(push, kserve_runtime_version="2.14.1")["spec"]["predictor"]["model"][
        "runtimeVersion"] == "2.14.1"
    for too_old in ("2.6.2", "2.11.1-gpu", "1.15.0"):
        with pytest.raises(ef.DslError, match="2.12 or newer"):
            ef.PushTarget("m", "taxi", kserve_manifest=True, kserve_runtime_version=too_old)
    with pytest.raises(ef.DslError, match="TF Serving image tag"):
        ef.PushTarget("m", "taxi", kserve_manifest=True, kserve_runtime_version="latest")


def test_the_default_tf_serving_is_tied_to_the_training_tensorflow():
    """Bumping TensorFlow in pyproject fails here until the serving default is revisited."""
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    [pin] = [d for d in pyproject["project"]["dependencies"] if d.startswith("tensorflow==")]
    assert pin == f"tensorflow=={specs.TRAINING_TENSORFLOW}.*"
    readme = (REPO / "docs" / "pages" / "serving.md").read_text()
    assert f"TF Serving {specs.DEFAULT_TF_SERVING_VERSION}" in readme


def test_the_dsl_docs_no_longer_suggest_kserves_default():
    assert "2.6.2" not in (ef.PushTarget.__doc__ or "").replace(
        "KServe's own default, 2.6.2", "")


def test_gpus_get_the_gpu_tag_and_resources(push):
    """KServe adds '-gpu' only to an unpinned tag, whose default (2.6.2) cannot load the
    export: the manifest pins the default tag and adds '-gpu' itself."""
    model = _manifest(push, kserve_gpus=2)["spec"]["predictor"]["model"]
    assert model["runtimeVersion"] == f"{specs.DEFAULT_TF_SERVING_VERSION}-gpu"
    assert model["resources"] == {"limits": {"nvidia.com/gpu": "2"},
                                  "requests": {"nvidia.com/gpu": "2"}}
    assert "resources" not in _manifest(push)["spec"]["predictor"]["model"]
    assert _manifest(push, kserve_gpus=1, kserve_runtime_version="2.19.1-gpu")[
        "spec"]["predictor"]["model"]["runtimeVersion"] == "2.19.1-gpu"
    with pytest.raises(ef.DslError, match="kserve_runtime_version.*'-gpu' tag"):
        ef.PushTarget("m", "taxi", kserve_manifest=True, kserve_gpus=1,
                      kserve_runtime_version="2.19.1")


def test_rollout_fields_are_checked():
    with pytest.raises(ef.DslError, match="kserve_rollout.*kserve_manifest=True"):
        ef.PushTarget("m", "taxi", kserve_rollout=True)
    with pytest.raises(ef.DslError, match="kserve_canary_percent.*1 to 99"):
        ef.PushTarget("m", "taxi", kserve_manifest=True, kserve_canary_percent=100)
    with pytest.raises(ef.DslError, match="kserve_rollout_timeout.*kserve_rollout=True"):
        ef.PushTarget("m", "taxi", kserve_manifest=True, kserve_rollout_timeout=60)


def test_the_docs_query_the_name_kserve_serves():
    """One name: the docs' KServe and estflow serve queries, the example's model_name, and the
    name TF Serving serves under on KServe (--model_name) agree; the InferenceService's own
    name is the Kubernetes form of it. (The served name was 'chicago-taxi', the docs'
    'chicago_taxi'.)"""
    from estflow.components import push as push_step
    from estflow.pipelines import loader

    target = loader.load(str(REPO / "pipelines" / "examples" / "taxi.py")).pipeline.push
    kserve = dataclasses.replace(target, kserve_manifest=True)
    model = yaml.safe_load(push_step.kserve_manifest(kserve, "gs://b/m", 1))
    served = {a.split("=", 1)[1] for a in model["spec"]["predictor"]["model"]["args"]}
    page = (REPO / "docs" / "pages" / "serving.md").read_text()
    queried = set(re.findall(r"/v1/models/([A-Za-z0-9_.-]+?)(?:[:/\s'\"]|$)", page))
    assert queried == served == {target.model_name}
    assert f"inferenceservice/{target.kserve_name}" in page  # kubectl names the resource
    assert model["metadata"]["name"] == target.kserve_name
