"""HTTP for ``estflow serve``: routing TF Serving's REST paths onto the model registry.

Paths (query strings are ignored)::

    GET  /v1/models/NAME[/versions/N]              model status
    GET  /v1/models/NAME[/versions/N]/metadata     signature defs
    POST /v1/models/NAME[/versions/N]:predict      instances -> predictions, inputs -> outputs
    POST /v1/models/NAME[/versions/N]:classify     examples -> results
    POST /v1/models/NAME[/versions/N]:regress      examples -> results

Every error is ``{"error": message}``: 400 bad request, 404 unknown model/version/path,
405 wrong method, 411 no Content-Length, 413 body over the limit (refused from its
Content-Length, before reading it), 500 a bug.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import re
import socket
from http.server import BaseHTTPRequestHandler
from http.server import ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote

from estflow.components._serve import codec
from estflow.components._serve.models import ModelRegistry
from estflow.components._serve.models import ServedModel
from estflow.components._serve.models import ServingError

__all__ = ["Route", "parse_route", "RestServer"]

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
        raise ServingError(404, f"unknown path {path!r}; the API is under {_PREFIX}NAME")
    rest, action = path[len(_PREFIX):], "status"
    last = rest.rsplit("/", 1)[-1]
    if ":" in last:
        rest, verb = rest.rsplit(":", 1)
        if verb not in _VERBS:
            raise ServingError(404, f"unknown method ':{verb}' in {path!r}; expected one of "
                               f"{', '.join(':' + v for v in _VERBS)}")
        action = verb
    elif rest.endswith("/metadata"):
        rest, action = rest[:-len("/metadata")], "metadata"
    try:
        segments = [unquote(s, errors="strict") for s in rest.split("/")]
    except UnicodeDecodeError:
        raise ServingError(400, f"the path {path!r} is not valid percent-encoded UTF-8") from None
    name = _model_name(segments[0], path)
    if len(segments) == 1:
        return Route(name, None, action)
    if len(segments) == 3 and segments[1] == "versions":
        if not _VERSION.fullmatch(segments[2]):
            raise ServingError(400, f"the version in {path!r} must be a positive integer, got "
                               f"{segments[2]!r}")
        return Route(name, int(segments[2]), action)
    if len(segments) == 3 and segments[1] == "labels":
        raise ServingError(404, "version labels are not supported; use /versions/N")
    raise ServingError(404, f"unknown path {path!r}; expected {_PREFIX}NAME[/versions/N]"
                       "[/metadata | :predict | :classify | :regress]")


def _model_name(name: str, path: str) -> str:
    if not name:
        raise ServingError(404, f"no model name in {path!r}")
    if name in (".", "..") or any(c in name for c in "/\\\0"):
        raise ServingError(400, f"invalid model name {name!r}: a model name is a directory "
                           "name under the base path, without '/', '\\' or '..'")
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
    signature = model.signature(codec.signature_name(doc, _default_signature(model,
                                                                             route.action)))
    if route.action == "predict":
        arrays, row_format = codec.predict_inputs(doc, signature)
        return codec.predict_response(codec.run_signature(signature, arrays), row_format)
    if len(signature.inputs) != 1 or next(iter(signature.inputs.values())).dtype.name != "string":
        raise ServingError(400, f"signature {signature.name!r} cannot serve :{route.action}: it "
                           "must take a single DT_STRING input of serialized tf.Examples "
                           f"(it takes {', '.join(signature.inputs) or 'nothing'})")
    examples = codec.serialized_examples(doc, model.raw_features)
    outputs = codec.run_signature(signature, {next(iter(signature.inputs)): examples})
    if route.action == "classify":
        return codec.classify_response(outputs, signature.name)
    return codec.regress_response(outputs, signature.name)


def _default_signature(model: ServedModel, action: str) -> str:
    """The signature a request that names none gets.

    ``:predict`` gets ``serving_default``. TF Serving sends ``:classify``/``:regress`` to
    ``serving_default`` too and requires its ``method_name`` to be
    ``tensorflow/serving/classify``/``regress``; estflow's ``serving_default`` is
    predict-shaped, so the first signature with that method name (``serving_default`` first)
    is used, else the signature named ``classify``/``regress``, else ``serving_default``.
    """
    if action == "predict":
        return "serving_default"
    method = f"tensorflow/serving/{action}"
    defs = model.signature_defs
    for name in ("serving_default", *defs):
        if name in model.signatures and defs.get(name, {}).get("method_name") == method:
            return name
    return action if action in model.signatures else "serving_default"


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive
    server_version = "estflow-serve"
    disable_nagle_algorithm = True  # headers and body go out in two writes
    server: RestServer

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        self._serve()

    do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = do_OPTIONS = do_GET  # noqa: N815

    def _serve(self) -> None:
        allow = None
        try:
            body = self._read_body()
            route = parse_route(self.path)
            allow = _METHODS[route.action]
            if self.command != allow:
                raise ServingError(405, f"{self.command} is not allowed on {self.path!r}; "
                                   f"use {allow}")
            status, payload = 200, handle(self.server.registry, route, body)
        except ServingError as e:
            status, payload = e.status, {"error": e.message}
        except Exception as e:  # noqa: BLE001 - a bug must still answer the client
            log.exception("internal error serving %s %s", self.command, self.path)
            status, payload = 500, {"error": f"internal error: {type(e).__name__}: {e}"}
        self._send(status, payload, allow if status == 405 else None)

    def _read_body(self) -> bytes | None:
        """The request body, refused (413) from its Content-Length before it is read."""
        if self.headers.get("Transfer-Encoding", "").lower() not in ("", "identity"):
            self.close_connection = True
            raise ServingError(411, "chunked request bodies are not supported; send a "
                               "Content-Length header")
        length_text = self.headers.get("Content-Length")
        if length_text is None:
            return None
        if not length_text.isdigit():
            self.close_connection = True
            raise ServingError(400, f"invalid Content-Length {length_text!r}")
        length = int(length_text)
        if length > self.server.max_body_bytes:
            self.close_connection = True  # the unread body would be taken for the next request
            raise ServingError(413, f"request body of {length} bytes is over the limit of "
                               f"{self.server.max_body_bytes} bytes (--max-body-bytes)")
        return self.rfile.read(length)

    def _send(self, status: int, payload: dict[str, Any], allow: str | None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        if allow:
            self.send_header("Allow", allow)
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - base signature
        log.debug("%s %s", self.address_string(), format % args)


class RestServer(ThreadingHTTPServer):
    """A thread per connection, serving the models of one :class:`ModelRegistry`."""

    daemon_threads = True
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], registry: ModelRegistry,
                 max_body_bytes: int) -> None:
        self.registry = registry
        self.max_body_bytes = max_body_bytes
        host = address[0]
        if ":" in host:  # an IPv6 literal
            self.address_family = socket.AF_INET6
        super().__init__(address, _Handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        log.debug("connection from %s ended with an error", client_address, exc_info=True)
