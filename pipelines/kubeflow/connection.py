"""How :mod:`estflow.pipelines.kubeflow.submit` reaches a KFP API: the login it sends, the client it
builds, and the one-line errors it turns the client's failures into.

A multi-user Kubeflow refuses a request that carries no user identity (HTTP 401) and one whose
user may not act in the namespace (HTTP 403). :class:`Login` is what ``kfp.Client`` (2.17) can
send, each from an option or an environment variable:

=============  ====================================  =========================================
What           Option / environment variable          Sent as (``kfp.Client`` argument)
=============  ====================================  =========================================
bearer token   ``--token`` / ``ESTFLOW_KFP_TOKEN``    ``Authorization: Bearer``
                                                      (``existing_token``)
token file     ``--token-file`` /                     ``Authorization: Bearer``, the file read
               ``KF_PIPELINES_SA_TOKEN_PATH``         again at each request (``credentials``:
               (kfp's), else kfp's in-cluster path    kfp's ServiceAccountTokenVolumeCredentials,
               when it exists                         as the projected token rotates)
cookies        ``--cookies`` / ``ESTFLOW_KFP_COOKIES``  ``Cookie`` header (``cookies``), e.g.
                                                      Kubeflow's ``oauth2_proxy_kubeflow=...``
CA bundle      ``--ca-cert`` / ``ESTFLOW_KFP_CA_CERT``  ``ssl_ca_cert``
no TLS check   ``--insecure``                         ``verify_ssl=False``
=============  ====================================  =========================================

No secret is ever printed: :meth:`Login.describe` names what is sent (a token and where it comes
from, the cookie names), never a value; a refusal may name the token's issuer (its ``iss``
claim, :meth:`Login.issuer`), which is no secret.

A refused request's hint follows from what was sent and what answered (:func:`_refusal_hint`;
the answers of Kubeflow 26.03's manifests and v1.9.0, read from upstream, are listed in
``tests/pipelines/test_login_overlays.py``): oauth2-proxy's ``401 {}`` on an API path without
a session, the ``Jwt ...`` 401s of Istio's gateway checking a bearer token (Envoy's jwt_authn),
an Istio authorization policy's ``403 RBAC: access denied``, and the KFP API's own 401s (no
identity, or its TokenReview refusing a token: audience, expiry) and 403 (not a contributor).

Only the API's own answers are taken: a login proxy in front of the API (Kubeflow v1.9.0's
oauth2-proxy, a company SSO gateway) answers a request it does not let through with a redirect
to its login page, or with the page itself, which ``kfp.Client`` would follow and read as an
empty answer (a run id ``None``, no schedules). :func:`guard` makes the client's urllib3 pool
follow no redirect and refuse a redirect, or a successful answer that is not JSON, as an
:class:`ApiAnswerError` that says what was asked, what answered (the status, where the redirect
leads, the HTML page's title or the content type) and what to do; :func:`require` refuses an
answer without the id estflow goes on with.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import html
import http
import io
import json
import logging
import os
import re
import urllib.parse
import warnings
from collections.abc import Iterator
from collections.abc import Mapping
from pathlib import Path

import kfp
import kfp_server_api
import urllib3
from kfp.client import set_volume_credentials

__all__ = ["SubmitError", "ApiUnreachableError", "ApiHttpError", "ApiAnswerError", "Login",
           "Client", "SA_TOKEN_PATH", "SA_TOKEN_ENV", "check_host", "connect", "api_errors",
           "guard", "check_answer", "require"]

# kfp's in-cluster service-account token: the path a Kubeflow notebook's PodDefault
# ("access-ml-pipeline") projects, and the variable that moves it (kfp.client's constants).
SA_TOKEN_ENV = kfp.client.KF_PIPELINES_SA_TOKEN_ENV  # "KF_PIPELINES_SA_TOKEN_PATH"
SA_TOKEN_PATH = kfp.client.KF_PIPELINES_SA_TOKEN_PATH  # /var/run/secrets/kubeflow/pipelines/token
TOKEN_ENV = "ESTFLOW_KFP_TOKEN"
COOKIES_ENV = "ESTFLOW_KFP_COOKIES"
CA_CERT_ENV = "ESTFLOW_KFP_CA_CERT"


class SubmitError(RuntimeError):
    """The KFP API could not be reached, or refused the request."""


class ApiUnreachableError(SubmitError):
    """No answer from the KFP API (connection refused, unknown host, TLS failure...)."""


class ApiHttpError(SubmitError):
    """The KFP API answered with an HTTP error."""

    def __init__(self, message: str, status: int, reason: str) -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason


class ApiAnswerError(SubmitError):
    """Something answered at the KFP API's address, but not the API: a redirect (a login
    proxy sending to its login page), an HTML page, an answer that is not JSON, or JSON without
    the id the command goes on with.

    Attributes:
        method, url: the request (None for an answer refused for a missing id).
        status: the HTTP status of the answer (None for a missing id).
        location: where a redirect leads (absolute), else None.
    """

    def __init__(self, message: str, *, method: str | None = None, url: str | None = None,
                 status: int | None = None, location: str | None = None,
                 page: bool = False) -> None:
        super().__init__(message)
        self.method = method
        self.url = url
        self.status = status
        self.location = location
        self.page = page  # the answer was a web page (HTML), not the API's JSON


class _NotTheApi(ApiAnswerError):
    """:func:`check_answer`'s error, made whole (host, login, what to do) by :func:`api_errors`."""


@dataclasses.dataclass(frozen=True)
class Login:
    """What identifies the user to a KFP API, and how its TLS certificate is checked.

    Attributes:
        token: a bearer token (a leading ``Bearer `` is dropped).
        token_file: a file holding the token, read at each request.
        cookies: a ``Cookie`` header value, ``name=value; name2=value2``.
        ca_cert: a PEM file of the CA(s) that signed the server's certificate.
        insecure: do not check the server's certificate at all.
    """

    token: str | None = None
    token_file: str | None = None
    cookies: str | None = None
    ca_cert: str | None = None
    insecure: bool = False

    @classmethod
    def resolve(cls, token: str | None = None, token_file: str | None = None,
                cookies: str | None = None, ca_cert: str | None = None, insecure: bool = False,
                environ: Mapping[str, str] | None = None) -> Login:
        """The login from the options, each missing one from its environment variable (see
        the module doc); kfp's in-cluster token path when no token is given and it exists.

        Raises:
            ValueError: both a token and a token file, a CA bundle with ``insecure``, or a
                file that cannot be read (named, with the option it came from).
        """
        env = os.environ if environ is None else environ
        if token and token_file:
            raise ValueError("give either --token or --token-file, not both")
        token = token or (None if token_file else env.get(TOKEN_ENV)) or None
        if not token and not token_file:
            token_file = env.get(SA_TOKEN_ENV) or (
                SA_TOKEN_PATH if os.path.isfile(SA_TOKEN_PATH) else None)
        ca_cert = ca_cert or (None if insecure else env.get(CA_CERT_ENV)) or None
        if ca_cert and insecure:
            raise ValueError("give either --ca-cert or --insecure, not both")
        login = cls(token=_bare(token), token_file=token_file,
                    cookies=cookies or env.get(COOKIES_ENV) or None, ca_cert=ca_cert,
                    insecure=insecure)
        login.check_files()
        return login

    def check_files(self) -> None:
        """Fail now, naming the file, when the token file or CA bundle cannot be used."""
        if self.token_file:
            try:
                text = Path(self.token_file).read_text().strip()
            except OSError as err:
                raise ValueError(f"cannot read the token file {self.token_file} (--token-file "
                                 f"or ${SA_TOKEN_ENV}): {err.strerror}") from None
            if not text:
                raise ValueError(f"the token file {self.token_file} is empty (--token-file "
                                 f"or ${SA_TOKEN_ENV})")
        if self.ca_cert and not os.path.isfile(self.ca_cert):
            raise ValueError(f"the CA bundle {self.ca_cert} does not exist (--ca-cert or "
                             f"${CA_CERT_ENV})")

    def client_kwargs(self) -> dict:
        """The ``kfp.Client`` arguments for this login."""
        kwargs: dict = {}
        if self.token:
            kwargs["existing_token"] = self.token
        elif self.token_file:
            kwargs["credentials"] = set_volume_credentials.ServiceAccountTokenVolumeCredentials(
                self.token_file)
        if self.cookies:
            kwargs["cookies"] = self.cookies
        if self.ca_cert:
            kwargs["ssl_ca_cert"] = self.ca_cert
        if self.insecure:
            kwargs["verify_ssl"] = False
        return kwargs

    def describe(self) -> str:
        """What this login sends, without any secret: e.g. ``a bearer token (--token)``."""
        sent = []
        if self.token:
            sent.append("a bearer token (--token or $" + TOKEN_ENV + ")")
        elif self.token_file:
            sent.append(f"a bearer token from {self.token_file}")
        if self.cookies:
            names = [c.split("=", 1)[0].strip() for c in self.cookies.split(";") if c.strip()]
            sent.append("the cookie" + ("s " if len(names) > 1 else " ") + ", ".join(names))
        return " and ".join(sent) or "no token and no cookie"

    def issuer(self) -> str | None:
        """The ``iss`` claim of the bearer token (read from the token file), unverified, or
        None (no token, not a JWT, an unreadable file): which issuer a gateway was shown. An
        issuer is no secret; the token never leaves this method."""
        token = self.token
        if not token and self.token_file:
            try:
                token = Path(self.token_file).read_text().strip()
            except OSError:
                return None
        parts = (token or "").split(".")
        if len(parts) != 3:
            return None
        try:
            claims = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
        except (ValueError, TypeError):
            return None
        iss = claims.get("iss") if isinstance(claims, dict) else None
        return iss if isinstance(iss, str) and iss else None


def _bare(token: str | None) -> str | None:
    # A token pasted with its scheme would otherwise go out as "Bearer Bearer ...".
    token = (token or "").strip()
    return token.removeprefix("Bearer ").strip() or None


class Client(kfp.Client):
    """``kfp.Client`` whose start-up health check fails at once on a refused login or a TLS
    failure, instead of kfp's five tries five seconds apart (a refusal does not heal), and
    whose answers are checked (:func:`guard`) from that first request on."""

    def get_kfp_healthz(self, sleep_duration: int = 5):  # noqa: D102 (kfp's)
        guard(self)  # kfp.Client.__init__ asks healthz before connect() sees the client
        try:
            return self._healthz_api.healthz_service_get_healthz()
        except kfp_server_api.ApiException as err:
            if err.status in (0, None, 401, 403):
                raise
        return super().get_kfp_healthz(sleep_duration)


def check_host(host: str) -> None:
    """Refuse a ``host`` that is not an http(s) URL (ValueError, before any request)."""
    if not isinstance(host, str) or not host.startswith(("http://", "https://")):
        raise ValueError("Received an invalid value for `host`, expected the KFP API's URL "
                         f"such as http://localhost:8080. Received: host={host!r}")



def connect(client_factory, host: str, namespace: str | None,
            login: Login | None = None) -> kfp.Client:
    """Build the client: ``client_factory(host=, [namespace=], **login.client_kwargs())``,
    its answers checked (:func:`guard`)."""
    kwargs = {"host": host, **({"namespace": namespace} if namespace else {}),
              **(login.client_kwargs() if login else {})}
    with warnings.catch_warnings():
        # kfp.Client warns on every construction that it needs KFP >= 2.0.0-beta.2.
        warnings.filterwarnings("ignore", message="This client only works with",
                                category=FutureWarning)
        return guard(client_factory(**kwargs))


# --- only the API's own answers ------------------------------------------------------------------

_REDIRECTS = (301, 302, 303, 307, 308)
_SHOWN = 160  # the longest URL or excerpt an error shows


class _CheckedPool:
    """The urllib3 pool of a ``kfp.Client`` (kfp_server_api's ``rest_client.pool_manager``),
    which follows no redirect and passes on only an answer :func:`check_answer` accepts.

    kfp_server_api sends every request through the pool's ``request``; the rest (``clear``,
    the pools, ...) is the wrapped pool's."""

    def __init__(self, pool) -> None:
        self._pool = pool

    def request(self, method, url, *args, **kwargs):
        kwargs["redirect"] = False
        response = self._pool.request(method, url, *args, **kwargs)
        check_answer(method, url, response)
        return response

    def __getattr__(self, name):
        return getattr(self._pool, name)


def guard(client: kfp.Client) -> kfp.Client:
    """Check every answer ``client`` gets from now on (:func:`check_answer`), by wrapping the
    urllib3 pool its generated API client sends through; the client is otherwise unchanged.
    Returns ``client``; a second call changes nothing."""
    rest = getattr(getattr(getattr(client, "_healthz_api", None), "api_client", None),
                   "rest_client", None)
    pool = getattr(rest, "pool_manager", None)
    if pool is not None and not isinstance(pool, _CheckedPool):
        rest.pool_manager = _CheckedPool(pool)
    return client


def check_answer(method: str, url: str, response: urllib3.BaseHTTPResponse) -> None:
    """Refuse what the KFP API never answers: a redirect (the API itself never redirects; a
    login proxy sends to its login page), or a success (2xx) that is not JSON (a login page or
    another web page answered with 200). An error status is left to the client (an
    ``ApiException``, see :func:`api_errors`).

    Raises:
        ApiAnswerError: what was asked and what answered, e.g. ``GET URL was answered HTTP 302
            Found, a redirect to LOCATION``.
    """
    status = response.status
    reason = getattr(response, "reason", None) or _phrase(status)
    asked = f"{method} {_short(url.split('?', 1)[0])} was answered HTTP {status}" + (
        f" {reason}" if reason else "")
    if status in _REDIRECTS:
        location = response.headers.get("Location")
        location = urllib.parse.urljoin(url, location) if location else None
        _release(response)
        raise _NotTheApi(f"{asked}, a redirect to {_short(location) if location else '(nowhere)'}",
                         method=method, url=url, status=status, location=location)
    if not 200 <= status < 300:
        return
    content_type = response.headers.get("Content-Type") or ""
    body = response.data or b""
    if _is_json(body, content_type):
        return
    page = _html_title(body, content_type)
    if page is None:
        excerpt = " ".join(body.decode("utf-8", "replace").split())
        page_text = (f"{content_type or 'no content type'}, not JSON: "
                     f"{_short(excerpt) if excerpt else '(an empty body)'!r}")
    else:
        page_text = (f"an HTML page {f'titled {page!r}' if page else 'without a title'}"
                     f"{f' ({content_type})' if content_type else ''}, not the API's JSON")
    raise _NotTheApi(f"{asked} with {page_text}", method=method, url=url, status=status,
                     page=True)


def require(value, what: str, field: str, answer, host: str) -> None:
    """Refuse an ``answer`` (a kfp_server_api model) that lacks the id estflow goes on with
    (``field``, e.g. the new run's ``run_id``): it is JSON, but not the KFP API's answer.

    Raises:
        ApiAnswerError: e.g. ``the KFP API at HOST answered the new run without a run_id
            ({})``, and what to check.
    """
    if value:
        return
    shown = answer.to_dict() if hasattr(answer, "to_dict") else answer
    if isinstance(shown, dict):
        shown = {key: item for key, item in shown.items() if item is not None}
    try:
        shown = json.dumps(shown, default=str, sort_keys=True)
    except (TypeError, ValueError):
        shown = repr(shown)
    raise ApiAnswerError(
        f"the KFP API at {host} answered {what} without {'an' if field[0] in 'aeiou' else 'a'} "
        f"{field} ({_short(shown)}), which the KFP API always sends: check that --host is the "
        "KFP API's address (on Kubeflow https://HOST/pipeline) and that no proxy or gateway in "
        "front of it answers in its place")


def not_the_api_message(err: ApiAnswerError, host: str, login: Login | None) -> str:
    """The whole message for :func:`check_answer`'s error: what answered, what was sent, what
    to do (never a secret)."""
    login = login or Login()
    text = f"the KFP API at {host} did not answer: {err}"
    moved = _moved_host(err.url, err.location)
    if moved:
        return f"{text}; the API answers at {moved}: give --host {moved}"
    if err.page:
        what = ("a login page or another web site answered in the API's place, or --host is "
                "not the KFP API's address (on Kubeflow: https://HOST/pipeline)")
    else:
        what = "a login proxy in front of the API sent the request to its login page"
    if login.cookies:
        todo = ("the cookie was not accepted: it may have expired; copy a fresh session cookie "
                f"from your browser into --cookies or ${COOKIES_ENV}")
    elif login.token or login.token_file:
        todo = ("the proxy does not take the bearer token: log in with your browser's session "
                "cookie instead (--cookies 'NAME=VALUE', e.g. oauth2_proxy_kubeflow on Kubeflow)")
    else:
        todo = ("log in: give --cookies 'NAME=VALUE' with your browser's session cookie for "
                "that site (from its developer tools; oauth2_proxy_kubeflow on Kubeflow), or "
                "--token/--token-file where the proxy takes a bearer token")
    return (f"{text} ({what}; sent {login.describe()}; {todo}; or reach the API without the "
            "proxy: inside the cluster --host http://ml-pipeline.kubeflow:8888, from your "
            "machine kubectl port-forward -n kubeflow svc/ml-pipeline 8888:8888 and --host "
            "http://localhost:8888)")


def _moved_host(url: str | None, location: str | None) -> str | None:
    """The host to give when a redirect leads to the same API path at another address (e.g.
    http to https), else None."""
    if not url or not location:
        return None
    asked, there = urllib.parse.urlsplit(url), urllib.parse.urlsplit(location)
    marker = asked.path.find("/apis/")
    same = (asked.scheme, asked.netloc, asked.path) == (there.scheme, there.netloc, there.path)
    if marker < 0 or same:
        return None
    suffix = asked.path[marker:]
    if not there.path.endswith(suffix):
        return None
    return urllib.parse.urlunsplit((there.scheme, there.netloc,
                                    there.path[:-len(suffix)], "", "")).rstrip("/")


def _is_json(body: bytes, content_type: str) -> bool:
    """Whether a successful answer is JSON: said so and parses, or says nothing and parses (or
    is empty)."""
    media = content_type.split(";", 1)[0].strip().lower()
    if media and media != "application/json" and not media.endswith("+json"):
        return False
    if not body.strip():  # not what the API sends ({} at least): the ids are checked later
        return True
    try:
        json.loads(body)
    except ValueError:
        return False
    return True


_TITLE = re.compile(rb"<title[^>]*>(.*?)</title\s*>", re.IGNORECASE | re.DOTALL)


def _html_title(body: bytes, content_type: str = "") -> str | None:
    """The title of an HTML page ("" when it has none), or None when ``body`` is not HTML."""
    head = body[:2048].lstrip().lower()
    if "html" not in content_type.lower() and not head.startswith((b"<!doctype html", b"<html")) \
            and b"<html" not in head and not _TITLE.search(body[:8192]):
        return None
    match = _TITLE.search(body)
    if not match:
        return ""
    return _short(" ".join(html.unescape(match.group(1).decode("utf-8", "replace")).split()))


def _phrase(status: int) -> str:
    try:
        return http.HTTPStatus(status).phrase
    except ValueError:
        return ""


def _short(text: str) -> str:
    return text if len(text) <= _SHOWN else text[:_SHOWN - 3] + "..."


def _release(response) -> None:
    with contextlib.suppress(Exception):  # an unread body: give the connection back
        response.drain_conn()
        response.release_conn()


@contextlib.contextmanager
def api_errors(host: str, login: Login | None = None,
               namespace: str | None = None) -> Iterator[None]:
    """Turn the client's failures into one-line :class:`SubmitError` s (a refused login says
    what was sent and what to do), and keep its chatter (urllib3's retry warnings, the
    "Experiment details: <url>" prints) out of the terminal."""
    pool_logger = logging.getLogger("urllib3.connectionpool")
    level = pool_logger.level
    pool_logger.setLevel(logging.ERROR)
    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed), warnings.catch_warnings():
            # --insecure is the user's explicit choice: not one warning per request.
            warnings.filterwarnings("ignore", category=urllib3.exceptions.InsecureRequestWarning)
            yield
    except _NotTheApi as err:  # a redirect or a web page answered (see check_answer)
        raise ApiAnswerError(not_the_api_message(err, host, login), method=err.method,
                             url=err.url, status=err.status, location=err.location,
                             page=err.page) from None
    except urllib3.exceptions.HTTPError as err:  # MaxRetryError, NewConnectionError, ...
        raise ApiUnreachableError(f"cannot reach the KFP API at {host}: "
                                  f"{_network_reason(err, login)}") from err
    except kfp_server_api.ApiException as err:
        if not err.status:  # the client's wrapper for TLS failures: "SSLError\n<detail>"
            reason = " ".join(str(err.reason).split()[1:]) or str(err.reason)
            raise ApiUnreachableError(f"cannot reach the KFP API at {host}: {reason}"
                                      f"{_tls_hint(reason, login)}") from err
        message = _error_message(err.body)
        # The hint reads the whole answer: the KFP API's reason for refusing a token comes
        # after its 300th character.
        hint = _refusal_hint(err.status, login, namespace, _error_message(err.body, None))
        raise ApiHttpError(f"the KFP API at {host} answered HTTP {err.status} {err.reason}: "
                           f"{message}{hint}", err.status, err.reason) from err
    except TimeoutError as err:  # kfp.Client's health check gave up (the API answered errors)
        raise ApiUnreachableError(f"the KFP API at {host} failed its health check "
                                  f"(GET /apis/v2beta1/healthz): {err}") from err
    finally:
        pool_logger.setLevel(level)
        if printed.getvalue().strip():
            logging.getLogger(__name__).info("kfp.Client: %s", printed.getvalue().strip())


# What answers a refused request, and what each answer says (the texts are upstream's: see
# tests/pipelines/test_login_overlays.py for the files they come from).
_PROXY_NO_SESSION = "{}"  # oauth2-proxy's 401 body on an api_route without a session
_KFP_NO_IDENTITY = "there is no user identity header"  # the KFP API's authenticators
_TOKEN_REVIEW = re.compile(r"Review\.Status\.Authenticated is false\. Error (.*?)"
                           r"(?:: Failed to authenticate token review|\]?$)")
_NEW_SA_TOKEN = "kubectl create token SA -n NS --audience pipelines.kubeflow.org"
_WITHOUT_GATEWAY = ("reach the API without the gateway, with a service-account token of "
                    "audience pipelines.kubeflow.org: --host http://ml-pipeline.kubeflow:8888 "
                    "in the cluster, or kubectl port-forward -n kubeflow svc/ml-pipeline "
                    "8888:8888 and --host http://localhost:8888")


def _refusal_hint(status: int, login: Login | None, namespace: str | None, message: str) -> str:
    """For a 401/403 (or a 400 asking for a namespace): what was sent and what to do (never
    a secret), following from what answered: Kubeflow's oauth2-proxy (``{}``), Istio's gateway
    (``Jwt ...`` 401s, ``RBAC: access denied``), or the KFP API itself (no identity, its
    TokenReview refusing the token, a user who is not a contributor). ``message``: the whole
    answer (see :func:`_error_message`)."""
    login = login or Login()
    sent = bool(login.token or login.token_file or login.cookies)
    where = f"namespace {namespace!r}" if namespace else "no namespace (--namespace)"
    if status == 401:
        return f" (sent {login.describe()}, {where}; {_unauthenticated_todo(login, message)})"
    if status == 400 and not namespace and "namespace" in message:
        return " (a multi-user KFP needs the namespace to act in: give --namespace, your " \
               "Kubeflow profile's namespace)"
    if status == 403 and not sent:
        return (f" (sent {login.describe()}, {where}; nothing identified you, so this is no "
                "verdict on your rights: log in with --cookies (your browser's session cookie, "
                "oauth2_proxy_kubeflow on Kubeflow) or --token/--token-file)")
    if status == 403 and "RBAC: access denied" in message:
        return (f" (sent {login.describe()}, {where}; Kubeflow's Istio gateway refused it before "
                "the KFP API saw it, or inside the cluster the API's Istio sidecar did: an "
                "authorization policy denied this login (Kubeflow's own deny a request without "
                "a verified token; a platform may add its own): ask the platform's admins "
                "which logins its policies let through)")
    if status == 403:
        return (f" (sent {login.describe()}, {where}; you are logged in but not allowed there: "
                "check --namespace is your profile's namespace, or ask its owner to add you as "
                "a contributor)")
    return ""


def _unauthenticated_todo(login: Login, message: str) -> str:
    """What to do about a 401, from what answered it and what was sent."""
    token = bool(login.token or login.token_file)
    cookie_only = bool(login.cookies) and not token
    if message.strip() == _PROXY_NO_SESSION:
        # oauth2-proxy (Kubeflow v1.9.1 on: api_routes) found no session. On Kubeflow 26.03 it
        # only sees a request without an Authorization header: a token never gets this far.
        if cookie_only:
            return ("Kubeflow's login proxy (oauth2-proxy) found no session in the cookie: it "
                    "has expired (24 h on Kubeflow) or is not this site's oauth2_proxy_kubeflow "
                    f"cookie; copy a fresh one from your browser into --cookies or ${COOKIES_ENV}")
        if token:
            return ("a login proxy (oauth2-proxy's 401 {}) took neither the token nor a session "
                    "cookie: log in with your browser's session cookie (--cookies "
                    f"'oauth2_proxy_kubeflow=VALUE'), or {_WITHOUT_GATEWAY}")
        return ("Kubeflow's login proxy (oauth2-proxy) found no session: log in with your "
                "browser's session cookie (--cookies 'oauth2_proxy_kubeflow=VALUE', from its "
                "developer tools), or --token/--token-file with a token the gateway takes (a "
                "Dex-issued token; a Kubernetes service-account token only where the platform "
                f"installed an m2m-dex-and-<cluster> overlay), or {_WITHOUT_GATEWAY}")
    if "Jwt issuer is not configured" in message:
        issuer = login.issuer()
        return ("Kubeflow's Istio gateway does not accept tokens of this token's issuer"
                f"{f' ({issuer})' if issuer else ''}: it takes Dex-issued tokens, and Kubeflow "
                "26.03's default install (the m2m-dex-only overlay) accepts Kubernetes "
                "service-account tokens only inside the cluster (--host "
                "http://ml-pipeline.kubeflow:8888), or at the gateway where the platform "
                "installed an m2m-dex-and-<cluster> overlay for that issuer; from outside, log "
                "in with your browser's session cookie (--cookies 'oauth2_proxy_kubeflow=...') "
                "or reach the API through kubectl port-forward -n kubeflow svc/ml-pipeline "
                "8888:8888 (--host http://localhost:8888)")
    if "Jwt is expired" in message:
        if cookie_only:  # oauth2-proxy passed the session's Dex token on to Istio
            return ("the session's token has expired (Kubeflow's Dex tokens last 24 h): log in "
                    "again in your browser and copy the fresh oauth2_proxy_kubeflow cookie into "
                    f"--cookies or ${COOKIES_ENV}")
        if (login.issuer() or "").endswith("/dex"):
            return "the token has expired: get a new one from Dex (it issues them for 24 h)"
        return (f"the token has expired: get a new one ({_NEW_SA_TOKEN}, or a token file that "
                "is renewed, as a projected service-account token is)")
    if "Jwt verification fails" in message:
        return ("the gateway could not verify the token's signature with its issuer's keys "
                "(JWKS): it was not signed by the issuer it names (made on another cluster, or "
                f"changed); create a new one on this cluster: {_NEW_SA_TOKEN}")
    if message.startswith(("Jwt ", "Jwks ")):  # another of Envoy jwt_authn's texts
        return (f"Kubeflow's Istio gateway refused the bearer token ({_short(message)}): it "
                "takes a JWT of an issuer the platform configured (Dex's; the cluster's with an "
                "m2m-dex-and-<cluster> overlay)")
    review = _TOKEN_REVIEW.search(message)
    if review:  # the KFP API itself (no gateway in front) asked Kubernetes about the token
        reason = review.group(1)
        if "is invalid for the target audiences" in reason:
            return (f"the KFP API's TokenReview refused the token's audience ({_short(reason)}): "
                    f"it takes tokens made for pipelines.kubeflow.org: {_NEW_SA_TOKEN}")
        if "expired" in reason:
            return (f"the KFP API's TokenReview found the token expired: get a new one "
                    f"({_NEW_SA_TOKEN})")
        return (f"the KFP API's TokenReview refused the token ({_short(reason)}): it takes a "
                f"service-account token of this cluster: {_NEW_SA_TOKEN}")
    if cookie_only and _KFP_NO_IDENTITY in message:
        # The API answered, so nothing in front of it read the cookie.
        return ("the KFP API itself found no identity: a session cookie is read by Kubeflow's "
                "gateway (--host https://HOST/pipeline), not by the API; without the gateway "
                "give --token/--token-file (a Kubernetes service-account token with audience "
                "pipelines.kubeflow.org)")
    if token or login.cookies:
        return "the token or cookie was not accepted: it may have expired; get a new one"
    return ("log in: give --token/--token-file (a Kubernetes service-account token with "
            "audience pipelines.kubeflow.org, which the KFP API reviews itself) or, through "
            "Kubeflow's gateway (https://HOST/pipeline), --cookies (your browser's session "
            "cookie, oauth2_proxy_kubeflow)")


def _tls_hint(reason: str, login: Login | None) -> str:
    if "CERTIFICATE_VERIFY_FAILED" not in reason and "certificate" not in reason.lower():
        return ""
    if login and login.ca_cert:
        return f" (checked against the CA bundle {login.ca_cert}: is it the one that signed " \
               "the server's certificate?)"
    return (" (the server's certificate is not signed by a known CA: give its CA bundle with "
            f"--ca-cert or ${CA_CERT_ENV}, or --insecure to skip the check)")


def _network_reason(err: urllib3.exceptions.HTTPError, login: Login | None = None) -> str:
    reason = getattr(err, "reason", None) or err
    if isinstance(reason, urllib3.exceptions.NameResolutionError):
        return "unknown host name"
    if "Connection refused" in str(reason):
        return "connection refused"
    # Checked last: urllib3 2 makes NewConnectionError (refused, unreachable) a subclass.
    if isinstance(reason, urllib3.exceptions.ConnectTimeoutError) and "timed out" in str(reason):
        return "connection timed out"
    text = str(reason).splitlines()[0]
    return text + _tls_hint(text, login)


def _error_message(body: bytes | str | None, limit: int | None = 300) -> str:
    """The message of KFP's error body (a google.rpc.Status), an HTML page by its title (a
    proxy's or gateway's error page), else the body itself (oauth2-proxy's ``{}``, Envoy's
    text); cut to ``limit`` characters (None: whole)."""
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else (body or "")
    try:
        payload = json.loads(text)
    except ValueError:
        payload = None
        title = _html_title(text.encode("utf-8", "replace"))
        if title is not None:
            return f"an HTML page titled {title!r}" if title else "an HTML page without a title"
    if isinstance(payload, dict) and (payload.get("message") or payload.get("error")):
        text = payload.get("message") or payload.get("error")
    text = " ".join(str(text).split()) or "(no message)"
    return text if limit is None or len(text) <= limit else text[:limit - 3] + "..."
