"""A compiled pipeline's search as a ``dsl.ParallelFor`` (``estflow compile --tune-on
parallel-for``): the KFP-only fallback where Katib is not installed, with one pod per trial.

* **The draw, at compile time** (:func:`draw`): the trials' assignments are those the local
  search (``components/tune/step.py``) draws for the same ``Tune.seed``: ``grid``, the first
  ``trials`` points of :meth:`~estflow.dsl.Tune.grid` shuffled by ``random.Random(seed)``;
  ``random``, Optuna's ``RandomSampler`` seeded ``(seed * 1_000_003 + n) % 2**32`` for trial
  ``n``, each dimension drawn by the search's own :func:`estflow.dsl.tune.suggest`. Optuna
  is imported only then, by a compile of a random search. ``tpe`` needs each trial's result
  before it draws the next, and ``early_stopping`` compares a running trial with the others: a
  loop of tasks drawn in advance can do neither, so both are refused (:func:`refusals`), naming
  ``--tune-on katib`` and ``--tune-on task``.
* **The plan**: the tune step carries the draw as its option :data:`OPTION` (JSON), so the
  fingerprint task keys the tune step with it (:func:`with_trials`); its inputs, outputs and
  the steps after it are unchanged.
* **The graph** (:func:`add_tasks`): a ``dsl.ParallelFor`` over the drawn assignments
  (``parallelism=Tune.parallel``), each iteration a task ``tune-trial`` running the trial entry (``<tune package>.katib_trial --result``: train and
  evaluate one assignment, its outcome, a failure included, in its ``trial`` artifact; the task
  succeeds either way), sized and imaged as a Katib trial would be
  (:func:`~estflow.pipelines.kubeflow.katib.trial_resources`,
  :func:`~estflow.pipelines.kubeflow.katib.trial_image`); then the ``tune`` task, which
  collects their artifacts (``dsl.Collected``) and runs ``<tune package>.on_parallel_for``:
  the best trial by the objective's direction into ``hyperparameters/best.json``, where the
  final train reads it, or a failure when more than ``Tune.max_failures`` trials failed.

  The drawn assignments are a constant of the compiled pipeline, but the loop does not iterate
  over them as static items: the small task ``tune-trials`` (:func:`build_items`) returns them,
  each with the tune step's spec and cache key, and the loop iterates over its output, as a
  mapped step's loop does (:func:`estflow.pipelines.kubeflow.user_steps.loop_items`). The kfp
  2.17 compiler writes static items' fields (``item.number``) inside the exit handler as inputs
  of the exit handler's group that name no pipeline parameter (``loop-item-param-N``), and
  ``kfp.local`` 2.17 hands a loop's body the loop item in place of any other task's output
  (the fingerprint task's spec and key): items from one task's single ``Output``, holding every
  per-trial value, avoid both.

``Tune.timeout_s`` has no counterpart (every drawn trial runs): a compile note says so.
"""

from __future__ import annotations

import dataclasses
import json
import random
from collections.abc import Mapping
from collections.abc import Sequence
from typing import Any

from kfp import dsl
from kfp.dsl import pipeline_task
from kfp.dsl import python_component

from estflow.dsl.contracts import TUNE
from estflow.dsl.resources import Resources
from estflow.dsl.tune import as_json
from estflow.dsl.tune import suggest
from estflow.pipelines.kubeflow import components
from estflow.pipelines.kubeflow import katib
from estflow.pipelines.kubeflow.settings import SMALL_REQUESTS
from estflow.pipelines.kubeflow.settings import TASK_SETTINGS
from estflow.pipelines.kubeflow.settings import TaskContext
from estflow.pipelines.plan import Plan
from estflow.pipelines.plan import PlannedStep

__all__ = ["OPTION", "TRIAL_TASK", "TRIAL_COMPONENT", "TRIAL_OUTPUT", "TRIAL_ENTRY",
           "COLLECTOR_ENTRY", "ITEMS_TASK", "ITEMS_COMPONENT", "SEED_STRIDE", "refusals",
           "draw", "with_trials", "is_fan_out", "trials_of", "build_items", "build_trial",
           "build_collector", "add_tasks", "task_images", "notes"]

OPTION = "parallel-for-trials"
"""The tune step's option carrying the drawn assignments (a JSON list; keyed, never passed to
an entry point)."""
TRIAL_TASK = "tune-trial"
"""The display name and pod label of each trial's task."""
TRIAL_COMPONENT = "tune_trial"
TRIAL_OUTPUT = "trial"
"""The trial task's output artifact: ``trial.json``, its outcome."""
TRIAL_ENTRY = "katib_trial"
"""The trial's entry, a module of the tune step's package (one trial: train and evaluate)."""
COLLECTOR_ENTRY = "on_parallel_for"
"""The tune task's entry in the tune step's package: the trials collected, the best kept."""
ITEMS_TASK = "tune-trials"
"""The small task returning the loop's items (the drawn trials with the spec and key)."""
ITEMS_COMPONENT = "tune_trials"
SEED_STRIDE = 1_000_003
"""Trial ``n`` of a random search draws with the seed ``(seed * SEED_STRIDE + n) % 2**32``, as
the local search's samplers do (``components/tune/step.py``: ``_Search._sampler``)."""


# --- what is drawn -------------------------------------------------------------------------

def refusals(tune: Any) -> list[str]:
    """Why ``tune`` cannot run as a loop of trials drawn at compile time (empty: it can)."""
    found = []
    if tune.algorithm == "tpe":
        found.append(
            "Received tune.algorithm='tpe' with --tune-on parallel-for, expected 'random' or "
            "'grid': TPE draws each trial from the results of the trials before it, and a "
            "ParallelFor's trials are all drawn when the pipeline is compiled; compile with "
            "--tune-on katib (a Katib Experiment) or --tune-on task (the search inside the tune "
            "task), or declare algorithm='random' or 'grid'. Received: algorithm='tpe'")
    if tune.early_stopping is not None:
        found.append(
            "Received tune.early_stopping with --tune-on parallel-for, expected None: early "
            "stopping compares a running trial with the others as they train, and the tasks "
            "of a ParallelFor cannot see or stop each other; compile with --tune-on katib "
            "(Katib's medianstop) or --tune-on task (Optuna's pruners), or declare "
            f"early_stopping=None. Received: early_stopping={tune.early_stopping!r}")
    return found


def draw(tune: Any) -> list[dict[str, Any]]:
    """The assignments (path -> declared value, the active dimensions only) of ``tune``'s
    trials, in trial order: what the local search draws for the same seed (module doc).

    Raises:
        ValueError: an algorithm that draws from earlier results (``tpe``).
    """
    if tune.algorithm == "grid":
        points = list(tune.grid())
        random.Random(tune.seed).shuffle(points)
        return points[:tune.trials]
    if tune.algorithm != "random":
        raise ValueError(f"Received an invalid value for `tune.algorithm`, expected 'random' or "
                         f"'grid' (drawn at compile time). Received: {tune.algorithm!r}")
    # Imported here: only compiling a random search needs Optuna, and `estflow compile` of
    # any other pipeline does not pay for importing it.
    import optuna

    def sampler(number: int) -> optuna.samplers.BaseSampler:
        return optuna.samplers.RandomSampler(seed=(tune.seed * SEED_STRIDE + number) % 2**32)

    verbosity = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.WARNING)  # no "new study created" line
    try:
        study = optuna.create_study(direction="maximize", sampler=sampler(0))
        drawn = []
        for number in range(tune.trials):
            study.sampler = sampler(number)
            drawn.append(suggest(study.ask(), tune))
        return drawn
    finally:
        optuna.logging.set_verbosity(verbosity)


# --- the plan --------------------------------------------------------------------------------

def with_trials(plan: Plan) -> Plan:
    """``plan`` with its tune step carrying the draw (:data:`OPTION`; any Katib Experiment
    dropped), the fingerprint step keying it; unchanged without a tune step."""
    tune = plan.pipeline.tune
    if tune is None or not any(s.name == TUNE.name for s in plan.steps):
        return plan
    return katib.with_tune_option(
        plan, OPTION, [{k: as_json(v) for k, v in a.items()} for a in draw(tune)],
        drop=(katib.OPTION,))


def is_fan_out(step: PlannedStep) -> bool:
    """Whether ``step`` is a tune step whose trials run as a ParallelFor."""
    return step.name == TUNE.name and OPTION in dict(step.options)


def trials_of(step: PlannedStep) -> list[dict[str, Any]]:
    """The drawn assignments a fan-out tune step carries (JSON values: tuples as lists)."""
    return json.loads(dict(step.options)[OPTION])


# --- the components and tasks ----------------------------------------------------------------

def _type(artifact: str) -> str:
    return components.ARTIFACT_TYPES.get(artifact, dsl.Artifact).__name__


def build_items(step: PlannedStep, image: str) -> python_component.PythonComponent:
    """The component returning the loop's items in ``image`` (no estflow import: the small
    image): one ``{"number", "assignment", "spec", "key"}`` per drawn trial (``trials``, the
    compiled JSON list), with the tune step's ``spec`` and ``cache_key``."""
    doc = (f"estflow step {step.name}: the trials drawn at compile time, the items of its "
           "ParallelFor.")
    source = "\n".join([
        f"def {ITEMS_COMPONENT}(spec: str, cache_key: str, trials: str) -> list:",
        f"    {doc!r}",
        "    import json",
        "    return [{'number': str(n), 'spec': spec, 'key': cache_key,",
        "             'assignment': json.dumps(a, sort_keys=True, separators=(',', ':'))}",
        "            for n, a in enumerate(json.loads(trials))]",
        ""])
    return dsl.component(components.define(ITEMS_COMPONENT, source), base_image=image,
                         install_kfp_package=False)


def build_trial(step: PlannedStep, image: str, *, keyed: bool
                ) -> python_component.PythonComponent:
    """The component of one trial (an iteration of the loop) in ``image``: the tune step's
    inputs, the item's ``number`` and ``assignment``, and the ``trial`` artifact."""
    package = step.module
    inputs = [a for a, _ in step.inputs]
    signature = ["spec: str", *([f"{components.CACHE_KEY}: str"] if keyed else []),
                 "number: str", "assignment: str",
                 *(f"{a}: Input[{_type(a)}]" for a in inputs),
                 f"{TRIAL_OUTPUT}: Output[Artifact]"]
    flags = "".join(f"'--{step.flag(a)}', {a}.path, " for a in inputs)
    doc = f"estflow step {step.name}: one trial of the search (a ParallelFor iteration)."
    lines = [f"def {TRIAL_COMPONENT}(", *(f"    {s}," for s in signature), "):",
             f"    {doc!r}",
             f"    print('estflow step {step.name}: trial %s' % number"
             + (f" + ', cache key %s' % {components.CACHE_KEY})" if keyed else ")"),
             f"    from {package} import {TRIAL_ENTRY} as step",
             f"    exit_code = step.main(['--spec', spec, {flags}'--assignment', assignment, "
             f"'--trial', number, '--result', {TRIAL_OUTPUT}.path])",
             "    if exit_code:",
             f"        raise RuntimeError('estflow step {step.name}: trial %s exited with code %s'"
             " % (number, exit_code))",
             ""]
    return dsl.component(components.define(TRIAL_COMPONENT, "\n".join(lines)),
                         base_image=image, install_kfp_package=False)


def build_collector(step: PlannedStep, image: str, *, keyed: bool
                    ) -> python_component.PythonComponent:
    """The tune task's component in ``image``: the trials' artifacts collected
    (``Input[List[Artifact]]``), the tune step's outputs written."""
    package = step.module
    signature = ["spec: str", *([f"{components.CACHE_KEY}: str"] if keyed else []),
                 f"{TRIAL_OUTPUT}_list: Input[List[Artifact]]",
                 *(f"{a}: Output[{_type(a)}]" for a in step.outputs)]
    outputs = "".join(f"'--{step.flag(a)}', {a}.path, " for a in step.outputs)
    doc = (f"estflow step {step.name}: the trials of its ParallelFor collected, the best "
           "kept for the final train.")
    lines = [f"def {step.name}(", *(f"    {s}," for s in signature), "):",
             f"    {doc!r}",
             *([f"    print('estflow step {step.name}: cache key %s' % {components.CACHE_KEY})"]
               if keyed else []),
             f"    from {package} import {COLLECTOR_ENTRY} as step",
             "    argv = ['--spec', spec]",
             f"    for found in {TRIAL_OUTPUT}_list:",
             "        argv += ['--trial', found.path]",
             f"    exit_code = step.main(argv + [{outputs.rstrip(', ')}])",
             "    if exit_code:",
             f"        raise RuntimeError('estflow step {step.name} exited with code %s' % "
             "exit_code)",
             ""]
    source = "from typing import List\n" + "\n".join(lines)
    return dsl.component(components.define(step.name, source), base_image=image,
                         install_kfp_package=False)


def _trial_resources(pipeline: Any, placement: pipeline_task.PipelineTask | None) -> Resources:
    """Each trial task's resources: the tune step's, else the train step's (as a Katib
    trial's pod); the declared placement when no placement task gives the run's."""
    source, resources = katib.trial_resources(pipeline)
    if resources is None:
        return Resources()
    if resources.placement_parameters and (placement is None or source != TUNE.name):
        return dataclasses.replace(resources, placement_parameters=False)
    return resources


def _apply(task: pipeline_task.PipelineTask, ctx: TaskContext) -> None:
    for setting in TASK_SETTINGS:
        setting(task, ctx)


def add_tasks(step: PlannedStep, built: Mapping[str, python_component.PythonComponent],
              given: Mapping[str, Any], *, pipeline: Any, caching: bool,
              after: Sequence[pipeline_task.PipelineTask] = (),
              placement: pipeline_task.PipelineTask | None = None,
              ) -> pipeline_task.PipelineTask:
    """Add the items task, the loop of trial tasks and the collecting tune task (module doc)
    to the pipeline being built. ``built``: the components by name (:data:`ITEMS_COMPONENT`,
    :data:`TRIAL_COMPONENT`, the step's); ``given``: what the tasks may take (pipeline
    parameters, the input artifacts, the tune step's ``spec`` and cache key); ``after``: the
    tasks the trials run after. Returns the tune task (its outputs are the tune step's)."""
    items = built[ITEMS_COMPONENT](spec=given["spec"],
                                   cache_key=given.get(components.CACHE_KEY, ""),
                                   trials=dict(step.options)[OPTION])
    _apply(items, TaskContext(name=ITEMS_TASK, caching=False))  # a few lines of Python
    trial = built[TRIAL_COMPONENT]
    resources = _trial_resources(pipeline, placement)
    with dsl.ParallelFor(items.output, parallelism=pipeline.tune.parallel) as item:
        inputs = {**given, "spec": item.spec, components.CACHE_KEY: item.key,
                  "number": item.number, "assignment": item.assignment}
        trial_task = trial(**{n: inputs[n] for n in trial.component_spec.inputs})
        _apply(trial_task, TaskContext(
            name=TRIAL_TASK, caching=caching, resources=resources,
            placement=placement if resources.placement_parameters else None,
            default_requests=step.requests))
        for task in after:
            trial_task.after(task)
    collector = built[step.name]
    inputs = {**given, f"{TRIAL_OUTPUT}_list": dsl.Collected(trial_task.outputs[TRIAL_OUTPUT])}
    tune_task = collector(**{n: inputs[n] for n in collector.component_spec.inputs})
    _apply(tune_task, TaskContext(name=step.name, caching=caching,
                                  default_requests=SMALL_REQUESTS))
    return tune_task


def task_images(plan: Plan, image: str, small_image: str,
                step_images: Mapping[str, str]) -> dict[str, str]:
    """The images of the tasks a fan-out tune step adds (:data:`ITEMS_TASK`, the small one;
    :data:`TRIAL_TASK`, the trials'), else {}."""
    if not any(is_fan_out(s) for s in plan.steps):
        return {}
    return {ITEMS_TASK: small_image,
            TRIAL_TASK: katib.trial_image(plan.pipeline, image, step_images)}


def notes(plan: Plan) -> tuple[str, ...]:
    """What a fan-out search leaves out of the declaration, one note each."""
    tune = plan.pipeline.tune
    if tune is None or not any(is_fan_out(s) for s in plan.steps) or tune.timeout_s is None:
        return ()
    return (f"tune.timeout_s={tune.timeout_s:g}: --tune-on parallel-for runs every drawn "
            "trial (the loop's tasks are all created at the start); bound each trial with "
            "resources['tune'].timeout_seconds instead",)
