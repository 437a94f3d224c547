"""Request metrics of ``estflow serve`` in Prometheus's text exposition format (0.0.4).

Served at TF Serving's path, ``/monitoring/prometheus/metrics`` by default (see
:func:`read_monitoring_config` for TF Serving's ``--monitoring_config_file``). Families:

* ``:tensorflow:serving:request_count{model_name, status}``: TF Serving's counter, every
  request, ``status`` its canonical code name (``OK``, ``INVALID_ARGUMENT``, ``NOT_FOUND``...);
* ``:tensorflow:serving:request_latency{model_name, API, entrypoint}``: TF Serving's
  histogram of successful requests in microseconds, with its buckets (10 * 1.8^i, 33 of them);
  ``API`` is ``Predict``/``Classify``/``Regress``/..., ``entrypoint`` ``REST`` or ``GRPC``;
* ``estflow_serving_requests_total{model, version, signature, api, entrypoint, code}``;
* ``estflow_serving_request_errors_total{...same}``: the requests whose code is not ``OK``;
* ``estflow_serving_request_latency_seconds{model, version, signature, api, entrypoint}``:
  a histogram of every request (errors included), in seconds;
* ``estflow_serving_warmup_requests_total{model, version}``: warm-up records replayed.

A request for a model that is not served is counted under the name it asked for, cut to 100
characters; past :data:`MAX_SERIES` label sets a family counts new ones under
``model="(other)"``, so a client cannot grow the page without bound. Stdlib only.
"""

from __future__ import annotations

import bisect
import contextvars
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["Metrics", "DEFAULT_PATH", "MAX_SERIES", "read_monitoring_config", "note",
           "metered_app", "code_of_http"]

DEFAULT_PATH = "/monitoring/prometheus/metrics"
MAX_SERIES = 2000
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

_TFS_BUCKETS = tuple(10 * 1.8 ** i for i in range(32))  # TF Serving's, in microseconds
_SECONDS_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
                    5.0, 10.0, 30.0)
_FAMILIES = (  # name, type, help, label names, buckets (histograms)
    (":tensorflow:serving:request_count", "counter", "The total number of requests.",
     ("model_name", "status"), None),
    (":tensorflow:serving:request_latency", "histogram",
     "Distribution of wall time (in microseconds) for Tensorflow Serving request.",
     ("model_name", "API", "entrypoint"), _TFS_BUCKETS),
    ("estflow_serving_requests_total", "counter",
     "Requests answered, by model, version, signature, API, entry point and status code.",
     ("model", "version", "signature", "api", "entrypoint", "code"), None),
    ("estflow_serving_request_errors_total", "counter",
     "Requests answered with an error (a code other than OK).",
     ("model", "version", "signature", "api", "entrypoint", "code"), None),
    ("estflow_serving_request_latency_seconds", "histogram",
     "Wall time of each request in seconds, errors included.",
     ("model", "version", "signature", "api", "entrypoint"), _SECONDS_BUCKETS),
    ("estflow_serving_warmup_requests_total", "counter",
     "Warm-up records (assets.extra/tf_serving_warmup_requests) replayed.",
     ("model", "version"), None),
)
_HTTP_CODES = {200: "OK", 400: "INVALID_ARGUMENT", 404: "NOT_FOUND", 405: "INVALID_ARGUMENT",
               408: "DEADLINE_EXCEEDED", 411: "INVALID_ARGUMENT", 413: "RESOURCE_EXHAUSTED",
               429: "RESOURCE_EXHAUSTED", 431: "RESOURCE_EXHAUSTED", 501: "UNIMPLEMENTED",
               503: "UNAVAILABLE", 504: "DEADLINE_EXCEEDED"}


_REST_APIS = {"status": "GetModelStatus", "metadata": "GetModelMetadata", "predict": "Predict",
              "classify": "Classify", "regress": "Regress"}


class _Note:
    """The served version and signature of the request in progress (set by the transport)."""

    def __init__(self) -> None:
        self.version: int | None = None
        self.signature = ""


_current: contextvars.ContextVar[_Note | None] = contextvars.ContextVar("estflow_serve_note",
                                                                        default=None)


def note(version: int, signature: str = "") -> None:
    """Label the request in progress with the version and signature that answered it (a
    no-op outside a metered request)."""
    current = _current.get()
    if current is not None:
        current.version, current.signature = version, signature


def code_of_http(status: int) -> str:
    """The canonical code name TF Serving's REST layer answers ``status`` for."""
    return _HTTP_CODES.get(status, "INTERNAL" if status >= 500 else "INVALID_ARGUMENT")


class _Histogram:
    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.counts = [0] * (len(bounds) + 1)
        self.sum = 0.0

    def add(self, bounds: tuple[float, ...], value: float) -> None:
        self.counts[bisect.bisect_left(bounds, value)] += 1
        self.sum += value


class Metrics:
    """The counters and histograms of one server (thread-safe; REST and gRPC share it)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._series: dict[str, dict[tuple[str, ...], float | _Histogram]] = {
            family[0]: {} for family in _FAMILIES}

    def observe(self, entrypoint: str, api: str, model: str, version: int | None,
                signature: str, code: str, seconds: float) -> None:
        """Count one answered request (``code``: a canonical code name, ``OK`` on success)."""
        model = model[:100]
        ver = "" if version is None else str(version)
        with self._lock:
            self._count(":tensorflow:serving:request_count", (model, code))
            labels = (model, ver, signature, api, entrypoint)
            self._count("estflow_serving_requests_total", (*labels, code))
            if code != "OK":
                self._count("estflow_serving_request_errors_total", (*labels, code))
            else:
                self._sample(":tensorflow:serving:request_latency", (model, api, entrypoint),
                             seconds * 1e6, _TFS_BUCKETS)
            self._sample("estflow_serving_request_latency_seconds", labels, seconds,
                         _SECONDS_BUCKETS)

    def warmed(self, model: str, version: int, records: int) -> None:
        """Count ``records`` warm-up requests replayed for a model version."""
        with self._lock:
            self._count("estflow_serving_warmup_requests_total", (model, str(version)), records)

    def _key(self, family: str, labels: tuple[str, ...]) -> tuple[str, ...]:
        series = self._series[family]
        if labels in series or len(series) < MAX_SERIES:
            return labels
        return ("(other)", *("" for _ in labels[1:]))

    def _count(self, family: str, labels: tuple[str, ...], by: float = 1) -> None:
        key = self._key(family, labels)
        series = self._series[family]
        series[key] = series.get(key, 0) + by

    def _sample(self, family: str, labels: tuple[str, ...], value: float,
                bounds: tuple[float, ...]) -> None:
        key = self._key(family, labels)
        histogram = self._series[family].setdefault(key, _Histogram(bounds))
        histogram.add(bounds, value)

    def render(self) -> str:
        """Every family in Prometheus's text format (families with no series yet are listed
        with their HELP and TYPE only)."""
        lines = []
        with self._lock:
            for name, kind, text, label_names, bounds in _FAMILIES:
                lines += [f"# HELP {name} {text}", f"# TYPE {name} {kind}"]
                for labels, value in sorted(self._series[name].items()):
                    pairs = list(zip(label_names, labels, strict=True))
                    if kind == "counter":
                        lines.append(f"{name}{_labels(pairs)} {_number(value)}")
                    else:
                        lines += _histogram_lines(name, pairs, value, bounds)
        return "\n".join(lines) + "\n"


def metered_app(app: Callable, metrics: Metrics, path: str | None,
                parse_route: Callable[[str], Any]) -> Callable:
    """``app`` (the REST application) with each answer counted in ``metrics`` and, when
    ``path`` is set, ``GET path`` answering the metrics page."""

    def metered(request: Any) -> tuple[int, Any, dict[str, str]]:
        target = request.target.split("?", 1)[0]
        if path is not None and target == path:
            if request.method != "GET":
                return 405, {"error": f"{request.method} is not allowed on {path}; use GET"}, \
                    {"Allow": "GET"}
            return 200, metrics.render().encode(), {"Content-Type": CONTENT_TYPE}
        start, record = time.perf_counter(), _Note()
        token = _current.set(record)
        try:
            status, payload, headers = app(request)
        finally:
            _current.reset(token)
        try:
            route = parse_route(request.target)
            model, api = route.model, _REST_APIS.get(route.action, route.action)
        except Exception:  # noqa: BLE001 - an unroutable path is counted without a model
            model, api = "", "unknown"
        metrics.observe("REST", api, model, record.version, record.signature,
                        code_of_http(status), time.perf_counter() - start)
        return status, payload, headers

    return metered


def _histogram_lines(name: str, pairs: list, histogram: _Histogram,
                     bounds: tuple[float, ...]) -> list[str]:
    lines, total = [], 0
    for bound, count in zip((*bounds, float("inf")), histogram.counts, strict=True):
        total += count
        le = "+Inf" if bound == float("inf") else repr(float(bound))
        lines.append(f"{name}_bucket{_labels([*pairs, ('le', le)])} {total}")
    lines.append(f"{name}_sum{_labels(pairs)} {_number(histogram.sum)}")
    lines.append(f"{name}_count{_labels(pairs)} {total}")
    return lines


def _labels(pairs: list[tuple[str, str]]) -> str:
    inner = ",".join(f'{key}="{_escape(value)}"' for key, value in pairs)
    return "{" + inner + "}" if inner else ""


def _escape(value: str) -> str:
    # the exposition format escapes exactly backslash, double quote and line feed in values
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def _monitoring_config_class() -> type:
    """TF Serving's ``MonitoringConfig`` message, built from its .proto's two messages
    (``tensorflow-serving-api`` does not ship its module)."""
    from google.protobuf import descriptor_pb2
    from google.protobuf import descriptor_pool
    from google.protobuf import message_factory

    proto = descriptor_pb2.FileDescriptorProto(name="estflow/monitoring_config.proto",
                                               package="tensorflow.serving", syntax="proto3")
    prometheus = proto.message_type.add(name="PrometheusConfig")
    prometheus.field.add(name="enable", number=1, type=8, label=1)  # bool
    prometheus.field.add(name="path", number=2, type=9, label=1)  # string
    monitoring = proto.message_type.add(name="MonitoringConfig")
    monitoring.field.add(name="prometheus_config", number=1, type=11, label=1,
                         type_name=".tensorflow.serving.PrometheusConfig")
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return message_factory.GetMessageClass(
        pool.FindMessageTypeByName("tensorflow.serving.MonitoringConfig"))


def read_monitoring_config(path: str | Path) -> str | None:
    """The metrics path a TF Serving ``--monitoring_config_file`` sets (a text-format
    ``MonitoringConfig``: ``prometheus_config { enable: true, path: "/..." }``; an empty path
    is :data:`DEFAULT_PATH`), or None when it does not enable Prometheus.

    Raises:
        OSError: the file cannot be read.
        ValueError: the file is not such a config (the message names the file and says why).
    """
    from google.protobuf import text_format

    text = Path(path).read_text()
    try:
        config = text_format.Parse(text, _monitoring_config_class()())
    except text_format.ParseError as e:
        raise ValueError(f"{path}: not a MonitoringConfig (expected prometheus_config "
                         f"{{ enable: true, path: \"/...\" }}): {e}") from None
    if not config.prometheus_config.enable:
        return None
    metrics_path = config.prometheus_config.path or DEFAULT_PATH
    if not metrics_path.startswith("/"):
        raise ValueError(f"{path}: prometheus_config.path must start with '/', got "
                         f"{metrics_path!r}")
    return metrics_path
