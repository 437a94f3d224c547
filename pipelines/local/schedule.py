"""Which steps of a plan may run at once, and running them so on this machine.

A step waits for the steps writing its inputs, those its ``after`` names (the plan chains the
built-in steps so), its ``runs_if`` gate and its ``when``'s step (:func:`waits_for`). A plan in
which no two steps can ever be ready together (every training pipeline without user steps) runs
one step after another, as it always has. Otherwise :func:`run_at_once` starts every ready step
whose declared requests (:attr:`~estflow.pipelines.plan.PlannedStep.requests`: cpu, memory) fit
beside those running, within the machine's cores and memory or the limits given (``estflow run
--jobs N --memory 8Gi``); one step always runs, however large. Each line a step prints is
prefixed by its name.

When a step fails, the steps that do not need it go on and finish; those that wait for it are
not started (recorded ``skipped``, naming it), and the run then fails with the first failure:
``estflow run --resume`` runs what failed or never ran and reuses what finished. Ctrl-C stops
every step in flight (each as a lone step is stopped) before the run says it was interrupted.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable
from concurrent import futures
from decimal import Decimal

from estflow.pipelines.plan import Plan
from estflow.pipelines.plan import PlannedStep

__all__ = ["waits_for", "runs_one_at_a_time", "Budget", "run_at_once", "parse_memory",
           "core_shares", "THREAD_ENV"]


def waits_for(plan: Plan) -> dict[str, set[str]]:
    """Step name -> the names of the plan's steps it waits for."""
    names = {s.name for s in plan.steps}
    found: dict[str, set[str]] = {}
    for step in plan.steps:
        deps = {producer for _, producer in step.inputs} | set(step.after)
        if step.runs_if is not None:
            deps.add(step.runs_if)
        if step.when is not None:
            deps.add(step.when.step)
        found[step.name] = deps & names
    return found


def _upstream(plan: Plan) -> dict[str, set[str]]:
    """Step name -> every step it waits for, directly or not (a plan's steps come after the
    steps they wait for)."""
    deps = waits_for(plan)
    closure: dict[str, set[str]] = {}
    for step in plan.steps:
        closure[step.name] = set(deps[step.name])
        for dep in deps[step.name]:
            closure[step.name] |= closure.get(dep, set())
    return closure


def runs_one_at_a_time(plan: Plan) -> bool:
    """Whether no two steps of ``plan`` can be ready together: each step waits, directly or
    not, for the one before it."""
    closure = _upstream(plan)
    return all(before.name in closure[step.name]
               for before, step in zip(plan.steps, plan.steps[1:], strict=False))


THREAD_ENV = ("TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS")
"""What TensorFlow reads, as its process starts, for the size of its two thread pools."""


def core_shares(plan: Plan, budget: Budget) -> dict[str, int]:
    """Step name -> the TensorFlow threads its process gets (:data:`THREAD_ENV`), for each
    step that may run beside another step asking a whole core or more (its ``requests``).

    TensorFlow sizes its thread pools to every core of the machine, whatever else runs, so two
    training steps at once would each ask for all the cores (the tune step sizes its trials by
    the same rule). A step gets the machine's cores (or ``--jobs``) divided by the number of
    such steps that can run with it: itself and every other one that neither waits for it nor
    is waited for by it, directly or not. Steps that can run only alone, and light steps
    (under a core), keep TensorFlow's default."""
    before = _upstream(plan)
    heavy = [s.name for s in plan.steps if _millicores(s.requests[0]) >= 1000]
    cores = budget.cpu // 1000
    shares = {}
    for name in heavy:
        beside = 1 + sum(1 for other in heavy if other != name and other not in before[name]
                         and name not in before[other])
        if budget.jobs is not None:
            beside = min(beside, budget.jobs)
        if beside > 1:
            shares[name] = max(1, cores // beside)
    return shares


_CPU = re.compile(r"^(\d+(?:\.\d+)?)(m?)$")
_MEMORY = re.compile(r"^(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|K|M|G|T)?$")
_UNITS = {None: 1, "K": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "Ki": 2**10,
          "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}


def _millicores(text: str) -> int:
    match = _CPU.match(text.strip())
    if not match:
        return 1000
    value = Decimal(match.group(1))
    return int(value if match.group(2) else value * 1000)


def parse_memory(text: str) -> int:
    """Bytes of a Kubernetes memory quantity (``512Mi``, ``8Gi``, ``2G``, ``1000000``).

    Raises:
        ValueError: not such a quantity (the message names it).
    """
    match = _MEMORY.match(str(text).strip())
    if not match:
        raise ValueError(f"Received memory {text!r}, expected a quantity such as 512Mi, 8Gi "
                         "or 2G")
    return int(Decimal(match.group(1)) * _UNITS[match.group(2)])


def _machine_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 8 * 2**30


class Budget:
    """The cores and memory steps may take at once: ``jobs`` (default: the machine's cores)
    and ``memory`` bytes (default: the machine's)."""

    def __init__(self, jobs: int | None = None, memory: int | None = None) -> None:
        self.cpu = 1000 * (jobs or os.cpu_count() or 1)
        self.memory = memory or _machine_memory()
        self.jobs = jobs

    def fits(self, step: PlannedStep, running: list[PlannedStep]) -> bool:
        """Whether ``step`` may start beside ``running`` (always, when nothing runs)."""
        if not running:
            return True
        if self.jobs is not None and len(running) >= self.jobs:
            return False
        cpu = sum(_millicores(s.requests[0]) for s in (*running, step))
        memory = sum(_memory(s.requests[1]) for s in (*running, step))
        return cpu <= self.cpu and memory <= self.memory


def _memory(text: str) -> int:
    try:
        return parse_memory(text)
    except ValueError:
        return 2**30


class _Prefixed:
    """An ``echo`` prefixing each line with the step the calling thread runs."""

    def __init__(self, echo: Callable[[str], None], width: int) -> None:
        self.echo, self.width = echo, width
        self.local = threading.local()
        self.lock = threading.Lock()

    def __call__(self, line: str) -> None:
        name = getattr(self.local, "step", None)
        with self.lock:
            self.echo(line if name is None else f"{name:<{self.width}} | {line}")


def run_at_once(plan: Plan, run_step: Callable[[PlannedStep], None], *, budget: Budget,
                echo: Callable[[str], None], install_echo: Callable[[Callable[[str], None]], None],
                block: Callable[[PlannedStep, str], None], stop_all: Callable[[], None]) -> None:
    """Run ``plan``'s steps, each ready one at once when ``budget`` allows.

    Args:
        run_step: runs one step to its end (raising when it fails); called in a thread.
        budget: how many steps fit at once.
        echo: where the run's lines go; ``install_echo`` makes the run's steps write through
            a prefixing one while they run (and puts ``echo`` back after).
        block: records a step not started because a step it waits for failed (the reason).
        stop_all: stops every step process in flight (Ctrl-C).

    Raises:
        the first failure (in plan order), once every step that could run has ended;
        KeyboardInterrupt after stopping the steps in flight.
    """
    deps = waits_for(plan)
    prefixed = _Prefixed(echo, max(len(s.name) for s in plan.steps))
    install_echo(prefixed)
    pending = list(plan.steps)
    running: dict[futures.Future, PlannedStep] = {}
    done: set[str] = set()
    failed: dict[str, BaseException] = {}
    not_run: set[str] = set()

    def work(step: PlannedStep) -> None:
        prefixed.local.step = step.name
        try:
            run_step(step)
        finally:
            prefixed.local.step = None

    pool = futures.ThreadPoolExecutor(max_workers=len(plan.steps),
                                      thread_name_prefix="estflow-step")
    try:
        while pending or running:
            for step in list(pending):
                stopped = sorted(deps[step.name] & (set(failed) | not_run))
                if stopped:
                    pending.remove(step)
                    not_run.add(step.name)
                    cause = stopped[0]
                    block(step, f"it waits for step {cause!r}, which "
                          f"{'failed' if cause in failed else 'did not run'}")
            for step in list(pending):
                if deps[step.name] <= done and budget.fits(step, list(running.values())):
                    pending.remove(step)
                    running[pool.submit(work, step)] = step
            if not running:
                break
            finished, _ = futures.wait(running, return_when=futures.FIRST_COMPLETED)
            for future in finished:
                step = running.pop(future)
                error = future.exception()
                if error is None:
                    done.add(step.name)
                else:
                    failed[step.name] = error
    except KeyboardInterrupt:
        stop_all()
        futures.wait(running)
        raise
    finally:
        pool.shutdown(wait=True)
        install_echo(echo)
    if failed:
        first = next(s.name for s in plan.steps if s.name in failed)
        raise failed[first]
