"""A fake Kubernetes API server on 127.0.0.1 for the TFJob custom resource, speaking the REST
paths the real ``kubernetes`` client calls (``/apis/kubeflow.org/v1/namespaces/NS/tfjobs``).

It stands in for a Kubernetes cluster with the Kubeflow Training Operator, which cannot run
here: it records every request, keeps created TFJobs, and moves each one through a scripted
list of states, one per GET (Created -> Running -> Succeeded, or Failed with a message), as the
operator would set ``status.conditions``. ``on_create`` lets a test play the replicas' part
(write the model the job's chief would write).
"""

from __future__ import annotations

import dataclasses
import json
import re
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from http.server import ThreadingHTTPServer
from typing import Any

_JOBS = re.compile(r"^/apis/kubeflow\.org/v1/namespaces/([^/]+)/tfjobs(?:/([^/?]+))?(?:\?.*)?$")


@dataclasses.dataclass
class Request:
    method: str
    path: str
    body: Any


class FakeKubernetes:
    """Start with ``with FakeKubernetes(script) as api:``; ``api.host`` is its URL.

    Args:
        script: the states successive GETs report: ``"Created"``, ``"Running"``,
            ``("Failed", "message")``...; the last one repeats.
        on_create: called with each created manifest.
        forbid: answer POSTs with 403 (RBAC missing) when True.
    """

    def __init__(self, script=("Created", "Running", "Succeeded"),
                 on_create: Callable[[dict], None] | None = None, forbid: bool = False) -> None:
        self.script = list(script)
        self.on_create = on_create
        self.forbid = forbid
        self.requests: list[Request] = []
        self.jobs: dict[tuple[str, str], dict] = {}
        self._gets: dict[tuple[str, str], int] = {}
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def host(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> FakeKubernetes:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()

    def methods(self) -> list[str]:
        return [r.method for r in self.requests]

    # -- behaviour ---------------------------------------------------------------------------
    def _status(self, key: tuple[str, str]) -> dict:
        n = self._gets.get(key, 0)
        self._gets[key] = n + 1
        conditions = []
        for step in self.script[:n + 1]:
            state, message = (step, f"TFJob {key[1]} is {step.lower()}.") \
                if isinstance(step, str) else step
            for c in conditions:
                if c["type"] in ("Running", "Restarting") and state in (
                        "Running", "Restarting", "Succeeded", "Failed"):
                    c["status"] = "False"
            conditions.append({"type": state, "status": "True", "reason": f"TFJob{state}",
                               "message": message})
        active = 1 if conditions[-1]["type"] == "Running" else 0
        return {"conditions": conditions, "replicaStatuses": {"Worker": {"active": active}}}

    def _handle(self, method: str, path: str, body: Any) -> tuple[int, dict]:
        self.requests.append(Request(method, path, body))
        match = _JOBS.match(path)
        if not match:
            return 404, _status_object(404, f"the server could not find {path}")
        namespace, name = match.groups()
        if method == "POST" and name is None:
            return self._create(namespace, body)
        key = (namespace, name)
        if key not in self.jobs:
            return 404, _status_object(404, f'tfjobs.kubeflow.org "{name}" not found')
        if method == "GET":
            return 200, {**self.jobs[key], "status": self._status(key)}
        if method == "DELETE":
            del self.jobs[key]
            return 200, _status_object(200, "deleted", status="Success")
        return 405, _status_object(405, f"{method} not allowed")

    def _create(self, namespace: str, body: dict) -> tuple[int, dict]:
        if self.forbid:
            return 403, _status_object(403, 'tfjobs.kubeflow.org is forbidden: User '
                                       '"system:serviceaccount:kubeflow:pipeline-runner" cannot '
                                       'create resource "tfjobs"')
        name = body["metadata"]["name"]
        if (namespace, name) in self.jobs:
            return 409, _status_object(409, f'tfjobs.kubeflow.org "{name}" already exists')
        self.jobs[(namespace, name)] = {**body, "metadata": {**body["metadata"], "uid": "u-1"}}
        if self.on_create:
            self.on_create(body)
        return 201, self.jobs[(namespace, name)]

    def _handler(self):
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def _serve(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                body = json.loads(raw) if raw else None
                code, payload = fake._handle(self.command, self.path, body)
                data = json.dumps(payload).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_DELETE = _serve

            def log_message(self, *args) -> None:  # keep test output clean
                pass

        return Handler


def _status_object(code: int, message: str, status: str = "Failure") -> dict:
    return {"kind": "Status", "apiVersion": "v1", "status": status, "message": message,
            "code": code}
