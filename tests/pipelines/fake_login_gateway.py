"""A fake of what stands in front of the KFP API on a multi-user Kubeflow, on loopback: the
Istio ingress gateway with oauth2-proxy (per 26.03 overlay, or as Kubeflow v1.9.0 had it), or
no gateway at all (a pod calling ``ml-pipeline.kubeflow:8888``, or ``kubectl port-forward``),
where the KFP API server authenticates the request itself.

A test starts it (``with Gateway(...) as gateway:``, or ``start()``/``stop()``): it serves
plain HTTP on 127.0.0.1 at a free port, on a daemon thread, and starts the
:class:`tests.pipelines.fake_kfp_api.FakeKfpApi` it sends accepted requests to (its
``gateway.api``, in multi-user mode: its 403 for a namespace the user is not a contributor of,
its 400 without a namespace, and every route's answer are that fake's). Leaving the ``with``
stops both. Nothing else is reached: no Kubernetes, no Dex, no Envoy.

What it answers, and where each answer comes from (the upstream files are named in
``tests/pipelines/test_login_overlays.py``'s docstring):

``path="gateway"`` (``url`` is ``http://127.0.0.1:PORT/pipeline``; the KFP API is served under
``/pipeline``, as Kubeflow's VirtualService routes it):

* ``version="26.03"``: a request *with* an ``Authorization`` header skips oauth2-proxy (the
  CUSTOM AuthorizationPolicy only checks requests without one) and its bearer token is checked
  as Envoy's jwt_authn checks it against the overlay's RequestAuthentications, in Envoy's
  order: an issuer no rule names answers ``401 Jwt issuer is not configured``, an ``exp`` in
  the past ``401 Jwt is expired``, a signature the issuer's keys do not verify ``401 Jwt
  verification fails`` (Envoy's body texts, ``text/plain``). The issuers: Dex's
  (:data:`DEX_ISSUER`) in every overlay; :data:`KIND_ISSUERS` added by ``m2m-dex-and-kind``;
  :data:`EKS_ISSUER` (the overlay's placeholder, ``eks_issuer=`` for a real one) by
  ``m2m-dex-and-eks``. No audience is checked (no rule sets ``audiences``). The user is the
  token's ``email`` claim (Dex) or ``sub`` (a service account), as ``outputClaimToHeaders``
  sets ``kubeflow-userid``. A request *without* one goes to oauth2-proxy (v7.14.3): a session
  cookie ``oauth2_proxy_kubeflow`` the fake knows (:meth:`Gateway.session`) passes, its Dex
  token then checked as above (an expired one: ``401 Jwt is expired``); without one, a path
  matching ``api_routes`` (``/api/``, ``/apis/``, ``^/ml_metadata``) answers ``401`` with
  body ``{}`` (``application/json``), any other the sign-in page (``403``, ``text/html``,
  titled ``Sign In``). ``api_routes=()`` plays that config without its api_routes.
* ``version="v1.9.0"``: oauth2-proxy (v7.6.0, ``skip_provider_button = true``, no
  ``api_routes``) checks every request: a session cookie passes, and so does a bearer token of
  Dex's issuer (``skip_jwt_bearer_tokens``); anything else answers ``302 Found`` to Dex's login
  page, ``/dex/auth?approval_prompt=force&client_id=kubeflow-oidc-authservice&...&state=...``,
  with the CSRF cookie.
* ``denied=`` (users): an AuthorizationPolicy the platform added, denying these users at the
  gateway with Envoy RBAC's ``403 RBAC: access denied`` (none of 26.03's own policies denies a
  request estflow sends).

``path="in-cluster"`` (``url`` ``http://127.0.0.1:PORT``) and ``path="port-forward"``
(``http://localhost:PORT``): no gateway, the KFP API server (2.16.0, multi-user) authenticates:
no ``kubeflow-userid`` header reaches it, so it asks Kubernetes a TokenReview of the bearer
token for the audience ``pipelines.kubeflow.org``. A token of the cluster's issuer
(``cluster_issuer``, signed with its key) whose ``aud`` holds that audience and which has not
expired is its ``sub``; otherwise ``401`` with the API's message (google.rpc code 16): without a
token ``... there is no user identity header.``, with a refused one ``Review.Status.Authenticated
is false. Error [invalid bearer token, token audiences [...] is invalid for the target audiences
["pipelines.kubeflow.org"]]`` (or ``service account token has expired``). ``healthz`` is not
authenticated. A cookie means nothing there.

Tokens are fake JWTs (:func:`mint`): ``header.payload.signature``, base64url, HS256 with a key
derived from the issuer (:func:`issuer_key`), so the fake checks ``iss``, ``aud``, ``exp``,
``email``/``sub`` and the signature as the real checks do, and a token ``signed_by`` another
key fails verification.

Every request is logged in ``requests`` as ``(method, path, who answered)``: ``"api"`` (sent
on), ``"istio"`` (jwt_authn or RBAC), ``"oauth2-proxy"`` or ``"kfp-auth"`` (the API server's
authenticators refusing it).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import http.client
import http.cookies
import http.server
import json
import re
import secrets
import threading
import time
import urllib.parse
from collections.abc import Iterable
from collections.abc import Mapping

from tests.pipelines.fake_kfp_api import FakeKfpApi

__all__ = ["Gateway", "mint", "issuer_key", "dex_token", "sa_token", "DEX_ISSUER",
           "KIND_ISSUERS", "EKS_ISSUER", "KFP_AUDIENCE", "COOKIE_NAME", "OVERLAYS", "PATHS"]

DEX_ISSUER = "http://dex.auth.svc.cluster.local:5556/dex"  # dex-jwt RequestAuthentication
# m2m-dex-and-kind: the m2m-token-issuer rule's issuer, and the rule its patch adds.
KIND_ISSUERS = ("https://kubernetes.default.svc.cluster.local", "https://kubernetes.default.svc")
EKS_ISSUER = "https://oidc.eks.AWS_REGION.amazonaws.com/id/CLUSTER_ID"  # the overlay's placeholder
KFP_AUDIENCE = "pipelines.kubeflow.org"  # the KFP API's TokenReview audience (its default)
COOKIE_NAME = "oauth2_proxy_kubeflow"  # base/oauth2_proxy.cfg's cookie_name
OVERLAYS = ("m2m-dex-only", "m2m-dex-and-kind", "m2m-dex-and-eks")
VERSIONS = ("26.03", "v1.9.0")
PATHS = ("gateway", "in-cluster", "port-forward")
API_ROUTES = ("/api/", "/apis/", "^/ml_metadata")  # base/oauth2_proxy.cfg's api_routes
# Envoy's jwt_authn bodies (google/jwt_verify_lib src/status.cc) and RBAC's.
UNKNOWN_ISSUER = "Jwt issuer is not configured"
EXPIRED = "Jwt is expired"
BAD_SIGNATURE = "Jwt verification fails"
BAD_FORMAT = "Jwt is not in the form of Header.Payload.Signature with two dots and 3 sections"
RBAC_DENIED = "RBAC: access denied"
# The KFP API server's (2.16.0) IdentityHeaderMissingError, as its UserError prints it.
_NO_HEADER = ("Unauthenticated: Request header error: there is no user identity header.: "
              "Request header error: there is no user identity header.")
_NO_IDENTITY = ("Failed to authorize with API: Unauthenticated: Failed to check authorization. "
                "User identity is empty in the request header: ")
_SIGN_IN_PAGE = ("<!DOCTYPE html>\n<html lang=\"en\" charset=\"utf-8\">\n<head>\n"
                 "  <title>Sign In</title>\n</head>\n<body>\n  <section class=\"hero\">"
                 "<form method=\"GET\" action=\"/oauth2/start\"><button type=\"submit\">Sign in "
                 "with Dex</button></form></section>\n</body>\n</html>\n")


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def issuer_key(issuer: str) -> bytes:
    """The fake signing key of ``issuer`` (what its JWKS would verify)."""
    return hashlib.sha256(b"fake-jwks:" + issuer.encode()).digest()


def mint(issuer: str, subject: str, *, audience: str | Iterable[str] = (),
         email: str | None = None, expires_in: int = 3600, signed_by: str | None = None) -> str:
    """A fake JWT: ``iss``, ``sub``, ``aud`` (a string or a list, as Kubernetes writes it),
    ``iat``/``exp`` (``expires_in`` seconds from now; negative: expired), ``email`` when given;
    signed with ``issuer``'s key, or ``signed_by``'s (another issuer's: fails verification)."""
    now = int(time.time())
    claims: dict = {"iss": issuer, "sub": subject, "iat": now, "exp": now + expires_in}
    if audience:
        claims["aud"] = audience if isinstance(audience, str) else list(audience)
    if email:
        claims.update(email=email, email_verified=True)
    signing = _b64(json.dumps({"alg": "HS256", "typ": "JWT", "kid": "fake"}).encode()) + "." + \
        _b64(json.dumps(claims).encode())
    signature = hmac.new(issuer_key(signed_by or issuer), signing.encode(), hashlib.sha256)
    return signing + "." + _b64(signature.digest())


def dex_token(email: str, **kwargs) -> str:
    """An ID token Dex issued for ``email`` (audience: oauth2-proxy's client)."""
    return mint(DEX_ISSUER, f"Cg{_b64(email.encode())}", audience="kubeflow-oidc-authservice",
                email=email, **kwargs)


def sa_token(namespace: str, name: str, *, issuer: str = KIND_ISSUERS[0],
             audience: str | Iterable[str] = (KIND_ISSUERS[0],), **kwargs) -> str:
    """A Kubernetes service-account token (``kubectl create token NAME -n NAMESPACE``; its
    default audience is the API server's, ``--audience`` gives another)."""
    return mint(issuer, f"system:serviceaccount:{namespace}:{name}", audience=audience,
                **kwargs)


def _claims(token: str) -> tuple[dict | None, str]:
    """The claims of a JWT (unverified) and the signed part; None when it is not one."""
    parts = token.split(".")
    if len(parts) != 3:
        return None, ""
    try:
        claims = json.loads(_unb64(parts[1]))
    except ValueError:
        return None, ""
    return (claims if isinstance(claims, dict) else None), parts[0] + "." + parts[1]


def _signed(token: str, signing: str, issuer: str) -> bool:
    expected = hmac.new(issuer_key(issuer), signing.encode(), hashlib.sha256).digest()
    try:
        return hmac.compare_digest(expected, _unb64(token.rsplit(".", 1)[1]))
    except ValueError:
        return False


def _audiences(claims: dict) -> list[str]:
    aud = claims.get("aud") or []
    return [aud] if isinstance(aud, str) else list(aud)


class _Refused(Exception):
    def __init__(self, status: int, headers: dict, body: bytes, who: str) -> None:
        super().__init__(status)
        self.answer = (status, headers, body)
        self.who = who


def _text(status: int, text: str, who: str, **headers) -> _Refused:
    return _Refused(status, {"Content-Type": "text/plain", **headers}, text.encode(), who)


class Gateway:
    """The fake: ``start()`` it (or use ``with``), point ``estflow`` at :attr:`url`.

    Args:
        overlay: the 26.03 overlay of ``common/oauth2-proxy/overlays/`` (:data:`OVERLAYS`).
        version: ``"26.03"`` or ``"v1.9.0"`` (its oauth2-proxy, whatever ``overlay`` says).
        path: ``"gateway"``, ``"in-cluster"`` or ``"port-forward"`` (:data:`PATHS`).
        users: user -> the namespaces it is a contributor of (the KFP API's 403 otherwise).
        cluster_issuer: the issuer of this cluster's service-account tokens (TokenReview).
        eks_issuer: the issuer ``m2m-dex-and-eks`` was patched with.
        api_routes: oauth2-proxy's ``api_routes`` (26.03's by default).
        denied: users an extra AuthorizationPolicy denies at the gateway.
    """

    def __init__(self, *, overlay: str = "m2m-dex-only", version: str = "26.03",
                 path: str = "gateway", users: Mapping[str, set[str]] | None = None,
                 cluster_issuer: str = KIND_ISSUERS[0], eks_issuer: str = EKS_ISSUER,
                 api_routes: Iterable[str] = API_ROUTES, denied: Iterable[str] = ()) -> None:
        if overlay not in OVERLAYS or version not in VERSIONS or path not in PATHS:
            raise ValueError(f"overlay {overlay!r}, version {version!r}, path {path!r}: "
                             f"expected one of {OVERLAYS}, {VERSIONS}, {PATHS}")
        self.overlay, self.version, self.path = overlay, version, path
        self.cluster_issuer = cluster_issuer
        self.issuers = {"m2m-dex-only": (DEX_ISSUER,),
                        "m2m-dex-and-kind": (DEX_ISSUER, *KIND_ISSUERS),
                        "m2m-dex-and-eks": (DEX_ISSUER, eks_issuer)}[overlay]
        self.api_routes = [re.compile(route) for route in api_routes]
        self.denied = set(denied)
        self.api = FakeKfpApi(users={user: set(spaces) for user, spaces in (users or {}).items()})
        self.sessions: dict[str, str] = {}  # cookie value -> the session's Dex ID token
        self.requests: list[tuple[str, str, str]] = []  # (method, path, who answered)
        self._lock = threading.Lock()
        self._server: http.server.ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # --- lifecycle ---------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """What to give ``--host``: the gateway's ``/pipeline``, or the API's address."""
        assert self._server is not None, "start() the fake first"
        port = self._server.server_address[1]
        if self.path == "gateway":
            return f"http://127.0.0.1:{port}/pipeline"
        return f"http://{'localhost' if self.path == 'port-forward' else '127.0.0.1'}:{port}"

    def start(self) -> Gateway:
        self.api.start()
        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,),
                                        name="fake-login-gateway", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._thread.join(timeout=5)
            self._server = None
        self.api.stop()

    def __enter__(self) -> Gateway:
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.stop()

    def session(self, email: str, **token_kwargs) -> str:
        """Log ``email`` in (oauth2-proxy's session, holding Dex's ID token made with
        ``token_kwargs``, e.g. ``expires_in=-60``): the ``Cookie`` value to send."""
        value = secrets.token_urlsafe(24)
        self.sessions[value] = dex_token(email, **token_kwargs)
        return f"{COOKIE_NAME}={value}"

    # --- dispatch ----------------------------------------------------------------------------

    def _handler_class(self) -> type[http.server.BaseHTTPRequestHandler]:
        fake = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True

            def do_GET(self):  # noqa: N802 (BaseHTTPRequestHandler's naming)
                fake._dispatch(self, "GET")

            def do_POST(self):  # noqa: N802
                fake._dispatch(self, "POST")

            def do_DELETE(self):  # noqa: N802
                fake._dispatch(self, "DELETE")

            def do_PUT(self):  # noqa: N802
                fake._dispatch(self, "PUT")

            def log_message(self, format, *args):  # noqa: A002 (keep test output quiet)
                pass

        return Handler

    def _dispatch(self, request: http.server.BaseHTTPRequestHandler, method: str) -> None:
        length = int(request.headers.get("Content-Length") or 0)
        body = request.rfile.read(length) if length else b""
        try:
            if self.path == "gateway":
                upstream, user = self._through_gateway(request.path, request.headers)
            else:
                upstream, user = self._kfp_authenticate(request.path, request.headers)
            status, headers, data = self._forward(method, upstream, body,
                                                  request.headers.get("Content-Type"), user)
            who = "api"
        except _Refused as refused:
            (status, headers, data), who = refused.answer, refused.who
        with self._lock:
            self.requests.append((method, request.path, who))
        request.send_response(status)
        for name, value in headers.items():
            request.send_header(name, value)
        request.send_header("Content-Length", str(len(data)))
        request.end_headers()
        request.wfile.write(data)

    def _forward(self, method: str, path: str, body: bytes, content_type: str | None,
                 user: str) -> tuple[int, dict, bytes]:
        """Send the request on to the KFP API fake, as ``user`` (the identity the gateway's
        kubeflow-userid header, or the API's TokenReview, gives it)."""
        identity = f"fake-userid:{user}"
        self.api.tokens[identity] = user
        host, port = urllib.parse.urlsplit(self.api.url).netloc.split(":")
        connection = http.client.HTTPConnection(host, int(port), timeout=30)
        try:
            headers = {"Authorization": f"Bearer {identity}"}
            if content_type:
                headers["Content-Type"] = content_type
            connection.request(method, path, body=body or None, headers=headers)
            response = connection.getresponse()
            return (response.status, {"Content-Type": response.getheader("Content-Type") or
                                      "application/json"}, response.read())
        finally:
            connection.close()

    # --- the gateway -------------------------------------------------------------------------

    def _through_gateway(self, path: str, headers) -> tuple[str, str]:
        """The KFP API path and the user of a request the gateway lets through."""
        route = urllib.parse.urlsplit(path).path
        if not route.startswith("/pipeline/"):
            raise _text(404, "", "istio")  # no VirtualService routes it
        upstream = path[len("/pipeline"):]
        if self.version == "v1.9.0":
            user = self._oauth2_proxy_v7_6_0(path, headers)
        elif headers.get("Authorization") is not None:
            user = self._jwt_authn(headers["Authorization"])
        else:
            user = self._jwt_authn("Bearer " + self._oauth2_proxy_v7_14_3(route, headers))
        if user in self.denied:
            raise _text(403, RBAC_DENIED, "istio")
        return upstream, user

    def _session_token(self, headers) -> str | None:
        jar = http.cookies.SimpleCookie()
        try:
            jar.load(headers.get("Cookie") or "")
        except http.cookies.CookieError:
            return None
        morsel = jar.get(COOKIE_NAME)
        return self.sessions.get(morsel.value) if morsel is not None else None

    def _oauth2_proxy_v7_14_3(self, route: str, headers) -> str:
        """26.03's oauth2-proxy as Istio's ext_authz: the session's Dex token (which it sets
        as the request's Authorization header), or its refusal."""
        token = self._session_token(headers)
        if token is not None:
            return token
        if any(pattern.search(route) for pattern in self.api_routes):
            raise _Refused(401, {"Content-Type": "application/json"}, b"{}", "oauth2-proxy")
        raise _Refused(403, {"Content-Type": "text/html; charset=utf-8"},
                       _SIGN_IN_PAGE.encode(), "oauth2-proxy")

    def _oauth2_proxy_v7_6_0(self, path: str, headers) -> str:
        """v1.9.0's oauth2-proxy, checking every request: the user, or its redirect to Dex."""
        token = self._session_token(headers)
        authorization = headers.get("Authorization") or ""
        if token is None and authorization.startswith("Bearer "):
            claims, signing = _claims(authorization[7:])
            if (claims and claims.get("iss") == DEX_ISSUER and claims.get("exp", 0) > time.time()
                    and _signed(authorization[7:], signing, DEX_ISSUER)):
                token = authorization[7:]
        if token is not None:
            return self._jwt_authn("Bearer " + token)
        state = urllib.parse.quote(f"{secrets.token_hex(16)}:{path}", safe="")
        query = urllib.parse.urlencode({
            "approval_prompt": "force", "client_id": "kubeflow-oidc-authservice",
            "code_challenge": _b64(secrets.token_bytes(32)), "code_challenge_method": "S256",
            "nonce": secrets.token_hex(16), "redirect_uri": "/oauth2/callback",
            "response_type": "code", "scope": "profile email groups openid"})
        location = f"/dex/auth?{query}&state={state}"
        raise _Refused(302, {"Content-Type": "text/html; charset=utf-8", "Location": location,
                             "Set-Cookie": f"{COOKIE_NAME}_csrf={secrets.token_hex(16)}; Path=/;"
                                           " HttpOnly; SameSite=Lax"},
                       f'<a href="{location}">Found</a>.\n\n'.encode(), "oauth2-proxy")

    def _jwt_authn(self, authorization: str) -> str:
        """Envoy's jwt_authn with the overlay's RequestAuthentications: the user
        (kubeflow-userid), or its 401."""
        if not authorization.startswith("Bearer "):
            # Not extracted (fromHeaders prefix "Bearer "): no principal, so the
            # istio-ingressgateway-require-jwt DENY policy answers.
            raise _text(403, RBAC_DENIED, "istio")
        token = authorization[7:]
        claims, signing = _claims(token)
        www = f'Bearer realm="{self.url}", error="invalid_token"'
        if claims is None:
            raise _text(401, BAD_FORMAT, "istio", **{"WWW-Authenticate": www})
        issuer = claims.get("iss")
        if issuer not in self.issuers:
            raise _text(401, UNKNOWN_ISSUER, "istio", **{"WWW-Authenticate": www})
        if not isinstance(claims.get("exp"), int) or claims["exp"] <= time.time():
            raise _text(401, EXPIRED, "istio", **{"WWW-Authenticate": www})
        if not _signed(token, signing, issuer):
            raise _text(401, BAD_SIGNATURE, "istio", **{"WWW-Authenticate": www})
        return claims["email"] if issuer == DEX_ISSUER else claims["sub"]

    # --- the KFP API server's own authentication ---------------------------------------------

    def _kfp_authenticate(self, path: str, headers) -> tuple[str, str]:
        """The KFP API server's authenticators (no gateway in front): the user, or its 401."""
        if urllib.parse.urlsplit(path).path == "/apis/v2beta1/healthz":
            return path, "system:anonymous"  # healthz asks for no identity
        authorization = headers.get("Authorization")
        if not authorization:
            raise self._kfp_401(_NO_HEADER)
        user, error = self._token_review(authorization.removeprefix("Bearer "))
        if user is not None:
            return path, user
        raise self._kfp_401(
            f"[{_NO_HEADER}, Authentication failure: Unauthenticated: Review.Status.Authenticated"
            f" is false. Error {error}: Failed to authenticate token review]")

    def _token_review(self, token: str) -> tuple[str | None, str]:
        """Kubernetes' TokenReview for the audience pipelines.kubeflow.org: (the user, "") or
        (None, its ``status.error``), checked in the order of Kubernetes' service-account
        token authenticator (issuer and signature, audience, then expiry)."""
        claims, signing = _claims(token)
        if (claims is None or claims.get("iss") != self.cluster_issuer
                or not _signed(token, signing, self.cluster_issuer)):
            return None, "invalid bearer token"  # no authenticator took it (text unverified)
        audiences = _audiences(claims)
        if KFP_AUDIENCE not in audiences:
            return None, (f"[invalid bearer token, token audiences {_go_quoted(audiences)} is "
                          f"invalid for the target audiences {_go_quoted([KFP_AUDIENCE])}]")
        if not isinstance(claims.get("exp"), int) or claims["exp"] <= time.time():
            return None, "[invalid bearer token, service account token has expired]"
        return claims["sub"], ""

    @staticmethod
    def _kfp_401(reason: str) -> _Refused:
        message = _NO_IDENTITY + reason
        body = {"error": message, "code": 16, "message": message, "details": []}
        return _Refused(401, {"Content-Type": "application/json"}, json.dumps(body).encode(),
                        "kfp-auth")


def _go_quoted(items: list[str]) -> str:
    """A Go ``%q`` of a string slice: ``["a" "b"]``."""
    return "[" + " ".join(json.dumps(item) for item in items) + "]"
