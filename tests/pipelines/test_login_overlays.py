"""Each row of the login tables in docs/pages/kubeflow/operations.md ("Which login reaches the
API"), tested: ``estflow submit --wait``, ``schedule`` and ``schedules list`` run as a user runs
them (``estflow.pipelines.cli.main``) against :class:`tests.pipelines.fake_login_gateway.Gateway`,
a loopback fake that answers as that Kubeflow overlay and path do, in front of the fake KFP API
(:class:`tests.pipelines.fake_kfp_api.FakeKfpApi`). Where a row says the login works every
command succeeds; where it does not, each exits 1 with one line holding the answer and the hint
the docs promise, and nothing reached the API. The last test keeps the tables and this module
naming each other.

What the fake answers was read from upstream, not guessed:

kubeflow/manifests, tag ``26.03`` (d68ebc7fab366ab40ddd1541d2ec22febb31bc83):

* ``common/oauth2-proxy/overlays/``: ``m2m-dex-only`` (the example install's, and README's
  "OPTION 1": "does NOT allow K8s service account tokens to be used from outside the cluster
  via the Istio ingress-gateway") adds only ``components/istio-external-auth``;
  ``m2m-dex-and-kind`` adds ``components/istio-m2m`` with the ``m2m-token-issuer``
  RequestAuthentication patched to ``https://kubernetes.default.svc.cluster.local`` plus a rule
  for ``https://kubernetes.default.svc`` (``outputClaimToHeaders``: ``kubeflow-userid`` from
  ``sub``); ``m2m-dex-and-eks`` patches it to ``https://oidc.eks.AWS_REGION.amazonaws.com/id/
  CLUSTER_ID``. No rule sets ``audiences``.
* ``components/istio-external-auth/``: the RequestAuthentication ``dex-jwt`` (issuer
  ``http://dex.auth.svc.cluster.local:5556/dex``, ``kubeflow-userid`` from ``email``, only
  from ``Authorization: Bearer``); the CUSTOM AuthorizationPolicy sending to oauth2-proxy only
  requests *without* an ``authorization`` header (not ``/dex/*``, ``/oauth2/*``); the DENY
  policy ``istio-ingressgateway-require-jwt`` for requests with no request principal (its
  comment: a cookie request passes, "because oauth2-proxy injects a Dex JWT into the request").
* ``components/istio-external-auth-patches/patches/cm.enable-oauth2-proxy.yaml``: the ext_authz
  provider sends oauth2-proxy only the ``authorization`` and ``cookie`` headers (so never
  ``Accept``: oauth2-proxy's ``isAjax`` cannot apply) and passes ``content-type`` and
  ``set-cookie`` of a denial back to the client.
* ``base/oauth2_proxy.cfg``: ``api_routes = ["/api/", "/apis/", "^/ml_metadata"]`` ("will
  receive a 401 Unauthorized response when not authenticated, instead of being redirected"),
  ``cookie_name = "oauth2_proxy_kubeflow"``, ``cookie_expire = "24h"``, ``skip_provider_button =
  false``; ``base/kustomization.yaml``: ``ENABLE_M2M_TOKENS=true`` (``skip_jwt_bearer_tokens``)
  and ``EXTRA_JWT_ISSUERS=`` (empty; no overlay sets it), moot at the gateway since bearer
  requests never reach oauth2-proxy; ``base/deployment.yaml``: image
  ``quay.io/oauth2-proxy/oauth2-proxy:v7.14.3``.
* ``applications/pipeline/upstream/base/installs/multi-user/istio-authorization-config.yaml``:
  the ``ml-pipeline`` AuthorizationPolicy allows any request without a ``kubeflow-userid``
  header (how a pod's bearer token reaches the API); ``api-service/params.env``: KFP 2.16.0,
  ``KUBEFLOW_USERID_HEADER=kubeflow-userid``, prefix "".
* ``.github/workflows/pipeline_test.yaml`` (with ``tests/oauth2-proxy_install.sh``:
  ``m2m-dex-and-kind``): ``kubectl -n $KF_PROFILE create token default-editor`` (no
  ``--audience``) works through the port-forwarded gateway at ``/pipeline``;
  ``tests/pipeline_v2_test.py``: a token of a service account outside the profile gets 403.

kubeflow/manifests, tag ``v1.9.0`` (a38c2be88fbafb0844c0231f0062e4b3719d4737),
``common/oidc-client/oauth2-proxy/``: image pinned to ``v7.6.0`` (``base/kustomization.yaml``),
``oauth2-proxy-config.yaml`` without ``api_routes`` and with ``skip_provider_button = true``,
``login_url = "/dex/auth"``, ``redirect_url = "/oauth2/callback"``; the CUSTOM policy's rules
``- {}`` (every request, bearer or not, goes to oauth2-proxy).

oauth2-proxy/oauth2-proxy ``v7.14.3`` (b5c8df79886c3d4601adc0ec9fda1d17290f45b1),
``oauthproxy.go``: ``Proxy`` on ``ErrNeedsLogin``: ``if p.forceJSONErrors || isAjax(req) ||
p.isAPIPath(req)`` then ``p.errorJSON(rw, http.StatusUnauthorized)``, which sets
``Content-Type: application/json`` and writes ``{}`` ("we need to send some JSON response");
otherwise, ``skip_provider_button`` false, ``p.SignInPage(rw, req, http.StatusForbidden)``
(``pkg/app/pagewriter/sign_in.html``: ``<title>Sign In</title>``). ``isAPIPath`` matches each
api_route regex against ``requestutil.GetRequestURI(req)``. So 26.03 answers an API call without
a session ``401 {}``: confirmed. Tag ``v7.6.0`` (7af1e42788e599c2e05f0e66211c33c33287c0dc):
the same branch; with ``SkipProviderButton``, ``doOAuthStart``, ``http.Redirect(rw, req,
loginURL, http.StatusFound)`` to the provider's login URL (``providers/util.go``
``makeLoginURL``: ``redirect_uri``, ``scope``, ``client_id``, ``response_type=code``, ``state``;
``approval_prompt=force`` by default, ``pkg/apis/options/legacy_options.go``). So v1.9.0's
302 leads straight to ``/dex/auth?...``, not to ``/oauth2/start?rd=...``.

Envoy (what Istio 1.29's gateway runs; the index's copies of envoyproxy/envoy):
``source/extensions/filters/http/jwt_authn/filter.cc`` (0016b9515b1b095f154693c0bda8f2204236e26c)
answers a failed check ``401`` with the status text as the body (``403`` only for
``JwtAudienceNotAllowed``) and ``WWW-Authenticate: Bearer realm=..., error="invalid_token"``;
google/jwt_verify_lib (b59e8075d4a4f975ba6f109e1916d6e60aeb5613) ``src/status.cc``: ``Jwt
issuer is not configured``, ``Jwt is expired``, ``Jwt verification fails``, ``Audiences in Jwt
are not allowed``; ``source/extensions/filters/http/rbac/rbac_filter.cc``
(01f134cfc214cce1bf8f94d07a73ee34b24f9e14): ``403`` ``RBAC: access denied``. Seen in the
field: kubeflow/community-distribution#3079 (``m2m-dex-and-kind``, a token of the other
kind issuer: "Jwt issuer is not configured"), pluralsh/plural-artifacts#146 (the 401 body
``Jwt issuer is not configured``, ``text/plain``, ``server: envoy``).

kubeflow/pipelines ``2.16.0`` (e4ebca310f404dac306e16bc880de12bbbf63b95): ``backend/src/
apiserver/auth/auth.go`` (the header authenticator, then the TokenReview one;
``IdentityHeaderMissingError``: "Request header error: there is no user identity header."),
``authenticator_token_review.go`` (audience ``pipelines.kubeflow.org``, ``common/const.go``;
"Review.Status.Authenticated is false. Error %s", wrapped "Authentication failure"),
``resource/resource_manager.go`` ``IsAuthorized`` (the aggregate: "Failed to check
authorization. User identity is empty in the request header"; a SubjectAccessReview's no:
``PermissionDenied`` "User '%s' is not authorized with reason: ..."),
``server/experiment_server.go`` ("Failed to authorize with API"). Kubernetes
``pkg/serviceaccount/jwt.go``: "token audiences %q is invalid for the target audiences %q";
``pkg/serviceaccount/claims.go`` (031075d149ca12dd66c16cc80d88d38086c2bbae): "service account
token has expired".

Not checked against a running cluster: the order of Istio's ext_authz and jwt_authn filters
(the fake follows upstream's comment that a cookie request gets its Dex JWT checked), the exact
TokenReview ``status.error`` wrapping (``[invalid bearer token, ...]``, as reported in the
field), and the operation prefix of each KFP error (the fake says "Failed to authorize with
API" for all).
"""

import ast
import re
from pathlib import Path

import pytest

from tests.pipelines.fake_login_gateway import EKS_ISSUER
from tests.pipelines.fake_login_gateway import KFP_AUDIENCE
from tests.pipelines.fake_login_gateway import KIND_ISSUERS
from tests.pipelines.fake_login_gateway import OVERLAYS
from tests.pipelines.fake_login_gateway import Gateway
from tests.pipelines.fake_login_gateway import dex_token
from tests.pipelines.fake_login_gateway import mint
from tests.pipelines.fake_login_gateway import sa_token

REPO = Path(__file__).resolve().parents[2]
OPERATIONS = REPO / "docs" / "pages" / "kubeflow" / "operations.md"

NAMESPACE = "kubeflow-user-example-com"  # Kubeflow's example profile
USER = "user@example.com"  # its owner
EDITOR = f"system:serviceaccount:{NAMESPACE}:default-editor"  # bound to kubeflow-edit there
OUTSIDER = "system:serviceaccount:test-unauthorized:test-unauthorized"
GKE_ISSUER = "https://container.googleapis.com/v1/projects/p/locations/europe-west4/clusters/c"
REAL_EKS_ISSUER = "https://oidc.eks.eu-west-1.amazonaws.com/id/EXAMPLED539D4633E53DE1B71EXAMPLE"




def _gateway(**kwargs) -> Gateway:
    """The fake with Kubeflow's example profile: its owner and its default-editor account are
    contributors of it."""
    return Gateway(users={USER: {NAMESPACE}, EDITOR: {NAMESPACE}}, **kwargs)


def _commands(host):
    return [
        ("submit", "tiny.yaml", "--host", host, "--namespace", NAMESPACE, "--wait",
         "--poll-seconds", "0"),
        ("schedule", "tiny.yaml", "--cron", "0 3 * * *", "--host", host, "--namespace",
         NAMESPACE),
        ("schedules", "list", "--host", host, "--namespace", NAMESPACE),
    ]


def _works(estflow, gateway, *login):
    """Each command succeeds with ``login``; every request reached the API."""
    gateway.api.run_script = [{"state": "RUNNING"}, {"state": "SUCCEEDED"}]
    for command in _commands(gateway.url):
        code, out, err = estflow(*command, *login)
        assert (code, err) == (0, ""), (command, err)
    assert len(gateway.api.runs) == 1 and len(gateway.api.recurring_runs) == 1
    assert {who for *_, who in gateway.requests} == {"api"}, gateway.requests


def _refused(estflow, gateway, *login, by, answer, says=(), never=(), secrets=()):
    """Each command exits 1 with one line: what answered (``answer``, from ``by``: see
    :class:`Gateway`'s ``requests``) and the hint (each of ``says``, none of ``never``), no
    secret; nothing was created. Returns the lines."""
    lines = []
    for command in _commands(gateway.url):
        code, out, err = estflow(*command, *login)
        assert (code, out) == (1, ""), (command, err)
        assert err.count("\n") == 1 and err.endswith("\n"), err
        assert f"the KFP API at {gateway.url} " in err and answer in err, err
        for text in says:
            assert text in err, (text, err)
        for text in never:
            assert text not in err, (text, err)
        for secret in secrets:
            assert secret not in err, err
        lines.append(err)
    assert not gateway.api.runs and not gateway.api.recurring_runs
    assert {who for *_, who in gateway.requests} == {by}, gateway.requests
    return lines


def _secret(token: str) -> str:
    return token.rsplit(".", 1)[1]  # the signature: what makes a JWT a credential


# --- Kubeflow 26.03, through the gateway ----------------------------------------------------------

@pytest.mark.parametrize("overlay", OVERLAYS)
def test_gateway_session_cookie(estflow, overlay):
    """Every overlay: oauth2-proxy takes the session cookie and hands Istio its Dex token."""
    with _gateway(overlay=overlay) as gateway:
        _works(estflow, gateway, "--cookies", gateway.session(USER))


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_gateway_dex_token(estflow, overlay):
    """Every overlay: Istio's dex-jwt RequestAuthentication takes a token Dex issued."""
    with _gateway(overlay=overlay) as gateway:
        _works(estflow, gateway, "--token", dex_token(USER))


def test_m2m_dex_only_refuses_a_service_account_token(estflow, workdir):
    """The default overlay names no Kubernetes issuer: Istio answers before oauth2-proxy or
    the API sees the request."""
    token = sa_token(NAMESPACE, "default-editor")
    (workdir / "token").write_text(token + "\n")
    with _gateway(overlay="m2m-dex-only") as gateway:
        _refused(estflow, gateway, "--token-file", "token",
                 by="istio", answer="answered HTTP 401 Unauthorized: Jwt issuer is not configured",
                 says=("sent a bearer token from token",
                       "does not accept tokens of this token's issuer "
                       f"({KIND_ISSUERS[0]})",
                       "accepts Kubernetes service-account tokens only inside the cluster "
                       "(--host http://ml-pipeline.kubeflow:8888)",
                       "m2m-dex-and-<cluster> overlay",
                       "--cookies 'oauth2_proxy_kubeflow=...'",
                       "kubectl port-forward -n kubeflow svc/ml-pipeline 8888:8888"),
                 never=("may have expired", "contributor"), secrets=(_secret(token),))


@pytest.mark.parametrize("issuer", KIND_ISSUERS)
def test_m2m_dex_and_kind_takes_the_cluster_s_token(estflow, issuer):
    """As upstream's CI: ``kubectl create token default-editor`` (the API server's audience),
    either of the cluster's issuer names."""
    with _gateway(overlay="m2m-dex-and-kind") as gateway:
        _works(estflow, gateway, "--token",
               sa_token(NAMESPACE, "default-editor", issuer=issuer, audience=[issuer]))


def test_m2m_dex_and_kind_refuses_another_issuer_s_token(estflow):
    token = sa_token(NAMESPACE, "default-editor", issuer=GKE_ISSUER, audience=[GKE_ISSUER])
    with _gateway(overlay="m2m-dex-and-kind") as gateway:
        _refused(estflow, gateway, "--token", token,
                 by="istio", answer="answered HTTP 401 Unauthorized: Jwt issuer is not configured",
                 says=(f"issuer ({GKE_ISSUER})", "installed an m2m-dex-and-<cluster> overlay "
                       "for that issuer"),
                 secrets=(_secret(token),))


def test_m2m_dex_and_eks_takes_the_eks_issuer_s_token(estflow):
    with _gateway(overlay="m2m-dex-and-eks", eks_issuer=REAL_EKS_ISSUER) as gateway:
        assert EKS_ISSUER not in gateway.issuers  # the overlay's placeholder, patched
        _works(estflow, gateway, "--token",
               sa_token(NAMESPACE, "default-editor", issuer=REAL_EKS_ISSUER,
                        audience=["sts.amazonaws.com"]))


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_gateway_without_a_login(estflow, overlay):
    """oauth2-proxy's api_routes: ``401`` with body ``{}``, not a login page."""
    with _gateway(overlay=overlay) as gateway:
        _refused(estflow, gateway, by="oauth2-proxy",
                 answer="answered HTTP 401 Unauthorized: {} (sent no token and no cookie, "
                        f"namespace '{NAMESPACE}'; ",
                 says=("Kubeflow's login proxy (oauth2-proxy) found no session: log in with "
                       "your browser's session cookie (--cookies 'oauth2_proxy_kubeflow=VALUE'",
                       "a Dex-issued token; a Kubernetes service-account token only where the "
                       "platform installed an m2m-dex-and-<cluster> overlay",
                       "--host http://ml-pipeline.kubeflow:8888",
                       "kubectl port-forward -n kubeflow svc/ml-pipeline 8888:8888"))


def test_gateway_stale_session_cookie(estflow):
    cookie = "oauth2_proxy_kubeflow=c2Vzc2lvbi1mcm9tLXllc3RlcmRheQ"
    with _gateway() as gateway:
        _refused(estflow, gateway, "--cookies", cookie,
                 by="oauth2-proxy", answer="answered HTTP 401 Unauthorized: {} (sent the cookie "
                        "oauth2_proxy_kubeflow, ",
                 says=("found no session in the cookie: it has expired (24 h on Kubeflow)",
                       "copy a fresh one from your browser"),
                 never=("Jwt", "contributor"), secrets=(cookie.split("=", 1)[1],))


# --- Kubeflow 26.03, without the gateway ----------------------------------------------------------

@pytest.mark.parametrize("how", ["--token-file", "KF_PIPELINES_SA_TOKEN_PATH"])
def test_in_cluster_token_of_audience_pipelines(estflow, workdir, monkeypatch, how):
    """A pod's token for the pipelines API (``kubectl create token ... --audience
    pipelines.kubeflow.org``, or the notebook PodDefault's projected token, found through
    kfp's variable): the API's TokenReview takes it."""
    (workdir / "token").write_text(sa_token(NAMESPACE, "default-editor",
                                            audience=[KFP_AUDIENCE]))
    login = ("--token-file", "token") if how == "--token-file" else ()
    if not login:
        monkeypatch.setenv("KF_PIPELINES_SA_TOKEN_PATH", "token")
    with _gateway(path="in-cluster") as gateway:
        _works(estflow, gateway, *login)


def test_in_cluster_token_of_another_audience(estflow):
    """A token made for the API server (kubectl create token's default): the KFP API's own
    401, its TokenReview's reason after the 300th character, read by the hint."""
    token = sa_token(NAMESPACE, "default-editor")
    with _gateway(path="in-cluster") as gateway:
        _refused(estflow, gateway, "--token", token,
                 by="kfp-auth",
                 answer="answered HTTP 401 Unauthorized: Failed to authorize with API: "
                        "Unauthenticated: Failed to check authorization.",
                 says=("the KFP API's TokenReview refused the token's audience ([invalid "
                       f'bearer token, token audiences ["{KIND_ISSUERS[0]}"] is invalid for '
                       f'the target audiences ["{KFP_AUDIENCE}"]])',
                       "kubectl create token SA -n NS --audience pipelines.kubeflow.org"),
                 never=("Istio", "may have expired"), secrets=(_secret(token),))


def test_in_cluster_without_a_token(estflow):
    with _gateway(path="in-cluster") as gateway:
        _refused(estflow, gateway, by="kfp-auth",
                 answer="answered HTTP 401 Unauthorized: Failed to authorize with API: "
                        "Unauthenticated: ",
                 says=("there is no user identity header",
                       f"(sent no token and no cookie, namespace '{NAMESPACE}'; log in: give "
                       "--token/--token-file (a Kubernetes service-account token with "
                       "audience pipelines.kubeflow.org, which the KFP API reviews itself)"))


def test_port_forward_token_of_audience_pipelines(estflow):
    """kubectl port-forward -n kubeflow svc/ml-pipeline 8888:8888: the API itself answers, as
    in the cluster."""
    with _gateway(path="port-forward") as gateway:
        assert gateway.url.startswith("http://localhost:")
        _works(estflow, gateway, "--token",
               sa_token(NAMESPACE, "default-editor", audience=[KFP_AUDIENCE]))


def test_port_forward_session_cookie(estflow):
    """The session cookie is oauth2-proxy's: past the gateway it identifies no one."""
    with _gateway(path="port-forward") as gateway:
        cookie = gateway.session(USER)
        _refused(estflow, gateway, "--cookies", cookie,
                 by="kfp-auth",
                 answer="answered HTTP 401 Unauthorized: Failed to authorize with API: ",
                 says=("sent the cookie oauth2_proxy_kubeflow",
                       "a session cookie is read by Kubeflow's gateway (--host "
                       "https://HOST/pipeline), not by the API",
                       "give --token/--token-file (a Kubernetes service-account token with "
                       "audience pipelines.kubeflow.org)"),
                 secrets=(cookie.split("=", 1)[1],))


# --- Kubeflow v1.9.0 ------------------------------------------------------------------------------

def test_v1_9_0_without_a_login(estflow):
    """oauth2-proxy v7.6.0 without api_routes, skip_provider_button: 302 to Dex's login, which
    estflow does not follow."""
    with _gateway(version="v1.9.0") as gateway:
        base = gateway.url.removesuffix("/pipeline")
        _refused(estflow, gateway, by="oauth2-proxy",
                 answer=f"did not answer: GET {gateway.url}/apis/v2beta1/",
                 says=(f"was answered HTTP 302 Found, a redirect to {base}/dex/auth?"
                       "approval_prompt=force&client_id=kubeflow-oidc-authservice&",
                       "a login proxy in front of the API sent the request to its login page; "
                       "sent no token and no cookie; log in: give --cookies 'NAME=VALUE'",
                       "oauth2_proxy_kubeflow on Kubeflow",
                       "kubectl port-forward -n kubeflow svc/ml-pipeline 8888:8888"))
        assert not any("/dex/" in path for _, path, _ in gateway.requests)  # not followed


def test_v1_9_0_session_cookie(estflow):
    with _gateway(version="v1.9.0") as gateway:
        _works(estflow, gateway, "--cookies", gateway.session(USER))


# --- every overlay and path: the API's own 403 ----------------------------------------------------

@pytest.mark.parametrize("path, overlay, login", [
    ("gateway", "m2m-dex-only", "cookie"),
    ("gateway", "m2m-dex-and-kind", "token"),
    ("in-cluster", "m2m-dex-only", "token"),
], ids=["gateway-cookie", "gateway-kind-token", "in-cluster-token"])
def test_a_login_that_is_not_a_contributor(estflow, path, overlay, login):
    """Logged in, but not a contributor of --namespace: the SubjectAccessReview's no."""
    with _gateway(path=path, overlay=overlay) as gateway:
        if login == "cookie":
            who, sent = "bob@example.com", ("--cookies", gateway.session("bob@example.com"))
        else:
            who = OUTSIDER
            audience = [KFP_AUDIENCE] if path == "in-cluster" else [KIND_ISSUERS[0]]
            sent = ("--token", sa_token("test-unauthorized", "test-unauthorized",
                                        audience=audience))
        _refused(estflow, gateway, *sent,
                 by="api", answer="answered HTTP 403 Forbidden: Failed to authorize with API: "
                        f"PermissionDenied: User '{who}' is not authorized",
                 says=(f"namespace '{NAMESPACE}'; you are logged in but not allowed there",
                       "ask its owner to add you as a contributor"),
                 never=("Istio", "nothing identified you"))


# --- other refusals -------------------------------------------------------------------------------

def test_gateway_expired_token(estflow):
    token = sa_token(NAMESPACE, "default-editor", expires_in=-60)
    with _gateway(overlay="m2m-dex-and-kind") as gateway:
        _refused(estflow, gateway, "--token", token,
                 by="istio", answer="answered HTTP 401 Unauthorized: Jwt is expired",
                 says=("the token has expired: get a new one (kubectl create token SA -n NS "
                       "--audience pipelines.kubeflow.org",),
                 never=("browser",), secrets=(_secret(token),))


def test_gateway_session_whose_dex_token_expired(estflow):
    """oauth2-proxy still holds the session, but the Dex token it hands Istio has expired."""
    with _gateway() as gateway:
        cookie = gateway.session(USER, expires_in=-60)
        _refused(estflow, gateway, "--cookies", cookie,
                 by="istio", answer="answered HTTP 401 Unauthorized: Jwt is expired",
                 says=("the session's token has expired (Kubeflow's Dex tokens last 24 h): log "
                       "in again in your browser and copy the fresh oauth2_proxy_kubeflow "
                       "cookie",),
                 never=("kubectl create token",), secrets=(cookie.split("=", 1)[1],))


def test_gateway_token_signed_by_another_key(estflow):
    """A token naming the cluster's issuer, not signed by its keys (another kind cluster)."""
    token = mint(KIND_ISSUERS[0], EDITOR, audience=[KIND_ISSUERS[0]], signed_by="another kind")
    with _gateway(overlay="m2m-dex-and-kind") as gateway:
        _refused(estflow, gateway, "--token", token,
                 by="istio", answer="answered HTTP 401 Unauthorized: Jwt verification fails",
                 says=("could not verify the token's signature with its issuer's keys (JWKS)",
                       "create a new one on this cluster: kubectl create token SA -n NS "
                       "--audience pipelines.kubeflow.org"),
                 never=("audience other than", "may have expired"),
                 secrets=(_secret(token),))


def test_in_cluster_expired_token(estflow):
    token = sa_token(NAMESPACE, "default-editor", audience=[KFP_AUDIENCE], expires_in=-60)
    with _gateway(path="in-cluster") as gateway:
        _refused(estflow, gateway, "--token", token,
                 by="kfp-auth",
                 answer="answered HTTP 401 Unauthorized: Failed to authorize with API: ",
                 says=("the KFP API's TokenReview found the token expired: get a new one",),
                 never=("Istio",), secrets=(_secret(token),))


def test_istio_policy_denial(estflow):
    """An AuthorizationPolicy the platform added denies the user at the gateway: told from the
    API's 403."""
    with _gateway(denied={USER}) as gateway:
        _refused(estflow, gateway, "--cookies", gateway.session(USER),
                 by="istio", answer="answered HTTP 403 Forbidden: RBAC: access denied",
                 says=("Kubeflow's Istio gateway refused it before the KFP API saw it",
                       "an authorization policy denied this login"),
                 never=("contributor",))


def test_sign_in_page_403_without_a_login(estflow):
    """oauth2-proxy v7.14.3 configured without api_routes: its sign-in page, 403."""
    with _gateway(api_routes=()) as gateway:
        _refused(estflow, gateway, by="oauth2-proxy",
                 answer="answered HTTP 403 Forbidden: an HTML page titled 'Sign In'",
                 says=("nothing identified you, so this is no verdict on your rights: log in "
                       "with --cookies",),
                 never=("contributor", "not allowed there"))


# --- the docs and this module name each other -----------------------------------------------------

def _login_tables() -> list[list[dict[str, str]]]:
    """The tables with a "Tested by" column in operations.md's login section, as rows."""
    text = OPERATIONS.read_text(encoding="utf-8")
    section = text.split("## Logging in to multi-user Kubeflow", 1)[1].split("\n## ", 1)[0]
    tables, lines = [], section.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("|") and "Tested by" in line and not lines[i - 1].startswith("|"):
            header = [cell.strip() for cell in line.strip("|").split("|")]
            rows = []
            for row in lines[i + 2:]:
                if not row.startswith("|"):
                    break
                rows.append(dict(zip(header, (c.strip() for c in row.strip("|").split("|")),
                                     strict=True)))
            tables.append(rows)
    return tables


def test_every_docs_row_names_a_test_and_every_test_a_row():
    tables = _login_tables()
    assert len(tables) == 2, "the login section has its two tables with a Tested by column"
    named = []
    for rows in tables:
        for row in rows:
            names = re.findall(r"`(test_\w+)`", row["Tested by"])
            assert len(names) == 1, f"a row names one test: {row}"
            named += names
    tree = ast.parse(Path(__file__).read_text(encoding="utf-8"))
    here = {node.name for node in tree.body
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_")}
    here.discard("test_every_docs_row_names_a_test_and_every_test_a_row")
    assert len(named) == len(set(named)), f"a test named twice: {sorted(named)}"
    assert not set(named) - here, f"rows name no such test: {sorted(set(named) - here)}"
    assert not here - set(named), f"tests no row names: {sorted(here - set(named))}"
    # One row per 26.03 overlay and path, and v1.9.0's redirect.
    paths = " ".join(" ".join(row.values()) for row in tables[0])
    for overlay in OVERLAYS:
        assert f"`{overlay}`" in paths, overlay
    for host in ("https://HOST/pipeline", "http://ml-pipeline.kubeflow:8888",
                 "http://localhost:8888", "v1.9.0"):
        assert host in paths, host
