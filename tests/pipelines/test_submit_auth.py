"""Logging in to a multi-user Kubeflow: ``estflow submit``, ``schedule``, ``schedules`` and
``submit --wait`` with a bearer token (value, file, kfp's service-account token variable),
a session cookie, a CA bundle or ``--insecure``, over TLS.

No Kubeflow can run here: :class:`tests.pipelines.fake_kfp_api.FakeKfpApi` plays one on
127.0.0.1 in multi-user mode (401 without a user identity, 403 for a namespace the user is not
in), serving HTTPS with a certificate :func:`make_certificates` makes for each test module.
The commands run as a user runs them (``estflow.pipelines.cli.main`` with the documented
arguments), from a fresh directory, with the package as a relative path.
"""

from pathlib import Path

import pytest
from kfp import compiler
from kfp import dsl

from estflow.pipelines import cli as estflow_cli
from estflow.pipelines.kubeflow import cron_zone
from estflow.pipelines.kubeflow import submit as submit_mod
from estflow.pipelines.kubeflow.connection import Login
from tests.pipelines.fake_kfp_api import FakeKfpApi
from tests.pipelines.fake_kfp_api import make_certificates

USER = "alice@example.com"
NAMESPACE = "team-a"
TOKEN = "tok-alice-0123456789"
COOKIE = "_oauth2_proxy=sess-alice-abcdef"
SECRETS = (TOKEN, "sess-alice-abcdef")


@dsl.component(base_image="python:3.11")
def _echo(text: str) -> str:
    return text


@dsl.pipeline(name="tiny")
def _tiny(text: str = "hello"):
    _echo(text=text)


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return make_certificates(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def other_ca(tmp_path_factory):
    """A CA that did not sign the server's certificate."""
    return make_certificates(tmp_path_factory.mktemp("other-tls"))["ca"]


@pytest.fixture
def api(certs):
    fake = FakeKfpApi(users={USER: {NAMESPACE}, "bob@example.com": {"team-b"}},
                      tokens={TOKEN: USER, "tok-alice-rotated": USER},
                      cookies={COOKIE: USER}, tls=(certs["cert"], certs["key"]))
    with fake:
        yield fake


@pytest.fixture
def workdir(tmp_path, monkeypatch, certs):
    """A fresh directory holding the compiled package and the CA bundle, as the cwd; no login
    variable inherited from the environment."""
    for name in ("ESTFLOW_KFP_TOKEN", "ESTFLOW_KFP_COOKIES", "ESTFLOW_KFP_CA_CERT",
                 "KF_PIPELINES_SA_TOKEN_PATH", "KF_PIPELINES_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    compiler.Compiler().compile(_tiny, "tiny.yaml")
    (tmp_path / "ca.pem").write_bytes(Path(certs["ca"]).read_bytes())
    return tmp_path


@pytest.fixture
def estflow(capsys, workdir):
    """``estflow ARGS...``: (exit status, stdout, stderr)."""
    def run(*argv):
        code = estflow_cli.main([str(a) for a in argv])
        out, err = capsys.readouterr()
        return code, out, err
    return run


def _commands(api, tmp_path):
    """submit --wait, schedule and schedules list, in the user's namespace."""
    api.run_script = [{"state": "RUNNING"}, {"state": "SUCCEEDED"}]
    common = ("--host", api.url, "--namespace", NAMESPACE)
    return [
        ("submit", "tiny.yaml", *common, "--wait", "--poll-seconds", "0"),
        ("schedule", "tiny.yaml", "--cron", "0 3 * * *", *common),
        ("schedules", "list", *common),
    ]


def _authorizations(api):
    return {h.get("authorization") for h in api.headers}


# --- logged in -----------------------------------------------------------------------------------

@pytest.mark.parametrize("login, env", [
    (("--token", TOKEN), {}),
    (("--token-file", "token"), {}),
    (("--cookies", COOKIE), {}),
    ((), {"ESTFLOW_KFP_TOKEN": TOKEN}),
    ((), {"KF_PIPELINES_SA_TOKEN_PATH": "token"}),  # kfp's in-cluster token variable
    ((), {"ESTFLOW_KFP_COOKIES": COOKIE}),
], ids=["token", "token-file", "cookies", "token-env", "sa-token-path-env", "cookies-env"])
def test_each_command_succeeds_with_a_login_and_the_ca_bundle(api, estflow, workdir,
                                                             monkeypatch, login, env):
    (workdir / "token").write_text(TOKEN + "\n")
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    for command in _commands(api, workdir):
        code, out, err = estflow(*command, *login, "--ca-cert", "ca.pem")
        assert (code, err) == (0, ""), command
    assert len(api.runs) == 1 and len(api.recurring_runs) == 1
    assert "SUCCEEDED" in out or "enabled" in out
    if "cookies" in " ".join(login) or "ESTFLOW_KFP_COOKIES" in env:
        assert {h.get("cookie") for h in api.headers} == {COOKIE}
        assert _authorizations(api) == {None}
    else:
        assert _authorizations(api) == {f"Bearer {TOKEN}"}


def test_the_ca_bundle_from_the_environment_and_insecure(api, estflow, workdir, monkeypatch):
    monkeypatch.setenv("ESTFLOW_KFP_CA_CERT", "ca.pem")
    assert estflow("schedules", "list", "--host", api.url, "--namespace", NAMESPACE,
                   "--token", TOKEN) == (0, "No schedules.\n", "")
    monkeypatch.delenv("ESTFLOW_KFP_CA_CERT")
    for command in _commands(api, workdir):
        code, _, err = estflow(*command, "--token", TOKEN, "--insecure")
        assert (code, err) == (0, ""), command


def test_the_host_comes_from_kf_pipelines_endpoint(api, estflow, monkeypatch):
    monkeypatch.setenv("KF_PIPELINES_ENDPOINT", api.url)
    code, out, err = estflow("submit", "tiny.yaml", "--namespace", NAMESPACE,
                             "--token", TOKEN, "--ca-cert", "ca.pem")
    assert (code, err) == (0, "") and out.startswith("Submitted run ")
    monkeypatch.delenv("KF_PIPELINES_ENDPOINT")
    assert estflow("submit", "tiny.yaml", "--token", TOKEN) == (
        2, "", "estflow submit: error: no KFP API given: pass --host URL (or set "
        "KF_PIPELINES_ENDPOINT)\n")


def test_a_token_file_is_read_again_at_each_request(api, workdir):
    """A projected service-account token rotates: each request sends the file's token now."""
    token = workdir / "token"
    token.write_text(TOKEN)
    login = Login.resolve(token_file=str(token), ca_cert="ca.pem", environ={})
    run = submit_mod.submit("tiny.yaml", host=api.url, namespace=NAMESPACE, login=login)
    api.run_script = [{"state": "RUNNING"}, {"state": "RUNNING"}, {"state": "SUCCEEDED"}]

    def rotate(line):
        token.write_text("tok-alice-rotated")

    result = submit_mod.wait(api.url, run.run_id, namespace=NAMESPACE, login=login,
                             poll_seconds=0, echo=rotate)
    assert result.succeeded
    assert [h["authorization"] for h in api.headers][-1] == "Bearer tok-alice-rotated"
    assert f"Bearer {TOKEN}" in _authorizations(api)


def test_a_pasted_bearer_scheme_is_not_sent_twice():
    assert Login.resolve(token=f"Bearer {TOKEN}", environ={}).token == TOKEN


# --- refused ---------------------------------------------------------------------------------------

def _one_line_without_secrets(err):
    assert err.count("\n") == 1, err
    assert not any(secret in err for secret in SECRETS), err


def test_without_a_login_each_command_fails_clearly(api, estflow, workdir):
    for command in _commands(api, workdir):
        code, out, err = estflow(*command, "--ca-cert", "ca.pem")
        assert (code, out) == (1, ""), command
        _one_line_without_secrets(err)
        assert "answered HTTP 401 Unauthorized: Failed to authorize with API: " \
               "Unauthenticated" in err
        assert f"(sent no token and no cookie, namespace '{NAMESPACE}'; log in: give " \
               "--token/--token-file" in err and "--cookies" in err
    assert not api.runs and not api.recurring_runs


def test_without_a_login_or_namespace_the_health_check_fails_at_once(api, estflow):
    """kfp.Client checks healthz when no namespace is given, five times 5 s apart; a refused
    login does not heal, so it fails on the first answer."""
    code, out, err = estflow("schedules", "list", "--host", api.url, "--ca-cert", "ca.pem")
    assert (code, out) == (1, "")
    assert "HTTP 401" in err and "no namespace (--namespace)" in err
    assert [p for _, p in api.requests] == ["/apis/v2beta1/healthz"]


def test_a_rejected_token_or_cookie_says_it_was_sent_not_its_value(api, estflow):
    code, _, err = estflow("submit", "tiny.yaml", "--host", api.url, "--namespace", NAMESPACE,
                           "--token", "tok-expired-99", "--ca-cert", "ca.pem")
    assert code == 1 and "tok-expired-99" not in err
    assert "HTTP 401" in err and "sent a bearer token (--token or $ESTFLOW_KFP_TOKEN)" in err
    assert "was not accepted: it may have expired" in err
    code, _, err = estflow("schedules", "list", "--host", api.url, "--namespace", NAMESPACE,
                           "--cookies", "_oauth2_proxy=stale; theme=dark", "--ca-cert", "ca.pem")
    assert code == 1 and "stale" not in err
    assert "sent the cookies _oauth2_proxy, theme" in err


def test_another_users_namespace_is_refused_with_403(api, estflow, workdir):
    for command in _commands(api, workdir):
        command = [("team-b" if a == NAMESPACE else a) for a in command]
        code, out, err = estflow(*command, "--token", TOKEN, "--ca-cert", "ca.pem")
        assert (code, out) == (1, ""), command
        _one_line_without_secrets(err)
        assert "answered HTTP 403 Forbidden" in err and f"User '{USER}' is not authorized" in err
        assert "sent a bearer token (--token or $ESTFLOW_KFP_TOKEN), namespace 'team-b'; you " \
               "are logged in but not allowed there" in err


def test_an_unknown_ca_fails_clearly(api, estflow, other_ca):
    common = ("schedules", "list", "--host", api.url, "--namespace", NAMESPACE, "--token", TOKEN)
    code, out, err = estflow(*common)
    assert (code, out) == (1, "")
    _one_line_without_secrets(err)
    assert f"cannot reach the KFP API at {api.url}: " in err
    assert "certificate verify failed" in err
    assert "give its CA bundle with --ca-cert or $ESTFLOW_KFP_CA_CERT, or --insecure" in err
    code, out, err = estflow(*common, "--ca-cert", other_ca)
    assert code == 1 and "certificate verify failed" in err
    assert f"checked against the CA bundle {other_ca}" in err
    assert api.runs == {} and not any(p != "/" for _, p in api.requests)


@pytest.mark.parametrize("options, message", [
    (("--token", TOKEN, "--token-file", "token"), "give either --token or --token-file"),
    (("--ca-cert", "ca.pem", "--insecure"), "give either --ca-cert or --insecure"),
    (("--token-file", "missing-token"), "cannot read the token file missing-token "
     "(--token-file or $KF_PIPELINES_SA_TOKEN_PATH): No such file or directory"),
    (("--token-file", "empty"), "the token file empty is empty"),
    (("--ca-cert", "missing.pem"), "the CA bundle missing.pem does not exist"),
])
def test_bad_login_options_fail_before_any_request(api, estflow, workdir, options, message):
    (workdir / "token").write_text(TOKEN)
    (workdir / "empty").write_text("\n")
    code, out, err = estflow("submit", "tiny.yaml", "--host", api.url, *options)
    assert (code, out) == (2, "") and message in err
    assert api.requests == []


# --- schedules' time zone ------------------------------------------------------------------------

def test_schedule_converts_a_cron_from_its_time_zone(api, estflow):
    code, out, err = estflow("schedule", "tiny.yaml", "--cron", "0 3 * * MON-FRI",
                             "--timezone", "Asia/Tokyo", "--host", api.url, "--namespace",
                             NAMESPACE, "--token", TOKEN, "--ca-cert", "ca.pem")
    assert (code, err) == (0, "")
    (sent,) = api.recurring_runs.values()
    # 03:00 in Tokyo (UTC+9, no daylight saving) is 18:00 UTC the day before.
    assert sent["trigger"]["cron_schedule"]["cron"] == "0 0 18 * * 0,1,2,3,4"
    assert out.endswith("cron '0 0 18 * * 0,1,2,3,4' in UTC ('0 3 * * MON-FRI' in "
                        "Asia/Tokyo), enabled\n")


def test_schedule_refuses_a_zone_with_daylight_saving(api, estflow):
    code, out, err = estflow("schedule", "tiny.yaml", "--cron", "0 3 * * *", "--timezone",
                             "Europe/Paris", "--host", api.url, "--token", TOKEN)
    assert (code, out) == (2, "")
    assert "Europe/Paris is +1h to +2h from UTC over the year (daylight saving)" in err
    assert "--scheduler-timezone Europe/Paris" in err
    assert api.requests == []
    # Told the scheduler runs in that zone, the cron goes as written.
    code, out, _ = estflow("schedule", "tiny.yaml", "--cron", "0 3 * * *", "--timezone",
                           "Europe/Paris", "--scheduler-timezone", "Europe/Paris",
                           "--host", api.url, "--namespace", NAMESPACE, "--token", TOKEN,
                           "--ca-cert", "ca.pem")
    assert code == 0 and "cron '0 0 3 * * *' in Europe/Paris, enabled" in out


@pytest.mark.parametrize("cron, zone, expected", [
    ("0 0 3 * * *", "Asia/Kolkata", "0 30 21 * * *"),  # half an hour: the minute moves
    ("0 0 22 * * SUN", "America/Bogota", "0 0 3 * * 1"),  # UTC-5: to Monday
    ("0 15 * * * *", "Asia/Tokyo", "0 15 * * * *"),  # every hour stays every hour
    ("0 0 3 * * *", "UTC", "0 0 3 * * *"),
])
def test_cron_zone_conversions(cron, zone, expected):
    assert cron_zone.to_scheduler_zone(cron, zone, "UTC") == expected


@pytest.mark.parametrize("cron, zone, message", [
    ("0 0 3,12 * * *", "Asia/Tokyo", "its times fall on different days there"),
    ("0 0 3 1 * *", "Asia/Tokyo", "day-of-month or month field cannot move"),
    ("0 0 */2 * * *", "Asia/Kolkata", "must be plain numbers"),
    ("0 0 3 * * *", "Mars/Olympus", "expected an IANA time zone name"),
])
def test_cron_zone_refusals(cron, zone, message):
    with pytest.raises(ValueError, match=message):
        cron_zone.to_scheduler_zone(cron, zone, "UTC")


def test_a_multi_user_api_without_a_namespace_asks_for_it(api, estflow):
    code, out, err = estflow("submit", "tiny.yaml", "--host", api.url, "--token", TOKEN,
                             "--ca-cert", "ca.pem")
    assert (code, out) == (1, "")
    assert "HTTP 400" in err and "give --namespace, your Kubeflow profile's namespace" in err
