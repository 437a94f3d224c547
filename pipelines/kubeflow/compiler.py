"""Compile a declared Pipeline into a Kubeflow Pipelines v2 IR YAML file.

The translation is Plan -> KFP, never Pipeline -> KFP: the same
:class:`~estflow.pipelines.plan.Plan` drives the local runner, so both run the same steps through the same entry points.

* one KFP task per planned step (ingest -> transform -> train -> evaluate -> push), named and
  displayed as the step, running a lightweight Python component generated from the step
  (:mod:`estflow.pipelines.kubeflow.components`) in the configured image;
* artifacts flow between tasks under their contract names (``examples``, ``transformed``,
  ``model``, ``evaluation``, ``pushed``); the data dependencies are the DAG's edges;
* evaluation gates push: evaluate returns whether the model is blessed, and push takes it as
  its ``blessed`` input and skips itself unless it is true (for a backend before 2.14: push
  runs inside ``dsl.If(blessed == True)``, a condition group displayed as ``blessed``);
* user steps (``Pipeline.steps``, :mod:`estflow.pipelines.kubeflow.user_steps`): one task each, running
  ``estflow.components.user_step``, returning its ``NamedTuple`` names as output parameters;
  its ``when`` is checked by its own task, which takes what the condition reads (the result,
  or evaluate's blessing for ``ef.blessed()``, as push does) and skips itself, and a step
  reading from a conditional step skips itself when its input was skipped (for a backend
  before 2.14: a ``dsl.If`` on that output, push's ``blessed`` group for ``ef.blessed()``, and
  a step reading from, running after or comparing a conditional step sits in its condition);
  conditions that do not nest are refused, naming the steps; its own ``resources``,
  ``image``, ``packages`` (pip-installed first) and ``cache`` apply to its task; a function
  defined in a pipeline file that is not an importable module gets a note;
* multi-worker training: when ``run_config.cluster`` asks for several processes, the train
  task runs ``estflow.components.tfjob`` instead, which submits a Kubeflow TFJob whose replicas
  get the train step's compute resources (the task keeps only its storage, secrets and
  timeout: the TFJob's ``backoffLimit`` retries the replicas, so KFP does not also retry the
  task, which would multiply the attempts) and follows it; ``cluster.shared_dir`` is required;
* an exit handler wraps the steps: the ``report`` task runs however they ended and logs the
  run's final state (:mod:`estflow.pipelines.kubeflow.tasks`);
* the KFP backend it targets (``kfp_backend``, default 2.16, what Kubeflow 26.03 installs;
  the exit handler's ``PipelineTaskFinalStatus`` needs 2.14): for an older one (Kubeflow
  1.10.x ships 2.4.1 or 2.5.0) the report takes no final status, and before 2.5 placement
  parameters become the declared constants; a PVC ``sub_path`` before 2.16 and an optional
  secret as environment variables before 2.15 are errors (older drivers drop them); from 2.14
  on, 2.17 included, gated steps (push, a user step's ``when``) sit in the exit handler's DAG
  without a ``dsl.If`` and skip themselves, since with a condition group there the exit
  handler's state stays RUNNING and the report reads UNKNOWN: 2.14-2.16 never pass a group's
  state up, and on 2.17 a false condition is created CANCELED and nothing updates the exit
  handler's DAG after it (:mod:`estflow.pipelines.kubeflow.backend`); mapped steps (a
  ``dsl.ParallelFor``) need 2.17, as does a search's ``--tune-on parallel-for``;
* a search (``Pipeline.tune``, ``tune_on``): a Katib Experiment the tune task runs
  (:mod:`estflow.pipelines.kubeflow.katib`), every trial in the tune task, or the trials drawn
  now, one task each in a ``dsl.ParallelFor``, then collected by the tune task
  (:mod:`estflow.pipelines.kubeflow.tune_fan_out`);
* pipeline parameters: ``spec`` (the Pipeline as JSON; override it per run),
  ``source_root`` (where the ingest step resolves relative data paths), ``beam_options`` (the
  Beam pipeline options of the ingest and transform tasks, one string such as
  ``"--runner=DataflowRunner --project=p --region=r --temp_location=gs://b/tmp"``; empty: the
  in-memory FnApiRunner inside the task's pod; its default is checked for the runner at
  compile time, see :mod:`estflow.pipelines.beam_options`), and for each step with
  ``Resources(placement_parameters=True)`` its ``<step>_accelerator_type``,
  ``<step>_accelerator_count``, ``<step>_tpu_topology`` and ``<step>_node_pool``;
* per-task settings are small functions in :data:`TASK_SETTINGS`, one per concern (display
  name, caching, pod labels, cpu/memory, accelerator, node selectors, tolerations, secrets,
  PVCs, scratch space, retries, timeout; :mod:`estflow.pipelines.kubeflow.settings`), from the
  pipeline's ``resources``; every task has cpu/memory requests (declared, else defaults). The YAML has two documents: the PipelineSpec, then the kubernetes PlatformSpec.
  Resources are compile-time: a run that overrides ``spec`` changes what the steps do, not
  their pods; the placement parameters are the run-time part.

Compiling imports kfp but never TensorFlow, Beam or ``estflow.components``, and the output is
byte-for-byte deterministic: same pipeline, image and options -> same file.

Example:
    >>> from estflow.pipelines import loader
    >>> from estflow.pipelines.kubeflow import compiler as kfp_compiler
    >>> loaded = loader.load("estflow.pipelines.examples.taxi")
    >>> kfp_compiler.compile_pipeline(loaded, "taxi.yaml").tasks  # doctest: +SKIP
    ('ingest', 'transform', 'train', 'evaluate', 'push')
"""

# No `from __future__ import annotations` here: KFP reads the pipeline function's annotations
# as types, and string annotations fail its type check.
import contextlib
import dataclasses
import inspect
import json
import operator
import os
import shlex
from collections.abc import Callable
from collections.abc import Mapping
from collections.abc import Sequence
from pathlib import Path

from kfp import compiler
from kfp import dsl
from kfp.dsl import graph_component
from kfp.dsl import pipeline_task

from estflow.dsl.contracts import BATCH_PREDICT
from estflow.dsl.contracts import STEPS
from estflow.dsl.contracts import TFJOB
from estflow.dsl.contracts import TUNE
from estflow.dsl.contracts import Step
from estflow.dsl.contracts import candidate_artifact
from estflow.dsl.models import Candidates
from estflow.dsl.pipeline import Pipeline
from estflow.dsl.resources import Resources
from estflow.pipelines import beam_options as beam
from estflow.pipelines.kubeflow import backend as kfp_backends
from estflow.pipelines.kubeflow import components as kfp_components
from estflow.pipelines.kubeflow import images as kfp_images
from estflow.pipelines.kubeflow import katib as kfp_katib
from estflow.pipelines.kubeflow import lean
from estflow.pipelines.kubeflow import refusals
from estflow.pipelines.kubeflow import tasks as kfp_tasks
from estflow.pipelines.kubeflow import tune_fan_out
from estflow.pipelines.kubeflow import user_steps
from estflow.pipelines.kubeflow.refusals import CompileError
from estflow.pipelines.kubeflow.settings import TASK_SETTINGS
from estflow.pipelines.kubeflow.settings import TaskContext
from estflow.pipelines.loader import LoadedPipeline
from estflow.pipelines.plan import Plan
from estflow.pipelines.plan import PlannedStep
from estflow.pipelines.plan import build_plan
from estflow.pipelines.plan import late_input

__all__ = ["DEFAULT_IMAGE", "DEFAULT_CACHING", "DEFAULT_KFP_BACKEND", "TASK_SETTINGS",
           "CompileError", "CompiledPipeline", "compile_pipeline", "build_pipeline",
           "small_image_for"]

# The image reference `make image` tags (not published: `estflow compile` wants it named).
DEFAULT_IMAGE = kfp_images.DEFAULT_IMAGE
small_image_for = kfp_images.small_image_for

# Caching per step, set at compile time (a KFP client's `enable_caching=False` reaches only
# root-level tasks): each contract row's `caching` (push has an effect outside its artifacts, a
# new serving version, so it always runs; batch prediction writes outside its artifact and its
# data changes behind the same path). Precedence: a planned step's row < its
# Resources(caching=...) < the `caching` compile option. This view: the table's rows.
DEFAULT_CACHING: Mapping[str, bool] = {s.name: s.caching for s in (*STEPS, BATCH_PREDICT)}

# The oldest KFP backend the default output runs on (its exit handler's final status).
DEFAULT_KFP_BACKEND = str(kfp_backends.DEFAULT)


@dataclasses.dataclass(frozen=True)
class CompiledPipeline:
    """What :func:`compile_pipeline` wrote: the file and its task names, in plan order; the
    KFP backend it needs (at most the targeted one), notes on what the targeted backend
    changed (placement parameters made constant, retries it ignores), and the image of each
    task (step names, ``report``, ``<step>-placement``, ``fingerprint``; a multi-worker train
    task's replicas as ``train-replicas``)."""

    path: Path
    tasks: tuple[str, ...]
    kfp_backend: str = DEFAULT_KFP_BACKEND
    notes: tuple[str, ...] = ()
    images: Mapping[str, str] = dataclasses.field(default_factory=dict)


def compile_pipeline(loaded_or_pipeline: LoadedPipeline | Pipeline,
                     output_path: str | os.PathLike, *, image: str = DEFAULT_IMAGE,
                     source_root: str | None = None,
                     caching: Mapping[str, bool] | None = None,
                     beam_runner: str | None = None,
                     beam_options: Sequence[str] = (),
                     kfp_backend: str = DEFAULT_KFP_BACKEND,
                     push_base_path: str | None = None,
                     small_image: str | None = None,
                     steps: Sequence[Step] | None = None,
                     step_images: Mapping[str, str] | None = None,
                     tune_on: str = kfp_katib.DEFAULT_TUNE_ON,
                     problems: Sequence[str] = ()) -> CompiledPipeline:
    """Compile a pipeline to KFP v2 IR YAML at ``output_path`` (written atomically).

    Args:
        loaded_or_pipeline: what :func:`estflow.pipelines.loader.load` returned, or a Pipeline.
        output_path: a ``.yaml`` or ``.yml`` file; its directory must exist.
        image: the base container image of the tasks (must have estflow installed; see
            ``pipelines/docker/``): the steps without an accelerator run it, a step declaring
            a GPU or TPU its ``-gpu``/``-tpu`` variant (:mod:`estflow.pipelines.kubeflow.images`).
        source_root: default of the ``source_root`` pipeline parameter: where relative data
            paths resolve inside the task, a directory or ``module:pkg.mod``. Default: the
            loaded pipeline's portable source root, or ``""`` (the task's working directory)
            for a bare Pipeline.
        caching: step name -> whether KFP may reuse the step's cached result; overrides the
            steps' declared ``Resources(caching=...)`` and their rows' ``caching``
            (:data:`DEFAULT_CACHING`).
        beam_runner: the Beam runner of the ingest and transform tasks (``dataflow``,
            ``flink``, ``spark``, ``portable``, or None/``local``: in-memory in the pod).
        beam_options: further Beam options (``["--project=p", "--region=r", ...]``); with the
            runner, checked now and made the default of the ``beam_options`` parameter.
        kfp_backend: the oldest KFP backend version the pipeline must run on (``"2.5"``,
            ``"2.14.3"``; at least 2.4). Before 2.14 the exit handler's report takes no final
            status; before 2.5 placement parameters become the declared constants; a PVC
            ``sub_path`` before 2.16 and an optional secret env before 2.15 are errors; before
            2.14 a gated step (push, a user step's ``when``) is a ``dsl.If`` group; from 2.14 on
            it gates itself in its task (a false ``dsl.If`` in the exit handler leaves the
            run's state RUNNING on every backend through 2.17). See
            :mod:`estflow.pipelines.kubeflow.backend`.
        push_base_path: replaces ``PushTarget.base_path`` in the compiled pipeline (e.g. a
            pipeline pushing to a local directory when run locally, compiled to push to
            ``gs://bucket/models``).
        small_image: the image of the report and placement tasks, which import neither
            TensorFlow nor Beam (``pipelines/docker/Dockerfile.slim``, ~1/20 of the size).
            Default: :func:`small_image_for` ``image``.
        steps: the contract rows a training pipeline may run (default: the contract table's,
            :data:`estflow.pipelines.plan.TRAINING_STEPS`); each task's defaults (requests,
            caching, gate, KFP UI outputs) are its row's.
        step_images: step name -> the image its task runs, instead of ``image`` or its
            accelerator's variant (required for an accelerated step when ``image`` is pinned
            by digest: a variant's digest cannot be derived).
        tune_on: where the search of a pipeline with ``Pipeline.tune`` runs (``--tune-on``):
            ``"katib"`` (default), a Katib Experiment built now and given to the tune task
            (:func:`estflow.pipelines.kubeflow.katib.with_experiment`), ``"task"``, every
            trial inside the tune task's pod, or ``"parallel-for"``, the trials drawn now and
            run as a ``dsl.ParallelFor`` of tasks, then collected by the tune task (no
            ``tpe``, no ``early_stopping``; KFP backend 2.17 or later:
            :mod:`estflow.pipelines.kubeflow.tune_fan_out`).
        problems: refusals the caller already found (``estflow compile``: no image, a bad
            ``--step-image``, local data that does not match the declaration), reported in the
            one CompileError with the compiler's own; with any, nothing is written.

    Returns:
        The written path, the step task names (the ``report`` and placement tasks aside), the
        backend the output needs, notes on what the target changed, and each task's image.

    Raises:
        CompileError: the image, output path, caching, Beam options or backend are invalid,
            the declaration needs what the backend lacks, or the push target is a place a
            Kubeflow task cannot reach (a relative path, or a local one on no volume the push
            and evaluate tasks mount). Every refusal is checked before it is raised: its
            ``problems`` are all of them (with ``problems`` given), in that order.
    """
    problems = list(problems)
    pipeline, root = _unpack(loaded_or_pipeline, source_root)
    beam_default = refusals.collect(problems, _beam_default, beam_runner, beam_options)
    if push_base_path is not None and pipeline.push is not None:
        pipeline = dataclasses.replace(pipeline, push=dataclasses.replace(
            pipeline.push, base_path=push_base_path))
    path = refusals.collect(problems, refusals.check_output_path, output_path)
    if refusals.collect(problems, refusals.check_image, image) is None and small_image is None:
        small_image = image  # refused: no variant of it is checked
    elif small_image is None:
        small_image = small_image_for(image)
    else:
        refusals.collect(problems, refusals.check_image, small_image)
    for ref in (step_images or {}).values():
        refusals.collect(problems, refusals.check_image, ref)
    for ref in user_steps.declared_images(pipeline).values():
        refusals.collect(problems, refusals.check_image, ref)
    target = refusals.collect(problems, refusals.check_backend, kfp_backend)
    refusals.collect(problems, refusals.check_push_target, pipeline, given=push_base_path is not None)
    notes: tuple[str, ...] = ()
    if target is not None:
        pipeline, notes = refusals.collect(problems, _for_backend, pipeline, target) or (pipeline, ())
    if problems:
        raise CompileError(*problems)
    plan = build_plan(pipeline, source_root=kfp_components.param_placeholder("source_root"),
                      beam_options=kfp_components.param_placeholder("beam_options"),
                      sdk_image=image, steps=steps)
    refusals.collect(problems, _check_caching, caching or {}, plan)
    images = refusals.collect(problems, _step_images, plan, image,
                      {**user_steps.declared_images(pipeline), **(step_images or {})})
    refusals.collect(problems, _check_user_steps, plan)
    plan = refusals.collect(problems, _tune_on, plan, tune_on, image, images or {}, target) or plan
    if problems:
        raise CompileError(*problems)
    notes = (*notes, *user_steps.unreachable_functions(pipeline), *_job_kind_notes(pipeline),
             *tune_fan_out.notes(plan))
    declared = {step: r.caching for step, r in user_steps.declared_resources(pipeline).items()
                if r.caching is not None}
    graph = build_pipeline(plan, image=image, small_image=small_image, source_root=root,
                           caching={**{s.name: s.caching for s in plan.steps}, **declared,
                                    **(caching or {})},
                           beam_options=beam_default, kfp_backend=str(target),
                           step_images=images)
    needs = _write(graph, path, target)
    return CompiledPipeline(path=path, tasks=tuple(s.name for s in plan.steps),
                            kfp_backend=str(needs), notes=notes,
                            images={**kfp_images.task_images(
                                plan, image, small_image, images,
                                tfjob=TFJOB.name if _runs_tfjob(TFJOB.name, pipeline) else None),
                                **tune_fan_out.task_images(plan, image, small_image,
                                                           images or {})})


def build_pipeline(plan: Plan, *, image: str, source_root: str,
                   caching: Mapping[str, bool], beam_options: str = "",
                   kfp_backend: str = DEFAULT_KFP_BACKEND,
                   small_image: str | None = None,
                   step_images: Mapping[str, str] | None = None,
                   ) -> graph_component.GraphComponent:
    """The KFP pipeline (a graph component) for ``plan``, whose argv must use the
    ``source_root`` and ``beam_options`` parameter placeholders (see
    :func:`compile_pipeline`; the plan's pipeline is assumed adapted to ``kfp_backend``);
    the steps of ``step_images`` run their image instead of ``image``."""
    target = kfp_backends.parse(kfp_backend)
    plan = _with_span_inputs(plan)
    folded, items = user_steps.fold_items(plan.steps, plan.pipeline)  # fan-out: ParallelFor
    plan = dataclasses.replace(plan, steps=folded)
    if items and target < kfp_backends.EXIT_HANDLER_STATE.since:
        raise CompileError(
            f"Received mapped steps {[t[:-len(user_steps.ITEM_SUFFIX)] for t in items]} for "
            f"KFP backend {target}, expected --kfp-backend 2.17 or later: a mapped step's items "
            "run in a dsl.ParallelFor, a group inside the pipeline's exit handler, whose state "
            "backends before 2.17 do not pass up (kubeflow/pipelines#11979)")
    keyed = plan.fingerprint is not None
    step_images = step_images or {}
    # Where the exit task reads the final state (2.14 on), gated steps sit in the exit
    # handler's DAG and skip themselves (kfp_tasks.build_gated_component), on every backend:
    # before 2.17 a dsl.If group there leaves the handler's state RUNNING; on 2.17 a false
    # condition is created CANCELED and no launcher updates the handler's DAG after it
    # (2.17.0's driver and metadata client), so it stays RUNNING and the report reads UNKNOWN.
    in_task_gates = kfp_backends.FINAL_STATUS.since <= target
    chains = _conditions(plan)
    types = _result_types(plan.pipeline)
    users = user_steps.declared(plan.pipeline)
    by_name = {s.name: s for s in plan.steps}
    components = {}
    for s in _task_steps(plan, image, step_images):
        step_image = image if _runs_tfjob(s.name, plan.pipeline) else step_images.get(
            s.name, image)
        name = user_steps.declared_name(s) if user_steps.is_user_step(s) else s.name
        if name != s.name or name in items:  # a mapped step's item template or collector
            step_image = step_images.get(name, image)
        if user_steps.is_item_template(s):
            components[s.name] = _user_component(
                s, dataclasses.replace(users[name], returns=()), step_image, keyed=keyed,
                types={}, in_task_gate=False, plan_steps=by_name)
        elif user_steps.is_user_step(s) and users[name].mapped:
            components[s.name] = user_steps.build_collector(s, users[name], step_image,
                                                            keyed=keyed)
        elif user_steps.is_user_step(s):
            components[s.name] = _user_component(
                s, users[s.name], step_image, keyed=keyed, types=types[s.name],
                in_task_gate=in_task_gates and bool(chains[s.name]), plan_steps=by_name)
        elif tune_fan_out.is_fan_out(s):  # --tune-on parallel-for: trials, then collected
            components[s.name] = tune_fan_out.build_collector(s, step_image, keyed=keyed)
            components[tune_fan_out.TRIAL_COMPONENT] = tune_fan_out.build_trial(
                s, kfp_katib.trial_image(plan.pipeline, image, step_images), keyed=keyed)
            components[tune_fan_out.ITEMS_COMPONENT] = tune_fan_out.build_items(
                s, small_image or image)
        else:
            components[s.name] = kfp_components.build_component(s, step_image, keyed=keyed)
    if keyed:
        names = [s.name for s in plan.steps if s.name not in items]
        components[plan.fingerprint.name] = kfp_components.build_component(
            plan.fingerprint, image,
            result=kfp_components.fingerprint_result(names, items, _candidates(plan)))
    if in_task_gates:
        components.update({s.name: kfp_tasks.build_gated_component(
            s, plan.step(s.runs_if).result.key, _image_of(components[s.name]), keyed=keyed)
            for s in plan.steps if s.runs_if is not None})
    small_image = small_image or image
    final_status = target >= kfp_backends.FINAL_STATUS.since
    report = kfp_tasks.build_report_component(plan.pipeline.name, small_image,
                                              final_status=final_status)
    # The exit task takes the run's id too ({{$.pipeline_job_uuid}}: the driver of 2.14+ and
    # kfp.local resolve it): when the backend passes a state it cannot map (a task died
    # before its launcher published), the report reads the run's tasks from the KFP API.
    report_inputs = {kfp_tasks.RUN_ID_INPUT: dsl.PIPELINE_JOB_ID_PLACEHOLDER} \
        if final_status else {}
    resources = user_steps.declared_resources(plan.pipeline)
    placements = {step: kfp_tasks.build_placement_component(step, small_image, r)
                  for step, r in resources.items() if r.placement_parameters}
    defaults = {"spec": (str, _compact_json(plan.pipeline.to_json())),
                "source_root": (str, source_root), "beam_options": (str, beam_options)}
    if _has_spans(plan.pipeline):
        defaults["span"] = (str, "")  # the run's span (or a time in it); empty: the schedule
    for step, declared in resources.items():
        defaults.update({p.name: (p.type, p.default)
                         for p in kfp_tasks.placement_parameters(step, declared)})

    schedule_time = (dsl.PIPELINE_JOB_SCHEDULE_TIME_UTC_PLACEHOLDER
                     if target >= SCHEDULE_TIME_SINCE else "")

    def body(arguments: dict) -> None:
        arguments = {**arguments, "schedule_time": schedule_time}
        exit_task = report(**report_inputs)
        _apply_settings(exit_task, TaskContext(name=kfp_tasks.REPORT, caching=False))
        with dsl.ExitHandler(exit_task, name=plan.pipeline.name):
            _add_steps(plan, _task_steps(plan, image, step_images), components, placements,
                       arguments, caching, in_task_gates=in_task_gates, chains=chains,
                       items=items, keyed=keyed, small_image=small_image)

    return dsl.pipeline(_with_signature(body, defaults), name=plan.pipeline.name,
                        description=_description(plan, target))


SCHEDULE_TIME_SINCE = kfp_backends.BackendVersion(2, 17, 0)
"""The backend release resolving ``{{$.pipeline_job_schedule_time_utc}}`` in a task's inputs
(kubeflow/pipelines#12628; older ones leave the text unresolved)."""


def _candidates(plan: Plan) -> dict[str, tuple[str, str]]:
    """Candidate -> (its train step, its model artifact), for a Candidates model (else {})."""
    model = plan.pipeline.model
    if not isinstance(model, Candidates):
        return {}
    writers = {a: s.name for s in plan.steps for a in s.outputs}
    return {c: (writers[candidate_artifact("model", c)], candidate_artifact("model", c))
            for c in sorted(model.models)}


def _has_spans(pipeline: Pipeline) -> bool:
    return getattr(getattr(pipeline, "source", None), "spans", None) is not None


def _with_span_inputs(plan: Plan) -> Plan:
    """A source with spans is resolved by the fingerprint task (no runner chose its spans):
    it takes the run's ``span`` parameter and its schedule time as run-time inputs."""
    if plan.fingerprint is None or not _has_spans(plan.pipeline):
        return plan
    options = (*plan.fingerprint.options, ("span", late_input("span")),
               ("schedule-time", late_input("schedule_time")))
    return dataclasses.replace(plan, fingerprint=dataclasses.replace(plan.fingerprint,
                                                                     options=options))


def _add_fingerprint(plan: Plan, components: dict, arguments: dict,
                     ) -> pipeline_task.PipelineTask | None:
    """The fingerprint task (never cached, as its row says: it reads the data's and the served
    model's state now), with the storage (PVCs, secrets) of the steps whose data outside the
    run it reads (``Step.outside_storage``: ingest's source and push's target)."""
    if plan.fingerprint is None:
        return None
    step = plan.fingerprint
    component = components[step.name]
    task = component(**{name: arguments[name] for name in component.component_spec.inputs})
    outside = [s.name for s in plan.steps if s.outside_storage]
    _apply_settings(task, TaskContext(name=step.name, caching=step.caching,
                                      resources=_storage_of(plan.pipeline, outside),
                                      default_requests=step.requests))
    return task


def _storage_of(pipeline: Pipeline, steps: Sequence[str]) -> Resources:
    """The PVCs and secrets of ``steps``' resources, each once."""
    declared = [pipeline.resources.get(step, Resources()) for step in steps]
    pvcs = {p.mount_path: p for r in declared for p in r.pvcs}
    volumes = {v.mount_path: v for r in declared for v in r.secrets_as_volume}
    env = []
    for secret in (e for r in declared for e in r.secrets_as_env):
        if secret not in env:
            env.append(secret)
    return Resources(pvcs=tuple(pvcs.values()), secrets_as_volume=tuple(volumes.values()),
                     secrets_as_env=tuple(env))


def _step_inputs(step: PlannedStep, fingerprint: pipeline_task.PipelineTask | None) -> dict:
    """What a step task takes from the fingerprint task: the part of the spec it reads
    (instead of the whole ``spec`` parameter: a change elsewhere in the spec then leaves its
    inputs, hence KFP's cache key, unchanged), its cache key, the model's fingerprint, the
    source's digest (which the ingest task checks again after reading); and the run's name
    (the pushed version's lineage)."""
    if fingerprint is None:
        return {"model_fingerprint": "", "source_digest": "", "candidate_fingerprints": "",
                "run": dsl.PIPELINE_JOB_NAME_PLACEHOLDER}
    return {"spec": fingerprint.outputs[f"{step.name}_spec"],
            kfp_components.CACHE_KEY: fingerprint.outputs[f"{step.name}_key"],
            "model_fingerprint": fingerprint.outputs["model_fingerprint"],
            "source_digest": fingerprint.outputs["source_digest"],
            **({"candidate_fingerprints": fingerprint.outputs["candidate_fingerprints"]}
               if "candidate_fingerprints" in fingerprint.outputs else {}),
            "run": dsl.PIPELINE_JOB_NAME_PLACEHOLDER}


def _add_steps(plan: Plan, steps: Sequence[PlannedStep], components: dict, placements: dict,
               arguments: dict, caching: Mapping[str, bool], *,
               in_task_gates: bool = False,
               chains: Mapping[str, tuple] | None = None,
               items: Mapping[str, Sequence[str]] | None = None, keyed: bool = True,
               small_image: str = DEFAULT_IMAGE) -> None:
    """The fingerprint task, then one task per step (``steps``, the plan's as their tasks run
    them), each fed by the artifacts of the steps before it and keyed by the fingerprint task.
    A step runs inside the conditions of ``chains`` (:func:`user_steps.conditions`: its own
    ``when`` or gate and those of the steps it reads from, runs after or compares), each one
    ``dsl.If`` group holding every step under it (as KFP requires of a task that consumes
    another's output inside a condition): the tasks are added group by group, in plan order
    where the data allows (:func:`_in_groups`). ``in_task_gates``: no groups; a gated step is
    given its gate's result as an input (the gate's key) and skips itself. ``items``: each
    mapped step's item template (:func:`user_steps.fold_items`) -> its items: the template's
    task runs in a ``dsl.ParallelFor`` over them, and the mapped step's task reads its outputs
    ``dsl.Collected``."""
    available = dict(arguments)
    fingerprint = _add_fingerprint(plan, components, arguments)
    tasks: dict[str, pipeline_task.PipelineTask] = {}
    by_name = {s.name: s for s in steps}
    chains = chains if chains is not None else _conditions(plan)

    items = items or {}

    def add(step: PlannedStep) -> None:
        name = (user_steps.declared_name(step) if user_steps.is_user_step(step) else
                step.of or step.name)  # a candidate's train: Pipeline.resources["train"]
        resources = _task_resources(name, plan.pipeline)
        gate = user_steps.gate_of(step, by_name)
        if in_task_gates and gate is not None and not user_steps.is_user_step(
                by_name[gate.step]):
            available[gate.key] = tasks[gate.step].outputs[kfp_components.RESULT_OUTPUT]
        placement = None
        if step.name in placements:
            placement = _add_placement(step.name, resources, placements[step.name],
                                       arguments)
        component = components[step.name]
        if step.name in items:  # a mapped step's items: one task per item, at once
            loop = dsl.ParallelFor(user_steps.loop_items(
                fingerprint, step.name, len(items[step.name]), keyed and fingerprint is not None,
                small_image))
            with loop as item:
                given = {**available, "item": item.index, "model_fingerprint": "",
                         "source_digest": "", "run": dsl.PIPELINE_JOB_NAME_PLACEHOLDER}
                if fingerprint is not None:
                    given.update({"spec": item.spec, kfp_components.CACHE_KEY: item.key,
                                  "model_fingerprint": fingerprint.outputs["model_fingerprint"],
                                  "source_digest": fingerprint.outputs["source_digest"]})
                task = component(**{n: given[n] for n in component.component_spec.inputs})
                _apply_settings(task, TaskContext(
                    name=step.name, caching=caching.get(name, step.caching),
                    resources=resources, placement=placement, default_requests=step.requests))
                for after in step.after:
                    task.after(tasks[after])
            tasks[step.name] = task
            available.update({f"{a}_list": dsl.Collected(task.outputs[a])
                              for a in step.outputs})
            return
        given = {**available, **_step_inputs(step, fingerprint)}
        if tune_fan_out.is_fan_out(step):  # the trials' ParallelFor, then the tune task
            task = tune_fan_out.add_tasks(
                step, components, given, pipeline=plan.pipeline,
                caching=caching.get(name, step.caching),
                after=[tasks[a] for a in step.after], placement=placement)
            tasks[step.name] = task
            available.update({a: task.outputs[a] for a in step.outputs})
            return
        task = component(**{name: given[name] for name in component.component_spec.inputs})
        ctx = TaskContext(name=step.name, caching=caching.get(name, step.caching),
                          resources=resources, placement=placement,
                          default_requests=step.requests)
        _apply_settings(task, ctx)
        for name in step.waits_for:  # the contract's order without data (train: validate)
            if name in tasks:
                task.after(tasks[name])
        for name in step.after:  # a user step's `after`: an order without data
            task.after(tasks[name])
        tasks[step.name] = task
        available.update({a: task.outputs[a] for a in step.outputs})

    placed = {s.name: () if in_task_gates else chains.get(s.name, ()) for s in steps}
    _in_groups(list(steps), placed, (), add, lambda when: _condition(when, by_name, tasks))


def _in_groups(steps: list[PlannedStep], chains: Mapping[str, tuple], prefix: tuple,
               add: Callable[[PlannedStep], None], condition: Callable) -> None:
    """Add ``steps`` (all under the conditions ``prefix``): those under no further condition
    directly, the others in one ``condition(when)`` group per next condition, recursively.
    The items (a step, a group) are added in dependency order, the earliest in plan order
    first: so a pipeline without user steps keeps its plan order."""
    index = {s.name: i for i, s in enumerate(steps)}
    items: dict[object, list[PlannedStep]] = {}  # a step's name, or the next condition
    for step in steps:
        chain = chains[step.name]
        key = ("step", step.name) if len(chain) == len(prefix) else ("if", chain[len(prefix)])
        items.setdefault(key, []).append(step)
    item_of = {s.name: key for key, members in items.items() for s in members}
    deps = {key: {item_of[up] for s in members for up in user_steps.upstream_steps(s)
                  if up in item_of and item_of[up] != key} for key, members in items.items()}
    done: set = set()
    while len(done) < len(items):
        ready = [k for k in items if k not in done and deps[k] <= done]
        if not ready:  # conditions.chains nest, so the items form no cycle
            raise CompileError(f"Received steps waiting on each other across conditions: "
                               f"{sorted(s.name for k in items if k not in done for s in items[k])}")
        key = min(ready, key=lambda k: index[items[k][0].name])
        done.add(key)
        if key[0] == "step":
            add(items[key][0])
        else:
            with condition(key[1]):
                _in_groups(items[key], chains, (*prefix, key[1]), add, condition)


_OPERATORS = {"==": operator.eq, "!=": operator.ne, ">": operator.gt, ">=": operator.ge,
              "<": operator.lt, "<=": operator.le}


def _condition(when, steps: Mapping[str, PlannedStep],
               tasks: dict) -> contextlib.AbstractContextManager:
    """The ``dsl.If`` group of ``when``: on a built-in step's result (push runs only when
    evaluate blessed the model: ``blessed``), its one ``Output``; on a user step's, the output
    parameter of that name (displayed as the condition)."""
    gate = steps[when.step]
    if not user_steps.is_user_step(gate):
        value = tasks[gate.name].outputs[kfp_components.RESULT_OUTPUT]
        name = when.key if (when.op, when.value) == ("==", True) else str(when)
    else:
        value, name = tasks[gate.name].outputs[when.key], str(when)
    return dsl.If(_OPERATORS[when.op](value, when.value), name=name)


def _conditions(plan: Plan) -> dict[str, tuple]:
    try:
        return user_steps.conditions(plan.steps)
    except user_steps.UserStepError as err:
        raise CompileError(str(err)) from None


def _result_types(pipeline: Pipeline) -> dict[str, dict[str, str]]:
    try:
        return user_steps.result_types(pipeline)
    except user_steps.UserStepError as err:
        raise CompileError(str(err)) from None


def _user_component(step: PlannedStep, user, image: str, **options):
    try:
        return user_steps.build_component(step, user, image, **options)
    except user_steps.UserStepError as err:
        raise CompileError(str(err)) from None


def _check_user_steps(plan: Plan) -> None:
    """CompileError for user steps KFP cannot place as declared: conditions that do not nest,
    a result name compared with values of two types, a result name that is an artifact's."""
    problems: list[str] = []
    refusals.collect(problems, _conditions, plan)
    types = refusals.collect(problems, _result_types, plan.pipeline)
    users = user_steps.declared(plan.pipeline)
    for step in plan.steps:
        if types is not None and user_steps.is_user_step(step) and step.name in users:
            declared = users[step.name]
            clash = sorted(set(declared.returns) & {*dict(step.inputs), *step.outputs})
            if clash:
                problems.append(f"Received step {step.name!r} returning {clash}, expected "
                                f"result names other than its artifacts' (its Kubeflow task "
                                f"has one output per name)")
    if problems:
        raise CompileError(*problems)


def _tune_on(plan: Plan, tune_on: str, image: str, images: Mapping[str, str],
             target: kfp_backends.BackendVersion | None = None) -> Plan:
    """``plan`` with its search on Katib (``tune_on="katib"``: the tune task's Experiment,
    :mod:`estflow.pipelines.kubeflow.katib`), in the tune task (``"task"``: unchanged) or as
    a ParallelFor of trials drawn now (``"parallel-for"``, for the KFP backend ``target``:
    :mod:`estflow.pipelines.kubeflow.tune_fan_out`)."""
    if tune_on not in kfp_katib.TUNE_ON:
        raise CompileError(f"Received an invalid value for `tune_on` (--tune-on), expected one "
                           f"of {list(kfp_katib.TUNE_ON)}. Received: {tune_on!r}")
    if tune_on == "task":
        return plan
    if tune_on == "parallel-for":
        return _tune_fan_out(plan, target)
    try:
        return kfp_katib.with_experiment(plan, image=image, step_images=images)
    except ValueError as err:
        raise CompileError(f"{err} (the search as a Katib Experiment; --tune-on task runs it "
                           "in the tune task)") from None


def _tune_fan_out(plan: Plan, target: kfp_backends.BackendVersion | None) -> Plan:
    """``plan`` with its tune step's trials drawn (``--tune-on parallel-for``), or
    CompileError with every reason it cannot be."""
    tune = plan.pipeline.tune
    if tune is None or not any(s.name == TUNE.name for s in plan.steps):
        return plan
    problems = tune_fan_out.refusals(tune)
    since = kfp_backends.EXIT_HANDLER_STATE.since
    if target is not None and target < since:
        problems.append(
            f"Received --tune-on parallel-for for KFP backend {target}, expected --kfp-backend "
            f"{since.major}.{since.minor} or later: the trials run in a dsl.ParallelFor, a group "
            "inside the pipeline's exit handler, whose state backends before 2.17 do not pass "
            "up (kubeflow/pipelines#11979); or compile with --tune-on katib or --tune-on task")
    if problems:
        raise CompileError(*problems)
    return tune_fan_out.with_trials(plan)


# -- multi-worker training: the train task submits a TFJob (contracts.TFJOB) ------------------
def _runs_tfjob(step_name: str, pipeline: Pipeline) -> bool:
    cluster = pipeline.run_config.cluster
    return step_name == TFJOB.name and cluster is not None and cluster.distributed


def _job_kind_notes(pipeline: Pipeline) -> tuple[str, ...]:
    """A note where multi-worker training submits a TFJob: the Training Operator that runs it
    is not in Kubeflow's default install since 1.11 (26.03's manifests comment it out)."""
    cluster = pipeline.run_config.cluster
    if cluster is None or not cluster.distributed or cluster.job_kind != "tfjob":
        return ()
    return ("run_config.cluster.job_kind='tfjob': the train task submits a kubeflow.org/v1 "
            "TFJob, which only the Training Operator runs; Kubeflow 1.11 and 26.03 do not "
            "install it by default (their manifests comment it out): install it, or use "
            "job_kind='trainjob' (the default, Kubeflow Trainer v2, installed since 1.11)",)


def _task_steps(plan: Plan, image: str,
                step_images: Mapping[str, str] | None = None) -> list[PlannedStep]:
    """The plan's steps as their tasks run them (see :func:`_as_tfjob`: its replicas run the
    train step's image, the submitting task the base ``image``)."""
    step_images = step_images or {}
    return [_as_tfjob(s, plan.pipeline, step_images.get(s.name, image)) for s in plan.steps]


def _step_images(plan: Plan, image: str, given: Mapping[str, str]) -> dict[str, str]:
    """Step -> image of the steps not running ``image`` (:func:`kfp_images.step_images`)."""
    names = [s.name for s in plan.steps]
    unknown = sorted(set(given) - set(names))
    if unknown:
        raise CompileError(f"Received an invalid value for `step_images` (--step-image), "
                           f"expected step names, some of {names}. Received: {unknown}")
    try:
        return kfp_images.step_images(image, kfp_images.accelerators(plan), given)
    except kfp_images.ImageError as err:
        raise CompileError(str(err)) from None


def _as_tfjob(step: PlannedStep, pipeline: Pipeline, image: str) -> PlannedStep:
    """The train step of a pipeline declaring a multi-process cluster runs the TFJob submitter
    (same artifacts, plus the image its replicas run); other steps are unchanged."""
    if not _runs_tfjob(step.name, pipeline):
        return step
    if not pipeline.run_config.cluster.shared_dir:
        raise CompileError("Received an invalid value for `run_config.cluster.shared_dir`, "
                           "expected the storage the TFJob's replicas and the train task share "
                           "(gs://bucket/path, or a path on a PVC in resources['train'].pvcs) "
                           "to compile a multi-worker train step. Received: None")
    if pipeline.resources.get(TFJOB.name, Resources()).placement_parameters:
        raise CompileError("Received resources['train'].placement_parameters=True with a "
                           "multi-worker cluster, expected False: the TFJob's replicas take "
                           "the declared accelerator and node pool")
    tfjob = PlannedStep.from_step(TFJOB, dict(step.inputs), {"image": image})
    # The task is still the train step to whoever reads the compiled pipeline: its component's
    # docstring keeps the planned step's description.
    return dataclasses.replace(tfjob, description=step.description)


def _task_resources(step_name: str, pipeline: Pipeline) -> Resources:
    """A step's task resources; the TFJob submitter keeps only storage, secrets and timeout
    (the replicas get the compute, accelerator, node pool and node selector, and the retries,
    as the TFJob's ``backoffLimit``: components/tfjob/; a KFP retry of the task on top
    would run up to (retries + 1)^2 attempts)."""
    resources = user_steps.declared_resources(pipeline).get(step_name, Resources())
    if not _runs_tfjob(step_name, pipeline):
        return resources
    return dataclasses.replace(resources, cpu_request=None, cpu_limit=None, memory_request=None,
                               memory_limit=None, accelerator=None, node_pool=None,
                               node_selector={}, gke_node_labels=True, tolerations=(),
                               ephemeral_storage=None, retries=0, retry_backoff_max=None)


def _image_of(component) -> str:
    """The image a built component runs in."""
    return component.component_spec.implementation.container.image


def _add_placement(step: str, resources: Resources, component, arguments: dict):
    parameters = kfp_tasks.placement_parameters(step, resources)
    task = component(**{p.input: arguments[p.name] for p in parameters})
    _apply_settings(task, TaskContext(name=kfp_tasks.placement_task_name(step), caching=True))
    return task


def _apply_settings(task: pipeline_task.PipelineTask, ctx: TaskContext) -> None:
    for setting in TASK_SETTINGS:
        setting(task, ctx)


def _with_signature(body: Callable[[dict], None],
                    defaults: Mapping[str, tuple[type, object]]) -> Callable:
    """A pipeline function with one typed, defaulted parameter per entry of ``defaults``.

    KFP reads a pipeline's parameters from its function's signature and calls it with one
    channel per parameter, positionally; the parameters here depend on the declaration (the
    placement parameters), hence a function built with an explicit ``__signature__``.
    """
    names = list(defaults)

    def pipeline_func(*args):
        body(dict(zip(names, args, strict=True)))

    pipeline_func.__signature__ = inspect.Signature([
        inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=default,
                          annotation=kind) for name, (kind, default) in defaults.items()])
    return pipeline_func


def _beam_default(runner: str | None, options: Sequence[str]) -> str:
    """The ``beam_options`` parameter's default: the runner's options, checked."""
    try:
        return shlex.join(beam.build_options(runner, options))
    except beam.BeamOptionsError as err:
        raise CompileError(f"Received invalid Beam options for the ingest and transform "
                           f"tasks: {err}") from None


def _unpack(value: LoadedPipeline | Pipeline, source_root: str | None) -> tuple[Pipeline, str]:
    if isinstance(value, LoadedPipeline):
        return value.pipeline, value.portable_source_root if source_root is None else source_root
    if isinstance(value, Pipeline):
        return value, "" if source_root is None else source_root
    raise CompileError("Received an invalid value for `loaded_or_pipeline`, expected a "
                       "LoadedPipeline or a Pipeline. Received: "
                       f"loaded_or_pipeline={type(value).__name__}")


def _for_backend(pipeline: Pipeline, target: kfp_backends.BackendVersion,
                 ) -> tuple[Pipeline, tuple[str, ...]]:
    """``pipeline`` with what ``target`` cannot run replaced (placement parameters by their
    declared values), the notes saying so; CompileError for what has no replacement."""
    notes: list[str] = []
    problems: list[str] = []
    declared = user_steps.declared_resources(pipeline)
    resources = dict(declared)
    for step, r in declared.items():
        if r.placement_parameters and target < kfp_backends.PARAMETERISED_PLACEMENT.since:
            resources[step] = dataclasses.replace(r, placement_parameters=False)
            notes.append(f"resources[{step!r}].placement_parameters: KFP backend {target} "
                         f"cannot take node selectors and tolerations from a task's outputs "
                         f"(needs {kfp_backends.PARAMETERISED_PLACEMENT.since}): the "
                         f"{step} task runs on its declared accelerator and node pool, and "
                         f"the {step}_* run parameters are left out")
        refusals.collect(problems, refusals.check_storage, step, r, target)
        if r.retries and target < kfp_backends.RETRIES.since and not _runs_tfjob(step, pipeline):
            notes.append(f"resources[{step!r}].retries: KFP backend {target} ignores retry "
                         f"policies (they run from {kfp_backends.RETRIES.since})")
    if target < kfp_backends.FINAL_STATUS.since:
        notes.append(f"the exit handler's report task takes no final status (KFP backend "
                     f"{target}; needs {kfp_backends.FINAL_STATUS.since}): it logs UNKNOWN")
    if problems:
        raise CompileError(*problems)
    return user_steps.with_resources(pipeline, resources), tuple(notes)


def _check_caching(caching: Mapping[str, bool], plan: Plan) -> None:
    known = {*DEFAULT_CACHING, *(s.name for s in plan.steps)}
    unknown = sorted(set(caching) - known)
    if unknown:
        raise CompileError("Received an invalid value for `caching`, expected step names, "
                           f"some of {sorted(known)}. Received: {unknown}")


def _compact_json(text: str) -> str:
    # One line: readable as a parameter default in the KFP UI, and small in the YAML.
    return json.dumps(json.loads(text), sort_keys=True, separators=(",", ":"))


def _description(plan: Plan, target: kfp_backends.BackendVersion) -> str:
    return (f"estflow pipeline {plan.pipeline.name}: "
            + " -> ".join(s.name for s in plan.steps)
            + f". Compiled for KFP backend >= {target}.")


def _write(graph: graph_component.GraphComponent, path: Path,
           target: kfp_backends.BackendVersion) -> kfp_backends.BackendVersion:
    """Compile next to ``path``, check the result runs on ``target``, and rename, so a failed
    compile leaves no partial file. Returns the backend version the output needs."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp.yaml")  # kfp wants a .yaml name
    try:
        compiler.Compiler().compile(graph, str(tmp))
        needs = kfp_backends.required(lean.load_all(tmp.read_text()))
        if needs > target:
            raise CompileError(f"the compiled pipeline needs KFP backend {needs}, newer than "
                               f"the targeted {target}")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return needs
