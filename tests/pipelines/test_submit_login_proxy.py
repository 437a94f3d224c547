"""Behind a login proxy: every ``estflow`` command that talks to the KFP API fails, naming what
answered, instead of reading a login page as an empty answer.

Kubeflow v1.9.0's oauth2-proxy (no ``api_routes``) answers an API call without its session
cookie with a redirect to the login page, and many company SSO gateways answer their sign-in
page (HTTP 200, HTML) at any path. ``kfp.Client`` follows the redirect and reads the page as an
empty model, so without a check ``estflow submit`` printed ``Submitted run None`` and
``estflow schedule`` ``Scheduled None``, exit status 0, while nothing was created.

No Kubeflow can run here: :class:`tests.pipelines.fake_kfp_api.FakeKfpApi` with ``gateway=``
stands in for the KFP API server behind a login proxy, on 127.0.0.1 (``"login-redirect"``: 302
to ``/oauth2/start``, then to Dex's login page; ``"login-page"``: the SSO sign-in page, 200
``text/html``, at every path; ``"empty-json"``: ``{}`` to every API call). The commands run as a
user runs them (``estflow.pipelines.cli.main``), from a fresh directory.
"""

import urllib.parse

import pytest
import urllib3

from estflow.pipelines.kubeflow import connection
from estflow.pipelines.kubeflow import submit as submit_mod
from tests.pipelines.fake_kfp_api import SSO_TITLE
from tests.pipelines.fake_kfp_api import FakeKfpApi

COOKIE = "oauth2_proxy_kubeflow=sess-alice-abcdef"
SCHEDULE_ID = "recurring-run-0042"




def _proxy(gateway):
    """The KFP API behind a login proxy (``gateway``) that lets the session cookie
    :data:`COOKIE` through; it holds one schedule, so that pause/resume/delete would find it."""
    fake = FakeKfpApi(gateway=gateway, cookies={COOKIE: "alice@example.com"})
    fake.recurring_runs[SCHEDULE_ID] = {
        "recurring_run_id": SCHEDULE_ID, "display_name": "nightly", "mode": "ENABLE",
        "status": "ENABLED", "trigger": {"cron_schedule": {"cron": "0 0 3 * * *"}}}
    return fake


# Every command that talks to the KFP API (with and without --namespace: kfp.Client only asks
# healthz first when it has none).
COMMANDS = {
    "submit": ("submit", "tiny.yaml"),
    "submit-namespace": ("submit", "tiny.yaml", "--namespace", "team-a"),
    "schedule": ("schedule", "tiny.yaml", "--cron", "0 3 * * *"),
    "schedule-namespace": ("schedule", "tiny.yaml", "--cron", "0 3 * * *", "--namespace",
                           "team-a"),
    "schedules-list": ("schedules", "list"),
    "schedules-list-experiment": ("schedules", "list", "--experiment", "nightly",
                                  "--namespace", "team-a"),
    "schedules-pause": ("schedules", "pause", SCHEDULE_ID),
    "schedules-resume": ("schedules", "resume", SCHEDULE_ID, "--namespace", "team-a"),
    "schedules-delete": ("schedules", "delete", SCHEDULE_ID),
}


def _one_line(err):
    assert err.count("\n") == 1 and err.endswith("\n"), err
    assert "sess-alice-abcdef" not in err, err


@pytest.mark.parametrize("command", COMMANDS.values(), ids=COMMANDS.keys())
def test_a_redirect_to_the_login_page_fails_each_command(estflow, command):
    """The fake stands in for the KFP API behind Kubeflow v1.9.0's oauth2-proxy: each API call
    is answered 302 to /oauth2/start, itself a 302 to Dex's login page (200, HTML)."""
    with _proxy("login-redirect") as api:
        code, out, err = estflow(*command, "--host", api.url)
        prog = " ".join(command[:2] if command[0] == "schedules" else command[:1])
        assert (code, out) == (1, ""), err
        _one_line(err)
        assert err.startswith(f"estflow {prog}: error: the KFP API at {api.url} did not answer: ")
        # What was asked, and what answered: the redirect's status and where it leads.
        assert f"{api.url}/apis/v2beta1/" in err
        assert f"HTTP 302 Found, a redirect to {api.url}/oauth2/start?rd=%2Fapis%2Fv2beta1%2F" \
            in err
        # What to do.
        assert "sent no token and no cookie" in err and "log in" in err and "--cookies" in err
        assert "kubectl port-forward" in err
        # The redirect was not followed: Dex was never asked, nothing reached the API.
        assert not any(path.startswith(("/oauth2/", "/dex/")) for _, path in api.requests)
        assert list(api.recurring_runs) == [SCHEDULE_ID] and not api.runs
        assert api.recurring_runs[SCHEDULE_ID]["status"] == "ENABLED"


@pytest.mark.parametrize("command", COMMANDS.values(), ids=COMMANDS.keys())
def test_an_html_page_answered_with_200_fails_each_command(estflow, command):
    """The fake stands in for the KFP API behind a company SSO gateway that answers its
    sign-in page (200, text/html) at every path."""
    with _proxy("login-page") as api:
        code, out, err = estflow(*command, "--host", api.url)
        assert (code, out) == (1, ""), err
        _one_line(err)
        assert f"the KFP API at {api.url} did not answer: " in err
        assert f"{api.url}/apis/v2beta1/" in err
        assert f"HTTP 200 OK with an HTML page titled {SSO_TITLE!r} " \
               "(text/html; charset=utf-8), not the API's JSON" in err
        assert "--cookies" in err and "kubectl port-forward" in err
        # Or --host is not the API's address at all (a dashboard, a web site).
        assert "/pipeline" in err
        assert list(api.recurring_runs) == [SCHEDULE_ID] and not api.runs


def test_with_the_session_cookie_the_proxy_lets_each_command_through(estflow):
    """The same fake, given the session cookie: the guard passes the API's own answers."""
    with _proxy("login-redirect") as api:
        # Single-user behind the proxy: no --namespace (the fake would keep a "Default"
        # experiment per namespace, and the names would clash).
        for command in (c for c in COMMANDS.values() if "--namespace" not in c):
            code, out, err = estflow(*command, "--host", api.url, "--cookies", COOKIE)
            assert (code, err) == (0, ""), (command, err)
        assert len(api.runs) == 1 and len(api.recurring_runs) == 1  # one made, one deleted
        assert not any(method == "GATEWAY" for method, _ in api.requests)


def test_submit_wait_fails_when_the_session_ends_while_following(estflow):
    """The fake stands in for the KFP API behind oauth2-proxy: the cookie is accepted while
    the run is created, then the session ends (the proxy redirects) before its first look."""
    with _proxy("login-redirect") as api:
        def end_session(method, path):
            if method == "GET" and path.startswith("/apis/v2beta1/runs/"):
                api.gateway = "login-redirect"
                api.cookies.clear()  # the session cookie is no longer accepted

        api.before_request = end_session
        # --timeout: without the check, the empty answers would read as PENDING until then.
        code, out, err = estflow("submit", "tiny.yaml", "--host", api.url, "--wait",
                                 "--poll-seconds", "0", "--timeout", "3", "--cookies", COOKIE)
        (run_id,) = api.runs
        assert code == 1
        assert out.startswith(f"Submitted run {run_id} ")
        _one_line(err)
        assert f"GET {api.url}/apis/v2beta1/runs/{run_id} was answered HTTP 302 Found, a " \
               f"redirect to {api.url}/oauth2/start?rd=" in err
        assert "sent the cookie oauth2_proxy_kubeflow" in err
        assert "was not accepted: it may have expired" in err


@pytest.mark.parametrize("command, missing", [
    (COMMANDS["submit"], "the new run without a run_id"),
    (COMMANDS["schedule"], "the experiment without an experiment_id"),
    (COMMANDS["schedules-pause"], f"recurring run {SCHEDULE_ID} without a recurring_run_id"),
    (COMMANDS["schedules-resume"], f"recurring run {SCHEDULE_ID} without a recurring_run_id"),
], ids=["submit", "schedule", "schedules-pause", "schedules-resume"])
def test_json_without_the_id_the_command_needs_fails(estflow, command, missing):
    """The fake stands in for the KFP API behind a gateway that answers {} (200, JSON) to
    every call: JSON, but not the API's answer."""
    with _proxy("empty-json") as api:
        code, out, err = estflow(*command, "--host", api.url)
        assert (code, out) == (1, ""), err
        _one_line(err)
        assert f"the KFP API at {api.url} answered {missing} ({{}})" in err
        assert "check that --host is the KFP API" in err


def test_wait_fails_on_a_run_without_its_id():
    """The fake stands in for the KFP API behind a gateway answering {} to every call."""
    with _proxy("empty-json") as api:
        with pytest.raises(connection.ApiAnswerError, match="answered run run-7 without a "
                           "run_id"):
            submit_mod.wait(api.url, "run-7", poll_seconds=0, echo=lambda line: None)


def test_the_error_carries_what_answered(workdir):
    """The fake stands in for the KFP API behind oauth2-proxy; the library call (not only the
    CLI) raises an ApiAnswerError with the answer's status, address and Location."""
    with _proxy("login-redirect") as api:
        with pytest.raises(submit_mod.ApiAnswerError) as info:
            submit_mod.submit("tiny.yaml", host=api.url, namespace="team-a")
        error = info.value
        assert isinstance(error, submit_mod.SubmitError)
        assert error.status == 302 and error.method == "GET"
        assert error.url.startswith(f"{api.url}/apis/v2beta1/experiments")
        assert error.location.startswith(f"{api.url}/oauth2/start?rd=")


def _answer(status, headers=None, body=b""):
    return urllib3.HTTPResponse(body=body, headers=headers or {}, status=status,
                                preload_content=True)


def test_a_redirect_to_the_same_path_elsewhere_says_which_host_to_give():
    answer = _answer(301, {"Location": "https://kfp.example.com/pipeline/apis/v2beta1/healthz"})
    with pytest.raises(connection.ApiAnswerError) as info:
        connection.check_answer("GET", "http://kfp.example.com/pipeline/apis/v2beta1/healthz",
                                answer)
    message = connection.not_the_api_message(info.value, "http://kfp.example.com/pipeline",
                                             connection.Login())
    assert "HTTP 301 Moved Permanently, a redirect to https://kfp.example.com/pipeline/apis/" \
           "v2beta1/healthz" in message
    assert "give --host https://kfp.example.com/pipeline" in message


@pytest.mark.parametrize("headers, body, what", [
    ({"Content-Type": "application/json"}, b'{"status": "ok"}', None),
    ({"Content-Type": "application/json; charset=utf-8"}, b"{}", None),
    ({}, b"", None),  # nothing said and nothing sent: not refused here
    ({}, b"{}", None),
    ({"Content-Type": "application/json"}, b"<html><title>Oops</title></html>",
     "an HTML page titled 'Oops' (application/json)"),
    ({"Content-Type": "text/plain"}, b"Hello from the gateway",
     "text/plain, not JSON: 'Hello from the gateway'"),
    ({"Content-Type": "text/html"}, b"<p>no title here</p>", "an HTML page without a title"),
    ({}, b"<!DOCTYPE html><html><head><title> Sign\n in </title>",
     "an HTML page titled 'Sign in'"),
])
def test_which_successful_answers_are_the_apis(headers, body, what):
    url = "http://kfp/apis/v2beta1/healthz"
    if what is None:
        connection.check_answer("GET", url, _answer(200, headers, body))
        return
    with pytest.raises(connection.ApiAnswerError) as info:
        connection.check_answer("GET", url, _answer(200, headers, body))
    assert what in str(info.value)
    assert str(info.value).startswith("GET http://kfp/apis/v2beta1/healthz was answered HTTP 200")


def test_an_http_error_that_is_an_html_page_is_named_by_its_title():
    assert connection._error_message(b"<html><head><title>502 Bad Gateway</title></head>"
                                     b"<body><center><h1>502</h1></center></body></html>") == \
        "an HTML page titled '502 Bad Gateway'"
    assert connection._error_message(b'{"message": "not found"}') == "not found"


def test_a_long_login_location_is_shortened():
    location = "https://sso.example.com/login?" + urllib.parse.urlencode({"state": "x" * 400})
    with pytest.raises(connection.ApiAnswerError) as info:
        connection.check_answer("POST", "http://kfp/apis/v2beta1/runs",
                                _answer(302, {"Location": location}))
    assert "a redirect to https://sso.example.com/login?state=xxx" in str(info.value)
    assert len(str(info.value)) < 300 and str(info.value).count("...") == 1
