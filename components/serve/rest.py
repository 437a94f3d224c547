"""TF Serving's REST API over the model registry: routes, methods, and the answer to each.

Paths (query strings are ignored)::

    GET  /v1/models/NAME[/versions/N]              model status
    GET  /v1/models/NAME[/versions/N]/metadata     signature defs
    POST /v1/models/NAME[/versions/N]:predict      instances -> predictions, inputs -> outputs
    POST /v1/models/NAME[/versions/N]:classify     examples -> results
    POST /v1/models/NAME[/versions/N]:regress      examples -> results

Every error is ``{"error": message}``: 400 bad request, 404 unknown model/version/path,
405 wrong method, 500 a bug (the HTTP layer adds 408, 411, 413, 431, 503, 505; see
:mod:`estflow.components.serve.http`).
"""

from __future__ import annotations

import dataclasses
import logging
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import unquote

from estflow.components.serve import codec
from estflow.components.serve.errors import ServingError
from estflow.components.serve.http import Request
from estflow.components.serve.http import Response
from estflow.components.serve.models import ModelRegistry

__all__ = ["Route", "parse_route", "handle", "make_app"]

log = logging.getLogger("estflow.serve")

_PREFIX = "/v1/models/"
_VERBS = ("predict", "classify", "regress")
_METHODS = {"status": "GET", "metadata": "GET", "predict": "POST", "classify": "POST",
            "regress": "POST"}
_VERSION = re.compile(r"[0-9]{1,18}")


@dataclasses.dataclass(frozen=True)
class Route:
    """A parsed request path: which model, which version (None: the served one), what to do."""

    model: str
    version: int | None
    action: str  # status | metadata | predict | classify | regress


def parse_route(raw_path: str) -> Route:
    """Parse a request path; a :class:`ServingError` 404 for unknown paths, 400 for bad names.

    Each segment is percent-decoded on its own, so an encoded slash cannot introduce a segment,
    and names that could address the filesystem (``..``, ``/``, ``\\``) are refused outright.
    """
    path = raw_path.split("?", 1)[0]
    if not path.startswith(_PREFIX):
        raise ServingError(404, f"unknown path {path[:200]!r}; the API is under {_PREFIX}NAME")
    rest, action = path[len(_PREFIX):], "status"
    last = rest.rsplit("/", 1)[-1]
    if ":" in last:
        rest, verb = rest.rsplit(":", 1)
        if verb not in _VERBS:
            raise ServingError(404, f"unknown method ':{verb[:50]}' in {path[:200]!r}; expected "
                               f"one of {', '.join(':' + v for v in _VERBS)}")
        action = verb
    elif rest.endswith("/metadata"):
        rest, action = rest[:-len("/metadata")], "metadata"
    try:
        segments = [unquote(s, errors="strict") for s in rest.split("/")]
    except UnicodeDecodeError:
        raise ServingError(400, f"the path {path[:200]!r} is not valid percent-encoded "
                           "UTF-8") from None
    name = _model_name(segments[0], path)
    if len(segments) == 1:
        return Route(name, None, action)
    if len(segments) == 3 and segments[1] == "versions":
        if not _VERSION.fullmatch(segments[2]):
            raise ServingError(400, f"the version in {path[:200]!r} must be a positive integer, "
                               f"got {segments[2][:50]!r}")
        return Route(name, int(segments[2]), action)
    if len(segments) == 3 and segments[1] == "labels":
        raise ServingError(404, "version labels are not supported; use /versions/N")
    raise ServingError(404, f"unknown path {path[:200]!r}; expected {_PREFIX}NAME[/versions/N]"
                       "[/metadata | :predict | :classify | :regress]")


def _model_name(name: str, path: str) -> str:
    if not name:
        raise ServingError(404, f"no model name in {path[:200]!r}")
    if name in (".", "..") or any(c in name for c in "/\\\0"):
        raise ServingError(400, f"invalid model name {name[:200]!r}: a model name is a "
                           "directory name under the base path, without '/', '\\' or '..'")
    return name


def handle(registry: ModelRegistry, route: Route, body: bytes | None) -> dict[str, Any]:
    """Answer one routed request (the method has been checked); raises ServingError."""
    if route.action == "status":
        return {"model_version_status": registry.status(route.model, route.version)}
    model = registry.get(route.model, route.version)
    if route.action == "metadata":
        return {"model_spec": {"name": model.name, "signature_name": "",
                               "version": str(model.version)},
                "metadata": {"signature_def": {"signature_def": model.signature_defs}}}
    doc = codec.parse_body(body or b"")
    method = f"tensorflow/serving/{route.action}"
    name = codec.signature_name(doc, "") or model.default_signature(method)
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
        allow = None
        try:
            route = parse_route(request.target)
            allow = _METHODS[route.action]
            if request.method != allow:
                raise ServingError(405, f"{request.method} is not allowed on "
                                   f"{request.target[:200]!r}; use {allow}")
            return 200, handle(registry, route, request.body), {}
        except ServingError as e:
            return e.status, {"error": e.message}, ({"Allow": allow} if e.status == 405 else {})
        except Exception as e:  # noqa: BLE001 - a bug must still answer the client
            log.exception("internal error serving %s %s", request.method, request.target[:200])
            return 500, {"error": f"internal error: {type(e).__name__}: {e}"}, {}

    return app
