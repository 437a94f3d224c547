"""What a refused request's message tells the user follows from what was sent and what
answered: Istio's gateway in front of Kubeflow's API (Envoy's jwt_authn 401 texts, the
authorization policy's ``RBAC: access denied`` 403), or the KFP API server itself (its
``Unauthenticated`` / ``PermissionDenied`` answers). The texts are Envoy's and Istio's own
(envoy/source/extensions/filters/http/jwt_authn: ``Status`` messages; Istio's RBAC filter)."""

from __future__ import annotations

import pytest

from estflow.pipelines.kubeflow.connection import Login
from estflow.pipelines.kubeflow.connection import _refusal_hint

TOKEN = Login(token="tok")
COOKIE = Login(cookies="oauth2_proxy_kubeflow=abc")
NOTHING = Login()


@pytest.mark.parametrize("login,message,says,never", [
    # A Kubernetes service-account token at the gateway of 26.03's default (m2m-dex-only)
    (TOKEN, "Jwt issuer is not configured", "accepts Kubernetes service-account tokens only "
     "inside the cluster", "may have expired"),
    (TOKEN, "Jwt is expired", "the token has expired", "not allowed there"),
    (TOKEN, "Jwt verification fails", "--audience pipelines.kubeflow.org", "may have expired"),
    (COOKIE, "Failed to authorize with API: Unauthenticated", "may have expired", "issuer"),
    (NOTHING, "Failed to authorize with API: Unauthenticated", "log in: give --token",
     "may have expired"),
])
def test_a_401_says_what_the_answer_means(login, message, says, never):
    hint = _refusal_hint(401, login, "team-a", message)
    assert says in hint and never not in hint
    assert "tok" not in hint.replace("token", "") and "abc" not in hint  # never the secret


def test_a_403_to_a_request_without_a_login_is_not_a_verdict_on_rights():
    hint = _refusal_hint(403, NOTHING, "team-a", "<html>Sign in</html>")
    assert "nothing identified you" in hint and "log in with --cookies" in hint
    assert "not allowed there" not in hint and "contributor" not in hint


def test_a_403_from_the_gateway_s_policy_is_told_from_the_api_s():
    gateway = _refusal_hint(403, TOKEN, "team-a", "RBAC: access denied")
    assert "Istio gateway refused it before the KFP API saw it" in gateway
    assert "contributor" not in gateway
    api = _refusal_hint(403, TOKEN, "team-b",
                        "Failed to authorize with API: PermissionDenied: User 'u' is not "
                        "authorized")
    assert "not allowed there" in api and "contributor" in api and "namespace 'team-b'" in api
