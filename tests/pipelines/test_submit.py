"""Submit and schedule through the unmodified kfp.Client, against a fake KFP REST API.

No KFP API server can run here; :mod:`tests.pipelines.fake_kfp_api` serves the v2beta1 routes
the client uses on 127.0.0.1, and records what it received.
"""

import socket

import pytest
import yaml
from kfp import compiler
from kfp import dsl

from estflow.pipelines import cli as estflow_cli
from estflow.pipelines import loader
from estflow.pipelines.cli import kfp_runs
from estflow.pipelines.kubeflow import compiler as kfp_compiler
from estflow.pipelines.kubeflow import submit as submit_mod
from estflow.pipelines.kubeflow.submit import ApiHttpError
from estflow.pipelines.kubeflow.submit import ApiUnreachableError
from estflow.pipelines.kubeflow.submit import BackendTooOldError
from estflow.pipelines.kubeflow.submit import SubmitError
from estflow.pipelines.kubeflow.submit import delete
from estflow.pipelines.kubeflow.submit import list_schedules
from estflow.pipelines.kubeflow.submit import parse_params
from estflow.pipelines.kubeflow.submit import pause
from estflow.pipelines.kubeflow.submit import resume
from estflow.pipelines.kubeflow.submit import schedule
from estflow.pipelines.kubeflow.submit import submit
from estflow.pipelines.kubeflow.submit import wait
from tests.pipelines.fake_kfp_api import FakeKfpApi
from tests.pipelines.fake_kfp_api import pipeline_name
from tests.pipelines.fake_kfp_api import task

# The taxi example pushes to a local path no Kubeflow task can reach: compiled with a bucket.
BUCKET = "gs://estflow-examples/serving_models"


@dsl.component(base_image="python:3.11")
def _echo(text: str) -> str:
    return text


@dsl.pipeline(name="tiny", description="two tasks; the second one never cached")
def _tiny(text: str = "hello", repeat: int = 1):
    first = _echo(text=text)
    _echo(text=first.output).set_caching_options(False)


def _compile_tiny(target, output_path) -> None:
    """A stand-in for the CLI's compile function (which wraps kfp_compiler)."""
    compiler.Compiler().compile(_tiny, output_path)


@pytest.fixture(scope="module")
def package(tmp_path_factory):
    path = tmp_path_factory.mktemp("package") / "tiny.yaml"
    _compile_tiny("tiny", str(path))
    return path


@pytest.fixture
def api():
    with FakeKfpApi() as fake:
        yield fake


@pytest.fixture
def closed_port_url():
    """A loopback URL nothing listens on: connecting is refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def _posts(api, route):
    return [p for m, p in api.requests if m == "POST" and p == f"/apis/v2beta1/{route}"]


def _caching(spec):
    """task name -> whether the sent spec enables caching for it (container tasks, in nested
    DAGs too: estflow's steps sit inside an exit handler and a condition)."""
    spec = spec.get("pipeline_spec", spec)
    components = spec.get("components", {})
    dags = [spec["root"]] + [c for c in components.values() if "dag" in c]
    return {name: task.get("cachingOptions", {}).get("enableCache", False)
            for dag in dags for name, task in dag["dag"]["tasks"].items()
            if "dag" not in components.get(task["componentRef"]["name"], {})}


# --- submit ------------------------------------------------------------------------------------

def test_submit_sends_the_pipeline_spec_parameters_and_experiment(api, package):
    run = submit(package, host=api.url, experiment="taxi", params={"text": "hi", "repeat": 3},
                 run_name="first")

    sent = api.runs[run.run_id]
    assert pipeline_name(sent["pipeline_spec"]) == "tiny"
    assert sent["runtime_config"]["parameters"] == {"text": "hi", "repeat": 3}
    assert sent["display_name"] == "first"
    (experiment,) = api.experiments.values()
    assert experiment["display_name"] == "taxi"
    assert sent["experiment_id"] == experiment["experiment_id"] == run.experiment_id
    assert run.url == f"{api.url}/#/runs/details/{run.run_id}"
    assert run.run_name == "first"


def test_the_experiment_is_created_once_and_reused(api, package):
    first = submit(package, host=api.url, experiment="nightly")
    second = submit(package, host=api.url, experiment="nightly")

    assert len(_posts(api, "experiments")) == 1
    assert first.experiment_id == second.experiment_id
    assert first.run_id != second.run_id
    assert len(api.runs) == 2


def test_defaults_are_the_default_experiment_and_a_named_timestamped_run(api, package):
    run = submit(package, host=api.url)

    assert [e["display_name"] for e in api.experiments.values()] == ["Default"]
    assert run.run_name.startswith("tiny ")
    assert api.runs[run.run_id]["runtime_config"].get("parameters", {}) == {}


def test_compile_time_caching_is_sent_unchanged(api, package):
    compiled = yaml.safe_load(package.read_text())
    expected = _caching(compiled)
    assert sorted(expected.values()) == [False, True]  # the fixture has both kinds

    run = submit(package, host=api.url)
    created = schedule(package, host=api.url, cron="@daily")

    assert _caching(api.runs[run.run_id]["pipeline_spec"]) == expected
    assert _caching(api.recurring_runs[created.schedule_id]["pipeline_spec"]) == expected


def test_a_non_yaml_source_is_compiled_with_compile_fn(api):
    seen = []

    def compile_fn(target, output_path):
        seen.append((target, output_path))
        _compile_tiny(target, output_path)

    run = submit("my/pipeline.py:nightly", host=api.url, compile_fn=compile_fn)

    assert seen[0][0] == "my/pipeline.py:nightly" and seen[0][1].endswith(".yaml")
    assert pipeline_name(api.runs[run.run_id]["pipeline_spec"]) == "tiny"


def test_bad_sources_fail_before_any_request(api, tmp_path):
    not_a_pipeline = tmp_path / "other.yaml"
    not_a_pipeline.write_text("kind: Deployment\nspec: {}\n")

    with pytest.raises(ValueError, match="expected a compiled pipeline .yaml/.yml"):
        submit("pipeline.py", host=api.url)
    with pytest.raises(FileNotFoundError, match="pipeline package not found"):
        submit(tmp_path / "missing.yaml", host=api.url)
    with pytest.raises(ValueError, match="other.yaml is not a compiled KFP pipeline"):
        submit(not_a_pipeline, host=api.url)
    with pytest.raises(ValueError, match="expected the KFP API's URL"):
        submit(not_a_pipeline, host="localhost:8080")
    assert api.requests == []


def test_a_beam_options_parameter_is_checked_before_any_request(api, package):
    """The compiled pipeline's beam_options parameter, set per run, is checked as compile
    checks its default: a Dataflow run without its region fails here, not in the pod."""
    bad = {"beam_options": "--runner=DataflowRunner --project=my-project "
                           "--temp_location=gs://b/tmp"}
    with pytest.raises(ValueError, match=r"`beam_options` parameter: .*missing --region"):
        submit(package, host=api.url, params=bad)
    with pytest.raises(ValueError, match=r"`beam_options` parameter"):
        schedule(package, host=api.url, cron="0 3 * * *", params=bad)
    assert api.requests == []
    good = {"beam_options": bad["beam_options"] + " --region=europe-west4"}
    run = submit(package, host=api.url, params=good)
    assert api.runs[run.run_id]["runtime_config"]["parameters"]["beam_options"] == \
        good["beam_options"]


def test_the_service_account_is_sent(api, package):
    run = submit(package, host=api.url, service_account="estflow-runner")
    created = schedule(package, host=api.url, cron="@daily", service_account="estflow-runner")
    assert api.runs[run.run_id]["service_account"] == "estflow-runner"
    assert api.recurring_runs[created.schedule_id]["service_account"] == "estflow-runner"


# --- the backend's version ---------------------------------------------------------------------

@pytest.fixture(scope="module")
def taxi_packages(tmp_path_factory):
    """The taxi example compiled for 2.14 (what the default target's output needs) and for
    2.5."""
    folder = tmp_path_factory.mktemp("taxi")
    taxi = loader.load("estflow.pipelines.examples.taxi")
    return {target: kfp_compiler.compile_pipeline(taxi, folder / f"taxi-{target}.yaml",
                                                  kfp_backend=target, push_base_path=BUCKET).path
            for target in ("2.14", "2.5")}


def test_a_backend_older_than_the_package_needs_is_refused_before_the_run(api, taxi_packages):
    """Kubeflow 1.10.x runs KFP 2.4.1/2.5.0, which fails a run whose exit task takes
    PipelineTaskFinalStatus (2.14+): say so, with the remedy, instead of sending it."""
    api.tag_name = "2.5.0"
    with pytest.raises(BackendTooOldError) as info:
        submit(taxi_packages["2.14"], host=api.url)
    message = str(info.value)
    assert "is 2.5.0, but taxi-2.14.yaml needs 2.14.0 or newer" in message
    assert "PipelineTaskFinalStatus" in message and "--kfp-backend 2.5" in message
    with pytest.raises(BackendTooOldError):
        schedule(taxi_packages["2.14"], host=api.url, cron="@daily")
    assert not api.runs and not api.recurring_runs
    run = submit(taxi_packages["2.5"], host=api.url)  # compiled for it: accepted
    assert pipeline_name(api.runs[run.run_id]["pipeline_spec"]) == "chicago-taxi"
    submit(taxi_packages["2.14"], host=api.url, check_backend=False)  # the user's choice
    assert len(api.runs) == 2


@pytest.mark.parametrize("tag", ["2.14.0", "2.16.0", None, "dev"])
def test_a_new_enough_or_unknown_backend_runs_the_package(api, taxi_packages, tag):
    api.tag_name = tag
    run = submit(taxi_packages["2.14"], host=api.url)
    assert run.run_id in api.runs


def test_server_version_reads_the_healthz_tag(api):
    import kfp

    api.tag_name = "2.15.0"
    client = submit_mod._connect(kfp.Client, api.url, None)
    assert submit_mod.server_version(client) == submit_mod.kfp_backends.BackendVersion(2, 15)


# --- following a run -----------------------------------------------------------------------------

_FAILED_RUN = [
    {"state": "RUNNING", "run_details": {"task_details": [
        task("chicago-taxi", "RUNNING", children=("train",)), task("train", "RUNNING")]}},
    {"state": "RUNNING", "run_details": {"task_details": [
        task("chicago-taxi", "RUNNING", children=("train",)), task("train", "RUNNING")]}},
    {"state": "FAILED", "error": {"code": 2, "message": "the run failed"},
     "run_details": {"task_details": [
         task("chicago-taxi", "FAILED", children=("train",), error="a child failed"),
         task("train", "FAILED", error="estflow step train exited with code 1",
              pod="chicago-taxi-abc-train-123"),
         task("report", "SUCCEEDED")]}},
]


def test_wait_follows_the_run_and_names_the_failing_task(api, package):
    api.run_script = _FAILED_RUN
    run = submit(package, host=api.url)
    lines = []
    result = wait(api.url, run.run_id, poll_seconds=0, echo=lines.append)
    assert lines == [f"run {run.run_id}: RUNNING (train)", f"run {run.run_id}: FAILED"]
    assert (result.state, result.succeeded, result.error) == ("FAILED", False, "the run failed")
    assert [(f.task, f.message, f.pod) for f in result.failed_tasks] == [
        ("train", "estflow step train exited with code 1", "chicago-taxi-abc-train-123")]


def test_wait_returns_a_success(api, package):
    api.run_script = [{"state": "PENDING"}, {"state": "SUCCEEDED"}]
    run = submit(package, host=api.url)
    result = wait(api.url, run.run_id, poll_seconds=0, echo=lambda line: None)
    assert result.succeeded and result.failed_tasks == ()


def test_wait_gives_up_after_its_timeout(api, package):
    api.run_script = [{"state": "RUNNING"}]
    run = submit(package, host=api.url)
    clock = iter(range(0, 1000, 30))
    with pytest.raises(SubmitError, match=r"did not finish within 60s \(last state RUNNING"):
        wait(api.url, run.run_id, poll_seconds=0, timeout=60, echo=lambda line: None,
             clock=lambda: next(clock), sleep=lambda s: None)


# --- schedules ---------------------------------------------------------------------------------

def test_schedule_sends_a_six_field_cron_and_its_options(api, package):
    created = schedule(package, host=api.url, cron="0 3 * * *", name="nightly-taxi",
                       experiment="taxi", params={"text": "night"}, max_concurrency=2)

    sent = api.recurring_runs[created.schedule_id]
    assert sent["trigger"]["cron_schedule"]["cron"] == "0 0 3 * * *"
    assert sent["max_concurrency"] == "2"
    assert sent["no_catchup"] is True
    assert sent["mode"] == "ENABLE"
    assert sent["display_name"] == "nightly-taxi"
    assert sent["runtime_config"]["parameters"] == {"text": "night"}
    assert pipeline_name(sent["pipeline_spec"]) == "tiny"
    assert sent["experiment_id"] == next(iter(api.experiments))
    assert (created.cron, created.enabled, created.max_concurrency, created.no_catchup) == \
        ("0 0 3 * * *", True, 2, True)


def test_schedule_can_start_paused_and_catch_up(api, package):
    created = schedule(package, host=api.url, cron="0 0 3 * * *", enabled=False,
                       no_catchup=False)

    sent = api.recurring_runs[created.schedule_id]
    assert (sent["mode"], sent["no_catchup"]) == ("DISABLE", False)
    assert created.name == "tiny" and created.state == "disabled"


@pytest.mark.parametrize("options, message", [
    ({"cron": "0 25 * * *"}, "hour field '25' is out of range 0-23"),
    ({"cron": "* * * *"}, "has 4 fields"),
    ({"cron": "@daily", "max_concurrency": 0}, "expected a positive integer"),
])
def test_invalid_schedules_fail_before_any_request(api, package, options, message):
    with pytest.raises(ValueError, match=message):
        schedule(package, host=api.url, **options)
    assert api.requests == []


def test_list_pause_resume_and_delete_change_the_servers_state(api, package):
    nightly = schedule(package, host=api.url, cron="0 3 * * *", name="nightly", experiment="a")
    hourly = schedule(package, host=api.url, cron="@hourly", name="hourly", experiment="b")

    assert [s.name for s in list_schedules(api.url)] == ["nightly", "hourly"]
    assert [s.schedule_id for s in list_schedules(api.url, "b")] == [hourly.schedule_id]

    paused = pause(api.url, nightly.schedule_id)
    assert api.recurring_runs[nightly.schedule_id]["status"] == "DISABLED"
    assert paused.state == "disabled"
    assert [s.enabled for s in list_schedules(api.url)] == [False, True]

    resumed = resume(api.url, nightly.schedule_id)
    assert api.recurring_runs[nightly.schedule_id]["status"] == "ENABLED"
    assert resumed.state == "enabled"

    delete(api.url, nightly.schedule_id)
    assert list(api.recurring_runs) == [hourly.schedule_id]
    assert [s.name for s in list_schedules(api.url)] == ["hourly"]


def test_list_reads_every_page(api, package):
    api.page_size_cap = 2
    for i in range(5):
        schedule(package, host=api.url, cron="@daily", name=f"s{i}")

    assert [s.name for s in list_schedules(api.url)] == [f"s{i}" for i in range(5)]
    pages = [p for m, p in api.requests if m == "GET" and p.startswith("/apis/v2beta1/recurringruns?")]
    assert len(pages) == 3


def test_listing_an_unknown_experiment_is_an_error(api):
    with pytest.raises(SubmitError, match="No experiment is found with name nope"):
        list_schedules(api.url, "nope")


# --- errors --------------------------------------------------------------------------------------

def test_an_http_error_carries_status_and_message(api):
    with pytest.raises(ApiHttpError) as info:
        pause(api.url, "recurring-run-9999")

    assert info.value.status == 404
    assert str(info.value) == (f"the KFP API at {api.url} answered HTTP 404 Not Found: "
                               "recurring run recurring-run-9999 not found")


@pytest.mark.parametrize("call", [
    lambda url, package: submit(package, host=url),
    lambda url, package: schedule(package, host=url, cron="@daily"),
    lambda url, package: list_schedules(url),
    lambda url, package: delete(url, "x"),
])
def test_an_unreachable_host_is_one_clear_line(closed_port_url, package, call):
    with pytest.raises(ApiUnreachableError) as info:
        call(closed_port_url, package)

    assert str(info.value) == f"cannot reach the KFP API at {closed_port_url}: connection refused"


def test_parse_params():
    assert parse_params([]) == {}
    assert parse_params(["a=1", "b=x=y", "c="]) == {"a": "1", "b": "x=y", "c": ""}
    with pytest.raises(ValueError, match="expected KEY=VALUE. Received: --param 'novalue'"):
        parse_params(["novalue"])
    with pytest.raises(ValueError, match="expected KEY=VALUE"):
        parse_params(["=1"])
    with pytest.raises(ValueError, match="parameter 'a' is given twice"):
        parse_params(["a=1", "a=2"])


# --- the CLI commands ----------------------------------------------------------------------------

@pytest.fixture
def cli(capsys, monkeypatch):
    """Parse argv with the estflow parser, compiling a .py target to the tiny pipeline (and
    recording it); run the handler."""
    compiled = []

    def compile_fn(target, output_path):
        compiled.append(target)
        _compile_tiny(target, output_path)

    monkeypatch.setattr(kfp_runs, "compile_target", compile_fn)
    parser = estflow_cli.build_parser()

    def run(*argv):
        args = parser.parse_args([str(a) for a in argv])
        code = args.handler(args)
        out, err = capsys.readouterr()
        return code, out, err

    run.compiled = compiled
    return run


def test_cli_submit_prints_the_run(api, package, cli):
    code, out, err = cli("submit", package, "--host", api.url, "--experiment", "taxi",
                         "--param", "text=cli", "--param", "repeat=2", "--run-name", "by-cli")

    (run_id,) = api.runs
    assert (code, err) == (0, "")
    assert out == f"Submitted run {run_id} ('by-cli'): {api.url}/#/runs/details/{run_id}\n"
    assert api.runs[run_id]["runtime_config"]["parameters"] == {"text": "cli", "repeat": "2"}
    assert cli.compiled == []


def test_cli_submit_wait_prints_the_states_and_the_failing_task(api, package, cli):
    api.run_script = _FAILED_RUN
    code, out, err = cli("submit", package, "--host", api.url, "--wait", "--poll-seconds", "0")
    (run_id,) = api.runs
    assert (code, err) == (1, "")
    assert out.splitlines() == [
        f"Submitted run {run_id} ('{api.runs[run_id]['display_name']}'): "
        f"{api.url}/#/runs/details/{run_id}",
        f"run {run_id}: RUNNING (train)",
        f"run {run_id}: FAILED",
        f"Run {run_id} finished: FAILED: the run failed",
        "  failed task train: estflow step train exited with code 1 "
        "(pod chicago-taxi-abc-train-123)"]


def test_cli_submit_wait_exits_0_on_success(api, package, cli):
    api.run_script = [{"state": "RUNNING"}, {"state": "SUCCEEDED"}]
    code, out, _ = cli("submit", package, "--host", api.url, "--wait", "--poll-seconds", "0",
                       "--service-account", "estflow-runner")
    (run_id,) = api.runs
    assert code == 0 and out.splitlines()[-1] == f"Run {run_id} finished: SUCCEEDED"
    assert api.runs[run_id]["service_account"] == "estflow-runner"


def test_cli_submit_refuses_an_old_backend_with_the_remedy(api, taxi_packages, cli):
    api.tag_name = "2.4.1"
    code, out, err = cli("submit", taxi_packages["2.14"], "--host", api.url)
    assert (code, out) == (1, "")
    assert "KFP backend at" in err and "--kfp-backend 2.4" in err
    assert cli("submit", taxi_packages["2.14"], "--host", api.url,
               "--skip-backend-check")[0] == 0


def test_cli_submit_compiles_a_python_target(api, cli):
    code, out, _ = cli("submit", "my_pipeline.py:nightly", "--host", api.url)

    assert code == 0 and out.startswith("Submitted run ")
    assert cli.compiled == ["my_pipeline.py:nightly"]


def test_cli_schedule_and_schedules(api, package, cli):
    code, out, _ = cli("schedule", package, "--cron", "30 2 * * MON-FRI", "--host", api.url,
                       "--name", "weekdays", "--max-concurrency", "3", "--catchup")
    (schedule_id,) = api.recurring_runs
    assert code == 0
    # KFP stores no time zone: the line says which one the scheduler applies.
    assert out == (f"Scheduled {schedule_id} ('weekdays'), cron '0 30 2 * * MON-FRI' in UTC, "
                   "enabled\n")
    sent = api.recurring_runs[schedule_id]
    assert (sent["max_concurrency"], sent["no_catchup"]) == ("3", False)

    code, out, _ = cli("schedules", "list", "--host", api.url)
    assert code == 0 and out.split() == [schedule_id, "enabled", "0", "30", "2", "*", "*",
                                         "MON-FRI", "weekdays"]

    assert cli("schedules", "pause", schedule_id, "--host", api.url)[1] == \
        f"Schedule {schedule_id} ('weekdays') is disabled\n"
    assert cli("schedules", "resume", schedule_id, "--host", api.url)[1] == \
        f"Schedule {schedule_id} ('weekdays') is enabled\n"
    assert cli("schedules", "delete", schedule_id, "--host", api.url)[1] == \
        f"Deleted schedule {schedule_id}\n"
    assert cli("schedules", "list", "--host", api.url)[1] == "No schedules.\n"


@pytest.mark.parametrize("argv, code, message", [
    (("schedule", "{package}", "--cron", "0 25 * * *", "--host", "{url}"), 2,
     "estflow schedule: error: hour field '25' is out of range 0-23 in cron '0 25 * * *'\n"),
    (("submit", "{package}", "--param", "oops", "--host", "{url}"), 2,
     "estflow submit: error: Received an invalid value for `--param`, expected KEY=VALUE. "
     "Received: --param 'oops'\n"),
    (("schedules", "pause", "nope", "--host", "{url}"), 1,
     "estflow schedules pause: error: the KFP API at {url} answered HTTP 404 Not Found: "
     "recurring run nope not found\n"),
])
def test_cli_errors_are_one_line_on_stderr(api, package, cli, argv, code, message):
    argv = [a.format(package=package, url=api.url) for a in argv]
    before = list(api.requests)

    assert cli(*argv) == (code, "", message.format(url=api.url))
    if code == 2:
        assert api.requests == before


def test_cli_unreachable_host_exits_1(closed_port_url, package, cli):
    code, out, err = cli("submit", package, "--host", closed_port_url)

    assert (code, out) == (1, "")
    assert err == (f"estflow submit: error: cannot reach the KFP API at {closed_port_url}: "
                   "connection refused\n")


def test_cli_submits_the_taxi_example_compiled_by_kfp_compiler(api, capsys, monkeypatch):
    monkeypatch.setenv("ESTFLOW_IMAGE", "r/estflow:1")  # what a .py target compiles on
    args = estflow_cli.build_parser().parse_args(["submit", "pipelines/examples/taxi.py",
                                                  "--host", api.url,
                                                  "--push-base-path", BUCKET])

    assert args.handler(args) == 0
    (sent,) = api.runs.values()
    assert pipeline_name(sent["pipeline_spec"]) == "chicago-taxi"
    # Per-task caching as compiled (push, the exit handler's report and the fingerprint task
    # never cached): nothing overrode it on the way.
    steps = ("ingest", "transform", "train", "evaluate", "push")
    assert _caching(sent["pipeline_spec"]) == {
        **{s: kfp_compiler.DEFAULT_CACHING[s] for s in steps}, "report": False,
        "fingerprint": False}


def test_public_names():
    assert set(submit_mod.__all__) >= {"submit", "schedule", "list_schedules", "pause",
                                       "resume", "delete", "parse_params"}
    # The client only: the commands are the CLI's (estflow.pipelines.cli.kfp_runs).
    assert not hasattr(submit_mod, "add_commands") and not hasattr(submit_mod, "argparse")
