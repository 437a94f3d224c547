"""A small in-memory fake of the Kubeflow Pipelines REST API (v2beta1), on loopback.

It stands in for a KFP API server, which cannot run here (no Kubernetes, no cluster), so tests
can drive the *unmodified* ``kfp.Client`` (kfp 2.17) over real HTTP and assert on what it sent.
It implements just the routes that client uses for submitting runs and managing recurring runs,
with the JSON shapes of the generated ``kfp_server_api`` models (snake_case keys, except
``recurringRuns`` in the recurring-run list; int64 values such as ``max_concurrency`` as
strings; errors as a ``google.rpc.Status`` body):

=======  ===============================================  ==================================
GET      /apis/v2beta1/healthz                            ``Client()`` (single-user: no
                                                          namespace lookup follows); like the
                                                          real server it also answers
                                                          ``tag_name`` (``tag_name``), which
                                                          the client's model drops
POST     /apis/v2beta1/experiments                        ``create_experiment``
GET      /apis/v2beta1/experiments                        ``get_experiment(experiment_name=)``
                                                          (``filter``: display_name EQUALS)
GET      /apis/v2beta1/experiments/{id}                   ``get_experiment(experiment_id=)``
POST     /apis/v2beta1/runs                               ``create_run_from_pipeline_package``
GET      /apis/v2beta1/runs, /runs/{id}                   ``list_runs``, ``get_run`` (each
                                                          ``get_run`` plays the next step of
                                                          ``run_script``, see :func:`task`)
POST     /apis/v2beta1/recurringruns                      ``create_recurring_run`` (rejects a
                                                          cron without six fields, like KFP)
GET      /apis/v2beta1/recurringruns, /{id}               ``list_recurring_runs``,
                                                          ``get_recurring_run``
POST     /apis/v2beta1/recurringruns/{id}:enable|:disable ``enable/disable_recurring_run``
DELETE   /apis/v2beta1/recurringruns/{id}                 ``delete_recurring_run``
=======  ===============================================  ==================================

``Client.create_run_from_pipeline_package`` and ``create_recurring_run`` send the pipeline spec
inline (``pipeline_spec``), so no pipeline upload route is needed. State lives in plain dicts
(``experiments``, ``runs``, ``recurring_runs``) and every request is logged in ``requests``.

Multi-user mode (``FakeKfpApi(users=...)``) plays a multi-user Kubeflow: the gateway's
oauth2-proxy turns a session cookie (``cookies``) into a user, the API server's TokenReview
authenticator a bearer token (``tokens``); a request with neither is refused with HTTP 401
(google.rpc code 16, Unauthenticated), as the API server refuses one without a user identity
(kubeflow/pipelines ``backend/src/apiserver/auth``), and one for a namespace the user is not
in ``users[user]`` with HTTP 403 (code 7, PermissionDenied, "User '...' is not authorized",
the SubjectAccessReview's answer). healthz answers ``multi_user: true``, and an experiment or a
list without a namespace is refused (400), as multi-user KFP does. Each request's headers are
kept in ``headers``. ``tls=(certfile, keyfile)`` serves HTTPS; :func:`make_certificates` makes
a CA and a certificate for 127.0.0.1 signed by it.

``gateway=`` puts something in front of the API that answers in its place, as a login proxy
does for a request without its session cookie (a request with one of ``cookies`` goes through,
to the API as usual):

``"login-redirect"``  a login proxy redirecting as Kubeflow v1.9.0's oauth2-proxy does (no
                      ``api_routes``): every path answers 302 to
                      ``/oauth2/start?rd=PATH``, which answers 302 to Dex's ``/dex/auth?...``,
                      which answers its login page (200, ``text/html``, titled ``dex``)
``"login-page"``      a company SSO gateway that answers its sign-in page (200,
                      ``text/html``, titled :data:`SSO_TITLE`) at every path
``"empty-json"``      a gateway answering ``{}`` (200, ``application/json``) to every API call

``before_request(method, path)``, when set, is called before each request is answered (under
the fake's lock): a test can change the fake between two requests of one command, e.g. end
the session (``gateway=``) before a run is followed.

Example:
    >>> with FakeKfpApi() as api:  # doctest: +SKIP
    ...     kfp.Client(host=api.url).create_experiment("demo")
"""

from __future__ import annotations

import datetime
import http.cookies
import http.server
import itertools
import json
import re
import ssl
import threading
import urllib.parse
from collections.abc import Mapping

__all__ = ["FakeKfpApi", "GATEWAYS", "SSO_TITLE", "make_certificates", "pipeline_name",
           "task"]

_PREFIX = "/apis/v2beta1"
GATEWAYS = ("login-redirect", "login-page", "empty-json")
SSO_TITLE = "Sign in \u00b7 Example Corp SSO"
# Dex's login page, as Kubeflow's Dex answers it (abridged).
_DEX_PAGE = ("<!DOCTYPE html>\n<html>\n  <head>\n    <meta charset=\"utf-8\">\n"
             "    <title>dex</title>\n  </head>\n  <body class=\"theme-body\">\n"
             "    <h2 class=\"theme-heading\">Log in to Your Account</h2>\n"
             "    <form method=\"post\" action=\"/dex/auth/local/login\">...</form>\n"
             "  </body>\n</html>\n")
_SSO_PAGE = (f"<!doctype html><html lang=\"en\"><head><title>{SSO_TITLE}</title></head>"
             "<body><h1>Sign in to continue</h1><form method=\"post\">...</form></body></html>")
# google.rpc.Code values the real server puts in its error bodies.
_GRPC_CODES = {400: 3, 401: 16, 403: 7, 404: 5, 409: 6, 500: 13}


class _HttpError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def task(name: str, state: str, *, error: str | None = None, children: tuple[str, ...] = (),
         pod: str | None = None) -> dict:
    """A run's task detail as the API answers it (``V2beta1PipelineTaskDetail``): a DAG
    (the exit handler, a condition) has ``child_tasks``; a failed task carries its error."""
    detail: dict = {"task_id": f"task-{name}", "display_name": name, "state": state}
    if error is not None:
        detail["error"] = {"code": 2, "message": error, "details": []}
    if children:
        detail["child_tasks"] = [{"task_id": f"task-{child}"} for child in children]
    if pod:
        detail["pod_name"] = pod
    return detail


def pipeline_name(spec: dict) -> str | None:
    """``pipelineInfo.name`` of a run's ``pipeline_spec`` (bare, or with a platform spec)."""
    spec = spec.get("pipeline_spec", spec)
    return spec.get("pipelineInfo", {}).get("name")


class FakeKfpApi:
    """The fake server: ``start()`` it (or use ``with``), point ``kfp.Client`` at ``url``."""

    def __init__(self, *, users: Mapping[str, set[str]] | None = None,
                 tokens: Mapping[str, str] | None = None,
                 cookies: Mapping[str, str] | None = None,
                 tls: tuple[str, str] | None = None, gateway: str | None = None) -> None:
        # Multi-user mode when `users` is given: user -> the namespaces it may act in; a
        # bearer token -> its user; a "name=value" session cookie -> its user.
        self.users = dict(users) if users is not None else None
        self.tokens = dict(tokens or {})
        self.cookies = dict(cookies or {})
        self.tls = tls
        if gateway not in (None, *GATEWAYS):
            raise ValueError(f"gateway must be one of {GATEWAYS} or None, not {gateway!r}")
        # What answers in front of the API (see the module doc); None: the API itself.
        self.gateway = gateway
        self.before_request = None  # called with (method, path) before each answer
        self.headers: list[dict[str, str]] = []  # each request's headers, lower-case names
        self.experiments: dict[str, dict] = {}
        self.runs: dict[str, dict] = {}
        self.recurring_runs: dict[str, dict] = {}
        self.requests: list[tuple[str, str]] = []  # (method, path with query)
        # Like a real server, answer at most this many items per page (None: as many as asked).
        self.page_size_cap: int | None = None
        # The backend version healthz reports (None: "unknown", as a server without TAG_NAME).
        self.tag_name: str | None = "2.16.0"
        # What each get_run of a run shows, in turn: dicts merged into the run (e.g.
        # {"state": "RUNNING", "run_details": {"task_details": [task(...), ...]}}); the last
        # one stays. Empty: runs stay PENDING.
        self.run_script: list[dict] = []
        self._played: dict[str, int] = {}
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._server: http.server.ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._routes = [
            ("GET", r"/healthz", self._healthz),
            ("POST", r"/experiments", self._create_experiment),
            ("GET", r"/experiments", self._list_experiments),
            ("GET", r"/experiments/(?P<id>[^/:]+)", self._get_experiment),
            ("POST", r"/runs", self._create_run),
            ("GET", r"/runs", self._list_runs),
            ("GET", r"/runs/(?P<id>[^/:]+)", self._get_run),
            ("POST", r"/recurringruns", self._create_recurring_run),
            ("GET", r"/recurringruns", self._list_recurring_runs),
            ("GET", r"/recurringruns/(?P<id>[^/:]+)", self._get_recurring_run),
            ("POST", r"/recurringruns/(?P<id>[^/:]+):enable", self._enable),
            ("POST", r"/recurringruns/(?P<id>[^/:]+):disable", self._disable),
            ("DELETE", r"/recurringruns/(?P<id>[^/:]+)", self._delete_recurring_run),
        ]

    # --- lifecycle ---------------------------------------------------------------------------

    @property
    def url(self) -> str:
        assert self._server is not None, "start() the fake first"
        host, port = self._server.server_address[:2]
        return f"{'https' if self.tls else 'http'}://{host}:{port}"

    def start(self) -> FakeKfpApi:
        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._server.daemon_threads = True
        if self.tls:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(*self.tls)
            # The handshake happens at accept(); a client refusing the certificate fails it,
            # which socketserver ignores (an OSError), as a real server logs and moves on.
            self._server.socket = context.wrap_socket(self._server.socket, server_side=True)
        # A short poll interval: stop() waits up to one interval for the loop to notice.
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,),
                                        name="fake-kfp-api", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._thread.join(timeout=5)
            self._server = None

    def __enter__(self) -> FakeKfpApi:
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.stop()

    # --- dispatch ----------------------------------------------------------------------------

    def _handler_class(self) -> type[http.server.BaseHTTPRequestHandler]:
        fake = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as urllib3's pool expects
            # Headers and body go out in separate writes; without TCP_NODELAY each answer
            # waits ~40 ms for a delayed ACK.
            disable_nagle_algorithm = True

            def do_GET(self):  # noqa: N802 (BaseHTTPRequestHandler's naming)
                fake._dispatch(self, "GET")

            def do_POST(self):  # noqa: N802
                fake._dispatch(self, "POST")

            def do_DELETE(self):  # noqa: N802
                fake._dispatch(self, "DELETE")

            def do_PUT(self):  # noqa: N802 (a gateway answers any method)
                fake._dispatch(self, "PUT")

            def log_message(self, format, *args):  # noqa: A002 (keep test output quiet)
                pass

        return Handler

    def _dispatch(self, request: http.server.BaseHTTPRequestHandler, method: str) -> None:
        url = urllib.parse.urlsplit(request.path)
        query = dict(urllib.parse.parse_qsl(url.query, keep_blank_values=True))
        length = int(request.headers.get("Content-Length") or 0)
        raw = request.rfile.read(length) if length else b""
        with self._lock:
            if self.before_request is not None:
                self.before_request(method, request.path)
            answer = self._gateway_answer(request.headers, request.path)
        if answer is not None:
            _send(request, *answer)
            return
        try:
            body = json.loads(raw) if raw else {}
            handler, params = self._route(method, url.path)
            with self._lock:
                self.requests.append((method, request.path))
                self.headers.append({k.lower(): v for k, v in request.headers.items()})
                self._authorize(request.headers, handler, body, query, params)
                status, payload = 200, handler(body=body, query=query, **params)
        except json.JSONDecodeError as err:
            status, payload = 400, self._status_body(400, f"invalid JSON body: {err}")
        except _HttpError as err:
            status, payload = err.status, self._status_body(err.status, err.message)
        _send(request, status, {"Content-Type": "application/json"}, json.dumps(payload).encode())

    def _gateway_answer(self, headers, path: str) -> tuple[int, dict, bytes] | None:
        """What :attr:`gateway` answers in the API's place (None: let the request through)."""
        if self.gateway is None or self._session_user(headers):
            return None
        route = urllib.parse.urlsplit(path).path
        if self.gateway == "empty-json":
            if not route.startswith("/apis/"):
                return None
            self.requests.append(("GATEWAY", path))
            return 200, {"Content-Type": "application/json"}, b"{}"
        self.requests.append(("GATEWAY", path))
        html = {"Content-Type": "text/html; charset=utf-8"}
        if self.gateway == "login-page":
            return 200, html, _SSO_PAGE.encode()
        if route == "/oauth2/start":
            query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(path).query))
            state = urllib.parse.quote(f"f3a1c0de:{query.get('rd', '/')}", safe="")
            return 302, {**html, "Location": "/dex/auth?client_id=kubeflow-oidc-authservice"
                         "&redirect_uri=%2Foauth2%2Fcallback&response_type=code"
                         f"&scope=openid+profile+email+groups&state={state}"}, \
                b'<a href="/dex/auth">Found</a>.\n'
        if route.startswith("/dex/"):
            return 200, html, _DEX_PAGE.encode()
        location = "/oauth2/start?rd=" + urllib.parse.quote(path, safe="")
        return 302, {**html, "Location": location}, \
            f'<a href="{location}">Found</a>.\n'.encode()

    def _session_user(self, headers) -> str | None:
        """The user of a session cookie the request carries (one of ``cookies``), else None."""
        jar = http.cookies.SimpleCookie()
        try:
            jar.load(headers.get("Cookie") or "")
        except http.cookies.CookieError:
            return None
        for name, morsel in jar.items():
            if f"{name}={morsel.value}" in self.cookies:
                return self.cookies[f"{name}={morsel.value}"]
        return None

    def _route(self, method: str, path: str):
        if path.startswith(_PREFIX):
            rest = path[len(_PREFIX):]
            for route_method, pattern, handler in self._routes:
                match = re.fullmatch(pattern, rest)
                if match and route_method == method:
                    return handler, match.groupdict()
        raise _HttpError(404, f"no route for {method} {path} in the fake KFP API")

    @staticmethod
    def _status_body(status: int, message: str) -> dict:
        # What KFP's grpc-gateway answers: a google.rpc.Status (plus the legacy "error").
        return {"error": message, "code": _GRPC_CODES.get(status, 2), "message": message,
                "details": []}

    # --- multi-user mode ---------------------------------------------------------------------

    def _authorize(self, headers, handler, body: dict, query: dict, params: dict) -> None:
        """In multi-user mode: 401 without a user, 403 for a namespace not the user's."""
        if self.users is None:
            return
        user = self._user(headers)
        if handler == self._healthz:
            return
        namespace = self._namespace(handler, body, query, params)
        if namespace is None:  # an unknown id: the route answers 404
            return
        if not namespace:
            raise _HttpError(400, "Invalid input error: a namespace is required in multi-user "
                             "mode")
        if namespace not in self.users.get(user, ()):
            raise _HttpError(403, f"Failed to authorize with API: PermissionDenied: User "
                             f"'{user}' is not authorized with reason: (request: "
                             f"&ResourceAttributes{{Namespace:{namespace},Group:pipelines."
                             f"kubeflow.org}})")

    def _user(self, headers) -> str:
        authorization = headers.get("Authorization") or ""
        if authorization.startswith("Bearer ") and authorization[7:] in self.tokens:
            return self.tokens[authorization[7:]]
        user = self._session_user(headers)
        if user is not None:
            return user
        raise _HttpError(401, "Failed to authorize with API: Unauthenticated: Request header "
                         "error: there is no user identity header.")

    def _namespace(self, handler, body: dict, query: dict, params: dict) -> str | None:
        """The namespace a request acts in ("" when it names none; None: unknown id)."""
        def of_experiment(experiment_id):
            experiment = self.experiments.get(experiment_id or "")
            return None if experiment is None else experiment["namespace"]

        if handler == self._create_experiment:
            return body.get("namespace") or ""
        if handler in (self._create_run, self._create_recurring_run):
            return of_experiment(body.get("experiment_id"))
        if handler in (self._list_experiments, self._list_runs, self._list_recurring_runs):
            if query.get("experiment_id"):
                return of_experiment(query["experiment_id"])
            return query.get("namespace") or ""
        if handler == self._get_experiment:
            return of_experiment(params["id"])
        table = self.runs if handler == self._get_run else self.recurring_runs
        item = table.get(params.get("id", ""))
        return None if item is None else of_experiment(item.get("experiment_id"))

    # --- helpers -----------------------------------------------------------------------------

    def _new_id(self, kind: str) -> str:
        return f"{kind}-{next(self._ids):04d}"

    @staticmethod
    def _now() -> str:
        return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

    def _page(self, items: list[dict], key: str, query: dict, filter_json: str | None) -> dict:
        """One page of ``items``; the page token is simply the offset of the next page."""
        items = [i for i in items if _matches(i, filter_json)]
        start = int(query.get("page_token") or 0)
        size = int(query.get("page_size") or 0) or len(items) or 1
        size = min(size, self.page_size_cap or size)
        page = items[start:start + size]
        next_token = str(start + size) if start + size < len(items) else ""
        return {key: page, "total_size": len(items), "next_page_token": next_token}

    def _lookup(self, table: dict[str, dict], kind: str, item_id: str) -> dict:
        if item_id not in table:
            raise _HttpError(404, f"{kind} {item_id} not found")
        return table[item_id]

    # --- routes ------------------------------------------------------------------------------

    def _healthz(self, body, query):
        # The real handler writes commit_sha and tag_name too (backend/src/apiserver/main.go).
        return {"commit_sha": "fake", "tag_name": self.tag_name or "unknown",
                "multi_user": self.users is not None, "pipeline_store": "database"}

    def _create_experiment(self, body, query):
        name = body.get("display_name")
        if not name:
            raise _HttpError(400, "experiment display_name is required")
        namespace = body.get("namespace") or ""
        if any(e["display_name"] == name and e["namespace"] == namespace
               for e in self.experiments.values()):
            raise _HttpError(409, f"experiment {name!r} already exists")
        experiment = {"experiment_id": self._new_id("experiment"), "display_name": name,
                      "description": body.get("description") or "", "namespace": namespace,
                      "created_at": self._now(), "storage_state": "AVAILABLE"}
        self.experiments[experiment["experiment_id"]] = experiment
        return experiment

    def _list_experiments(self, body, query):
        namespace = query.get("namespace") or ""
        items = [e for e in self.experiments.values()
                 if not namespace or e["namespace"] == namespace]
        return self._page(items, "experiments", query, query.get("filter"))

    def _get_experiment(self, body, query, id):  # noqa: A002 (route parameter name)
        return self._lookup(self.experiments, "experiment", id)

    def _check_source(self, body: dict, what: str) -> None:
        if not body.get("pipeline_spec") and not body.get("pipeline_version_reference"):
            raise _HttpError(400, f"{what} needs a pipeline_spec or pipeline_version_reference")
        if body.get("experiment_id"):
            self._lookup(self.experiments, "experiment", body["experiment_id"])

    def _create_run(self, body, query):
        self._check_source(body, "a run")
        run = {**body, "run_id": self._new_id("run"), "state": "PENDING",
               "storage_state": "AVAILABLE", "created_at": self._now()}
        self.runs[run["run_id"]] = run
        return run

    def _list_runs(self, body, query):
        items = [r for r in self.runs.values()
                 if not query.get("experiment_id") or r.get("experiment_id") == query["experiment_id"]]
        return self._page(items, "runs", query, query.get("filter"))

    def _get_run(self, body, query, id):  # noqa: A002
        run = self._lookup(self.runs, "run", id)
        step = self._played.get(id, 0)
        if step < len(self.run_script):
            run.update(self.run_script[step])
            self._played[id] = step + 1
        return run

    def _create_recurring_run(self, body, query):
        self._check_source(body, "a recurring run")
        trigger = body.get("trigger") or {}
        cron = (trigger.get("cron_schedule") or {}).get("cron")
        if cron is None and not trigger.get("periodic_schedule"):
            raise _HttpError(400, "a recurring run needs a cron_schedule or periodic_schedule")
        if cron is not None and len(cron.split()) != 6:
            # KFP's scheduler parses cron with seconds first; five fields are rejected.
            raise _HttpError(400, f"invalid cron {cron!r}: expected 6 fields, seconds first")
        concurrency = int(body.get("max_concurrency") or 1)
        if not 1 <= concurrency <= 10:
            raise _HttpError(400, f"max_concurrency {concurrency} must be between 1 and 10")
        enabled = body.get("mode", "ENABLE") != "DISABLE"
        recurring = {**body, "recurring_run_id": self._new_id("recurring-run"),
                     "max_concurrency": str(concurrency), "no_catchup": bool(body.get("no_catchup")),
                     "created_at": self._now(), "updated_at": self._now()}
        _set_enabled(recurring, enabled)
        self.recurring_runs[recurring["recurring_run_id"]] = recurring
        return recurring

    def _list_recurring_runs(self, body, query):
        items = [r for r in self.recurring_runs.values()
                 if not query.get("experiment_id") or r.get("experiment_id") == query["experiment_id"]]
        # Not a typo: this one list is `recurringRuns` on the wire (the proto field's own
        # name; kfp_server_api's V2beta1ListRecurringRunsResponse maps it so).
        return self._page(items, "recurringRuns", query, query.get("filter"))

    def _get_recurring_run(self, body, query, id):  # noqa: A002
        return self._lookup(self.recurring_runs, "recurring run", id)

    def _enable(self, body, query, id):  # noqa: A002
        _set_enabled(self._lookup(self.recurring_runs, "recurring run", id), True)
        return {}

    def _disable(self, body, query, id):  # noqa: A002
        _set_enabled(self._lookup(self.recurring_runs, "recurring run", id), False)
        return {}

    def _delete_recurring_run(self, body, query, id):  # noqa: A002
        self._lookup(self.recurring_runs, "recurring run", id)
        del self.recurring_runs[id]
        return {}


def _send(request: http.server.BaseHTTPRequestHandler, status: int, headers: dict,
          data: bytes) -> None:
    request.send_response(status)
    for name, value in headers.items():
        request.send_header(name, value)
    request.send_header("Content-Length", str(len(data)))
    request.end_headers()
    request.wfile.write(data)


def _set_enabled(recurring: dict, enabled: bool) -> None:
    # The real server reports both: `mode` (the input) and `status` (what the scheduler does).
    recurring["mode"] = "ENABLE" if enabled else "DISABLE"
    recurring["status"] = "ENABLED" if enabled else "DISABLED"
    recurring["updated_at"] = FakeKfpApi._now()


def _matches(item: dict, filter_json: str | None) -> bool:
    """Whether ``item`` passes a KFP filter; only ``EQUALS`` on a string key is supported."""
    if not filter_json:
        return True
    try:
        predicates = json.loads(filter_json).get("predicates", [])
    except (json.JSONDecodeError, AttributeError):
        raise _HttpError(400, f"invalid filter {filter_json!r}") from None
    for predicate in predicates:
        if predicate.get("operation") not in (1, "EQUALS") or "stringValue" not in predicate:
            raise _HttpError(400, f"the fake supports only EQUALS on strings: {predicate}")
        key = {"name": "display_name"}.get(predicate["key"], predicate["key"])
        if item.get(key) != predicate["stringValue"]:
            return False
    return True



def make_certificates(folder) -> dict[str, str]:
    """A CA, and a certificate for 127.0.0.1/localhost it signs, written as PEM files in
    ``folder``: ``{"ca": ..., "cert": ..., "key": ...}`` paths (made with ``cryptography``)."""
    from pathlib import Path

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    folder = Path(folder)
    now = datetime.datetime.now(datetime.UTC)

    def build(subject, issuer, public_key, signing_key, *, ca: bool):
        builder = (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer)
                   .public_key(public_key).serial_number(x509.random_serial_number())
                   .not_valid_before(now - datetime.timedelta(minutes=5))
                   .not_valid_after(now + datetime.timedelta(days=1))
                   .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
        if ca:
            builder = builder.add_extension(x509.KeyUsage(
                digital_signature=True, key_cert_sign=True, crl_sign=True,
                content_commitment=False, key_encipherment=False, data_encipherment=False,
                key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
        else:
            import ipaddress
            builder = builder.add_extension(x509.SubjectAlternativeName([
                x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                critical=False)
        builder = builder.add_extension(
            x509.SubjectKeyIdentifier.from_public_key(public_key), critical=False)
        return builder.sign(signing_key, hashes.SHA256())

    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"fake KFP CA {folder.name}")])
    ca = build(ca_name, ca_name, ca_key.public_key(), ca_key, ca=True)
    cert = build(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]), ca_name,
                 key.public_key(), ca_key, ca=False)
    paths = {"ca": folder / "ca.pem", "cert": folder / "server.pem", "key": folder / "server.key"}
    paths["ca"].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths["cert"].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    paths["key"].write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                               serialization.PrivateFormat.PKCS8,
                                               serialization.NoEncryption()))
    return {name: str(path) for name, path in paths.items()}
