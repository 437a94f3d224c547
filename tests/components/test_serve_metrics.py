"""``estflow serve``'s Prometheus page: TF Serving's endpoint and ``--monitoring_config_file``,
requests, errors and latency per model, version and signature over REST and gRPC, read back with
Prometheus's own parser (prometheus_client)."""

import os
import re
import shutil
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import grpc
import pytest
import tensorflow as tf
from prometheus_client.parser import text_string_to_metric_families
from tensorflow_serving.apis import predict_pb2
from tensorflow_serving.apis import prediction_service_pb2_grpc

from estflow.components.serve import __main__ as serve
from estflow.components.serve.metrics import Metrics
from estflow.components.serve.metrics import read_monitoring_config
from tests.components import _serving_fixtures as fx

ROOT = Path(__file__).resolve().parents[2]
TESTDATA = Path(__file__).parent / "tfserving_testdata"
PATH = "/monitoring/prometheus/metrics"


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    root = tmp_path_factory.mktemp("base")
    shutil.copytree(TESTDATA / "saved_model_half_plus_two_cpu", root / "default")
    return root


def page(server, path=PATH):
    with urllib.request.urlopen(server.url + path, timeout=30) as response:
        assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        return response.read().decode()


def samples(text):
    """(sample name, labels) -> value, from Prometheus's parser (which rejects a bad page)."""
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def value(found, name, **labels):
    return found.get((name, tuple(sorted(labels.items()))), 0)


def test_rest_and_grpc_requests_errors_and_latency_per_model_version_signature(base):
    with serve.serve(base, port=0, poll_seconds=0, grpc_port=0) as server:
        body = {"instances": [[1.0], [2.0]]}
        for _ in range(3):
            assert fx.http_request(server.host, server.port, "POST", "/v1/models/default:predict",
                                   body)[0] == 200
        assert fx.http_request(server.host, server.port, "POST", "/v1/models/default:predict",
                               {"signature_name": "nope", **body})[0] == 400
        assert fx.http_request(server.host, server.port, "GET", "/v1/models/other")[0] == 404
        request = predict_pb2.PredictRequest()
        request.model_spec.name = "default"
        request.inputs["x"].CopyFrom(tf.make_tensor_proto([[1.0]], dtype=tf.float32))
        with grpc.insecure_channel(server.grpc.address) as channel:
            prediction_service_pb2_grpc.PredictionServiceStub(channel).Predict(request, 30)
        found = samples(page(server))
    common = {"model": "default", "version": "123", "signature": "serving_default",
              "api": "Predict"}
    assert value(found, "estflow_serving_requests_total", **common, entrypoint="REST",
                 code="OK") == 3
    assert value(found, "estflow_serving_requests_total", **common, entrypoint="GRPC",
                 code="OK") == 1
    errors = {**common, "signature": "nope", "entrypoint": "REST", "code": "INVALID_ARGUMENT"}
    assert value(found, "estflow_serving_request_errors_total", **errors) == 1
    assert value(found, "estflow_serving_request_errors_total", model="other", version="",
                 signature="", api="GetModelStatus", entrypoint="REST", code="NOT_FOUND") == 1
    assert value(found, "estflow_serving_request_latency_seconds_count", **common,
                 entrypoint="REST") == 3
    assert value(found, "estflow_serving_request_latency_seconds_bucket", **common,
                 entrypoint="REST", le="+Inf") == 3
    # TF Serving's own families, with its label names (the parser adds _total to counters)
    assert value(found, ":tensorflow:serving:request_count_total", model_name="default",
                 status="OK") == 4
    assert value(found, ":tensorflow:serving:request_count_total", model_name="default",
                 status="INVALID_ARGUMENT") == 1
    assert value(found, ":tensorflow:serving:request_latency_count", model_name="default",
                 API="Predict", entrypoint="GRPC") == 1


def test_histogram_buckets_are_cumulative_and_labels_escaped():
    metrics = Metrics()
    for seconds in (0.0001, 0.003, 0.003, 2.0, 100.0):
        metrics.observe("REST", "Predict", 'we"ird\\na\nme', 1, "s", "OK", seconds)
    found = samples(metrics.render())
    labels = {"model": 'we"ird\\na\nme', "version": "1", "signature": "s", "api": "Predict",
              "entrypoint": "REST"}
    name = "estflow_serving_request_latency_seconds_bucket"
    assert [value(found, name, **labels, le=le) for le in ("0.0005", "0.005", "2.5", "30.0",
                                                          "+Inf")] == [1, 3, 4, 4, 5]
    assert value(found, "estflow_serving_request_latency_seconds_sum", **labels) == \
        pytest.approx(102.0061)


def test_a_client_cannot_grow_the_page_without_bound(monkeypatch):
    monkeypatch.setattr("estflow.components.serve.metrics.MAX_SERIES", 3)
    metrics = Metrics()
    for i in range(10):
        metrics.observe("REST", "Predict", f"model{i}", None, "", "NOT_FOUND", 0.001)
    found = samples(metrics.render())
    names = {dict(labels)["model_name"] for (name, labels) in found
             if name == ":tensorflow:serving:request_count_total"}
    assert names == {"model0", "model1", "model2", "(other)"}
    assert value(found, ":tensorflow:serving:request_count_total", model_name="(other)",
                 status="") == 7


def test_monitoring_config_file_as_tf_serving(tmp_path):
    config = tmp_path / "monitoring_config.txt"
    # TF Serving's tensorflow_serving/servables/tensorflow/testdata/monitoring_config.txt
    config.write_text('prometheus_config: {\n  enable: true,\n  path: '
                      '"/monitoring/prometheus/metrics"\n}\n')
    assert read_monitoring_config(config) == PATH
    config.write_text('prometheus_config { enable: true path: "/metrics" }  # a comment')
    assert read_monitoring_config(config) == "/metrics"
    config.write_text("prometheus_config { enable: true }")
    assert read_monitoring_config(config) == PATH
    config.write_text("prometheus_config { enable: false }")
    assert read_monitoring_config(config) is None
    config.write_text("prometheus_config { enabled: true }")
    with pytest.raises(ValueError, match=rf"{re.escape(str(config))}: not a MonitoringConfig.*"
                                         "enabled"):
        read_monitoring_config(config)


def test_metrics_page_moves_or_goes_with_the_config(base):
    with serve.serve(base, port=0, poll_seconds=0, metrics_path="/metrics") as server:
        assert "# TYPE :tensorflow:serving:request_count counter" in page(server, "/metrics")
        with pytest.raises(urllib.error.HTTPError) as caught:
            page(server)
        assert caught.value.code in (400, 404)
    with serve.serve(base, port=0, poll_seconds=0, metrics_path=None) as server:
        with pytest.raises(urllib.error.HTTPError):
            page(server)


def _env():
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "TF_CPP"))}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    return env


def test_a_bad_monitoring_config_file_fails_at_once_naming_it(tmp_path):
    shutil.copytree(TESTDATA / "saved_model_half_plus_two_cpu", tmp_path / "models" / "default")
    (tmp_path / "monitoring.txt").write_text("prometheus_config { enable: maybe }")
    proc = subprocess.run([sys.executable, "-m", "estflow.pipelines.cli", "serve", "models",
                           "--port", "0", "--monitoring-config-file", "monitoring.txt"],
                          cwd=tmp_path, capture_output=True, text=True, env=_env(), timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.startswith("estflow serve: monitoring.txt: not a MonitoringConfig")
    assert "enable" in proc.stderr
