"""Following a KFP run to its end (:func:`wait`, re-exported by
:mod:`estflow.pipelines.kubeflow.submit`): its state changes as they happen, then the final state and,
when it failed, the failing tasks and their errors."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable

import kfp
import kfp_server_api

from estflow.pipelines.kubeflow.connection import Client
from estflow.pipelines.kubeflow.connection import Login
from estflow.pipelines.kubeflow.connection import SubmitError
from estflow.pipelines.kubeflow.connection import api_errors
from estflow.pipelines.kubeflow.connection import check_host
from estflow.pipelines.kubeflow.connection import connect
from estflow.pipelines.kubeflow.connection import require

__all__ = ["TERMINAL_STATES", "TaskFailure", "RunResult", "wait"]

# V2beta1RuntimeState values after which a run changes no more.
TERMINAL_STATES = ("SUCCEEDED", "SKIPPED", "FAILED", "CANCELED")


@dataclasses.dataclass(frozen=True)
class TaskFailure:
    """A task of a run that failed: its display name, its error message, its pod."""

    task: str
    message: str
    pod: str | None = None


@dataclasses.dataclass(frozen=True)
class RunResult:
    """How a run ended (:func:`wait`): its final state, its error, the tasks that failed."""

    run_id: str
    state: str
    error: str | None = None
    failed_tasks: tuple[TaskFailure, ...] = ()

    @property
    def succeeded(self) -> bool:
        return self.state == "SUCCEEDED"



def wait(host: str, run_id: str, *, namespace: str | None = None, poll_seconds: float = 10,
         timeout: float | None = None, echo: Callable[[str], None] = print,
         login: Login | None = None, client_factory: Callable[..., kfp.Client] = Client,
         sleep: Callable[[float], None] = time.sleep,
         clock: Callable[[], float] = time.monotonic) -> RunResult:
    """Follow run ``run_id`` until it ends: ``echo`` one line per change of its state (with
    the tasks running), then return how it ended.

    Raises:
        SubmitError: unreachable API, an HTTP error, an answer that is not the API's (a login
            page, a run without its id: :class:`ApiAnswerError`), or not finished within
            ``timeout`` seconds (the run goes on).
    """
    check_host(host)
    deadline = None if timeout is None else clock() + timeout
    last = None
    with api_errors(host, login, namespace):
        client = connect(client_factory, host, namespace, login)
    while True:
        with api_errors(host, login, namespace):  # each call alone: it keeps the client's
            # prints, not echo's
            run = client.get_run(run_id)
            require(run.run_id, f"run {run_id}", "run_id", run, host)
        state = str(run.state or "PENDING")
        running = sorted(t.display_name for t in _task_details(run)
                         if t.state == "RUNNING" and not t.child_tasks and t.display_name)
        line = f"run {run_id}: {state}" + (f" ({', '.join(running)})" if running else "")
        if line != last:
            echo(line)
            last = line
        if state in TERMINAL_STATES:
            return _run_result(run_id, run, state)
        if deadline is not None and clock() >= deadline:
            raise SubmitError(f"run {run_id} did not finish within {timeout:g}s (last state "
                              f"{state}; it goes on: {host.rstrip('/')}/#/runs/details/"
                              f"{run_id})")
        sleep(poll_seconds)


def _task_details(run: kfp_server_api.V2beta1Run) -> list:
    return list((run.run_details.task_details or []) if run.run_details else [])


def _run_result(run_id: str, run: kfp_server_api.V2beta1Run, state: str) -> RunResult:
    # The failing tasks: failed leaves (a failed DAG, such as the exit handler's, only
    # repeats its child's failure).
    failed = tuple(
        TaskFailure(t.display_name or t.task_id or "?",
                    (t.error.message if t.error and t.error.message else "no error message"),
                    t.pod_name or None)
        for t in _task_details(run) if t.state == "FAILED" and not t.child_tasks)
    error = run.error.message if run.error and run.error.message else None
    return RunResult(run_id=run_id, state=state, error=error, failed_tasks=failed)
