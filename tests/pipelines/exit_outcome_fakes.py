"""Helpers of ``test_exit_outcome.py``: user steps with a ``when`` (module-level, so a task could
import them by this module's name), a stand-in step that SIGKILLs its own process, and the
task details the KFP API (v2beta1, ``Run.run_details.task_details``) answers for a run of the
compiled taxi pipeline, as the API server builds them from the Argo workflow's nodes.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import NamedTuple

import estflow.dsl as ef
from tests.pipelines import kfp_local_fakes
from tests.pipelines.fake_kfp_api import task


class Check(NamedTuple):
    auc: float


@ef.step
def business_check(evaluation: ef.Input[ef.Evaluation], report: ef.Output[ef.Markdown]) -> Check:
    return Check(auc=0.0)


@ef.step(when=ef.result("business_check")["auc"] > 0.7)
def record(report: ef.Input[ef.Markdown], table: ef.Output[ef.Dataset]) -> None:
    pass


@ef.step(when=ef.blessed())
def announce(pushed: ef.Input[ef.Pushed]) -> None:
    pass


USER_STEPS = (business_check, record, announce)

# Appended to a stand-in step module (kfp_local_fakes writes them): the step named by the
# run's spec["kill"] logs that it started, then SIGKILLs its own process, so nothing of it
# (no exit code of its own, no executor output) is left to report.
_KILL = textwrap.dedent("""
    _stand_in_main = main

    def main(argv):
        import signal
        args = dict(zip(argv[::2], argv[1::2]))
        spec = json.loads(args["--spec"])
        if spec.get("kill") == NAME:
            with open(spec["log"], "a") as log:
                log.write(NAME + "\\n")
            os.kill(os.getpid(), signal.SIGKILL)
        return _stand_in_main(argv)
""")


def add_kill_switch(folder: Path) -> None:
    """Let every stand-in step of ``folder`` (compiled by kfp_local_fakes) be SIGKILLed."""
    for module in (folder / kfp_local_fakes.PACKAGE).glob("*.py"):
        if module.name not in ("__init__.py", "fingerprint.py"):
            module.write_text(module.read_text() + _KILL)


# The Argo nodes of a run of the compiled taxi pipeline while its report task runs (KFP's
# argocompiler: the entrypoint's root-driver and root DAG; the exit handler's DAG task
# exit-handler-1, whose exit lifecycle hook runs the report, Argo naming that node
# "exit-handler-1.onExit"; each container task a "<task>-driver" pod and a "<task>" DAG whose
# pod node is "executor"), as task details: display name -> state, in the API's RuntimeState.
WORKFLOW = "chicago-taxi-x7k2p"
STEPS = ("fingerprint", "ingest", "transform", "train", "evaluate", "push")


def task_details(states: dict[str, str], *, errors: dict[str, str] | None = None,
                 exit_handler: str = "SUCCEEDED") -> list[dict]:
    """The task details of a run whose steps ended in ``states`` (step -> RuntimeState; a step
    left out: SUCCEEDED), the report running."""
    errors = errors or {}
    details = [task(WORKFLOW, "RUNNING"), task("root-driver", "SUCCEEDED"),
               task("root", "RUNNING"), task("exit-handler-1-driver", "SUCCEEDED"),
               task("exit-handler-1", exit_handler)]
    for step in STEPS:
        state = states.get(step, "SUCCEEDED")
        details += [task(f"{step}-driver", "SUCCEEDED"),
                    task(step, state, error=errors.get(step), children=("executor",)),
                    task("executor", state, pod=f"{WORKFLOW}-system-container-impl-{step}")]
    details += [task("exit-handler-1.onExit", "RUNNING"), task("report-driver", "SUCCEEDED"),
                task("report", "RUNNING", children=("executor",)),
                task("executor", "RUNNING", pod=f"{WORKFLOW}-system-container-impl-report")]
    return details
