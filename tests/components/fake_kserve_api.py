"""A fake Kubernetes API with KServe installed, on 127.0.0.1 over HTTPS (a certificate the
test makes), for the push step's rollout (components/push/rollout.py).

It stands in for a cluster, which cannot run here. It serves the two calls the rollout makes
on ``/apis/serving.kserve.io/v1beta1/namespaces/NS/inferenceservices/NAME``: server-side apply
(``PATCH``, ``application/apply-patch+yaml``, ``fieldManager`` required) and ``GET``. Each
applied object is validated strictly against KServe's real CRD schema of a chosen release
(tests/pipelines/schemas/), as the API server does with ``fieldValidation=Strict``. A request
without the service account's bearer token is a 401; ``forbid`` answers 403 (RBAC missing).

It plays KServe's controller: an apply that changes ``spec`` makes a new revision
(``NAME-predictor-0000N``); the next GET shows it created, the one after shows its outcome from
``outcomes`` (by ``storageUri``): ``"ready"`` (it takes the traffic, or
``canaryTrafficPercent`` of it beside the previous rolled-out revision), ``("failed", reason,
message)`` (a RevisionFailed condition; the previous revision keeps the traffic) or
``"stuck"`` (never ready). :meth:`served` says which storageUri gets what share of traffic.
"""

from __future__ import annotations

import copy
import datetime
import ipaddress
import json
import re
import ssl
import threading
from http.server import BaseHTTPRequestHandler
from http.server import ThreadingHTTPServer
from pathlib import Path

import jsonschema

SCHEMAS = Path(__file__).resolve().parents[1] / "pipelines" / "schemas"
_PATH = re.compile(r"^/apis/serving\.kserve\.io/v1beta1/namespaces/([^/]+)/inferenceservices/"
                   r"([^/?]+)(?:\?(.*))?$")


def strict_validator(tag: str) -> jsonschema.Draft4Validator:
    """KServe ``tag``'s InferenceService schema, unknown fields refused where it lists fields."""
    def strict(schema):
        if isinstance(schema, dict):
            out = {k: strict(v) for k, v in schema.items()}
            if "properties" in out and not out.get("x-kubernetes-preserve-unknown-fields") \
                    and "additionalProperties" not in out:
                out["additionalProperties"] = False
            return out
        return [strict(v) for v in schema] if isinstance(schema, list) else schema

    document = json.loads((SCHEMAS / f"kserve-{tag}-inferenceservice.json").read_text())
    assert document["x-estflow-source"]["tag"] == tag
    return jsonschema.Draft4Validator(strict(document["schema"]))


def make_certificate(folder: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 (it is its own CA): (cert, key) paths."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "fake-kube-apiserver")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = folder / "ca.crt", folder / "server.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path


class FakeKServe:
    """``with FakeKServe(tmp_path, tag) as api:``; ``api.host``, ``api.ca``, ``api.token``."""

    def __init__(self, folder: Path, tag: str = "v0.20.0", *, token: str = "sa-token",
                 outcomes: dict | None = None, forbid: bool = False) -> None:
        self.validator = strict_validator(tag)
        self.token, self.forbid = token, forbid
        self.outcomes = outcomes if outcomes is not None else {}
        self.applies: list[dict] = []  # every apply: {"query", "content_type", "body"}
        self.services: dict[tuple[str, str], dict] = {}
        self._lock = threading.Lock()
        self.ca, key = make_certificate(folder)
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self.ca, key)
        self._server.socket = context.wrap_socket(self._server.socket, server_side=True)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def port(self) -> int:
        return self._server.server_address[1]

    @property
    def host(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def __enter__(self) -> FakeKServe:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()

    def served(self, namespace: str, name: str) -> dict[str, int]:
        """storageUri -> percent of traffic, as the route sends it now."""
        state = self.services[(namespace, name)]
        uris = {r["name"]: r["storageUri"] for r in state["revisions"]}
        return {uris[rev]: pct for rev, pct in state["traffic"].items()}

    # -- the API -------------------------------------------------------------------------------
    def _handle(self, method: str, path: str, headers, body: bytes) -> tuple[int, dict]:
        match = _PATH.match(path)
        scheme, _, token = (headers.get("Authorization") or "").partition(" ")
        if scheme.lower() != "bearer" or token != self.token:  # the scheme is case-blind
            return 401, _status(401, "Unauthorized", "Unauthorized")
        if not match:
            return 404, _status(404, f"the server could not find the requested resource {path}")
        namespace, name, query = match.groups()
        query = dict(kv.split("=", 1) for kv in (query or "").split("&") if "=" in kv)
        with self._lock:
            if method == "GET":
                if (namespace, name) not in self.services:
                    return 404, _status(404, f'inferenceservices.serving.kserve.io "{name}" '
                                        "not found", "NotFound")
                return 200, self._observe(namespace, name)
            if method == "PATCH":
                return self._apply(namespace, name, query, headers.get("Content-Type"), body)
        return 405, _status(405, f"{method} is not allowed")

    def _apply(self, namespace, name, query, content_type, raw) -> tuple[int, dict]:
        if content_type != "application/apply-patch+yaml" or not query.get("fieldManager"):
            return 400, _status(400, "expected server-side apply (application/apply-patch+yaml"
                                f" with a fieldManager); received {content_type}, {query}")
        if self.forbid:
            return 403, _status(403, 'inferenceservices.serving.kserve.io "' + name + '" is '
                                'forbidden: User "system:serviceaccount:ml:pipeline-runner" '
                                'cannot patch resource "inferenceservices"', "Forbidden")
        body = json.loads(raw)
        self.applies.append({"query": query, "content_type": content_type, "body": body})
        errors = [f"{'.'.join(map(str, e.path))}: {e.message}"
                  for e in self.validator.iter_errors(body)]
        if body["metadata"]["name"] != name or body["metadata"].get("namespace") != namespace:
            errors.append("metadata.name/namespace: do not match the request path")
        if errors:
            return 422, _status(422, "; ".join(errors), "Invalid")
        state = self.services.setdefault((namespace, name), {
            "spec": None, "generation": 0, "revisions": [], "traffic": {}, "rolled_out": []})
        if body["spec"] != state["spec"]:
            state["spec"] = copy.deepcopy(body["spec"])
            state["generation"] += 1
            state["revisions"].append({
                "name": f"{name}-predictor-{len(state['revisions']) + 1:05d}",
                "storageUri": body["spec"]["predictor"]["model"]["storageUri"],
                "canary": body["spec"]["predictor"].get("canaryTrafficPercent"),
                "stage": "new"})
        state["metadata"] = {**body["metadata"], "generation": state["generation"]}
        return 200, self._object(state)

    def _observe(self, namespace: str, name: str) -> dict:
        """A GET: the newest revision moves one stage (new -> created -> its outcome)."""
        state = self.services[(namespace, name)]
        newest = state["revisions"][-1]
        if newest["stage"] == "new":
            newest["stage"] = "created"
        elif newest["stage"] == "created":
            outcome = self.outcomes.get(newest["storageUri"], "ready")
            if outcome == "ready":
                newest["stage"] = "ready"
                self._route(state, newest)
            elif outcome != "stuck":
                newest["stage"], newest["failure"] = "failed", outcome[1:]
        return self._object(state)

    def _route(self, state: dict, revision: dict) -> None:
        previous = state["rolled_out"][-1] if state["rolled_out"] else None
        if revision["canary"] and previous:
            state["traffic"] = {revision["name"]: revision["canary"],
                                previous: 100 - revision["canary"]}
        else:
            state["traffic"] = {revision["name"]: 100}
            state["rolled_out"].append(revision["name"])

    def _object(self, state: dict) -> dict:
        revisions = [r for r in state["revisions"] if r["stage"] != "new"]
        ready = [r["name"] for r in revisions if r["stage"] == "ready"]
        conditions = [{"type": "Ready", "status": "True" if state["traffic"] else "Unknown"}]
        failed = [r for r in revisions[-1:] if r["stage"] == "failed"]
        for r in failed:
            conditions.append({"type": "PredictorConfigurationReady", "status": "False",
                               "reason": r["failure"][0], "message": r["failure"][1]})
        predictor = {"traffic": [{"revisionName": rev, "percent": pct, "latestRevision":
                                  rev == (revisions[-1]["name"] if revisions else None)}
                                 for rev, pct in state["traffic"].items()]}
        if revisions:
            predictor["latestCreatedRevision"] = revisions[-1]["name"]
        if ready:
            predictor["latestReadyRevision"] = ready[-1]
        return {"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
                "metadata": state["metadata"], "spec": state["spec"],
                "status": {"observedGeneration": len(revisions), "conditions": conditions,
                           "components": {"predictor": predictor},
                           "url": f"http://{state['metadata']['name']}.example.com"}}

    def _handler(self):
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def _serve(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                code, payload = fake._handle(self.command, self.path, self.headers,
                                             self.rfile.read(length) if length else b"")
                data = json.dumps(payload).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_PATCH = do_POST = do_PUT = do_DELETE = _serve

            def log_message(self, *args) -> None:  # keep test output clean
                pass

        return Handler


def _status(code: int, message: str, reason: str = "") -> dict:
    return {"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": message,
            "reason": reason, "code": code}
