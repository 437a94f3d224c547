"""One run of a plan in progress (:class:`PlanRun`: what
:func:`~estflow.pipelines.local.runner.run_plan` keeps between steps): each step reused from
the step cache (:meth:`StepCache.reuse_or_run`) or run by its executor, its outputs linked
from ``<run>/<step>/<artifact>``, its record and its lines; and the choices around it: which
executor runs a step (:func:`executor_for`), which steps ``--no-cache`` runs again
(:func:`steps_after`), how many processes are prestarted (:data:`PRESTART_AHEAD`).
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from collections.abc import Collection
from pathlib import Path

from estflow.dsl.contracts import TFJOB
from estflow.dsl.contracts import Files
from estflow.dsl.contracts import candidate_artifact
from estflow.dsl.models import Candidates
from estflow.dsl.steps import RESULT_FILE
from estflow.dsl.steps import result_artifact
from estflow.pipelines.local import runs
from estflow.pipelines.local.cluster import ClusterExecutor
from estflow.pipelines.local.cluster import Topology
from estflow.pipelines.local.files import write_atomically
from estflow.pipelines.local.forks import fork_server_on
from estflow.pipelines.local.prestart import Prestarter
from estflow.pipelines.local.processes import Executor
from estflow.pipelines.local.processes import ProcessExecutor
from estflow.pipelines.local.processes import StepRun
from estflow.pipelines.local.schedule import THREAD_ENV
from estflow.pipelines.local.schedule import Budget
from estflow.pipelines.local.schedule import core_shares
from estflow.pipelines.local.schedule import run_at_once
from estflow.pipelines.local.step_cache import Claim
from estflow.pipelines.local.step_cache import StepCache
from estflow.pipelines.local.stopping import STOP_GRACE_S
from estflow.pipelines.local.stopping import StepFailed
from estflow.pipelines.local.warm import WARM_STEPS
from estflow.pipelines.local.warm import spawn_warm
from estflow.pipelines.plan import Plan
from estflow.pipelines.plan import PlannedStep

__all__ = ["PlanRun", "executor_for", "steps_after", "PRESTART_AHEAD"]


def executor_for(step: PlannedStep, topology: Topology,
                 prestarter: Prestarter | None = None) -> Executor:
    """How ``step`` runs: the train step (the one a TFJob runs on Kubeflow) as the processes
    of a distributed ``topology``; every other step, and train in one process, as one (its
    prestarted process when ``prestarter`` has one)."""
    if step.name == TFJOB.name and topology.distributed:
        return ClusterExecutor(topology)
    return ProcessExecutor(prestarter)


PRESTART_AHEAD = 2
"""At most this many steps' processes wait prestarted at once (``$ESTFLOW_PRESTART`` overrides
it; 0: none, every step starts plainly)."""


def _prestart_ahead(env: dict[str, str]) -> int:
    text = env.get("ESTFLOW_PRESTART", os.environ.get("ESTFLOW_PRESTART", ""))
    try:
        return max(0, int(text)) if text else PRESTART_AHEAD
    except ValueError:
        return PRESTART_AHEAD


def steps_after(plan: Plan, names: Collection[str]) -> set[str]:
    """``names`` and every step of ``plan`` that reads their outputs, transitively (what
    ``--no-cache STEP`` runs again)."""
    forced = set(names)
    for step in plan.steps:
        if any(producer in forced for _, producer in step.inputs):
            forced.add(step.name)
    return forced


def _metrics_of(paths: dict[str, str], step: PlannedStep) -> dict:
    """The scalars of ``step``'s summary file (its contract row's ``summary``, in its first
    output), which the run record keeps as the step's metrics."""
    found: dict = {}
    for artifact in step.outputs[:1] if step.summary else ():
        path = Path(paths[artifact]) / step.summary
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(data, dict):
            found.update({k: v for k, v in data.items()
                          if isinstance(v, (int, float, str, bool)) and k != "path"})
            if isinstance(data.get("metrics"), dict):
                found.update(data["metrics"])
    return found


def _link(link: Path, target: Path) -> None:
    """``link`` -> ``target`` (replacing what ``link`` was: a link or an old directory), as a
    path relative to the link's own folder, which is where the OS resolves it from: the link
    holds wherever the command runs, and in a copy of the whole ``estflow_runs`` folder."""
    if link.is_symlink() or link.is_file():
        link.unlink()
    elif link.is_dir():
        shutil.rmtree(link)
    link.parent.mkdir(parents=True, exist_ok=True)
    relative = os.path.relpath(os.path.realpath(target), os.path.realpath(link.parent))
    link.symlink_to(relative, target_is_directory=True)


def _as_linked(echo: Callable[[str], None], folder: Path,
               outputs: dict[str, Path]) -> Callable[[str], None]:
    """``echo`` with the step's output directories (in the cache, partial while it runs)
    shown as their links ``<run>/<step>/<artifact>``: what a line prints must exist after the
    step, and a partial directory is renamed when the step's entry is made."""
    moved = {str(path): str(folder / artifact) for artifact, path in outputs.items()
             if path != folder / artifact}
    if not moved:
        return echo

    def shown(line: str) -> None:
        for path, link in moved.items():
            line = line.replace(path, link)
        echo(line)
    return shown


def _shown_as_linked(err: StepFailed, folder: Path, outputs: dict[str, Path]) -> None:
    """A failed step's message with its output directories (partial, in the cache) shown as
    their links ``<run>/<step>/<artifact>``, as its lines were (e.g. ingest's
    ``rejected.jsonl``): the run's own paths, which stay while the run is there."""
    text = str(err)
    for artifact, path in outputs.items():
        if path != folder / artifact:
            text = text.replace(str(path), str(folder / artifact))
    if text != str(err):
        err.args = (text,)


@dataclasses.dataclass
class PlanRun:
    """One run of a plan in progress (what :func:`~estflow.pipelines.local.runner.run_plan` keeps
    between steps)."""

    plan: Plan
    workdir: Path
    echo: Callable[[str], None]
    env: dict[str, str]
    topology: Topology
    cache: StepCache | None
    forced: set[str]
    resume: bool
    record: runs.RunRecord | None
    keys: dict = dataclasses.field(default_factory=dict)
    source_digest: str | None = None  # the fingerprint step's; the ingest step checks it
    paths: dict[str, str] = dataclasses.field(default_factory=dict)
    fingerprints: dict[str, str] = dataclasses.field(default_factory=dict)
    seconds: dict[str, float] = dataclasses.field(default_factory=dict)
    reused: list[str] = dataclasses.field(default_factory=list)
    skipped: dict[str, str] = dataclasses.field(default_factory=dict)  # step -> why
    # steps not started because a step they wait for failed (running several at once)
    blocked: dict[str, str] = dataclasses.field(default_factory=dict)
    # the processes of the steps in flight (running several at once: Ctrl-C stops them all)
    processes: dict[str, subprocess.Popen] = dataclasses.field(default_factory=dict)
    lock: threading.RLock = dataclasses.field(default_factory=threading.RLock)
    prestarter: Prestarter | None = None
    claim: Claim | None = None
    # step -> TensorFlow threads, for steps sharing the cores with others (schedule.core_shares)
    threads: dict[str, int] = dataclasses.field(default_factory=dict)

    def share_cores(self, budget: Budget) -> None:
        """Give the steps that can run beside others their share of the cores (unless the
        user's environment sets TensorFlow's threads itself)."""
        if not any(name in {**os.environ, **self.env} for name in THREAD_ENV):
            self.threads = core_shares(self.plan, budget)

    @property
    def run_id(self) -> str | None:
        return self.record.run_id if self.record else None

    def save(self, *, quiet: bool = False) -> None:
        """Save the record; ``quiet``: when the run is failing already, a failure to save is
        ignored (the last record saved stays; once this process is gone it reads as
        interrupted, which ``--resume`` continues)."""
        if self.record is None:
            return
        try:
            with self.lock:  # steps running at once save the one record
                self.record.save()
        except OSError:
            if not quiet:
                raise

    def fingerprint(self, spec: Path) -> None:
        """Run the fingerprint step; keep each step's key."""
        step = self.plan.fingerprint
        out = self.workdir / step.name
        paths = {a: str(out / a) for a in step.outputs}
        for path in paths.values():
            Path(path).mkdir(parents=True, exist_ok=True)
        command = (sys.executable, "-m", step.module, *step.argv(str(spec), paths))
        start = time.monotonic()
        ProcessExecutor().execute(StepRun(step.name, command, out, self.echo, self.env))
        (output,) = step.outputs
        found = json.loads((Path(paths[output]) / Files.FINGERPRINTS).read_text())
        self.keys = found["steps"]
        self.source_digest = (found.get("source") or {}).get("digest")
        if self.record is not None:
            self.record.data.update(
                source=found.get("source"), served_before=found.get("served"),
                code=found.get("code"), estflow_code=found.get("estflow"),
                fingerprint_seconds=round(time.monotonic() - start, 3))

    def claim_entries(self) -> None:
        """Claim the cache entries of every cacheable step's key before deciding what to
        reuse: ``estflow runs prune`` leaves them until the run ends."""
        if self.cache is not None:
            self.claim = self.cache.claim(
                (step.name, info["key"]) for step in self.plan.steps
                if (info := self.keys.get(step.name)) is not None and info["cacheable"])

    def expected(self) -> list[tuple[str, str]]:
        """(name, module) of the steps expected to run in one process, in order: those
        without a completed cache entry (or forced, or not cacheable)."""
        found = []
        for step in self.plan.steps:
            if not isinstance(executor_for(step, self.topology), ProcessExecutor):
                continue
            info = self.keys.get(step.name)
            if (self.cache is not None and info is not None and info["cacheable"]
                    and step.name not in self.forced
                    and self.cache.reusable(step.name, info["key"])):
                continue
            found.append((step.name, step.module))
        return found

    def prestart(self, warm: bool = False) -> None:
        ahead = _prestart_ahead(self.env)
        if ahead:
            self.prestarter = Prestarter(self.expected(), self.env, limit=ahead, warm=warm,
                                         step_env={name: self._threads_env(name)
                                                   for name in self.threads},
                                         fork=fork_server_on(self.env))

    def leave_warm(self, seconds: float) -> None:
        """Warm processes for the next run: for the steps this run ran in a process of their
        own from train on (what a model change reruns; push aside: it imports next to
        nothing), at most :data:`WARM_STEPS`; the last ones of a plan without train."""
        names = [s.name for s in self.plan.steps]
        start = names.index(TFJOB.name) if TFJOB.name in names else 0
        ran = [(s.name, s.module) for s in self.plan.steps[start:]
               if s.name in self.seconds and s.warm
               and isinstance(executor_for(s, self.topology), ProcessExecutor)]
        left = spawn_warm(ran[-WARM_STEPS:] if start == 0 else ran[:WARM_STEPS], self.env,
                          seconds)
        if left:
            self.echo(f"Warm processes for the next run: {', '.join(left)} (their imports "
                      f"done; they wait up to {seconds:.0f}s; ESTFLOW_WARM=0 leaves none)")

    def run_at_once(self, spec: Path, budget: Budget) -> None:
        """Run the plan's steps, several at once where they do not wait for each other
        (:mod:`estflow.pipelines.local.schedule`); each line prefixed by its step."""
        index = {s.name: i for i, s in enumerate(self.plan.steps, start=1)}
        if self.threads:
            self.echo("Steps that can run at once share the cores: " + ", ".join(
                f"{name} {n} TensorFlow thread{'s' if n > 1 else ''}"
                for name, n in self.threads.items()))

        def install(echo: Callable[[str], None]) -> None:
            self.echo = echo

        stopped: list[str] = []
        try:
            run_at_once(self.plan, lambda step: self.step(index[step.name], step, spec),
                        budget=budget, echo=self.echo, install_echo=install,
                        block=self.block, stop_all=lambda: stopped.extend(self.stop_running()))
        except KeyboardInterrupt:
            if self.record is not None:
                for name in stopped:
                    self.record.step(name).update(status="interrupted")
            raise

    def block(self, step: PlannedStep, reason: str) -> None:
        """Record ``step`` as not started: a step it waits for failed."""
        self.blocked[step.name] = reason
        if self.prestarter is not None:
            self.prestarter.drop(step.name)
        if self.record is not None:
            rec = self.record.step(step.name)
            rec.clear()
            rec.update(status="skipped", reason=reason)
        self.echo(f"--- {step.name} not run: {reason}")
        self.save(quiet=True)

    def stop_running(self) -> list[str]:
        """Stop the processes of the steps in flight (Ctrl-C): each still running is sent
        SIGINT (a Ctrl-C at a terminal sent it already), then SIGTERM and SIGKILL if it does not
        leave within the grace periods a lone step gets; returns their steps' names. Their
        threads see the processes end (their output is read to its end there)."""
        with self.lock:
            procs = dict(self.processes)
        # a runner that ignores SIGINT (a background job of a non-interactive shell) started
        # its steps ignoring it too: they are sent SIGTERM (as a lone step is)
        first = (signal.SIGTERM if signal.getsignal(signal.SIGINT) is signal.SIG_IGN
                 else signal.SIGINT)
        for proc in procs.values():
            if proc.poll() is None:
                proc.send_signal(first)
        for proc in procs.values():
            for grace, then in zip(STOP_GRACE_S[1:], (signal.SIGTERM, signal.SIGKILL),
                                   strict=True):
                try:
                    proc.wait(timeout=grace)
                    break
                except subprocess.TimeoutExpired:
                    proc.send_signal(then)
        return list(procs)

    def _started(self, name: str) -> Callable[[subprocess.Popen], None]:
        def started(proc: subprocess.Popen) -> None:
            with self.lock:
                self.processes[name] = proc
        return started

    def skip_reason(self, step: PlannedStep) -> str | None:
        """Why ``step`` does not run (None: it runs): a step it waits for was skipped, or its
        ``when`` does not hold for the value the earlier step wrote."""
        for artifact, producer in step.inputs:
            if producer in self.skipped:
                return f"its input {artifact!r} was not written (step {producer!r} was skipped)"
        for name in step.after:
            if name in self.skipped:
                return f"it runs after step {name!r}, which was skipped"
        when = step.when
        if when is None:
            return None
        if when.step in self.skipped:
            return f"its condition {when} reads step {when.step!r}, which was skipped"
        gate = next((s for s in self.plan.steps if s.name == when.step), None)
        artifact, file = ((gate.result.artifact, gate.result.file) if gate and gate.result
                          else (result_artifact(when.step), RESULT_FILE))
        path = Path(self.paths.get(artifact, "")) / file
        try:
            found = json.loads(path.read_text())
        except (OSError, ValueError) as err:
            return f"its condition {when} could not be read ({path}: {err})"
        if when.key not in found:
            return f"its condition {when}: {when.step!r}'s result has no {when.key!r}"
        if when.holds(found[when.key]):
            return None
        return f"its condition {when} does not hold ({when.step}.{when.key} = " \
               f"{found[when.key]!r})"

    def skip(self, index: int, step: PlannedStep, reason: str) -> None:
        """Record ``step`` as skipped (its outputs unwritten: the steps reading them skip)."""
        self.skipped[step.name] = reason
        if self.prestarter is not None:
            self.prestarter.drop(step.name)
        if self.record is not None:
            rec = self.record.step(step.name)
            rec.clear()
            rec.update(status="skipped", reason=reason, seconds=0.0)
        self.echo(f"==> step {index}/{len(self.plan.steps)}: {step.name} skipped: {reason}")
        self.save()

    def step(self, index: int, step: PlannedStep, spec: Path) -> None:
        reason = self.skip_reason(step)
        if reason is not None:
            self.skip(index, step, reason)
            return
        info = self.keys.get(step.name)
        folder = self.workdir / step.name
        folder.mkdir(parents=True, exist_ok=True)
        spec_arg = str(spec)
        if info is not None:
            write_atomically(folder / "spec.json", info["spec"])
            spec_arg = str(folder / "spec.json")
        rec = self.record.step(step.name) if self.record else {}
        rec.clear()
        rec.update(status="running", started=runs.now(), key=info and info["key"],
                   parameters={"spec": f"{step.name}/spec.json" if info else Files.SPEC,
                               "options": dict(step.options)})
        self.echo(f"==> step {index}/{len(self.plan.steps)}: {step.name} ({step.description})")
        cacheable = (self.cache is not None and info is not None and info["cacheable"])
        if not cacheable:
            self._run(step, folder, spec_arg, {a: folder / a for a in step.outputs}, rec)
            return
        key = info["key"]

        def run(partial: Path) -> dict:
            self._run(step, folder, spec_arg, {a: partial / a for a in step.outputs}, rec)
            return {"run": self.run_id, "run_dir": str(self.workdir),
                    "seconds": round(self.seconds[step.name], 3), "outputs": info["outputs"]}

        entry, reused = self.cache.reuse_or_run(step.name, key, run,
                                                force=step.name in self.forced,
                                                fresh=not self.resume, say=self.echo)
        self._artifacts(step, folder, {a: entry.artifact(a) for a in step.outputs})
        if not reused:
            self._io(step, rec)
            self.save()
            return
        if self.prestarter is not None:
            self.prestarter.drop(step.name)
        self.reused.append(step.name)
        made = entry.info.get("run") or "an earlier run"
        rec.update(status="reused", reused_from=made, seconds=0.0, finished=runs.now(),
                   metrics=_metrics_of(self.paths, step))
        self._io(step, rec)
        self.echo(f"<== {step.name} reused: cache key {key[:12]}, made by run {made} in "
                  f"{entry.info.get('seconds', 0):.1f}s")
        self.save()

    def _artifacts(self, step: PlannedStep, folder: Path, where: dict[str, Path]) -> None:
        """Record where ``step``'s outputs are; ``<run>/<step>/<artifact>`` links to them."""
        for artifact, path in where.items():
            path.mkdir(parents=True, exist_ok=True)
            if path != folder / artifact:
                _link(folder / artifact, path)
            self.paths[artifact] = str(path)
            info = self.keys.get(step.name)
            if info is not None:
                self.fingerprints[artifact] = info["outputs"][artifact]

    def _io(self, step: PlannedStep, rec: dict) -> None:
        rec["inputs"] = {a: {"path": self.paths[a], "fingerprint": self.fingerprints.get(a)}
                         for a, _ in step.inputs}
        rec["outputs"] = {a: {"path": self.paths[a], "fingerprint": self.fingerprints.get(a)}
                          for a in step.outputs}

    def _env(self, step: PlannedStep) -> dict[str, str]:
        """The environment of ``step``'s process: the run's, with its share of the cores."""
        return {**self.env, **self._threads_env(step.name)}

    def _threads_env(self, name: str) -> dict[str, str]:
        if name not in self.threads:
            return {}
        return dict.fromkeys(THREAD_ENV, str(self.threads[name]))

    def _run(self, step: PlannedStep, folder: Path, spec_arg: str,
             outputs: dict[str, Path], rec: dict) -> None:
        self._artifacts(step, folder, outputs)
        self._io(step, rec)
        self.save()
        late = {"run": str(self.workdir)}
        info = self.keys.get(step.name)
        if info is not None and "model" in info["inputs"]:
            late["model_fingerprint"] = info["inputs"]["model"]
        model = self.plan.pipeline.model
        if info is not None and isinstance(model, Candidates):
            late["candidate_fingerprints"] = json.dumps({
                c: info["inputs"].get(candidate_artifact("model", c)) for c in sorted(model.models)
                if candidate_artifact("model", c) in info["inputs"]})
        if self.source_digest:
            late["source_digest"] = self.source_digest
        command = (sys.executable, "-m", step.module,
                   *step.argv(spec_arg, self.paths, late=late))
        if step.name in self.threads:
            rec["tf_threads"] = self.threads[step.name]
        start = time.monotonic()
        try:
            for attempt in range(step.retries + 1):
                try:
                    executor_for(step, self.topology, self.prestarter).execute(
                        StepRun(step.name, command, folder,
                                _as_linked(self.echo, folder, outputs), self._env(step),
                                on_start=self._started(step.name)))
                    break
                except StepFailed as err:
                    if attempt == step.retries:
                        raise
                    self.echo(f"--- {step.name} failed ({err}); retrying: attempt "
                              f"{attempt + 2} of {step.retries + 1}")
        except StepFailed as err:
            rec.update(status="failed", seconds=round(time.monotonic() - start, 3),
                       exit_code=getattr(err, "returncode", None), log=str(folder / "log.txt"))
            _shown_as_linked(err, folder, outputs)
            raise
        except KeyboardInterrupt:
            rec.update(status="interrupted", seconds=round(time.monotonic() - start, 3),
                       log=str(folder / "log.txt"))
            raise
        finally:
            with self.lock:
                self.processes.pop(step.name, None)
        self.seconds[step.name] = time.monotonic() - start
        rec.update(status="ran", finished=runs.now(),
                   seconds=round(self.seconds[step.name], 3), exit_code=0,
                   log=str(folder / "log.txt"), metrics=_metrics_of(self.paths, step))
        self.echo(f"<== {step.name} done in {self.seconds[step.name]:.1f}s")
