"""The two small tasks estflow adds around the steps, both lightweight components on the
estflow image that import no TensorFlow:

* ``report``, the exit handler: it runs however the steps ended and logs the run's final state,
  one of :data:`REPORT_STATES`: ``SUCCEEDED``, ``FAILED``, ``CANCELLED``, or ``UNKNOWN``. The
  backends name states differently: the open-source KFP backend (2.14+) passes the MLMD
  execution state of the exit handler's DAG (``COMPLETE``, ``CACHED``, ``FAILED``,
  ``CANCELED``, ...: ``backend/src/v2/driver/resolve.go``) and no error code or message (a
  TODO there); ``kfp.local`` passes ``SUCCEEDED``/``FAILED``; Vertex AI ``SUCCEEDED``,
  ``FAILED``, ``CANCELLED``. The report maps them (:data:`STATE_NAMES`) and logs the
  backend's own value as ``backend_state``. A state it cannot map (``RUNNING``: a task whose
  pod died before its launcher published, evicted, past its deadline or never started, leaves
  the exit handler's DAG RUNNING on every backend 2.14-2.17, since only a launcher updates it)
  is never reported as UNKNOWN: the report reads the run's tasks from the KFP API
  (:func:`outcome_from_kfp_api`) and reports ``FAILED`` (a task failed or canceled, or still
  running once the exit handler has ended, or the API cannot be read: the reason says which)
  or ``SUCCEEDED`` (every task ended). For a backend older than 2.14 (``estflow compile
  --kfp-backend 2.5``) the report takes no final status and logs ``UNKNOWN``: see the run's
  page, or ``estflow submit --wait``;
* ``<step>_placement``, for a step declared with ``Resources(placement_parameters=True)``: it
  turns the run parameters ``<step>_accelerator_type``, ``<step>_accelerator_count``,
  ``<step>_tpu_topology`` and ``<step>_node_pool`` into the accelerator resource, node
  selector and tolerations of the step's pod, with
  :meth:`estflow.dsl.placement.Placement.from_parameters` (the derivation the compiler uses
  for declared values), so one compiled pipeline targets a GPU, a TPU or CPUs per run.

Why a task: KFP resolves an accelerator type, node selector or toleration from a parameter only
as a whole value (kfp-kubernetes 2.17: ``set_accelerator_type``/``set_accelerator_limit`` take a
string channel, ``add_node_selector_json``/``add_toleration_json`` a dict/list channel;
``add_node_selector`` takes constants only). GPU and TPU need different node labels, so no single
pipeline parameter can be wired into the pod directly; a task computes them from one.
"""

from __future__ import annotations

import dataclasses
import inspect
import textwrap

from kfp import dsl
from kfp.dsl import python_component

from estflow.dsl.resources import Resources
from estflow.pipelines.kubeflow import components
from estflow.pipelines.plan import PlannedStep

__all__ = ["REPORT", "REPORT_STATES", "STATE_NAMES", "SKIPPED_FILE", "KFP_API", "SETTLE_ENV",
           "SETTLE_SECONDS", "RUN_ID_INPUT", "PlacementParameter", "placement_parameters",
           "build_report_component", "build_placement_component", "build_gated_component",
           "placement_task_name", "outcome_from_kfp_api"]

REPORT = "report"

# What the report logs as ``state``; the backend's own name of it is logged as backend_state.
REPORT_STATES = ("SUCCEEDED", "FAILED", "CANCELLED", "UNKNOWN")
# Backend state name -> report state (anything else: UNKNOWN). COMPLETE, CACHED, CANCELED: the
# MLMD execution states the open-source backend passes; SUCCEEDED, CANCELLED: kfp.local and
# Vertex AI.
STATE_NAMES = {"SUCCEEDED": "SUCCEEDED", "COMPLETE": "SUCCEEDED", "CACHED": "SUCCEEDED",
               "FAILED": "FAILED", "CANCELED": "CANCELLED", "CANCELLED": "CANCELLED"}

# Where the report reads the run's tasks when the backend passes a state it cannot map: the KFP
# API server's in-cluster address (KF_PIPELINES_ENDPOINT, kfp.Client's own variable, overrides
# it); how long it waits for the API to show every task ended (the persistence agent copies
# the Argo workflow's nodes into the API's task details a little after they change).
KFP_API = "http://ml-pipeline.kubeflow:8888"
SETTLE_ENV = "ESTFLOW_REPORT_SETTLE_SECONDS"
SETTLE_SECONDS = 120
# The report's input carrying the run's id (KFP's {{$.pipeline_job_uuid}}, resolved by the
# driver of 2.14+ and by kfp.local): the final status names the Argo workflow, not the run.
RUN_ID_INPUT = "run_id"

# What a gated task (see build_gated_component) writes in each output when its gate is False.
SKIPPED_FILE = "skipped.json"

# Output name -> type of the placement task, in the forms the KFP backend reads.
_PLACEMENT_OUTPUTS = (("resource", "str"), ("count", "str"), ("node_selector", "dict"),
                      ("tolerations", "list"))


@dataclasses.dataclass(frozen=True)
class PlacementParameter:
    """A run parameter of a step's placement: its pipeline name, the placement task's input
    name, its type and its default (the declared value). All are strings, the count too:
    ``estflow submit --param k=v`` passes strings, and the placement task validates them."""

    name: str
    input: str
    type: type
    default: str


def placement_parameters(step: str, resources: Resources) -> tuple[PlacementParameter, ...]:
    """The run parameters of ``step``'s placement (empty unless ``placement_parameters``)."""
    if not resources.placement_parameters:
        return ()
    accelerator = resources.accelerator
    values = (("accelerator_type", str, accelerator.type if accelerator else ""),
              ("accelerator_count", str, str(accelerator.count if accelerator else 1)),
              ("tpu_topology", str, (accelerator.tpu_topology or "") if accelerator else ""),
              ("node_pool", str, resources.node_pool or ""))
    return tuple(PlacementParameter(f"{step}_{name}", name, kind, default)
                 for name, kind, default in values)


def placement_task_name(step: str) -> str:
    """The KFP task name of ``step``'s placement task (its component function's name)."""
    return f"{step}-placement"


def build_placement_component(step: str, image: str, resources: Resources | None = None,
                              ) -> python_component.PythonComponent:
    """The placement task of ``step``; the declared ``gke_node_labels`` and free-form
    ``node_selector`` of ``resources`` are constants of its code."""
    return dsl.component(components.define(f"{step}_placement",
                                           _placement_source(step, resources or Resources())),
                         base_image=image, install_kfp_package=False)


def build_report_component(pipeline_name: str, image: str, *, final_status: bool = True,
                           ) -> python_component.PythonComponent:
    """The exit handler's task; ``final_status=False`` for a backend older than 2.14, which
    cannot pass ``PipelineTaskFinalStatus``."""
    source = _report_source(pipeline_name) if final_status else \
        _plain_report_source(pipeline_name)
    return dsl.component(components.define(REPORT, source), base_image=image,
                         install_kfp_package=False)


def build_gated_component(step: PlannedStep, gate: str, image: str, *, keyed: bool = False,
                          ) -> python_component.PythonComponent:
    """``step``'s component taking its gate's result as the bool input ``gate`` (``blessed``):
    when False it runs no step, logs why and writes :data:`SKIPPED_FILE` in each output (a KFP
    launcher uploads every output). For a KFP backend from 2.14 on (2.17 included), where a
    ``dsl.If`` group inside the exit handler leaves the exit handler's state RUNNING (before
    2.17: kubeflow/pipelines#11979; on 2.17 a false condition is created CANCELED and nothing
    updates the exit handler's DAG after it): the task then sits in the exit handler's DAG
    itself, and the report reads the run's real final state.

    Raises:
        ValueError: ``step`` returns a result (a skipped task would have none to return).
    """
    if step.result is not None:
        raise ValueError(f"Received a gated step with a result, expected none: {step.name} "
                         f"returns {step.result.key}")
    lines = components.render_source(step, keyed=keyed).split("\n")
    body = next(i for i, line in enumerate(lines) if line.startswith(")")) + 2  # after doc
    outputs = [*step.outputs, *(name for name, _ in components.ui_outputs(step))]
    message = f"estflow step {step.name}: skipped: {gate} is False"
    if step.skip_note:
        message += f" ({step.skip_note})"
    guard = [f"    if not {gate}:",
             "        import json",
             "        import os",
             f"        print({message!r})",
             f"        for skipped in ({''.join(o + ', ' for o in outputs)}):",
             "            os.makedirs(skipped.path, exist_ok=True)",
             f"            with open(os.path.join(skipped.path, {SKIPPED_FILE!r}), 'w') as f:",
             f"                json.dump({{'skipped': True, {gate!r}: False}}, f)",
             "        return"]
    source = "\n".join([lines[0], f"    {gate}: bool,", *lines[1:body], *guard, *lines[body:]])
    return dsl.component(components.define(step.name, source), base_image=image,
                         install_kfp_package=False)


def _placement_source(step: str, resources: Resources) -> str:
    outputs = ", ".join(f"({name!r}, {kind})" for name, kind in _PLACEMENT_OUTPUTS)
    doc = f"estflow: the {step} task's accelerator and node pool, chosen by run parameters."
    lines = [f"def {step}_placement(",
             "    accelerator_type: str,",
             "    accelerator_count: str,",
             "    tpu_topology: str,",
             "    node_pool: str,",
             f") -> NamedTuple('Outputs', [{outputs}]):",
             f"    {doc!r}",
             "    import json",
             "    from estflow.dsl.placement import Placement",
             "    placement = Placement.from_parameters(",
             "        accelerator_type, accelerator_count, tpu_topology, node_pool,",
             f"        prefix={step + '_'!r}, gke_node_labels={resources.gke_node_labels!r},",
             f"        extra_selector={dict(resources.node_selector)!r})",
             "    outputs = placement.to_outputs()",
             f"    print('estflow {step} placement: ' + json.dumps(outputs, sort_keys=True))",
             "    return tuple(outputs[name] for name in "
             f"{tuple(name for name, _ in _PLACEMENT_OUTPUTS)!r})",
             ""]
    return "\n".join(lines)


def outcome_from_kfp_api(run_id, pipeline_job, host, settle):
    """(state, reason, tasks) of run ``run_id`` (Argo workflow ``pipeline_job``) whose exit
    handler's state the backend passed as one the report cannot map (``RUNNING``): read from
    the run's task details in the KFP API at ``host`` (``RunServiceApi.run_service_get_run``,
    what ``kfp.Client.get_run`` calls); ``state`` is ``SUCCEEDED`` or ``FAILED``, never
    UNKNOWN. Embedded in the report task's code (the stdlib, kfp and kfp_server_api only; no
    global of this module).

    The API's tasks are the Argo workflow's nodes (``apiserver/server/api_converter.go``,
    ``toModelTasks``), states mapped to ``RuntimeState``: a pod that died without its launcher
    publishing is FAILED there even though MLMD still says RUNNING. Left out: the nodes that
    are still running because the report is (the workflow's own, ``root``, the exit hook
    ``<exit handler>.onExit``, ``report``, ``report-driver``), the ``executor`` pod nodes
    (their task's node carries their state) and retry attempts (``name(N)``: the retry node
    carries the outcome). FAILED: a task FAILED, CANCELED or CANCELING; one still RUNNING,
    PENDING or PAUSED ``settle`` seconds on (the exit handler has ended, so its pod is gone);
    no task listed; the API unreachable (an error answered for ``settle`` seconds) or refusing
    (HTTP 4xx). SUCCEEDED: every task ended otherwise.
    """
    import json
    import os
    import re
    import socket
    import time
    import urllib.parse

    why = "the backend passed no final state of the exit handler's tasks (see backend_state)"
    token = os.environ.get("KF_PIPELINES_SA_TOKEN_PATH",
                           "/var/run/secrets/kubeflow/pipelines/token")

    def described(err):  # (HTTP status or None, one line)
        status = getattr(err, "status", None)
        try:
            message = json.loads(err.body).get("message") or ""
        except Exception:  # noqa: BLE001 (no JSON body: not an HTTP answer)
            message = (str(err).strip().splitlines() or [""])[0]
        if isinstance(status, int):
            return status, f"HTTP {status} {getattr(err, 'reason', '')}: {message}"
        return None, f"{type(err).__name__}: {message}"

    def refused(status, error):
        hint = (" (multi-user Kubeflow: give the report's pod a ServiceAccount token for the "
                f"audience pipelines.kubeflow.org at {token}, or set "
                "KF_PIPELINES_SA_TOKEN_PATH)") if status in (401, 403) else ""
        return "FAILED", (f"{why}, and the KFP API at {host} refused to show run {run_id} "
                          f"({error}){hint}"), {}

    if not run_id:
        return "FAILED", why + ", and no run id to read the run's tasks with", {}
    address = urllib.parse.urlsplit(host)
    try:
        port = address.port or (443 if address.scheme == "https" else 80)
        socket.create_connection((address.hostname, port), timeout=10).close()
    except (OSError, ValueError) as err:
        return "FAILED", (f"{why}, and the KFP API at {host} cannot be reached to read run "
                          f"{run_id}'s tasks ({type(err).__name__}: {err})"), {}
    try:
        import kfp_server_api  # what kfp.Client.get_run calls, without its healthz retries
        config = kfp_server_api.Configuration(host=host)
        if os.path.isfile(token):  # as kfp.Client(credentials=...) sets it up
            from kfp.client import set_volume_credentials
            credentials = set_volume_credentials.ServiceAccountTokenVolumeCredentials(token)
            config.api_key["authorization"] = "placeholder"
            config.api_key_prefix["authorization"] = "Bearer"
            config.refresh_api_key_hook = credentials.refresh_api_key_hook
        runs = kfp_server_api.RunServiceApi(kfp_server_api.ApiClient(config))
    except Exception as err:  # noqa: BLE001 (any failure is the reason reported)
        return "FAILED", f"{why}, and no KFP API client could be made for {host} " \
            f"({type(err).__name__}: {err})", {}
    own = {pipeline_job, "root", "report", "report-driver", "executor"}
    ended = ("FAILED", "CANCELED", "CANCELING")
    waiting = ("RUNNING", "PENDING", "PAUSED")
    deadline = time.monotonic() + settle
    poll = min(5.0, max(0.05, settle / 10))
    said_last = None
    while True:
        error, tasks = None, {}
        try:
            run = runs.run_service_get_run(run_id=run_id, _request_timeout=30)
            details = (run.run_details.task_details if run.run_details else None) or []
        except Exception as err:  # noqa: BLE001
            status, error = described(err)
            if isinstance(status, int) and 400 <= status < 500:  # asking again won't do
                return refused(status, error)
            details = []
        for detail in details:
            name = detail.display_name or detail.task_id or "?"
            if name in own or re.search(r"\(\d+\)$|\.onExit$|\.hooks\.", name):
                continue
            state = str(detail.state or "RUNTIME_STATE_UNSPECIFIED")
            message = detail.error.message if detail.error and detail.error.message else ""
            if name not in tasks or state in ended or (
                    state in waiting and tasks[name][0] not in ended):
                tasks[name] = (state, message)
        failed = sorted(n for n, (state, _) in tasks.items() if state in ended)
        if failed:
            said = "; ".join(f"{n} {tasks[n][0]}" + (f": {tasks[n][1]}" if tasks[n][1] else "")
                             for n in failed)
            return "FAILED", f"{why}; the KFP API shows run {run_id}'s task(s) {said}", tasks
        stuck = sorted(n for n, (state, _) in tasks.items() if state in waiting)
        if tasks and not stuck and error is None:
            said = ", ".join(f"{n} {tasks[n][0]}" for n in sorted(tasks))
            return "SUCCEEDED", (f"{why}; the KFP API shows every task of run {run_id} ended "
                                 f"({said})"), tasks
        if time.monotonic() >= deadline:
            if error is not None:
                reason = (f"run {run_id}'s tasks could not be read from the KFP API at {host} "
                          f"({error})")
            elif not tasks:
                reason = f"the KFP API at {host} lists no task of run {run_id}"
            else:
                reason = (f"the KFP API shows run {run_id}'s task(s) {', '.join(stuck)} still "
                          f"{'/'.join(sorted({tasks[n][0] for n in stuck}))} {settle:g}s after "
                          "the exit handler ended: the pod is gone without reporting (evicted, "
                          "past its deadline, its image not pulled) or the API lags")
            return "FAILED", f"{why}, and {reason}", tasks
        said = error or "no task of the run"
        if stuck:
            said = (f"task(s) {', '.join(stuck)} still "
                    f"{'/'.join(sorted({tasks[n][0] for n in stuck}))}")
        if said != said_last:
            print(f"estflow report: the KFP API at {host} shows {said}; asking again until "
                  f"{settle:g}s have passed")
            said_last = said
        time.sleep(max(0.0, min(poll, deadline - time.monotonic())))


def _report_source(pipeline_name: str) -> str:
    doc = f"estflow: log how the run of pipeline {pipeline_name} ended (the exit handler)."
    headline = f"estflow pipeline {pipeline_name} finished: %s%s"
    resolver = inspect.getsource(outcome_from_kfp_api)
    start = resolver.index('"""')  # its docstring, in short: the long one is here
    resolver = (resolver[:start] + '"""The run\'s outcome read from the KFP API: see estflow\'s '
                'pipelines/kubeflow/tasks.py."""' + resolver[resolver.index('"""', start + 3) + 3:])
    resolver = textwrap.indent(textwrap.dedent(resolver), "    ")
    lines = [f"def {REPORT}(status: PipelineTaskFinalStatus, {RUN_ID_INPUT}: str = ''):",
             f"    {doc!r}",
             "    import json",
             "    import os",
             resolver.rstrip("\n"),
             f"    state = {STATE_NAMES!r}.get(str(status.state).upper())",
             f"    summary = {{'pipeline': {pipeline_name!r}, 'state': state,",
             "               'backend_state': status.state,",
             "               'pipeline_job': status.pipeline_job_resource_name,",
             "               'task': status.pipeline_task_name,",
             "               'error_code': status.error_code,",
             "               'error_message': status.error_message}",
             "    reason = status.error_message",
             "    if state is None:  # RUNNING, ...: a task ended without reporting; ask the API",
             f"        host = os.environ.get('KF_PIPELINES_ENDPOINT') or {KFP_API!r}",
             f"        settle = float(os.environ.get({SETTLE_ENV!r}) or {SETTLE_SECONDS!r})",
             "        state, reason, tasks = outcome_from_kfp_api(",
             f"            {RUN_ID_INPUT}, status.pipeline_job_resource_name, host, settle)",
             "        summary.update(state=state, reason=reason, run_id=" + RUN_ID_INPUT + ",",
             "                       kfp_api=host, tasks={n: s for n, (s, _) in tasks.items()})",
             f"    print({headline!r} % (state, ' (%s)' % reason if reason else ''))",
             "    print(json.dumps(summary, sort_keys=True))",
             ""]
    return "\n".join(lines)


def _plain_report_source(pipeline_name: str) -> str:
    doc = (f"estflow: log that the run of pipeline {pipeline_name} ended (the exit handler; "
           "this KFP backend passes no final state).")
    headline = (f"estflow pipeline {pipeline_name} finished: UNKNOWN (a KFP backend older than "
                "2.14 passes exit tasks no final state: see the run's page)")
    lines = [f"def {REPORT}():",
             f"    {doc!r}",
             "    import json",
             f"    print({headline!r})",
             f"    print(json.dumps({{'pipeline': {pipeline_name!r}, 'state': 'UNKNOWN'}}, "
             "sort_keys=True))",
             ""]
    return "\n".join(lines)
