"""How :mod:`estflow.pipelines.submit` reaches a KFP API: the login it sends, the client it
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
                                                      oauth2-proxy's ``_oauth2_proxy=...``
CA bundle      ``--ca-cert`` / ``ESTFLOW_KFP_CA_CERT``  ``ssl_ca_cert``
no TLS check   ``--insecure``                         ``verify_ssl=False``
=============  ====================================  =========================================

No secret is ever printed: :meth:`Login.describe` names what is sent (a token and where it comes
from, the cookie names), never a value.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import logging
import os
import warnings
from collections.abc import Iterator
from collections.abc import Mapping
from pathlib import Path

import kfp
import kfp_server_api
import urllib3
from kfp.client import set_volume_credentials

__all__ = ["SubmitError", "ApiUnreachableError", "ApiHttpError", "Login", "Client",
           "SA_TOKEN_PATH", "SA_TOKEN_ENV", "check_host", "connect", "api_errors"]

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


def _bare(token: str | None) -> str | None:
    # A token pasted with its scheme would otherwise go out as "Bearer Bearer ...".
    token = (token or "").strip()
    return token.removeprefix("Bearer ").strip() or None


class Client(kfp.Client):
    """``kfp.Client`` whose start-up health check fails at once on a refused login or a TLS
    failure, instead of kfp's five tries five seconds apart (a refusal does not heal)."""

    def get_kfp_healthz(self, sleep_duration: int = 5):  # noqa: D102 (kfp's)
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
    """Build the client: ``client_factory(host=, [namespace=], **login.client_kwargs())``."""
    kwargs = {"host": host, **({"namespace": namespace} if namespace else {}),
              **(login.client_kwargs() if login else {})}
    with warnings.catch_warnings():
        # kfp.Client warns on every construction that it needs KFP >= 2.0.0-beta.2.
        warnings.filterwarnings("ignore", message="This client only works with",
                                category=FutureWarning)
        return client_factory(**kwargs)


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
    except urllib3.exceptions.HTTPError as err:  # MaxRetryError, NewConnectionError, ...
        raise ApiUnreachableError(f"cannot reach the KFP API at {host}: "
                                  f"{_network_reason(err, login)}") from err
    except kfp_server_api.ApiException as err:
        if not err.status:  # the client's wrapper for TLS failures: "SSLError\n<detail>"
            reason = " ".join(str(err.reason).split()[1:]) or str(err.reason)
            raise ApiUnreachableError(f"cannot reach the KFP API at {host}: {reason}"
                                      f"{_tls_hint(reason, login)}") from err
        message = _error_message(err.body)
        hint = _refusal_hint(err.status, login, namespace, message)
        raise ApiHttpError(f"the KFP API at {host} answered HTTP {err.status} {err.reason}: "
                           f"{message}{hint}", err.status, err.reason) from err
    except TimeoutError as err:  # kfp.Client's health check gave up (the API answered errors)
        raise ApiUnreachableError(f"the KFP API at {host} failed its health check "
                                  f"(GET /apis/v2beta1/healthz): {err}") from err
    finally:
        pool_logger.setLevel(level)
        if printed.getvalue().strip():
            logging.getLogger(__name__).info("kfp.Client: %s", printed.getvalue().strip())


def _refusal_hint(status: int, login: Login | None, namespace: str | None, message: str) -> str:
    """For a 401/403 (or a 400 asking for a namespace): what was sent and what to do (never
    a secret)."""
    login = login or Login()
    where = f"namespace {namespace!r}" if namespace else "no namespace (--namespace)"
    if status == 401:
        todo = ("the token or cookie was not accepted: it may have expired; get a new one"
                if login.token or login.token_file or login.cookies else
                "log in: give --token/--token-file (a Kubernetes service-account token with "
                "audience pipelines.kubeflow.org) or --cookies (your browser's session cookie, "
                "e.g. _oauth2_proxy or authservice_session)")
        return f" (sent {login.describe()}, {where}; {todo})"
    if status == 400 and not namespace and "namespace" in message:
        return " (a multi-user KFP needs the namespace to act in: give --namespace, your " \
               "Kubeflow profile's namespace)"
    if status == 403:
        return (f" (sent {login.describe()}, {where}; you are logged in but not allowed there: "
                "check --namespace is your profile's namespace, or ask its owner to add you as "
                "a contributor)")
    return ""


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


def _error_message(body: bytes | str | None) -> str:
    """The message of KFP's error body (a google.rpc.Status), else the body itself."""
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else (body or "")
    try:
        payload = json.loads(text)
    except ValueError:
        payload = None
    if isinstance(payload, dict) and (payload.get("message") or payload.get("error")):
        text = payload.get("message") or payload.get("error")
    text = " ".join(str(text).split()) or "(no message)"
    return text if len(text) <= 300 else text[:297] + "..."
