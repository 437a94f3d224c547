"""The local runner (the embedded default of ``estflow run``): the Plan's steps, in order, each
as a subprocess running the same entry point a Kubeflow task runs.

A subprocess per step keeps steps isolated the way containers are (a step that crashes at
interpreter exit, as Beam can, cannot take the runner down), streams each step's progress live,
and means the runner itself never imports TensorFlow or Beam.

Caching. A plan's fingerprint step runs first (``estflow.components.fingerprint``, a fraction
of a second): it keys every step by what it reads (:mod:`estflow.dsl.fingerprints`). A step
whose key has a completed entry in the step cache (:mod:`estflow.pipelines.local.step_cache`) is
reused, not run; one that runs writes into the cache, and the entry appears when it succeeds.
Each step gets only the part of the spec its key covers (``<run>/<step>/spec.json``). Push has
side effects and always runs (it publishes nothing when the served version has the same model
fingerprint). ``no_cache`` runs steps again (and the steps after them that read their
outputs).

Layout of a run: ``<workdir>/run.json`` (the record, :mod:`estflow.pipelines.local.runs`),
``<workdir>/pipeline.json`` (the spec), ``<workdir>/<step>/{spec.json,log.txt}`` and
``<workdir>/<step>/<artifact>``, a link to the artifact in the cache (a directory for a plan
without a fingerprint step, e.g. ``estflow preprocess``).

How a step runs is an executor's job (:mod:`estflow.pipelines.local.processes`,
:mod:`estflow.pipelines.local.cluster`); one is picked per step (:func:`executor_for`): one
process, or, for the train step of a multi-worker :class:`Topology` (``estflow run --workers
N``, or a declared ``RunConfig.cluster``), one process per TF_CONFIG task on localhost ports.
A run in progress, step by step, is a :class:`~estflow.pipelines.local.plan_run.PlanRun`; the
cache's protocol (reuse a whole entry, else run into its partial directory and commit) is
:meth:`~estflow.pipelines.local.step_cache.StepCache.reuse_or_run`.

Before any step, :func:`run_local` checks a local CSV source's header against the declaration
(:mod:`estflow.pipelines.data_check`). Ctrl-C stops the running step's process and raises
:class:`RunInterrupted`, which says what was kept (the run, the last checkpoint).
``estflow run --resume`` continues a failed or interrupted run as it was declared: finished steps
are reused, and the stopped step continues in its partial cache directory (training from its
last checkpoint). When the pipeline file's declaration is no longer the run's
(``pipeline.json``), :func:`run_local` refuses (:class:`DeclarationChanged`, naming the fields):
resuming would run the old declaration again, and a new run of the file reuses every step
whose inputs did not change.

Where things go: the data follows the pipeline file (a relative source path is read from its
directory: data ships with the declaration); the run store (``ESTFLOW_HOME``, default
``./estflow_runs``) and a relative ``PushTarget.base_path`` follow the directory ``estflow
run`` starts in (outputs belong to the workspace, never to the folder a pipeline file or an
installed example module lives in). The push path is resolved once and the run's spec records
it absolute. A run says where they are when they are new (:func:`where_things_go`), and names
the run stores nearby that hold this pipeline's earlier runs.

Prestarted processes. Once the step keys are known, the runner knows which steps will run (those
without a completed cache entry; push always). Their processes are started ahead, one
importing at a time (:class:`~estflow.pipelines.local.prestart.Prestarter`), so TensorFlow's and
Beam's imports overlap the work of the steps before them: each step still runs as its own
``python -m <module> ARGS`` process, handed its arguments when its turn comes and its inputs
exist. A prestarted process never used (its step reused after all, a failure, Ctrl-C) is
killed before :func:`run_plan` returns. ``ESTFLOW_PRESTART=N``: at most N waiting at once
(default :data:`~estflow.pipelines.local.plan_run.PRESTART_AHEAD`); 0 turns prestarting off.
The steps after the first are forked from a fork server that imported their libraries once
for the run (:mod:`~estflow.pipelines.local.forks`; ``ESTFLOW_FORK=0`` turns it off).

Warm processes (``ESTFLOW_WARM=SECONDS``; by default only for a run at a terminal, see
:data:`~estflow.pipelines.local.warm.WARM_ENV`): a run that succeeds leaves, for the steps
from train on that it ran (push aside, at most :data:`~estflow.pipelines.local.warm.WARM_STEPS`),
a process that has imported the step's libraries and waits up to SECONDS for the next run, in
a session of its own. The next run whose Python, estflow code and import environment (``TF_*``,
``PYTHON*``, ...) are the same takes it instead of prestarting one: a run where only the model
changed no longer waits for TensorFlow to load. Each is used once; one not taken in time
leaves by itself.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import re
import time
from collections.abc import Callable
from collections.abc import Collection
from importlib import metadata
from pathlib import Path

from estflow.dsl import fingerprints
from estflow.dsl.checks import select_span
from estflow.dsl.checks import select_window
from estflow.dsl.checks import span_of
from estflow.dsl.contracts import CANDIDATES_FILE
from estflow.dsl.contracts import PUSH
from estflow.dsl.contracts import TFJOB
from estflow.dsl.contracts import TUNE_STUDIES
from estflow.dsl.contracts import TUNE_STUDY_ENV
from estflow.dsl.contracts import Files
from estflow.dsl.pipeline import Pipeline
from estflow.pipelines import data_check
from estflow.pipelines.loader import LoadedPipeline
from estflow.pipelines.local import runs
from estflow.pipelines.local.cluster import Topology
from estflow.pipelines.local.cluster import topology_for
from estflow.pipelines.local.files import write_atomically
from estflow.pipelines.local.plan_run import PlanRun
from estflow.pipelines.local.plan_run import executor_for
from estflow.pipelines.local.plan_run import steps_after
from estflow.pipelines.local.schedule import Budget
from estflow.pipelines.local.schedule import runs_one_at_a_time
from estflow.pipelines.local.step_cache import StepCache
from estflow.pipelines.local.stopping import StepFailed
from estflow.pipelines.local.warm import warm_seconds
from estflow.pipelines.plan import Plan
from estflow.pipelines.plan import build_plan

__all__ = ["StepFailed", "RunnerFailed", "RunInterrupted", "RunResult", "Topology",
           "topology_for", "executor_for", "run_local", "run_plan", "default_workdir",
           "last_checkpoint", "pin_push_target", "steps_after", "DeclarationChanged",
           "declaration_changes", "where_things_go"]


@dataclasses.dataclass(frozen=True)
class RunResult:
    """What a run made: its directory, each artifact's path, the seconds of each step that
    ran, the steps reused from the cache, and its record (None for a plan run without one)."""

    workdir: Path
    artifacts: dict[str, Path]
    seconds: dict[str, float]
    reused: tuple[str, ...] = ()
    record: runs.RunRecord | None = None
    skipped: dict[str, str] = dataclasses.field(default_factory=dict)  # step -> why
    order: tuple[str, ...] = ()  # the plan's steps, in plan order (steps may finish in any)

    def read(self, artifact: str, file: str) -> dict:
        return json.loads((self.artifacts[artifact] / file).read_text())

    @property
    def model_delivered(self) -> bool:
        """Whether the run did what it is for: the model was pushed or is already the served
        version (with a push target), or blessed (without one; no blessing file: blessed)."""
        if "pushed" in self.artifacts:
            pushed = self.read("pushed", Files.PUSH_RESULT)
            return bool(pushed.get("pushed", True) or pushed.get("already_served"))
        evaluation = self.artifacts.get("evaluation")
        if evaluation is None or not (evaluation / Files.BLESSING).is_file():
            return True
        return bool(self.read("evaluation", Files.BLESSING)["blessed"])


class RunnerFailed(StepFailed):
    """The runner could not write its own files (the run record, a cache entry, a link, a
    spec, a step's log), e.g. on a full disk: ``step`` is the step it was at (None: none),
    ``error`` the OS error, naming the file. The run stops as after a failed step (its last
    saved record continues with ``--resume``)."""

    def __init__(self, step: str | None, error: OSError) -> None:
        where = f"step {step!r} failed" if step else "the runner failed"
        super().__init__(f"{where}: the runner could not write its files: {error}")
        self.step, self.error = step, error


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C stopped a run: ``step`` (the one running) was stopped; ``done`` lists the steps
    that had finished, whose outputs stay under ``workdir`` (``run_id``: the run's id, what
    ``--resume`` takes; None for a plan run without a record)."""

    def __init__(self, workdir: Path, step: str, done: tuple[str, ...],
                 run_id: str | None = None) -> None:
        super().__init__(f"interrupted during step {step!r}")
        self.workdir, self.step, self.done, self.run_id = workdir, step, done, run_id

    def last_checkpoint(self) -> Path | None:
        """The train step's newest checkpoint under ``workdir`` (None: none yet)."""
        (model,) = TFJOB.outputs
        return last_checkpoint(self.workdir / TFJOB.name / model / Files.CHECKPOINTS)


def last_checkpoint(directory: Path) -> Path | None:
    """The newest checkpoint in a model directory: what its ``checkpoint`` state file names,
    else the ``ckpt-N.index`` with the highest N (None: none)."""
    state = directory / "checkpoint"
    if state.is_file():
        match = re.search(r'^model_checkpoint_path:\s*"(.*)"', state.read_text(), re.M)
        if match:
            path = Path(match.group(1))
            return path if path.is_absolute() else directory / path
    steps = [(int(m.group(1)), p) for p in directory.glob("*.index")
             if (m := re.search(r"-(\d+)\.index$", p.name))]
    return max(steps)[1].with_suffix("") if steps else None


_ONE_PROCESS = Topology()


def default_workdir(pipeline: Pipeline) -> Path:
    """A new run directory ``<ESTFLOW_HOME>/<pipeline>/<timestamp>`` (created)."""
    return runs.new_run_dir(pipeline.name)


def pin_push_target(pipeline: Pipeline, cwd: Path | None = None) -> Pipeline:
    """``pipeline`` with a relative local ``PushTarget.base_path`` made absolute against
    ``cwd`` (default: the current directory), the one place local runs resolve it."""
    push = pipeline.push
    if push is None or "://" in push.base_path or os.path.isabs(push.base_path):
        return pipeline
    base = str((cwd or Path.cwd()) / push.base_path)
    return dataclasses.replace(pipeline, push=dataclasses.replace(push, base_path=base))


class DeclarationChanged(ValueError):
    """``--resume`` of a run whose pipeline file declares something else now: ``record`` is
    the run, ``file`` the pipeline file, ``changes`` the spec fields that differ (as
    :func:`runs.spec_changes` names them). Resuming would run the old declaration again (the
    run's ``pipeline.json``); a new run of the file is what helps."""

    def __init__(self, record: runs.RunRecord, file: Path | str, changes: list[str]) -> None:
        shown = ", ".join(changes[:6]) + (f" and {len(changes) - 6} more"
                                           if len(changes) > 6 else "")
        super().__init__(f"the pipeline changed since run {record.run_id} ({shown}): "
                         "--resume continues a run as it was declared "
                         f"({record.run_dir / Files.SPEC}), so it would run the old "
                         "declaration again")
        self.record, self.file, self.changes = record, file, changes


def _as_recorded_span(current: Pipeline, recorded: Pipeline) -> Pipeline:
    """``current`` reading the span(s) the recorded run read, when its source declares spans
    (a run's spec records the span it read; the file has the ``{span:FORMAT}`` placeholder)."""
    source, read = getattr(current, "source", None), getattr(recorded, "source", None)
    if getattr(source, "spans", None) is None or read is None:
        return current
    try:
        selected = getattr(getattr(read, "spans", None), "selected", None)
        if selected:
            return dataclasses.replace(current, source=select_window(source, selected))
        value = span_of(source.path, getattr(read, "path", ""))
        if value is not None:
            return dataclasses.replace(current, source=select_span(source, value))
    except ValueError:  # DslError: not a span of this source (a change, then)
        pass
    return current


def declaration_changes(current: Pipeline, recorded: Pipeline) -> list[str]:
    """The spec fields where ``current`` (the pipeline file now, its push target pinned as the
    run pinned it) differs from ``recorded`` (the run's ``pipeline.json``), e.g.
    ``['label.dtype']``; [] when the declaration is the run's."""
    current = _as_recorded_span(current, recorded)
    before, now = json.loads(recorded.to_json()), json.loads(current.to_json())
    if before == now:
        return []
    paths = [path or "(the whole spec)" for path, _, _ in runs.spec_changes(before, now)]
    return [p for p in paths  # a field, not also each of its items
            if not any(p != q and p.startswith((q + ".", q + "[")) for q in paths)]


def _stores_with(name: str, starts: list[Path], skip: Path) -> list[tuple[Path, list]]:
    """The run stores (``<dir>/estflow_runs``, ``dir`` one of ``starts`` or above it) other
    than ``skip`` that hold runs of pipeline ``name``, with those runs (oldest first)."""
    seen, found = {skip}, []
    for start in starts:
        for folder in (start, *start.parents):
            store = folder / runs.DEFAULT_HOME
            if store in seen:
                continue
            seen.add(store)
            if (store / name).is_dir():
                with contextlib.suppress(OSError, ValueError):
                    records = runs.all_runs(name, root=store)
                    if records:
                        found.append((store, records))
    return found


def where_things_go(pipeline: Pipeline, pipeline_file: Path | str | None = None, *,
                    resumed: bool = False) -> list[str]:
    """What a run says, before it starts, about where its outputs go: the run store when it
    does not exist yet (absolute: it follows the current directory or ``ESTFLOW_HOME``), the
    run stores nearby (around the current directory and the pipeline file) holding this
    pipeline's earlier runs when this store holds none, and a local push target with no model
    under it yet, with where earlier runs pushed when they pushed elsewhere."""
    store = runs.home().absolute()
    lines = []
    if not store.exists():
        lines.append(f"run store: {store} (new: runs of this pipeline from other directories "
                     "are not reused here; it follows the current directory, or "
                     "ESTFLOW_HOME)")
    elsewhere: list[tuple[Path, list]] = []
    if not resumed and not any((store / pipeline.name).glob(f"*/{Files.RUN_RECORD}")):
        starts = [Path.cwd()]
        if pipeline_file is not None:
            starts.append(Path(pipeline_file).absolute().parent)
        elsewhere = _stores_with(pipeline.name, starts, store)
        for other, records in elsewhere[:2]:
            count = f"{len(records)} earlier run" + ("s" if len(records) > 1 else "")
            lines.append(f"  {count} of {pipeline.name!r} {'are' if len(records) > 1 else 'is'} "
                         f"in {other} "
                         f"(the last {records[-1].run_id}): to reuse their steps, run from "
                         f"{other.parent} or set ESTFLOW_HOME={other}")
    push = pipeline.push
    if push is not None and "://" not in push.base_path:
        target = Path(push.base_path) / push.model_name
        if not target.exists():
            lines.append(f"push target: {target} (new: no version of {push.model_name!r} there "
                         "yet; a relative PushTarget.base_path follows the current directory)")
            pushed = {str(Path(r.data[PUSH.name]["path"]).parent) for _, records in elsewhere
                      for r in records if (r.data.get(PUSH.name) or {}).get("path")}
            pushed.discard(str(target))
            if pushed:
                lines.append(f"  earlier runs of {pipeline.name!r} pushed to "
                             f"{', '.join(sorted(pushed))}")
    return lines


def run_plan(plan: Plan, workdir: Path, *, echo: Callable[[str], None] = print,
             env: dict[str, str] | None = None, topology: Topology = _ONE_PROCESS,
             cache: StepCache | None = None, no_cache: Collection[str] = (),
             resume: bool = False, record: runs.RunRecord | None = None,
             budget: Budget | None = None) -> RunResult:
    """Run every step of ``plan`` under ``workdir``; raise :class:`StepFailed` on the first
    failure (its output stays in ``<workdir>/<step>/log.txt``), :class:`RunInterrupted` on
    Ctrl-C (the running step's process stopped first). The train step runs as the processes
    of ``topology``.

    Args:
        cache: reuse steps from (and add them to) this step cache; None: every step runs,
            writing into ``<workdir>/<step>/<artifact>``.
        no_cache: step names to run even when cached (with the steps reading their outputs).
        resume: continue the cache's partial outputs of a stopped run (training from its
            last checkpoint) instead of starting those steps afresh.
        record: the run's record, updated as the steps go.
        budget: the cores and memory steps may take at once (default: the machine's); steps
            that do not wait for each other run at once within it (:mod:`._schedule`). A plan
            whose steps each wait for the one before runs them in order.
    """
    spec = workdir / Files.SPEC
    env = dict(env or {})
    if cache is not None and plan.pipeline.tune is not None:  # searches kept beside the cache
        env.setdefault(TUNE_STUDY_ENV, str(cache.root.parent / TUNE_STUDIES))
    run = PlanRun(plan, workdir, echo, env, topology, cache,
               steps_after(plan, no_cache), resume, record)
    step = plan.fingerprint or (plan.steps[0] if plan.steps else None)
    at: str | None = None  # the step the runner is at (what a failure to write names)
    warm = warm_seconds(run.env)
    try:
        workdir.mkdir(parents=True, exist_ok=True)
        write_atomically(spec, plan.pipeline.to_json())
        if plan.fingerprint is not None:
            at = plan.fingerprint.name
            run.fingerprint(spec)
            run.claim_entries()
        budget = budget or Budget()
        at_once = not (budget.jobs == 1 or runs_one_at_a_time(plan))
        if at_once:
            run.share_cores(budget)
        run.prestart(warm=warm > 0)
        if not at_once:
            for index, step in enumerate(plan.steps, start=1):
                at = step.name
                run.step(index, step, spec)
        else:
            at = None
            run.run_at_once(spec, budget)
        at = None
        if warm > 0:
            run.leave_warm(warm)
    except KeyboardInterrupt:
        run.save(quiet=True)
        done = tuple(s.name for s in plan.steps
                     if s.name in run.seconds or s.name in run.reused or s.name in run.skipped)
        stopped = ", ".join(s.name for s in plan.steps
                            if run.record is not None and s.name not in done
                            and run.record.step(s.name).get("status") == "interrupted")
        raise RunInterrupted(workdir, stopped or (step.name if step else ""), done,
                             run.run_id) from None
    except StepFailed as err:
        run.save(quiet=True)
        err.run_id, err.workdir = run.run_id, workdir
        raise
    except OSError as err:  # the runner's own write (a full disk): the run fails at that step
        if run.record is not None and at in run.record.data["steps"]:
            run.record.step(at).update(status="failed", error=str(err))
        run.save(quiet=True)
        failed = RunnerFailed(at, err)
        failed.run_id, failed.workdir = run.run_id, workdir
        raise failed from err
    finally:
        if run.prestarter is not None:
            run.prestarter.close()
        if run.claim is not None:
            run.claim.release()
    return RunResult(workdir, {k: Path(v) for k, v in run.paths.items()}, run.seconds,
                     tuple(run.reused), record, dict(run.skipped),
                     tuple(s.name for s in plan.steps))


def _estflow_version() -> str:
    try:
        return metadata.version("estflow")
    except metadata.PackageNotFoundError:
        return "unknown"


def run_local(loaded: LoadedPipeline, workdir: str | None = None, *,
              echo: Callable[[str], None] = print, workers: int | None = None,
              no_cache: Collection[str] | bool = (),
              resume: runs.RunRecord | None = None, jobs: int | None = None,
              memory: int | None = None) -> RunResult:
    """Run a loaded pipeline end to end on this machine and print a summary.

    Args:
        workdir: the run's directory (default: a new ``<ESTFLOW_HOME>/<pipeline>/<run id>``).
        workers: train with this many worker processes (default: the declared
            ``run_config.cluster``, else one process).
        no_cache: steps to run even when cached (and the steps after them); True: all.
        resume: a failed or interrupted run to continue (:func:`runs.resumable_run`): its
            directory, record and recorded spec; finished steps are reused, the stopped one
            continues where it was (training from its last checkpoint).
        jobs, memory: steps that do not wait for each other run at once, within this many
            cores (default: the machine's) and bytes of memory (default: the machine's), by
            the cpu and memory each step requests; ``jobs=1``: one step at a time.

    Raises:
        ValueError: ``workers`` does not fit the pipeline's strategy.
        DeclarationChanged: (a ValueError) ``resume`` of a run whose declaration the
            pipeline file no longer has (checked before anything is written).
        DslErrors: the header of the local CSV data does not match the declaration (checked
            before any step runs).
        StepFailed: a step failed (its ``run_id`` says which run).
        RunInterrupted: Ctrl-C.
    """
    pipeline = pin_push_target(loaded.pipeline)
    if resume is not None:
        recorded = Pipeline.from_json((resume.run_dir / Files.SPEC).read_text())
        started_in = resume.data.get("cwd")  # where the run pinned its push target
        changes = declaration_changes(
            pin_push_target(loaded.pipeline, Path(started_in)) if started_in else pipeline,
            recorded)
        if changes:
            raise DeclarationChanged(resume, loaded.file, changes)
        pipeline = recorded
    topology = topology_for(pipeline, workers)
    data_check.check_local_source(pipeline, loaded.local_source_root)
    plan = build_plan(pipeline, source_root=loaded.local_source_root)
    places = where_things_go(pipeline, loaded.file, resumed=resume is not None)
    try:
        if resume is not None:
            record = resume
            record.begin_attempt(resumed=True)
            root = record.run_dir
        else:
            root = (Path(workdir) if workdir else default_workdir(pipeline)).resolve()
            record = runs.RunRecord.start(root, pipeline.name, version=_estflow_version())
    except OSError as err:  # no record to continue, but the one resumed
        failed = RunnerFailed(None, err)
        if resume is not None:
            failed.run_id, failed.workdir = resume.run_id, resume.run_dir
        raise failed from err
    record.data.update(pipeline_file=str(loaded.file),
                       spec_digest=fingerprints.digest(json.loads(pipeline.to_json())))
    record.data.setdefault("cwd", str(Path.cwd()))  # what a relative push path followed
    forced = {s.name for s in plan.steps} if no_cache is True else set(no_cache or ())
    echo(f"estflow run: pipeline {pipeline.name!r}, {len(plan.steps)} steps, run "
         f"{record.run_id} in {root}" + (" (resumed)" if resume is not None else ""))
    for line in places:
        echo(line)
    start = time.monotonic()
    try:
        result = run_plan(plan, root, echo=echo, topology=topology,
                          cache=StepCache(runs.cache_root()), no_cache=forced,
                          resume=resume is not None, record=record,
                          budget=Budget(jobs, memory))
        _finish_record(record, result)
        record.finish("succeeded", time.monotonic() - start)
    except KeyboardInterrupt:
        _finish_quietly(record, "interrupted", time.monotonic() - start)
        raise
    except OSError as err:  # the record's last save: every step is done, --resume says so
        failed = RunnerFailed(None, err)
        failed.run_id, failed.workdir = record.run_id, root
        raise failed from err
    except BaseException:
        _finish_quietly(record, "failed", time.monotonic() - start)
        raise
    _summary(result, time.monotonic() - start, echo)
    return result


def _finish_quietly(record: runs.RunRecord, status: str, seconds: float) -> None:
    """Record how the run ended, if the disk lets it (the run is failing or stopping already:
    its last saved record reads as interrupted once this process is gone)."""
    with contextlib.suppress(OSError):
        record.finish(status, seconds)


def _finish_record(record: runs.RunRecord, result: RunResult) -> None:
    """The run-level parts of the record: its eval metrics and what push did."""
    if "evaluation" in result.artifacts:
        try:
            record.data["metrics"] = result.read("evaluation", Files.METRICS)["metrics"]
        except (OSError, ValueError, KeyError):
            pass
    if "pushed" in result.artifacts:
        try:
            record.data[PUSH.name] = result.read("pushed", Files.PUSH_RESULT)
        except (OSError, ValueError):
            pass


def _shown(result: RunResult, artifact: str) -> Path:
    """Where to show an artifact: its link in the run directory when there is one."""
    for link in result.workdir.glob(f"*/{artifact}"):
        if link.is_symlink() and link.resolve() == result.artifacts[artifact].resolve():
            return link
    return result.artifacts[artifact]


def _summary(result: RunResult, seconds: float, echo: Callable[[str], None]) -> None:
    echo("")
    order = (list(result.order) or
             (list(result.record.data["steps"]) if result.record else list(result.seconds)))
    timings = [f"{k} {result.seconds[k]:.1f}s" if k in result.seconds else
               f"{k} {'skipped' if k in result.skipped else 'reused'}"
               for k in order if k in result.seconds or k in result.reused
               or k in result.skipped]
    echo(f"Pipeline finished in {seconds:.1f}s ({', '.join(timings)})")
    if "evaluation" in result.artifacts:  # a pipeline that trains (not one that only predicts)
        _training_summary(result, echo)
    if "predictions" in result.artifacts:
        _predictions_summary(result.read("predictions", Files.PREDICT_RESULT), echo)
    if result.record is not None:
        echo(f"Run {result.record.run_id}: {result.workdir} (estflow runs show "
             f"{result.record.run_id})")
    else:
        echo(f"Run directory: {result.workdir}")


def _predictions_summary(summary: dict, echo: Callable[[str], None]) -> None:
    if summary.get("skipped"):
        echo(f"Batch prediction skipped: {summary['reason']}")
        return
    echo(f"Batch prediction: {summary['scored']} rows scored, {summary['rejected']} rejected "
         f"({summary['rows_per_second']} rows/s); predictions in {summary['output']}")


def _training_summary(result: RunResult, echo: Callable[[str], None]) -> None:
    evaluation = result.read("evaluation", Files.METRICS)
    trained = result.read("model", Files.TRAIN_RESULT)
    metrics = evaluation["metrics"]
    echo("Eval metrics (" + evaluation["head"] + " head, through the exported model): " +
         ", ".join(f"{k}={v:.4f}" if isinstance(v, float) else f"{k}={v}"
                   for k, v in metrics.items()))
    candidates = result.artifacts["evaluation"] / CANDIDATES_FILE
    if candidates.is_file():  # Candidates: the select step's comparison
        summary = json.loads(candidates.read_text())
        sign = -1 if summary["higher_is_better"] else 1

        def number(value: object) -> bool:  # a NaN AUC (one class in the eval split) is none
            return isinstance(value, (int, float)) and math.isfinite(value)

        ranked = sorted(summary["candidates"], key=lambda r: (
            not number(r["value"]), sign * r["value"] if number(r["value"]) else 0))
        listed = ", ".join(
            (f"{r['name']} {r['value']:.4f}" if number(r["value"])
             else f"{r['name']} (no {summary['best_by']} to compare)")
            + ("" if r["blessed"] else " (not blessed)") for r in ranked)
        picked = summary["picked"]
        nothing = ("no blessed candidate has a " + summary["best_by"] + " to compare"
                   if any(r["blessed"] for r in ranked) else "none blessed")
        echo(f"Candidates by {summary['best_by']}: {listed}; "
             + (f"picked {picked}" if picked else nothing))
    echo(f"Evaluation report: {_shown(result, 'evaluation') / Files.REPORT}")
    echo(f"Trained to step {trained.get('global_step')}; TensorBoard: "
         f"tensorboard --logdir {_shown(result, 'model') / Files.CHECKPOINTS}")
    if "pushed" in result.artifacts:
        pushed = result.read("pushed", Files.PUSH_RESULT)
        if pushed.get("already_served"):
            echo(f"Nothing pushed: {pushed['model_name']} version {pushed['version']} at "
                 f"{pushed['path']} already serves this model (same fingerprint "
                 f"{str(pushed.get('fingerprint'))[:12]})")
        elif pushed.get("pushed", True):
            echo(f"Pushed {pushed['model_name']} version {pushed['version']} to "
                 f"{pushed['path']}")
        else:
            echo(f"Model NOT pushed (not blessed): {'; '.join(pushed['reasons'])}")
    elif (result.artifacts["evaluation"] / Files.BLESSING).is_file():
        blessing = result.read("evaluation", Files.BLESSING)
        echo(("Blessed" if blessing["blessed"] else "NOT blessed") + " (no push target): "
             + "; ".join(blessing["reasons"]))
