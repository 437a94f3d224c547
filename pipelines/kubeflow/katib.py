"""A hyperparameter search (:class:`~estflow.dsl.Tune`) compiled to a Katib ``Experiment``
(``kubeflow.org/v1beta1``, Katib v0.19.0, the Katib of Kubeflow 26.03), and the best trial read
back as estflow paths.

:func:`experiment` builds the Experiment; the in-cluster task
(``python -m estflow.components._runtime.katib``) creates it, follows it and reads the best
trial back as estflow paths (``best_of``: the one read-back). What the Experiment holds, and why (Katib v0.19.0's sources, kubeflow/katib@578e60f1):

**Parameters.** One Katib parameter per path of the space, named after the path in
lowercase letters, digits and ``-`` (``model.dnn_feature_columns[company].dimension`` ->
``model-dnn-feature-columns-company-dimension``; a clash gets ``-2``...):

* :class:`~estflow.dsl.IntRange`: ``parameterType: int``, ``feasibleSpace`` ``min``/``max``
  (and ``step`` when not 1); ``log=True``: ``distribution: logUniform``. For ``tpe`` and
  ``random`` (Hyperopt's ``quniform``: ``round(x / step) * step``) a range whose ``low`` is not
  a multiple of its ``step`` would draw values off its grid (``IntRange(1, 9, step=2)``: even
  numbers), so such a range is a ``categorical`` parameter of its values instead;
* :class:`~estflow.dsl.FloatRange`: ``parameterType: double``, ``min``/``max``; ``log=True``:
  ``distribution: logUniform``;
* :class:`~estflow.dsl.Choice`: ``parameterType: categorical``, ``feasibleSpace.list`` of one
  string per value, its JSON text (a tuple is a JSON array: ``(64, 32)`` -> ``"[64, 32]"``;
  for a Choice of strings only, the string itself), escaped as described under *Trial* (so
  plain values read as themselves in Katib's UI).

The mapping from Katib names back to paths (:data:`MAPPING_ANNOTATION`, JSON: name -> path,
type, how a value is written, ``when``) is an annotation of the Experiment, and each
``trialParameters`` entry's ``description`` is its path.

**Conditions.** Katib has no conditional parameters: a dimension with ``when=(path, value)``
is flattened, a parameter every trial draws. The trial ignores the value of a dimension that
is inactive for its assignment (:func:`estflow.components._runtime.katib.active`, the rule of
:meth:`~estflow.dsl.tune.Dimension.active`), and the task's read-back leaves it out. So
trials that differ only in an inactive value train the same model, and a ``grid`` enumerates
the flattened product (Katib's grid sampler, Optuna's ``GridSampler``, in a random order):
with conditions, ``trials`` grid points may repeat a model and miss another.

**Trial.** A ``batch/v1`` Job (no retries: a failed trial is a failed trial; no Istio sidecar,
which would keep the Job from completing), its container ``trial`` (``primaryContainerName``)
running ``command`` in ``image`` with ``--assignment <JSON>`` appended: a JSON object, estflow
path -> value (a tuple as a JSON array), every path of the space. Katib substitutes
``${trialParameters.<name>}`` placeholders as raw text into the JSON text of the trial template
(``GetRunSpecWithHyperParameters``), and its StdOut metrics collector runs the container's
command and arguments joined with spaces under ``sh -c`` (``wrapWorkerContainer``, no
quoting). So the container's command is ``["sh", "-c", SCRIPT]``, ``SCRIPT`` the command and
its arguments quoted for the shell (the assignment in single quotes), and each value Katib
substitutes is written to survive both: ``'`` as the JSON escape ``\\u0027`` and the value's
JSON text escaped as inside a JSON string (``"`` as ``\\"``, ``\\`` as ``\\\\``). The trial's
name is in ``ESTFLOW_TRIAL_NAME`` (``${trialSpec.Name}``). Success and failure are the Job's
``Complete`` and ``Failed`` conditions (Katib's defaults for a Job, written out).

**Metrics.** The StdOut collector, with a filter matching only lines that are exactly
``<objective>=<value>`` (e.g. ``auc=0.8731``; a float as Python's ``repr`` writes it, no
spaces, from the start of the line; Katib's default filter would also take tf.estimator's own
``auc = 0.87`` log lines, and no ``label/mean``). The trial prints one such line to stdout
after each evaluation, with ``flush=True`` (the collector follows the file stdout is redirected
to), every ``early_stopping.every_steps`` training steps when early stopping is declared; the
*last* line is the trial's value (``metricStrategies``: ``latest``). A trial that prints none
counts as failed (Katib: metrics unavailable).

**Search.** ``algorithm`` ``tpe`` and ``random`` are Katib's ``tpe`` and ``random``
(Hyperopt), ``grid`` is ``grid`` (Optuna); ``seed`` is their ``random_state``. The objective
is ``maximize`` or ``minimize`` (``higher_is_better``; None: by
:data:`~estflow.dsl.models.LOWER_IS_BETTER`), without a goal. ``maxTrialCount`` is
``trials``, ``parallelTrialCount`` ``parallel``; ``maxFailedTrialCount`` is
``max_failures + 1`` (Katib fails an experiment when its failed trials *reach* the count;
estflow's ``max_failures`` trials may fail), at most ``trials``. ``resumePolicy: Never``: the
suggestion service goes when the experiment ends.

**Early stopping.** :class:`~estflow.dsl.MedianStop` is Katib's ``medianstop`` (its only
early-stopping algorithm: a :class:`~estflow.dsl.HalvingStop` is refused, it runs with
``--tune-on task``):
``min_trials_required`` = ``warmup_trials`` (at least 1: Katib needs a finished trial to
compare with), ``start_step`` = ``warmup_steps // every_steps + 1`` (counted in reported
values: the first report after the warm-up is the first judged). Katib's rule is not Optuna's
per-step median: a running trial stops when a reported value is worse than the mean, over the
finished trials, of their first ``start_step`` values.

**Not in the Experiment.** ``timeout_s`` (Katib has none): the task stops following when it
has passed (:data:`TIMEOUT_ANNOTATION`), waits for the trials running then, takes the best
trial so far and deletes the Experiment; ``trial_steps``: the trial reads it from the
pipeline's ``Tune``.

**In a compiled pipeline** (``estflow compile --tune-on katib``, the default):
:func:`for_pipeline` builds the Experiment of a pipeline's search at compile time and
:func:`with_experiment` hands it to the tune task as its ``--katib-experiment`` option (JSON).
Its trial command is ``python -m estflow.components.tune.katib_trial --spec {spec} --examples
{examples} --transformed {transformed}`` with those literal tokens (:data:`TOKENS`), which
the tune task replaces at run time by the spec it got and its input artifacts' bucket URIs;
it also names the Experiment after its output path (the run's id), sets the namespace (its
pod's, unless compiled in) and the trials' service account (its pod's, unless compiled in),
then creates and follows it (``components/_runtime/katib.py``) and writes the best assignment
where the final train reads it.
"""

from __future__ import annotations

import dataclasses
import json
import re
import shlex
from collections.abc import Iterable
from collections.abc import Mapping
from collections.abc import Sequence
from typing import Any

from estflow.dsl.contracts import TRAIN
from estflow.dsl.contracts import TUNE
from estflow.dsl.models import LOWER_IS_BETTER
from estflow.dsl.tune import HalvingStop
from estflow.pipelines.plan import fingerprint_step

__all__ = ["API_VERSION", "KIND", "MAPPING_ANNOTATION", "TIMEOUT_ANNOTATION", "CONTAINER",
           "ALGORITHMS", "TOKENS", "TRIAL_MODULE", "OPTION", "TUNE_ON", "DEFAULT_TUNE_ON",
           "experiment", "parameter_mapping", "metrics_filter", "katib_name",
           "trial_command", "trial_resources", "trial_image", "for_pipeline",
           "with_experiment", "with_tune_option"]

API_VERSION = "kubeflow.org/v1beta1"
KIND = "Experiment"
MAPPING_ANNOTATION = "estflow.dev/tune-parameters"
"""The Experiment's annotation holding the parameter mapping (JSON, see :func:`experiment`)."""
TIMEOUT_ANNOTATION = "estflow.dev/tune-timeout-seconds"
"""The Experiment's annotation holding ``Tune.timeout_s`` for the task (absent: none)."""
CONTAINER = "trial"
ALGORITHMS = {"tpe": "tpe", "random": "random", "grid": "grid"}
"""estflow's algorithm -> Katib's algorithmName (katib-config of v0.19.0: tpe and random on
the Hyperopt suggestion image, grid on the Optuna one)."""
TRIAL_NAME_PARAMETER = "trial-name"
TRIAL_MODULE = "estflow.components.tune.katib_trial"
"""The trial's entry point (one trial: the train and evaluate steps, ``<objective>=<value>``
lines on stdout)."""
TOKENS = {"spec": "{spec}", "examples": "{examples}", "transformed": "{transformed}"}
"""The literal tokens of the compiled trial command that the tune task replaces at run time:
the spec it got, the URIs of its ``examples`` and ``transformed`` inputs (the same as
``estflow.components._runtime.katib.TOKENS``)."""
OPTION = "katib-experiment"
"""The tune step's option carrying the compiled Experiment (JSON; empty: search in the task)."""
TUNE_ON = ("katib", "task", "parallel-for")
"""Where a compiled pipeline's search runs: ``katib`` (a Katib Experiment, one pod per trial;
Kubeflow 26.03 installs Katib v0.19.0), ``task`` (every trial inside the tune task's pod,
for a KFP without Katib) or ``parallel-for`` (trials drawn at compile time, one KFP task each
in a ``dsl.ParallelFor``, for a KFP without Katib: :mod:`.tune_fan_out`)."""
DEFAULT_TUNE_ON = "katib"
_STAND_IN_NAMESPACE = "default"  # valid for experiment(); dropped unless one is given
_JOB_SUCCESS = 'status.conditions.#(type=="Complete")#|#(status=="True")#'
_JOB_FAILURE = 'status.conditions.#(type=="Failed")#|#(status=="True")#'
_ISTIO_INJECT = "sidecar.istio.io/inject"
_LABELS = {"app.kubernetes.io/part-of": "estflow", "app.kubernetes.io/component": TUNE.name}
# Katib's experiment validator: names start with a letter, at most 40 characters (the
# suggestion's Deployment and Service are named after the experiment and its algorithm).
_EXPERIMENT_NAME = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_NAMESPACE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_NUMBER = r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?"


# --- names and values ------------------------------------------------------------------------

def katib_name(path: str, taken: Iterable[str] = ()) -> str:
    """The Katib parameter name for ``path``: lowercase letters, digits and ``-``, starting
    with a letter, at most 63 characters; ``-2``, ``-3``... when ``taken`` has it already."""
    base = re.sub(r"[^a-z0-9]+", "-", path.lower()).strip("-") or "p"
    if not base[0].isalpha():
        base = f"p-{base}"
    base = base[:63].rstrip("-")
    taken = set(taken)
    name, n = base, 1
    while name in taken:
        n += 1
        suffix = f"-{n}"
        name = base[:63 - len(suffix)].rstrip("-") + suffix
    return name


def _json(value: Any) -> str:
    """A Choice value's JSON text (a tuple as an array), with ``'`` written ``\\u0027`` (it
    can only be inside a JSON string there) so the text fits in single shell quotes."""
    return json.dumps(value, ensure_ascii=False).replace("'", "\\u0027")


def _embedded(text: str) -> str:
    """``text`` as written inside a JSON string: what Katib must substitute for a placeholder
    inside the trial template's JSON text for the template to read ``text`` there."""
    return json.dumps(text, ensure_ascii=False)[1:-1]


def _pairs(tune: Any) -> list[tuple[str, Any]]:
    """The space's (path, dimension) pairs, each conditional one after the dimension it depends
    on (``Tune.dimensions()``'s order when the object has it)."""
    if callable(getattr(tune, "dimensions", None)):
        return list(tune.dimensions())
    space = tune.space
    left = sorted(space.items() if isinstance(space, Mapping) else space, key=lambda p: p[0])
    placed: list[tuple[str, Any]] = []
    done: set[str] = set()
    while left:
        ready = [p for p in left if getattr(p[1], "when", None) is None
                 or p[1].when[0] in done] or left[:1]
        placed.append(ready[0])
        done.add(ready[0][0])
        left.remove(ready[0])
    return placed


def _kind(dim: Any) -> str:
    name = type(dim).__name__
    if name in ("IntRange", "FloatRange", "Choice"):
        return name
    if hasattr(dim, "values"):
        return "Choice"
    if hasattr(dim, "step"):
        return "IntRange"
    return "FloatRange"


def _float_text(value: float) -> str:
    return repr(float(value))


def _parameter(name: str, path: str, dim: Any, algorithm: str
               ) -> tuple[dict[str, Any], dict[str, Any]]:
    """(Katib parameter, mapping entry) of one dimension."""
    kind = _kind(dim)
    when = getattr(dim, "when", None)
    entry: dict[str, Any] = {"path": path,
                             "when": None if when is None else [when[0], _tagged(when[1])]}
    if kind == "IntRange":
        step = int(getattr(dim, "step", 1))
        low, high = int(dim.low), int(dim.high)
        if step != 1 and low % step and algorithm != "grid":
            values = tuple(range(low, high + 1, step))
            return _categorical(name, values, entry)
        space = {"min": str(low), "max": str(high)}
        if step != 1:
            space["step"] = str(step)
        if getattr(dim, "log", False):
            space["distribution"] = "logUniform"
        return ({"name": name, "parameterType": "int", "feasibleSpace": space},
                {**entry, "type": "int"})
    if kind == "FloatRange":
        if algorithm == "grid":
            raise ValueError(f"Received an invalid value for `tune.space[{path!r}]`, expected "
                             "a Choice or an IntRange with algorithm='grid' (Katib's grid "
                             f"needs a step). Received: {dim!r}")
        space = {"min": _float_text(dim.low), "max": _float_text(dim.high)}
        if getattr(dim, "log", False):
            space["distribution"] = "logUniform"
        return ({"name": name, "parameterType": "double", "feasibleSpace": space},
                {**entry, "type": "double"})
    return _categorical(name, tuple(dim.values), entry)


def _tagged(value: Any) -> Any:
    """A value as JSON keeps it in the mapping (a tuple as an array: read back as a tuple)."""
    return list(_tagged(v) for v in value) if isinstance(value, (list, tuple)) else value


def _categorical(name: str, values: Sequence[Any], entry: dict[str, Any]
                 ) -> tuple[dict[str, Any], dict[str, Any]]:
    strings = all(isinstance(v, str) for v in values)
    texts = [_json(v)[1:-1] if strings else _json(v) for v in values]
    tokens = [_embedded(t) for t in texts]
    if len(set(tokens)) != len(tokens):
        raise ValueError(f"Received an invalid value for `tune.space[{entry['path']!r}]`, "
                         "expected values that differ as JSON. Received: "
                         f"{list(values)!r}")
    return ({"name": name, "parameterType": "categorical", "feasibleSpace": {"list": tokens}},
            {**entry, "type": "categorical", "slot": "string" if strings else "json"})


# --- the Experiment --------------------------------------------------------------------------

def metrics_filter(objective: str) -> str:
    """The metrics collector's filter (a Go regular expression, two groups: name, value) that
    takes lines that are exactly ``<objective>=<number>``."""
    return f"^({re.escape(objective)})=({_NUMBER})\\s*$"


def _higher_is_better(tune: Any) -> bool:
    higher = getattr(tune, "higher_is_better", None)
    return tune.objective not in LOWER_IS_BETTER if higher is None else bool(higher)


def _container_resources(resources: Any) -> tuple[dict[str, Any], dict[str, Any], dict]:
    """(container fields, pod fields, job spec fields) from a :class:`~estflow.dsl.Resources`
    (requests, limits, accelerator, node selection, tolerations, Secrets, PVCs, scratch space,
    timeout; not ``retries``: a trial is not retried), or a plain Kubernetes ``resources``
    mapping, or None."""
    if resources is None:
        return {}, {}, {}
    if isinstance(resources, Mapping):
        return {"resources": json.loads(json.dumps(dict(resources)))}, {}, {}
    from estflow.dsl.placement import Placement

    placement = Placement.for_resources(resources)
    requests = {k: v for k, v in (("cpu", resources.cpu_request),
                                  ("memory", resources.memory_request)) if v is not None}
    limits = {k: v for k, v in (("cpu", resources.cpu_limit),
                                ("memory", resources.memory_limit)) if v is not None}
    if placement.resource:
        limits[placement.resource] = str(placement.count)
    container: dict[str, Any] = {}
    compute = {k: v for k, v in (("requests", requests), ("limits", limits)) if v}
    if compute:
        container["resources"] = compute
    env = [{"name": var, "valueFrom": {"secretKeyRef": {
        "name": s.secret, "key": key, "optional": s.optional}}}
        for s in resources.secrets_as_env for key, var in s.key_to_env.items()]
    mounts = [{"name": f"secret-{i}", "mountPath": s.mount_path, "readOnly": True}
              for i, s in enumerate(resources.secrets_as_volume)]
    mounts += [{"name": f"pvc-{i}", "mountPath": p.mount_path,
                **({"subPath": p.sub_path} if p.sub_path else {})}
               for i, p in enumerate(resources.pvcs)]
    volumes = [{"name": f"secret-{i}", "secret": {"secretName": s.secret,
                                                   "optional": s.optional}}
               for i, s in enumerate(resources.secrets_as_volume)]
    volumes += [{"name": f"pvc-{i}", "persistentVolumeClaim": {"claimName": p.pvc_name}}
                for i, p in enumerate(resources.pvcs)]
    if getattr(resources, "ephemeral_storage", None):  # as a KFP task's (kubeflow.settings)
        mounts.append({"name": "estflow-scratch", "mountPath": "/tmp"})
        volumes.append({"name": "estflow-scratch",
                        "emptyDir": {"sizeLimit": resources.ephemeral_storage}})
    if env:
        container["env"] = env
    if mounts:
        container["volumeMounts"] = mounts
    tolerations = [*placement.tolerations,
                   *(t for t in resources.tolerations if t not in placement.tolerations)]
    pod = {k: v for k, v in (("nodeSelector", dict(placement.node_selector)),
                             ("tolerations", [t.to_k8s() for t in tolerations]),
                             ("volumes", volumes)) if v}
    job = {}
    if getattr(resources, "timeout_seconds", None) is not None:
        job["activeDeadlineSeconds"] = int(resources.timeout_seconds)
    return container, pod, job


def _placeholder(name: str) -> str:
    """Where Katib writes trial parameter ``name``'s value (``TrialTemplateParamReplaceFormat``)."""
    return "${trialParameters." + name + "}"


def _assignment_argument(mapping: dict[str, dict[str, Any]]) -> str:
    """``--assignment``'s JSON with a placeholder per parameter (a Choice of strings inside
    quotes, every other value bare)."""
    fields = []
    for name, entry in mapping.items():
        placeholder = _placeholder(name)
        if entry.get("slot") == "string":
            placeholder = f'"{placeholder}"'
        fields.append(f"{json.dumps(entry['path'], ensure_ascii=False)}: {placeholder}")
    return "{" + ", ".join(fields) + "}"


def experiment(tune: Any, *, name: str, namespace: str, image: str, command: Sequence[str],
               trial_resources: Any, service_account: str | None = None) -> dict[str, Any]:
    """The Katib Experiment searching ``tune``'s space (see the module's description).

    Args:
        tune: the search (:class:`~estflow.dsl.Tune`, or an object with its attributes).
        name: the Experiment's name: lowercase letters, digits, ``-``, starting with a letter,
            at most 40 characters (Katib's limit).
        namespace: where it and its trials run.
        image: the estflow image the trials run.
        command: the trial's command and arguments (the estflow train-trial entry);
            ``--assignment <JSON>`` is appended.
        trial_resources: each trial's pod: a :class:`~estflow.dsl.Resources`, a Kubernetes
            container ``resources`` mapping, or None.
        service_account: the trials' pods' service account (None: the namespace's default).

    Returns:
        The Experiment as a dict (``apiVersion``, ``kind``, ``metadata``, ``spec``).

    Raises:
        ValueError: a name, namespace or command Kubernetes or Katib refuses, a FloatRange in a
            grid, an unknown algorithm, or early stopping Katib does not have (HalvingStop).
    """
    if not isinstance(name, str) or len(name) > 40 or not _EXPERIMENT_NAME.match(name):
        raise ValueError("Received an invalid value for `name`, expected a Katib experiment "
                         "name: lowercase letters, digits and '-', starting with a letter, "
                         f"at most 40 characters. Received: {name!r}")
    if not isinstance(namespace, str) or not _NAMESPACE.match(namespace):
        raise ValueError("Received an invalid value for `namespace`, expected a Kubernetes "
                         f"namespace. Received: {namespace!r}")
    if (isinstance(command, str) or not isinstance(command, Sequence) or not command
            or not all(isinstance(c, str) for c in command)):
        raise ValueError("Received an invalid value for `command`, expected a non-empty list "
                         f"of strings. Received: {command!r}")
    if not isinstance(image, str) or not image:
        raise ValueError(f"Received an invalid value for `image`, expected an image reference. "
                         f"Received: {image!r}")
    if tune.algorithm not in ALGORITHMS:
        raise ValueError(f"Received an invalid value for `tune.algorithm`, expected one of "
                         f"{sorted(ALGORITHMS)}. Received: {tune.algorithm!r}")

    parameters: list[dict[str, Any]] = []
    mapping: dict[str, dict[str, Any]] = {}
    for path, dim in _pairs(tune):
        katib_param = katib_name(path, [*mapping, TRIAL_NAME_PARAMETER])
        parameter, entry = _parameter(katib_param, path, dim, tune.algorithm)
        parameters.append(parameter)
        mapping[katib_param] = entry

    script = shlex.join([*command, "--assignment", _assignment_argument(mapping)])
    container_fields, pod_fields, job_fields = _container_resources(trial_resources)
    env = [{"name": "ESTFLOW_TRIAL_NAME", "value": _placeholder(TRIAL_NAME_PARAMETER)},
           {"name": "PYTHONUNBUFFERED", "value": "1"}, *container_fields.pop("env", [])]
    container = {"name": CONTAINER, "image": image, "command": ["sh", "-c", script],
                 "env": env, **container_fields}
    pod_spec: dict[str, Any] = {"restartPolicy": "Never", "containers": [container],
                                **pod_fields}
    if service_account:
        pod_spec["serviceAccountName"] = service_account
    job = {"apiVersion": "batch/v1", "kind": "Job", "spec": {
        "backoffLimit": 0, **job_fields,
        "template": {"metadata": {"labels": dict(_LABELS),
                                  "annotations": {_ISTIO_INJECT: "false"}},
                     "spec": pod_spec}}}
    trial_parameters = [{"name": n, "description": e["path"], "reference": n}
                        for n, e in mapping.items()]
    trial_parameters.append({"name": TRIAL_NAME_PARAMETER, "description": "the trial's name",
                             "reference": "${trialSpec.Name}"})

    objective = tune.objective
    trials = int(tune.trials)
    algorithm: dict[str, Any] = {"algorithmName": ALGORITHMS[tune.algorithm]}
    if getattr(tune, "seed", None) is not None:
        algorithm["algorithmSettings"] = [{"name": "random_state", "value": str(int(tune.seed))}]
    spec: dict[str, Any] = {
        "objective": {"type": "maximize" if _higher_is_better(tune) else "minimize",
                      "objectiveMetricName": objective,
                      "metricStrategies": [{"name": objective, "value": "latest"}]},
        "algorithm": algorithm,
        "parallelTrialCount": max(1, min(int(tune.parallel), trials)),
        "maxTrialCount": trials,
        "maxFailedTrialCount": min(int(tune.max_failures) + 1, trials),
        "resumePolicy": "Never",
        "parameters": parameters,
        "metricsCollectorSpec": {"collector": {"kind": "StdOut"},
                                 "source": {"filter": {"metricsFormat": [
                                     metrics_filter(objective)]}}},
        "trialTemplate": {"primaryContainerName": CONTAINER,
                          "successCondition": _JOB_SUCCESS, "failureCondition": _JOB_FAILURE,
                          "trialParameters": trial_parameters, "trialSpec": job},
    }
    stop = getattr(tune, "early_stopping", None)
    if isinstance(stop, HalvingStop):
        raise ValueError(
            "Received tune.early_stopping=HalvingStop with --tune-on katib, expected None or a "
            "MedianStop: Katib's only early-stopping algorithm is its median rule "
            "(medianstop); declare early_stopping=ef.MedianStop(...), or compile with "
            f"--tune-on task (successive halving in the tune task). Received: {stop!r}")
    if stop is not None:
        every = int(stop.every_steps)
        spec["earlyStopping"] = {"algorithmName": "medianstop", "algorithmSettings": [
            {"name": "min_trials_required", "value": str(max(1, int(stop.warmup_trials)))},
            {"name": "start_step", "value": str(int(stop.warmup_steps) // every + 1)}]}
    annotations = {MAPPING_ANNOTATION: json.dumps(mapping, ensure_ascii=False,
                                                  separators=(",", ":"))}
    if getattr(tune, "timeout_s", None) is not None:
        annotations[TIMEOUT_ANNOTATION] = repr(float(tune.timeout_s))
    return {"apiVersion": API_VERSION, "kind": KIND,
            "metadata": {"name": name, "namespace": namespace, "labels": dict(_LABELS),
                         "annotations": annotations},
            "spec": spec}


# --- reading the result back -----------------------------------------------------------------

def parameter_mapping(experiment_object: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The mapping (Katib name -> path, type, ...) :func:`experiment` put in the annotation."""
    annotations = (experiment_object.get("metadata") or {}).get("annotations") or {}
    if MAPPING_ANNOTATION not in annotations:
        raise ValueError(f"the Experiment has no {MAPPING_ANNOTATION} annotation: not compiled "
                         "by estflow")
    return json.loads(annotations[MAPPING_ANNOTATION])


# --- a compiled pipeline's search ------------------------------------------------------------

def trial_command() -> list[str]:
    """The trial's command before ``--assignment``: the trial entry with the tokens of
    :data:`TOKENS` for what only the run knows."""
    return ["python", "-m", TRIAL_MODULE, "--spec", TOKENS["spec"],
            "--examples", TOKENS["examples"], "--transformed", TOKENS["transformed"]]


def trial_resources(pipeline: Any) -> tuple[str | None, Any]:
    """(the step whose resources each trial's pod takes, those resources):
    ``Pipeline.resources["tune"]`` when declared, else ``["train"]`` (a trial trains as the
    train step does), else (None, None)."""
    resources = getattr(pipeline, "resources", None) or {}
    for step in (TUNE.name, TRAIN.name):
        if step in resources:
            return step, resources[step]
    return None, None


def trial_image(pipeline: Any, image: str,
                step_images: Mapping[str, str] | None = None) -> str:
    """The image each trial runs: the one of the step whose resources it takes
    (:func:`trial_resources`), from ``step_images`` (step -> image, the compiler's: overrides
    and accelerator variants): ``tune``'s, else ``train``'s when the trials take its resources,
    else ``image``."""
    step_images = step_images or {}
    source, _ = trial_resources(pipeline)
    return step_images.get(TUNE.name) or (
        step_images.get(TRAIN.name) if source == TRAIN.name else None) or image


def for_pipeline(pipeline: Any, *, image: str, namespace: str | None = None,
                 service_account: str | None = None) -> dict[str, Any]:
    """The Experiment searching ``pipeline.tune``'s space, as the compiler hands it to the tune
    task: the trial command :func:`trial_command`, each trial's pod sized by
    :func:`trial_resources`, running ``image``; named after the pipeline (the task renames it
    per run); ``namespace`` and ``service_account`` when given (else the task's pod's, filled
    in at run time: ``metadata.namespace`` is then absent). Deterministic.

    Raises:
        ValueError: no search declared, or one Katib cannot run (see :func:`experiment`).
    """
    tune = pipeline.tune
    if tune is None:
        raise ValueError("Received a pipeline without a search (Pipeline.tune is None), "
                         "expected one to compile to a Katib Experiment")
    name = katib_name(f"{pipeline.name}-tune")[:40].rstrip("-")
    compiled = experiment(tune, name=name, namespace=namespace or _STAND_IN_NAMESPACE,
                          image=image, command=trial_command(),
                          trial_resources=trial_resources(pipeline)[1],
                          service_account=service_account)
    if namespace is None:
        del compiled["metadata"]["namespace"]
    return compiled


def with_experiment(plan: Any, *, image: str, step_images: Mapping[str, str] | None = None,
                    namespace: str | None = None, service_account: str | None = None) -> Any:
    """``plan`` (:class:`estflow.pipelines.plan.Plan`) with its tune step taking the
    Experiment (:func:`for_pipeline`) as its :data:`OPTION`, compact JSON with sorted keys;
    the fingerprint step keys the tune step with it. Unchanged without a tune step.

    The trials run the image of the step whose resources they take (:func:`trial_resources`):
    ``step_images`` (step -> image, the compiler's: overrides and accelerator variants) of
    ``tune``, else of ``train`` when the trials take its resources, else ``image``.
    """
    if not any(s.name == TUNE.name for s in plan.steps) or plan.pipeline.tune is None:
        return plan
    compiled = for_pipeline(plan.pipeline, image=trial_image(plan.pipeline, image, step_images),
                            namespace=namespace, service_account=service_account)
    return with_tune_option(plan, OPTION, compiled)


def with_tune_option(plan: Any, option: str, value: Any, drop: Sequence[str] = ()) -> Any:
    """``plan`` with its tune step's ``option`` set to ``value`` as compact JSON with sorted
    keys (and the options ``drop`` removed), the fingerprint step keying the tune step with
    it: how a compiled search reaches the tune task (:func:`with_experiment`, and the drawn
    trials of :mod:`estflow.pipelines.kubeflow.tune_fan_out`)."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    gone = {option, *drop}
    steps = tuple(dataclasses.replace(s, options=(*((k, v) for k, v in s.options
                                                    if k not in gone), (option, text)))
                  if s.name == TUNE.name else s for s in plan.steps)
    planned = dataclasses.replace(plan, steps=steps)
    if plan.fingerprint is not None:
        source_root = dict(plan.fingerprint.options)["source-root"]
        planned = dataclasses.replace(planned, fingerprint=fingerprint_step(planned,
                                                                            source_root))
    return planned
