"""TF Serving's REST API over the model registry: routes, methods, and the answer to each.

Paths (query strings are ignored; matched like TF Serving, case-insensitively)::

    GET  /v1/models/NAME[/versions/N | /labels/L]              model status
    GET  /v1/models/NAME[/versions/N | /labels/L]/metadata     signature defs
    POST /v1/models/NAME[/versions/N | /labels/L]:predict      instances/inputs -> predictions/outputs
    POST /v1/models/NAME[/versions/N | /labels/L]:classify     examples -> results
    POST /v1/models/NAME[/versions/N | /labels/L]:regress      examples -> results

Every error is ``{"error": message}`` with TF Serving's status: 400 for a malformed request
(a ``/v1/`` path that is not one of the above, a method other than GET/POST on it, a version
that is not an int64, an unknown version label, a bad body), 404 for a model or version that is
not served, 404 for paths outside ``/v1/``, 500 a bug (the HTTP layer adds 408, 411, 413, 431,
503, 505; see :mod:`estflow.components.serve.http`). The model name and label are
percent-decoded; names are only looked up in the registry, never used as paths.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import unquote

from estflow.components.serve import codec
from estflow.components.serve import metrics
from estflow.components.serve.errors import ServingError
from estflow.components.serve.http import Request
from estflow.components.serve.http import Response
from estflow.components.serve.registry import ModelRegistry

__all__ = ["Route", "parse_route", "handle", "make_app"]

log = logging.getLogger("estflow.serve")

# TF Serving's path patterns (tensorflow_serving/model_servers/http_rest_api_util.cc)
_API = re.compile(r"(?i)/v1/.*", re.DOTALL)
_PREDICTION = re.compile(r"(?i)/v1/models/([^/:]+)(?:(?:/versions/(\d+))|(?:/labels/([^/:]+)))?"
                         r":(classify|regress|predict)", re.DOTALL)
_STATUS = re.compile(r"(?i)/v1/models(?:/([^/:]+))?(?:(?:/versions/(\d+))|(?:/labels/([^/:]+)))?"
                     r"(?:/(metadata))?", re.DOTALL)
_INT64_MAX = 2**63 - 1


@dataclasses.dataclass(frozen=True)
class Route:
    """A parsed request: which model, which version or label (None: the latest served), what
    to do."""

    model: str
    version: int | None
    action: str  # status | metadata | predict | classify | regress
    label: str | None = None


def parse_route(raw_path: str, method: str | None = None) -> Route:
    """Parse a request's method and path as TF Serving does: a :class:`ServingError` 404 for a
    path outside ``/v1/``, 400 for one inside that matches no API ("Malformed request").
    Without ``method``, the one the path fits (POST for ``:verb`` paths, else GET)."""
    path = raw_path.split("?", 1)[0]
    if not _API.fullmatch(path):
        raise ServingError(404, f"unknown path {path[:200]!r}; the API is under /v1/models/NAME")
    if method is None:
        method = "POST" if _PREDICTION.fullmatch(path) else "GET"
    pattern = {"POST": _PREDICTION, "GET": _STATUS}.get(method)
    match = pattern.fullmatch(path) if pattern else None
    if match is None:
        raise ServingError(400, f"Malformed request: {method[:20]} {path[:200]}; expected GET "
                           "/v1/models/NAME[/versions/N|/labels/L][/metadata] or POST "
                           "/v1/models/NAME[/versions/N|/labels/L]:predict|classify|regress")
    name, version, label, verb = match.groups()
    if method == "POST" and verb not in ("predict", "classify", "regress"):  # matched as ?i
        raise ServingError(400, f"Malformed request: {method} {path[:200]}")
    action = verb if method == "POST" else ("metadata" if verb == "metadata" else "status")
    if not name:
        raise ServingError(400, "Missing model name in request.")
    name = _decoded(name, "model name")
    if version is not None and int(version) > _INT64_MAX:
        raise ServingError(400, f"Failed to convert version: {version[:50]} to numeric.")
    return Route(name, None if version is None else int(version), action,
                 None if label is None else _decoded(label, "model version label"))


def _decoded(text: str, what: str) -> str:
    try:
        return unquote(text, errors="strict")
    except UnicodeDecodeError:
        raise ServingError(400, f"Failed to decode {what}: {text[:200]} (not percent-encoded "
                           "UTF-8)") from None


def handle(registry: ModelRegistry, route: Route, body: bytes | None) -> dict[str, Any]:
    """Answer one routed request (the method has been checked); raises ServingError."""
    if route.action == "status":
        return {"model_version_status": registry.status(route.model, route.version,
                                                        route.label)}
    model = registry.get(route.model, route.version, route.label)
    metrics.note(model.version)  # labels this request's metrics (a contextvar; no-op untimed)
    if route.action == "metadata":
        return {"model_spec": {"name": model.name, "signature_name": "",
                               "version": str(model.version)},
                "metadata": {"signature_def": {"signature_def": model.signature_defs}}}
    doc = codec.parse_body(body or b"")
    method = f"tensorflow/serving/{route.action}"
    name = codec.signature_name(doc, "") or model.default_signature(method)
    metrics.note(model.version, name)
    if route.action == "predict":
        signature = model.signature(name)
        arrays, row_format = codec.predict_inputs(doc, signature)
        _sig, outputs = model.predict(name, arrays)
        return codec.predict_response(outputs, row_format)
    examples = codec.serialized_examples(doc, model.raw_features,
                                         f"model {model.name!r} version {model.version}")
    if route.action == "classify":
        return codec.classify_response(model.classify(name, examples)[1])
    return codec.regress_response(model.regress(name, examples)[1])


def make_app(registry: ModelRegistry) -> Callable[[Request], Response]:
    """The application the HTTP layer calls for each complete request."""

    def app(request: Request) -> Response:
        try:
            route = parse_route(request.target, request.method)
            return 200, handle(registry, route, request.body), {}
        except ServingError as e:
            return e.status, {"error": registry.public(e.message)}, {}
        except Exception as e:  # noqa: BLE001 - a bug must still answer the client
            log.exception("internal error serving %s %s", request.method, request.target[:200])
            return 500, {"error": registry.public(f"internal error: {type(e).__name__}: {e}")}, {}

    return app
