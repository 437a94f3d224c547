"""Submit compiled pipelines to a Kubeflow Pipelines API, and manage their schedules.

Everything goes through the unmodified ``kfp.Client`` (kfp 2.17, KFP REST API v2beta1):

* :func:`submit` runs a pipeline once (``Client.create_run_from_pipeline_package``), in an
  experiment that is created on first use and reused after;
* :func:`schedule` creates a recurring run (``Client.create_recurring_run``) from a cron
  expression, converted to KFP's six fields (seconds first) by
  :func:`estflow.pipelines.kubeflow.cron.to_kfp_cron`, so a bad cron fails before any request;
* :func:`list_schedules`, :func:`pause`, :func:`resume`, :func:`delete` manage recurring runs;
* :func:`wait` follows a run (``Client.get_run``) to its end: its state changes as they happen,
  then the final state and, when it failed, the failing tasks and their errors.

Before sending a package, :func:`submit` and :func:`schedule` compare the KFP backend version
the package needs (:func:`estflow.pipelines.kubeflow.backend.required`: an exit task taking
``PipelineTaskFinalStatus`` needs 2.14, parameterised placement 2.5) with the server's (the
``tag_name`` its healthz answers), and refuse a server too old with the remedy
(``estflow compile --kfp-backend ...``) instead of a run the backend fails. A server that does
not say its version is not checked.

Caching is never overridden here: the compiled YAML already carries each task's caching (set
at compile time, see ``kfp_compiler.DEFAULT_CACHING``), while the client's ``enable_caching``
would overwrite it on root-level tasks only.

Every call takes a ``login`` (:class:`Login`: a bearer token or token file, cookies, a CA
bundle or ``insecure``), which a multi-user Kubeflow needs (see
:mod:`estflow.pipelines.kubeflow.connection`).

Failures are one-line errors: :class:`ApiUnreachableError` (connection refused, unknown host,
TLS...), :class:`ApiHttpError` (the API answered with an HTTP error: status and message; a
401/403 also says what was sent and what to do) and :class:`ApiAnswerError` (something else
answered in the API's place: a redirect to a login page, an HTML page, an answer that is not
JSON or lacks the run's or schedule's id; it says what was asked, what answered and what to
do, so a login proxy never passes for a created run), all :class:`SubmitError`; bad input (cron, ``k=v`` parameters, a missing package) is a
``ValueError``/``FileNotFoundError``. This module is the client only: the ``estflow submit``,
``schedule`` and ``schedules`` commands are defined with the rest of the CLI
(:mod:`estflow.pipelines.cli`).

Example:
    >>> run = submit("taxi.yaml", host="http://localhost:8080", params={"source_root": "/data"})
    ... # doctest: +SKIP
    >>> schedule("taxi.yaml", host="http://localhost:8080", cron="0 3 * * *", name="nightly")
    ... # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import json
import logging
import os
import tempfile
from collections.abc import Callable
from collections.abc import Iterator
from collections.abc import Mapping
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import kfp
import kfp_server_api
import yaml
from google.protobuf import json_format
from kfp.pipeline_spec import pipeline_spec_pb2

from estflow.pipelines import beam_options
from estflow.pipelines.kubeflow import backend as kfp_backends
from estflow.pipelines.kubeflow import cron_zone
from estflow.pipelines.kubeflow.connection import ApiAnswerError
from estflow.pipelines.kubeflow.connection import ApiHttpError
from estflow.pipelines.kubeflow.connection import ApiUnreachableError
from estflow.pipelines.kubeflow.connection import Client
from estflow.pipelines.kubeflow.connection import Login
from estflow.pipelines.kubeflow.connection import SubmitError
from estflow.pipelines.kubeflow.connection import api_errors
from estflow.pipelines.kubeflow.connection import check_host as _check_host
from estflow.pipelines.kubeflow.connection import connect
from estflow.pipelines.kubeflow.connection import require
from estflow.pipelines.kubeflow.cron import to_kfp_cron
from estflow.pipelines.kubeflow.follow import TERMINAL_STATES
from estflow.pipelines.kubeflow.follow import RunResult
from estflow.pipelines.kubeflow.follow import TaskFailure
from estflow.pipelines.kubeflow.follow import wait

__all__ = ["DEFAULT_EXPERIMENT", "TERMINAL_STATES", "SubmitError", "ApiUnreachableError",
           "ApiHttpError", "ApiAnswerError", "BackendTooOldError", "Login", "RunInfo", "ScheduleInfo", "TaskFailure",
           "RunResult", "submit", "schedule", "wait", "list_schedules", "pause", "resume",
           "delete", "parse_params", "server_version"]

# The experiment kfp.Client itself falls back to when none is named.
DEFAULT_EXPERIMENT = "Default"

_log = logging.getLogger(__name__)

PipelineSource = Any  # a compiled .yaml/.yml path, or whatever ``compile_fn`` accepts
CompileFn = Callable[[Any, str], object]  # compile_fn(source, output_yaml_path)
ClientFactory = Callable[..., kfp.Client]


class BackendTooOldError(SubmitError):
    """The KFP backend is older than the package needs (it would fail the run)."""


@dataclasses.dataclass(frozen=True)
class RunInfo:
    """A submitted run: its id, its page in the KFP UI, its name and experiment."""

    run_id: str
    url: str
    run_name: str
    experiment_id: str


@dataclasses.dataclass(frozen=True)
class ScheduleInfo:
    """A recurring run as the KFP API reports it."""

    schedule_id: str
    name: str
    cron: str | None
    enabled: bool
    experiment_id: str | None
    max_concurrency: int | None
    no_catchup: bool

    @property
    def state(self) -> str:
        return "enabled" if self.enabled else "disabled"


def submit(source: PipelineSource, *, host: str, experiment: str | None = None,
           params: Mapping[str, Any] | None = None, run_name: str | None = None,
           namespace: str | None = None, compile_fn: CompileFn | None = None,
           service_account: str | None = None, check_backend: bool = True,
           login: Login | None = None, client_factory: ClientFactory = Client) -> RunInfo:
    """Run a pipeline once on the KFP API at ``host``.

    Args:
        source: a compiled KFP pipeline ``.yaml``/``.yml``, or anything ``compile_fn`` compiles
            (a pipeline ``.py``/module target, a Pipeline...).
        host: the KFP API endpoint, e.g. ``http://localhost:8080``.
        experiment: experiment name (created if missing); default ``"Default"``.
        params: pipeline parameters (runtime_config.parameters).
        run_name: the run's display name; default ``"<pipeline name> <timestamp>"``.
        namespace: Kubernetes namespace, for multi-user KFP deployments.
        compile_fn: ``compile_fn(source, output_path)`` writes the YAML when ``source`` is not
            one already, e.g. ``kfp_compiler.compile_pipeline`` for a loaded pipeline.
        service_account: the Kubernetes service account the run's pods use (None: the
            server's default, ``pipeline-runner`` or the profile's ``default-editor``).
        check_backend: refuse a server older than the package needs (see the module doc).
        login: the token, cookies and TLS settings to connect with (None: none).
        client_factory: builds the client (a ``kfp.Client``); called with ``host``, when
            given ``namespace``, and the login's ``kfp.Client`` arguments.

    Returns:
        The run's id and UI address.

    Raises:
        ValueError: bad ``host``, package or ``beam_options`` parameter; FileNotFoundError:
            no such package.
        BackendTooOldError: the server's KFP backend cannot run the package.
        SubmitError: the API was unreachable or answered with an error.
    """
    _check_host(host)
    beam_options.check_parameter(params)
    with _package(source, compile_fn) as package:
        pipeline_name = _pipeline_name(package)
        run_name = run_name or f"{pipeline_name} {_timestamp()}"
        with api_errors(host, login, namespace):
            client = connect(client_factory, host, namespace, login)
            if check_backend:
                _check_backend(client, host, package)
            result = client.create_run_from_pipeline_package(
                str(package), arguments=dict(params or {}), run_name=run_name,
                experiment_name=experiment or DEFAULT_EXPERIMENT, namespace=namespace,
                service_account=service_account)
            require(result.run_id, "the new run", "run_id", result.run_info, host)
    return RunInfo(run_id=result.run_id, url=f"{host.rstrip('/')}/#/runs/details/{result.run_id}",
                   run_name=run_name, experiment_id=result.run_info.experiment_id)


def schedule(source: PipelineSource, *, host: str, cron: str, name: str | None = None,
             experiment: str | None = None, params: Mapping[str, Any] | None = None,
             max_concurrency: int = 1, no_catchup: bool = True, enabled: bool = True,
             namespace: str | None = None, compile_fn: CompileFn | None = None,
             service_account: str | None = None, check_backend: bool = True,
             timezone: str | None = None,
             scheduler_timezone: str = cron_zone.DEFAULT_SCHEDULER_ZONE,
             login: Login | None = None, client_factory: ClientFactory = Client) -> ScheduleInfo:
    """Create a recurring run of a pipeline on the KFP API at ``host``.

    Args:
        source, host, experiment, params, namespace, compile_fn, service_account,
            check_backend, login, client_factory: as :func:`submit`.
        cron: five fields (``"0 3 * * *"``), six (seconds first) or a macro (``@daily``), in
            the scheduler's time zone, or in ``timezone`` when given.
        timezone: the IANA zone ``cron`` is written in; it is rewritten for the scheduler's
            zone, or refused when no one cron there fires at those times all year (see
            :mod:`estflow.pipelines.kubeflow.cron_zone`).
        scheduler_timezone: the zone KFP's scheduler reads cron in (the install's
            ``cronScheduleTimezone``; ``UTC`` in KFP's manifests).
        name: the recurring run's display name; default: the pipeline's name.
        max_concurrency: how many of its runs may run at once (KFP allows 1-10).
        no_catchup: after a pause, run only the latest missed interval, not each one.
        enabled: start it enabled (else create it paused).

    Returns:
        The recurring run as created.

    Raises:
        ValueError: an invalid cron (before any request), host, package or concurrency.
        SubmitError: the API was unreachable or answered with an error.
    """
    kfp_cron = to_kfp_cron(cron)
    cron_zone.zone(scheduler_timezone, "--scheduler-timezone")
    if timezone is not None:
        kfp_cron = cron_zone.to_scheduler_zone(kfp_cron, timezone, scheduler_timezone)
    _check_host(host)
    beam_options.check_parameter(params)
    if isinstance(max_concurrency, bool) or not isinstance(max_concurrency, int) \
            or max_concurrency < 1:
        raise ValueError("Received an invalid value for `max_concurrency`, expected a positive "
                         f"integer. Received: max_concurrency={max_concurrency!r}")
    with _package(source, compile_fn) as package:
        name = name or _pipeline_name(package)
        with api_errors(host, login, namespace):
            client = connect(client_factory, host, namespace, login)
            if check_backend:
                _check_backend(client, host, package)
            found = client.create_experiment(name=experiment or DEFAULT_EXPERIMENT,
                                             namespace=namespace)
            require(found.experiment_id, "the experiment", "experiment_id", found, host)
            created = client.create_recurring_run(
                experiment_id=found.experiment_id, job_name=name, cron_expression=kfp_cron,
                max_concurrency=max_concurrency, no_catchup=no_catchup,
                params=dict(params or {}), pipeline_package_path=str(package), enabled=enabled,
                service_account=service_account)
            require(created.recurring_run_id, "the new recurring run", "recurring_run_id",
                    created, host)
    return _schedule_info(created)


def server_version(client: kfp.Client) -> kfp_backends.BackendVersion | None:
    """The KFP backend version the server reports (its healthz ``tag_name``, which the
    generated client model drops), or None when it does not say or is not a release."""
    try:
        response = client._healthz_api.healthz_service_get_healthz(_preload_content=False)
        tag = json.loads(response.data).get("tag_name")
        return kfp_backends.parse(tag)
    except (AttributeError, ValueError, TypeError, kfp_server_api.ApiException):
        return None


def _check_backend(client: kfp.Client, host: str, package: Path) -> None:
    with package.open() as stream:
        needs = kfp_backends.required(list(yaml.safe_load_all(stream)))
    if needs <= kfp_backends.OLDEST:
        return
    server = server_version(client)
    if server is None:
        _log.info("the KFP API at %s does not report its version; not checked against the "
                  "%s this package needs", host, needs)
        return
    if server < needs:
        features = sorted(f.what for f in kfp_backends.features_used(
            list(yaml.safe_load_all(package.read_text()))) if f.since > server and not f.degrades)
        raise BackendTooOldError(
            f"the KFP backend at {host} is {server}, but {package.name} needs {needs} or newer "
            f"({'; '.join(features)}); recompile it for this backend: estflow compile PIPELINE "
            f"-o OUT.yaml --kfp-backend {server.major}.{server.minor}")


def list_schedules(host: str, experiment: str | None = None, *, namespace: str | None = None,
                   login: Login | None = None, client_factory: ClientFactory = Client) -> list[ScheduleInfo]:
    """The recurring runs on ``host``: all of them, or those of the named ``experiment``.

    Raises:
        SubmitError: unreachable API, an HTTP error, or no experiment of that name.
    """
    _check_host(host)
    found = []
    with api_errors(host, login, namespace):
        client = connect(client_factory, host, namespace, login)
        experiment_id = None
        if experiment:
            try:
                named = client.get_experiment(experiment_name=experiment, namespace=namespace)
            except ValueError as err:  # kfp: "No experiment is found with name ..."
                raise SubmitError(f"{err} (KFP API at {host})") from None
            require(named.experiment_id, f"the experiment {experiment!r}", "experiment_id",
                    named, host)
            experiment_id = named.experiment_id
        token = ""
        while True:
            page = client.list_recurring_runs(page_token=token, page_size=100,
                                              experiment_id=experiment_id, namespace=namespace)
            for recurring in page.recurring_runs or ():
                require(recurring.recurring_run_id, "a recurring run in the list",
                        "recurring_run_id", recurring, host)
                found.append(_schedule_info(recurring))
            token = page.next_page_token
            if not token:
                return found


def pause(host: str, schedule_id: str, *, namespace: str | None = None,
          login: Login | None = None, client_factory: ClientFactory = Client) -> ScheduleInfo:
    """Disable a recurring run (no new runs start; running ones go on). Returns its state."""
    return _set_enabled(host, schedule_id, False, namespace, login, client_factory)


def resume(host: str, schedule_id: str, *, namespace: str | None = None,
           login: Login | None = None, client_factory: ClientFactory = Client) -> ScheduleInfo:
    """Enable a paused recurring run. Returns its new state."""
    return _set_enabled(host, schedule_id, True, namespace, login, client_factory)


def delete(host: str, schedule_id: str, *, namespace: str | None = None,
           login: Login | None = None, client_factory: ClientFactory = Client) -> None:
    """Delete a recurring run (the runs it started stay)."""
    _check_host(host)
    with api_errors(host, login, namespace):
        connect(client_factory, host, namespace, login).delete_recurring_run(schedule_id)


def parse_params(items: Sequence[str]) -> dict[str, str]:
    """``["k=v", ...]`` (from ``--param``) as a dict; the value may itself contain ``=``.

    Values stay strings: KFP checks and converts them against the pipeline's parameter types.

    Raises:
        ValueError: an item has no ``=`` or an empty key, or a key repeats.
    """
    params: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ValueError(f"Received an invalid value for `--param`, expected KEY=VALUE. "
                             f"Received: --param {item!r}")
        if key in params:
            raise ValueError(f"parameter {key!r} is given twice (--param {key}=...)")
        params[key] = value
    return params


_connect = connect  # the tests' (and older callers') name


# --- talking to the API ------------------------------------------------------------------------

def _set_enabled(host: str, schedule_id: str, enabled: bool, namespace: str | None,
                 login: Login | None, client_factory: ClientFactory) -> ScheduleInfo:
    _check_host(host)
    with api_errors(host, login, namespace):
        client = connect(client_factory, host, namespace, login)
        if enabled:
            client.enable_recurring_run(schedule_id)
        else:
            client.disable_recurring_run(schedule_id)
        recurring = client.get_recurring_run(schedule_id)
        require(recurring.recurring_run_id, f"recurring run {schedule_id}", "recurring_run_id",
                recurring, host)
        return _schedule_info(recurring)


def _schedule_info(recurring: kfp_server_api.V2beta1RecurringRun) -> ScheduleInfo:
    trigger = recurring.trigger
    cron = trigger.cron_schedule.cron if trigger and trigger.cron_schedule else None
    # `status` is what the scheduler does; `mode` (the request's field) is the fallback.
    enabled = (recurring.status == "ENABLED" if recurring.status not in (None, "STATUS_UNSPECIFIED")
               else recurring.mode == "ENABLE")
    concurrency = recurring.max_concurrency
    return ScheduleInfo(schedule_id=recurring.recurring_run_id, name=recurring.display_name or "",
                        cron=cron, enabled=enabled, experiment_id=recurring.experiment_id,
                        max_concurrency=int(concurrency) if concurrency else None,
                        no_catchup=bool(recurring.no_catchup))


# --- packages ----------------------------------------------------------------------------------

@contextlib.contextmanager
def _package(source: PipelineSource, compile_fn: CompileFn | None) -> Iterator[Path]:
    """The compiled YAML for ``source``: itself, or a temporary file ``compile_fn`` writes."""
    if isinstance(source, (str, os.PathLike)) and Path(source).suffix in (".yaml", ".yml"):
        if not Path(source).is_file():
            raise FileNotFoundError(f"pipeline package not found: {source}")
        yield Path(source)
        return
    if compile_fn is None:
        raise ValueError("Received an invalid value for `source`, expected a compiled pipeline "
                         f".yaml/.yml (or pass compile_fn to compile it). Received: {source!r}")
    with tempfile.TemporaryDirectory(prefix="estflow-submit-") as tmp:
        path = Path(tmp) / "pipeline.yaml"
        compile_fn(source, str(path))
        yield path


def _pipeline_name(package: Path) -> str:
    """``pipelineInfo.name`` of a compiled package, after checking it parses as a PipelineSpec
    (so a wrong file fails here, with its name, instead of inside the client)."""
    try:
        with package.open() as stream:
            spec = next(iter(yaml.safe_load_all(stream)), None)
        parsed = json_format.ParseDict(spec, pipeline_spec_pb2.PipelineSpec())
    except (yaml.YAMLError, json_format.ParseError, AttributeError, TypeError) as err:
        raise ValueError(f"{package} is not a compiled KFP pipeline: "
                         f"{str(err).splitlines()[0]}") from None
    if not parsed.pipeline_info.name:
        raise ValueError(f"{package} is not a compiled KFP pipeline: no pipelineInfo.name")
    return parsed.pipeline_info.name


def _timestamp() -> str:
    return datetime.datetime.now().strftime("%Y-%m-%d %H-%M-%S")
