"""A fake Kubernetes API server on 127.0.0.1 for the training jobs estflow submits, speaking the
REST paths the real ``kubernetes`` client calls:

* custom resources ``/apis/GROUP/VERSION/namespaces/NS/PLURAL[/NAME]``: TFJobs
  (``kubeflow.org/v1``) and TrainJobs (``trainer.kubeflow.org/v1alpha1``): POST (with
  ``fieldValidation=Strict`` checked against the real CRD schema of a chosen release, see
  ``crd_schemas.py``), GET, PATCH (merge patch), DELETE;
* pods ``/api/v1/namespaces/NS/pods[/NAME[/log]]``: the submitting pod (``pods``), and the
  pods each created job gets (one per replica, labelled as the operator or JobSet labels them),
  with their logs.

It stands in for a cluster with the Training Operator or Kubeflow Trainer, which cannot run
here: it records every request, keeps created jobs, and moves each through a scripted list of
states, one per GET (Created -> Running -> Succeeded, or Failed with a message), setting the
status the controller would set. ``on_create`` lets a test play the replicas' part (write the
model the job's chief would write).
"""

from __future__ import annotations

import dataclasses
import json
import re
import threading
import urllib.parse
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from http.server import ThreadingHTTPServer
from typing import Any

from tests.components import crd_schemas

_CUSTOM = re.compile(r"^/apis/([^/]+)/([^/]+)/namespaces/([^/]+)/([^/]+)(?:/([^/]+))?$")
_PODS = re.compile(r"^/api/v1/namespaces/([^/]+)/pods(?:/([^/]+))?(/log)?$")
KINDS = {"tfjobs": ("kubeflow.org", "v1", "TFJob"),
         "trainjobs": ("trainer.kubeflow.org", "v1alpha1", "TrainJob")}


@dataclasses.dataclass
class Request:
    method: str
    path: str
    query: dict[str, str]
    body: Any


class FakeKubernetes:
    """Start with ``with FakeKubernetes(script) as api:``; ``api.host`` is its URL.

    Args:
        script: the states successive GETs of a job report: ``"Created"``, ``"Running"``,
            ``"Succeeded"``, ``("Failed", "message")``...; the last one repeats.
        on_create: called with each created manifest.
        forbid: answer POSTs of jobs with 403 (RBAC missing) when True.
        schemas: plural -> CRD name in ``crd_schemas.CRDS`` whose schema checks created
            objects (the release the fake cluster runs); a plural missing here is not served
            (404, the CRD is not installed).
        pods: the pods that exist before any job (name -> pod object), e.g. the submitter.
        resubmitted: the script of a job created again under the same name (default:
            ``script``).
    """

    def __init__(self, script=("Created", "Running", "Succeeded"),
                 on_create: Callable[[dict], None] | None = None, forbid: bool = False,
                 schemas: dict[str, str] | None = None,
                 pods: dict[str, dict] | None = None, resubmitted=None) -> None:
        self.script = list(script)
        self.resubmitted = list(resubmitted or script)
        self.created: dict[tuple[str, str, str], int] = {}
        self.on_create = on_create
        self.forbid = forbid
        self.schemas = {"tfjobs": "tfjob-v1.9.3", "trainjobs": "trainjob-v2.2.1"} \
            if schemas is None else schemas
        self.requests: list[Request] = []
        self.jobs: dict[tuple[str, str, str], dict] = {}
        self.pods: dict[tuple[str, str], dict] = {
            (p["metadata"].get("namespace", "default"), name): p
            for name, p in (pods or {}).items()}
        self._gets: dict[tuple[str, str, str], int] = {}
        self._lock = threading.Lock()
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

    def methods(self, prefix: str = "/apis/") -> list[str]:
        """The methods of the requests to paths starting with ``prefix`` (the jobs')."""
        return [r.method for r in self.requests if r.path.startswith(prefix)]

    def job_requests(self) -> list[Request]:
        return [r for r in self.requests if r.path.startswith("/apis/")]

    # -- routing -----------------------------------------------------------------------------
    def _handle(self, method: str, url: str, body: Any) -> tuple[int, Any]:
        parsed = urllib.parse.urlsplit(url)
        query = dict(urllib.parse.parse_qsl(parsed.query))
        with self._lock:
            self.requests.append(Request(method, parsed.path, query, body))
            if match := _CUSTOM.match(parsed.path):
                return self._custom(method, query, body, *match.groups())
            if match := _PODS.match(parsed.path):
                return self._pods(method, query, *match.groups())
        return 404, _status(404, f"the server could not find the requested resource {url}")

    def _custom(self, method, query, body, group, version, namespace, plural, name):
        if plural not in self.schemas or KINDS.get(plural, ())[:2] != (group, version):
            return 404, _status(404, "the server could not find the requested resource")
        if method == "POST" and name is None:
            return self._create(plural, namespace, body, query.get("fieldValidation"))
        key = (plural, namespace, name)
        if key not in self.jobs:
            return 404, _status(404, f'{plural}.{group} "{name}" not found', "NotFound")
        if method == "GET":
            return 200, {**self.jobs[key], "status": self._status(key)}
        if method == "PATCH":
            _merge_patch(self.jobs[key], body)
            return 200, self.jobs[key]
        if method == "DELETE":
            del self.jobs[key]
            self._gets.pop(key, None)
            for pod in [k for k, p in self.pods.items()
                        if p["metadata"].get("labels", {}).get("fake/job") == name]:
                del self.pods[pod]
            return 200, _status(200, "deleted", "Success")
        return 405, _status(405, f"{method} not allowed")

    def _create(self, plural: str, namespace: str, body: dict, validation: str | None):
        group = KINDS[plural][0]
        if self.forbid:
            return 403, _status(403, f'{plural}.{group} is forbidden: User "system:'
                                f'serviceaccount:kubeflow:pipeline-runner" cannot create '
                                f'resource "{plural}"', "Forbidden")
        problems = crd_schemas.errors(self.schemas[plural], body)
        unknown = [p for p in problems if "Additional properties" in p]
        if unknown and validation == "Strict":
            return 400, _status(400, f'{KINDS[plural][2]} in version "{KINDS[plural][1]}" '
                                'cannot be handled as a ' + KINDS[plural][2] + ': strict '
                                'decoding error: unknown field ' + "; ".join(unknown),
                                "BadRequest")
        if [p for p in problems if p not in unknown]:
            return 422, _status(422, "; ".join(problems), "Invalid")
        name = body["metadata"]["name"]
        if (plural, namespace, name) in self.jobs:
            return 409, _status(409, f'{plural}.{group} "{name}" already exists',
                                "AlreadyExists")
        self.created[(plural, namespace, name)] = self.created.get(
            (plural, namespace, name), 0) + 1
        self.jobs[(plural, namespace, name)] = {
            **body, "metadata": {**body["metadata"], "uid": f"uid-{name}"}}
        self._add_pods(plural, namespace, body)
        if self.on_create:
            self.on_create(body)
        return 201, self.jobs[(plural, namespace, name)]

    def _add_pods(self, plural: str, namespace: str, body: dict) -> None:
        name = body["metadata"]["name"]
        if plural == "tfjobs":
            names = [(f"{name}-{replica.lower()}-{i}", "tensorflow")
                     for replica, spec in body["spec"]["tfReplicaSpecs"].items()
                     for i in range(spec["replicas"])]
            labels = {"training.kubeflow.org/job-name": name}
        else:
            names = [(f"{name}-node-0-{i}", "node")
                     for i in range(body["spec"]["trainer"]["numNodes"])]
            labels = {"jobset.sigs.k8s.io/jobset-name": name}
        labels |= {"estflow/job": name} if plural == "tfjobs" else {}
        for pod, container in names:
            self.pods[(namespace, pod)] = {
                "metadata": {"name": pod, "namespace": namespace,
                             "labels": {**labels, "fake/job": name}},
                "spec": {"containers": [{"name": container, "image": "img"}]},
                "status": {"phase": "Running"},
                "fake/log": f"{pod} started\n{pod} step 100: loss 0.5\n"}

    def _pods(self, method: str, query: dict, namespace: str, name: str | None, log):
        if method != "GET":
            return 405, _status(405, f"{method} not allowed")
        if name is None:
            wanted = dict(kv.split("=", 1) for kv in
                          (query.get("labelSelector") or "").split(",") if kv)
            items = [_public(p) for (ns, _), p in sorted(self.pods.items()) if ns == namespace
                     and wanted.items() <= p["metadata"].get("labels", {}).items()]
            return 200, {"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": items}
        pod = self.pods.get((namespace, name))
        if pod is None:
            return 404, _status(404, f'pods "{name}" not found', "NotFound")
        if log:
            lines = pod.get("fake/log", "").splitlines(True)
            tail = int(query.get("tailLines") or len(lines))
            return 200, "".join(lines[-tail:])
        return 200, _public(pod)

    # -- what the controller would set --------------------------------------------------------
    def _status(self, key: tuple[str, str, str]) -> dict:
        n = self._gets.get(key, 0)
        self._gets[key] = n + 1
        script = self.script if self.created.get(key, 1) == 1 else self.resubmitted
        steps = [(s, f"{key[2]} is {s.lower()}.") if isinstance(s, str) else s
                 for s in script[:min(n, len(script) - 1) + 1]]
        if key[0] == "tfjobs":
            return _tfjob_status(steps)
        return _trainjob_status(steps, self.jobs[key]["spec"]["trainer"]["numNodes"])

    def _handler(self):
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def _serve(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                body = json.loads(raw) if raw else None
                code, payload = fake._handle(self.command, self.path, body)
                text = isinstance(payload, str)
                data = payload.encode() if text else json.dumps(payload).encode()
                self.send_response(code)
                self.send_header("Content-Type", "text/plain" if text else "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_DELETE = do_PATCH = _serve

            def log_message(self, *args) -> None:  # keep test output clean
                pass

        return Handler


def _tfjob_status(steps: list[tuple[str, str]]) -> dict:
    conditions: list[dict] = []
    for state, message in steps:
        for c in conditions:
            if c["type"] in ("Running", "Restarting"):
                c["status"] = "False"
        conditions.append({"type": state, "status": "True", "reason": f"TFJob{state}",
                           "message": message})
    active = 1 if conditions[-1]["type"] == "Running" else 0
    return {"conditions": conditions, "replicaStatuses": {"Worker": {"active": active}}}


def _trainjob_status(steps: list[tuple[str, str]], nodes: int) -> dict:
    state, message = steps[-1]
    kinds = {"Succeeded": "Complete", "Failed": "Failed"}
    conditions = [{"type": kinds[state], "status": "True", "reason": f"Jobs{kinds[state]}",
                   "message": message, "lastTransitionTime": "2026-11-24T00:00:00Z"}] \
        if state in kinds else []
    counts = {"Running": {"active": nodes, "ready": nodes}, "Succeeded": {"succeeded": nodes},
              "Failed": {"failed": 1}}.get(state, {})
    return {"conditions": conditions, "jobsStatus": [{"name": "node", **counts}]}


def _public(pod: dict) -> dict:
    return {"kind": "Pod", "apiVersion": "v1",
            **{k: v for k, v in pod.items() if not k.startswith("fake/")}}


def _merge_patch(target: dict, patch: dict) -> None:
    """RFC 7386 JSON merge patch (what the client sends for custom objects): objects merge,
    anything else (lists too) replaces, null deletes."""
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict) and isinstance(target.get(key), dict):
            _merge_patch(target[key], value)
        else:
            target[key] = value


def _status(code: int, message: str, reason: str = "", status: str = "Failure") -> dict:
    return {"kind": "Status", "apiVersion": "v1", "status": status, "message": message,
            "reason": reason, "code": code}
