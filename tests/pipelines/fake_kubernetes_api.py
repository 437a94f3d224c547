"""A small fake Kubernetes API with Katib v0.19.0 on 127.0.0.1 (plain HTTP, no credentials),
for the search task (components/_runtime/katib.py) and the compiled Experiment
(pipelines/kubeflow/katib.py).

It stands in for a cluster, which cannot run here. ``with FakeKatibApi() as api:`` serves, in
a thread (``http.server``), ``experiments`` of ``kubeflow.org/v1beta1`` under
``/apis/kubeflow.org/v1beta1/namespaces/NS/experiments[/NAME]``: create (``POST``), get,
list (``GET``), delete (``DELETE``). Every request is recorded in ``calls`` as (API group,
resource, verb), for the RBAC test.

A created Experiment is admitted as Katib v0.19.0 admits it, else refused with HTTP 400 and
the reasons (the validating webhook answers 400; the API server adds the webhook's name):

* jsonschema against the committed CRD's ``openAPIV3Schema``
  (tests/pipelines/schemas/katib-v0.19.0/experiment.yaml: only ``type: object``, as the API
  server checks it) and, strictly (unknown fields refused), against Katib's OpenAPI schema of
  ``v1beta1.Experiment`` (experiment-openapi.json): what the webhook's decoding into Katib's Go
  types checks, and more (the webhook drops an unknown field, which this refuses);
* the namespace exists (else 404 ``namespaces "NS" not found``, as the API server answers) and
  has the label ``katib.kubeflow.org/metrics-collector-injection: enabled`` (the webhook's
  check);
* the rules of Katib's ``validator.go`` an Experiment of this shape meets: name (at most 40
  characters), trial counts, objective, algorithm and early stopping names known to
  katib-config, parameter types, distributions and feasible spaces, the trial template
  (primary container, conditions, trial parameters: names, references, every placeholder
  matched both ways in the template's JSON text, no name or namespace, a ``batch/v1`` Job the
  Kubernetes client's ``V1Job`` model reads without losing a field, as the webhook's conversion
  to ``batchv1.Job`` does), the metrics collector (kind, filter regular expressions with two
  groups); and the primary container exists in the Job (the pod webhook's check).

Then it plays Katib's controller, by ``outcome``:

``"succeeded"`` (default)  the first GET shows it Running (one trial running), the next ones
                           Succeeded (``ExperimentMaxTrialsReached``) with
                           ``currentOptimalTrial`` built from the spec: each parameter's
                           ``pick`` (default: its first feasible value: ``min``, or the list's
                           first entry), the objective's value ``objective_value``;
``"failed"``               Running, then Failed (``max failed count``);
``"no-metrics"``           Running, then Succeeded with no optimal trial (every trial's metric
                           unavailable);
``"endless"``              Running for ever: GET k shows trials k and k+1 running, the earlier
                           ones succeeded, the best so far from the second GET on.

What Katib's suggestion service checks when it starts (algorithm settings: Hyperopt's and
Optuna's validators; a grid's trials at most its combinations; medianstop's settings) comes
later in a real cluster, as a Failed Experiment: here too (:func:`suggestion_errors`).

The trial's Job is rendered as Katib renders it (``GetRunSpecWithHyperParameters``: each
``${trialParameters.NAME}`` replaced by the assigned value, as raw text, in the template's JSON
text): ``trial_jobs[name]`` holds the best trial's Job.

``katib_installed=False``: every Katib path answers 404 as an API server without the CRD does
(``not_found_body="status"``: a ``Status`` "the server could not find the requested
resource"; ``"text"``: ``404 page not found``).
"""

from __future__ import annotations

import copy
import json
import math
import re
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from http.server import ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import jsonschema
import yaml

SCHEMAS = Path(__file__).resolve().parent / "schemas" / "katib-v0.19.0"
INJECTION_LABEL = "katib.kubeflow.org/metrics-collector-injection"
_PATH = re.compile(r"^/apis/kubeflow\.org/v1beta1/namespaces/([^/]+)/experiments(?:/([^/?]+))?"
                   r"(?:\?.*)?$")
# katib-config.yaml of v0.19.0 (manifests/v1beta1/installs/katib-standalone)
SUGGESTIONS = ("random", "tpe", "grid", "hyperband", "bayesianoptimization", "cmaes", "sobol",
               "multivariate-tpe", "enas", "darts", "pbt")
EARLY_STOPPINGS = ("medianstop",)
COLLECTORS = ("StdOut", "File", "TensorFlowEvent", "PrometheusMetric", "Custom", "Push")
_PLACEHOLDER = re.compile(r"\$\{trialParameters\..+?\}")
_META = re.compile(r"\$\{trialSpec\.(.+?)\}")
_META_KEYS = ("Name", "Namespace", "Kind", "APIVersion", "Annotations", "Labels")


# --- the schemas -------------------------------------------------------------------------------

def crd_validator() -> jsonschema.Draft4Validator:
    """The committed CRD's openAPIV3Schema (v1beta1)."""
    crd = yaml.safe_load((SCHEMAS / "experiment.yaml").read_text())
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1beta1"]
    return jsonschema.Draft4Validator(version["schema"]["openAPIV3Schema"])


def openapi_validator() -> jsonschema.Draft4Validator:
    """Katib's OpenAPI schema of v1beta1.Experiment, Katib's own object schemas strict."""
    document = json.loads((SCHEMAS / "experiment-openapi.json").read_text())
    assert document["x-estflow-source"]["tag"] == "v0.19.0"
    schemas = document["components"]["schemas"]
    for name, schema in schemas.items():
        if name.startswith("v1beta1.") and "properties" in schema:
            schema["additionalProperties"] = False
    return jsonschema.Draft4Validator({"$ref": "#/components/schemas/v1beta1.Experiment",
                                       "components": {"schemas": schemas}})


def schema_errors(experiment: dict[str, Any]) -> list[str]:
    """What the two schemas refuse in ``experiment`` (``path: message``)."""
    errors = []
    for label, validator in (("CRD", crd_validator()), ("Katib types", openapi_validator())):
        for e in sorted(validator.iter_errors(experiment), key=lambda e: list(e.path)):
            errors.append(f"{label}: {'.'.join(map(str, e.path)) or '<root>'}: {e.message}")
    return errors


# --- Katib's validator (pkg/webhook/v1beta1/experiment/validator/validator.go) -----------------

def template_text(trial_spec: dict[str, Any]) -> str:
    """The trial template's JSON text, as Katib's ``ConvertUnstructuredToString`` writes it
    (Go's MarshalJSON: compact, keys sorted, ``<``, ``>``, ``&`` as ``\\u003c``...)."""
    text = json.dumps(trial_spec, separators=(",", ":"), sort_keys=True, ensure_ascii=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _job_conversion_errors(job: dict[str, Any]) -> list[str]:
    """Fields of ``job`` the Kubernetes ``V1Job`` model does not keep (the webhook converts the
    template to batchv1.Job and refuses one that changes; resources' values exempt)."""
    from kubernetes import client as k8s

    api = k8s.ApiClient()
    try:
        model = api.deserialize(SimpleNamespace(data=json.dumps(job)), "V1Job")
    except (ValueError, TypeError) as err:
        return [f"unable to convert spec.trialTemplate to Job: {err}"]
    back = api.sanitize_for_serialization(model)
    errors: list[str] = []

    def compare(a: Any, b: Any, where: str) -> None:
        if "/resources/limits/" in where + "/" or "/resources/requests/" in where + "/":
            return
        if isinstance(a, dict):
            for k, v in a.items():
                if not isinstance(b, dict) or k not in b:
                    errors.append(f"unable to convert: {where}/{k} - {v!r} to Job")
                else:
                    compare(v, b[k], f"{where}/{k}")
        elif isinstance(a, list):
            if not isinstance(b, list) or len(a) != len(b):
                errors.append(f"unable to convert: {where} - {a!r} to Job")
            else:
                for i, (x, y) in enumerate(zip(a, b, strict=True)):
                    compare(x, y, f"{where}/{i}")
        elif a != b:
            errors.append(f"unable to convert: {where} - {a!r} to Job")

    compare(job, back, "")
    return errors


def webhook_errors(experiment: dict[str, Any]) -> list[str]:
    """The validator's findings for a new Experiment (``field: message``)."""
    errors: list[str] = []
    name = (experiment.get("metadata") or {}).get("name") or ""
    if not re.match(r"^[a-z]([-a-z0-9]*[a-z0-9])?", name) or len(name) > 40:
        errors.append(f"metadata.name: Invalid value: {name!r}: name must consist of lower case "
                      "alphanumeric characters or '-', start with an alphabetic character, and "
                      "end with an alphanumeric character and may not be longer than 40 "
                      "characters")
    spec = experiment.get("spec") or {}
    max_trials, parallel = spec.get("maxTrialCount"), spec.get("parallelTrialCount")
    max_failed = spec.get("maxFailedTrialCount")
    if max_failed is not None and max_failed < 0:
        errors.append("spec.maxFailedTrialCount: should not be less than 0")
    if max_trials is not None and max_trials <= 0:
        errors.append("spec.maxTrialCount: must be greater than 0")
    if parallel is not None and parallel <= 0:
        errors.append("spec.parallelTrialCount: must be greater than 0")
    if max_failed is not None and max_trials is not None and max_failed > max_trials:
        errors.append("spec.maxFailedTrialCount: should be less than or equal to "
                      "spec.maxTrialCount")
    if parallel is not None and max_trials is not None and parallel > max_trials:
        errors.append("spec.parallelTrialCount: should be less than or equal to "
                      "spec.maxTrialCount")
    objective = spec.get("objective")
    if objective is None:
        return errors + ["spec.objective: Required value: must be specified"]
    if objective.get("type") not in ("minimize", "maximize"):
        errors.append(f"spec.objective.type: Invalid value: {objective.get('type')!r}: must be "
                      "minimize or maximize")
    if not objective.get("objectiveMetricName"):
        errors.append("spec.objective.objectiveMetricName: Required value")
    if objective.get("objectiveMetricName") in (objective.get("additionalMetricNames") or ()):
        errors.append("spec.objective.additionalMetricNames: should not contain "
                      "spec.objective.objectiveMetricName")
    algorithm = spec.get("algorithm")
    if algorithm is None:
        errors.append("spec.algorithm: Required value: must be specified")
    elif algorithm.get("algorithmName") not in SUGGESTIONS:
        errors.append(f"spec.algorithm.algorithmName: Invalid value: "
                      f"{algorithm.get('algorithmName')!r}: unable to get Suggestion config data")
    stop = spec.get("earlyStopping")
    if stop is not None and stop.get("algorithmName") not in EARLY_STOPPINGS:
        errors.append(f"spec.earlyStopping.algorithmName: Invalid value: "
                      f"{stop.get('algorithmName')!r}: unable to get EarlyStopping config data")
    if spec.get("resumePolicy", "") not in ("", "Never", "LongRunning", "FromVolume"):
        errors.append("spec.resumePolicy: invalid ResumePolicyType")
    errors += _template_errors(spec)
    parameters = spec.get("parameters") or []
    if not parameters and spec.get("nasConfig") is None:
        errors.append("spec: Required value: spec.parameters or spec.nasConfig must be "
                      "specified")
    names = [p.get("name") for p in parameters]
    if len(set(names)) != len(names):
        errors.append(f"spec.parameters: duplicate names {names}")
    for i, p in enumerate(parameters):
        at, kind, space = f"spec.parameters[{i}]", p.get("parameterType"), p.get(
            "feasibleSpace") or {}
        if kind not in ("int", "double", "categorical", "discrete", "unknown"):
            errors.append(f"{at}.parameterType: parameterType: {kind} is not supported")
        if space.get("distribution", "") not in ("", "uniform", "logUniform", "normal",
                                                 "logNormal", "unknown"):
            errors.append(f"{at}.feasibleSpace.distribution: distribution: "
                          f"{space['distribution']} is not supported")
        if not space:
            errors.append(f"{at}.feasibleSpace: Required value: feasibleSpace must be specified")
        elif kind in ("int", "double"):
            if space.get("list"):
                errors.append(f"{at}.feasibleSpace.list: not supported for {kind}")
            if not space.get("max") or not space.get("min"):
                errors.append(f"{at}.feasibleSpace.max: feasibleSpace.max or feasibleSpace.min "
                              f"must be specified for parameterType: {kind}")
        elif kind in ("categorical", "discrete"):
            if space.get("max") or space.get("min") or space.get("step"):
                errors.append(f"{at}.feasibleSpace: .max, .min and .step is not supported for "
                              f"parameterType: {kind}")
        if len(set(space.get("list") or ())) != len(space.get("list") or ()):
            errors.append(f"{at}.feasibleSpace.list: duplicate values (a set)")
    errors += _collector_errors(spec)
    return errors


def _template_errors(spec: dict[str, Any]) -> list[str]:
    template = spec.get("trialTemplate")
    if template is None:
        return ["spec.trialTemplate: Required value: must be specified"]
    errors = []
    if not template.get("primaryContainerName"):
        errors.append("spec.trialTemplate.primaryContainerName: Required value")
    if not template.get("successCondition") or not template.get("failureCondition"):
        errors.append("spec.trialTemplate: successCondition and failureCondition must be "
                      "specified")
    if template.get("trialParameters") is None:
        return errors + ["spec.trialTemplate.trialParameters: Required value"]
    job = template.get("trialSpec")
    if job is None:
        return errors + ["spec.trialTemplate.TrialSource: spec.trialTemplate.trialSpec or "
                         "spec.trialTemplate.configMap must be specified"]
    text = template_text(job)
    parameter_names = {p.get("name") for p in spec.get("parameters") or ()}
    seen_names, seen_refs = set(), set()
    for i, p in enumerate(template["trialParameters"]):
        at = f"spec.trialTemplate.trialParameters[{i}]"
        name, ref = p.get("name") or "", p.get("reference") or ""
        if not name or not ref or "{" in name or "}" in name:
            errors.append(f"{at}: name and reference must be specified and name must not "
                          "contain '{' or '}'")
            continue
        if name in seen_names or ref in seen_refs:
            errors.append(f"{at}: name or reference duplicated")
            continue
        seen_names.add(name)
        seen_refs.add(ref)
        meta = _META.match(ref)
        is_meta = bool(meta) and (meta.group(1) in _META_KEYS or re.match(
            r"^(Annotations|Labels)\[.+\]$", meta.group(1)) is not None)
        if parameter_names and not is_meta and ref not in parameter_names:
            errors.append(f"{at}.reference: parameter reference {ref} does not exist in "
                          "spec.parameters")
        placeholder = "${trialParameters." + name + "}"
        if placeholder not in text:
            errors.append(f"{at}.name: parameter name: {name} in spec.trialParameters not "
                          "found in spec.trialTemplate")
            return errors
        text = text.replace(placeholder, "test-value")
    left = _PLACEHOLDER.findall(text)
    if left:
        errors.append(f"spec.trialTemplate: parameters: {left} in spec.trialTemplate not found "
                      "in spec.trialParameters")
    try:
        rendered = json.loads(text)
    except ValueError as err:
        return errors + [f"spec.trialTemplate: unable to convert to unstructured: {err}"]
    metadata = rendered.get("metadata") or {}
    if metadata.get("name") or metadata.get("namespace"):
        errors.append("spec.trialTemplate: metadata.name and metadata.namespace in "
                      "spec.trialTemplate must be omitted")
    if not rendered.get("apiVersion") or not rendered.get("kind"):
        errors.append("spec.trialTemplate: APIVersion and Kind in spec.trialTemplate must be "
                      "specified")
    if rendered.get("apiVersion") == "batch/v1" and rendered.get("kind") == "Job":
        errors += [f"spec.trialTemplate: invalid spec.trialTemplate: {e}"
                   for e in _job_conversion_errors(rendered)]
        containers = ((((rendered.get("spec") or {}).get("template") or {}).get("spec") or {})
                      .get("containers") or [])
        if template.get("primaryContainerName") not in [c.get("name") for c in containers]:
            errors.append("spec.trialTemplate.primaryContainerName: no container of that name "
                          "in the trial's pod")
    return errors


def _collector_errors(spec: dict[str, Any]) -> list[str]:
    collector = (spec.get("metricsCollectorSpec") or {}).get("collector") or {"kind": "StdOut"}
    errors = []
    if collector.get("kind") not in COLLECTORS:
        errors.append(f"spec.metricsCollectorSpec.collector.kind: invalid metrics collector "
                      f"kind: {collector.get('kind')}")
    source = (spec.get("metricsCollectorSpec") or {}).get("source") or {}
    for f in (source.get("filter") or {}).get("metricsFormat") or ():
        try:
            re.compile(f)  # Python's re for Go's RE2: the filters estflow writes use both's
        except re.error as err:  # common syntax
            errors.append(f"spec.metricsCollectorSpec.source.filter.metricsFormat: invalid "
                          f"filter: {err}")
            continue
        if not re.match(r".*\(.*\).*\(.*\).*", f):
            errors.append("spec.metricsCollectorSpec.source.filter.metricsFormat: two top "
                          "subexpressions are required")
    return errors


# --- the suggestion and early-stopping services' own checks -----------------------------------

def _grid_combinations(parameters: list[dict[str, Any]]) -> int:
    """Katib's ``HyperParameterSearchSpace.convert_to_combinations`` (internal/search_space.py),
    counted; raises ValueError for a double without step."""
    total = 1
    for p in parameters:
        space = p["feasibleSpace"]
        if p["parameterType"] == "int":
            total *= len(range(int(space["min"]), int(space["max"]) + 1,
                               int(space.get("step") or 1)))
        elif p["parameterType"] == "double":
            if not space.get("step"):
                raise ValueError(f"Param {p['name']} step is nil; For discrete search space, "
                                 "all parameters must include step")
            lo, hi, step = (float(space[k]) for k in ("min", "max", "step"))
            count = math.ceil((hi + step - lo) / step)  # np.arange(lo, hi + step, step)
            total *= count - (lo + (count - 1) * step > hi)
        else:
            total *= len(space["list"])
    return total


def suggestion_errors(experiment: dict[str, Any]) -> list[str]:
    """What Katib's suggestion service (Hyperopt for tpe/random, Optuna for grid) and the
    medianstop service refuse when they validate the settings (the Experiment then fails)."""
    spec = experiment["spec"]
    algorithm = spec["algorithm"]
    errors = []
    allowed = {"tpe": ("gamma", "prior_weight", "n_EI_candidates", "random_state"),
               "random": ("random_state",), "grid": ("random_state",)}
    for s in algorithm.get("algorithmSettings") or ():
        if s["name"] not in allowed.get(algorithm["algorithmName"], ()):
            errors.append(f"unknown setting {s['name']} for algorithm "
                          f"{algorithm['algorithmName']}")
        elif s["name"] == "random_state" and not int(s["value"]) >= 0:
            errors.append("random_state should be great or equal than zero")
    if algorithm["algorithmName"] == "grid":
        try:
            combinations = _grid_combinations(spec["parameters"])
            if spec["maxTrialCount"] > combinations:
                errors.append(f"Max Trial Count: {spec['maxTrialCount']} > all possible search "
                              f"combinations: {combinations}")
        except ValueError as err:
            errors.append(f"failed to validate parameters: {err}")
    for s in (spec.get("earlyStopping") or {}).get("algorithmSettings") or ():
        if s["name"] == "min_trials_required" and not int(s["value"]) > 0:
            errors.append("min_trials_required must be greater than zero (>0)")
        elif s["name"] == "start_step" and not int(s["value"]) >= 1:
            errors.append("start_step must be greater or equal than one (>=1)")
        elif s["name"] not in ("min_trials_required", "start_step"):
            errors.append(f"unknown setting {s['name']} for algorithm medianstop")
    return errors


def render_trial(experiment: dict[str, Any], trial: str, assignments: dict[str, str]
                 ) -> dict[str, Any]:
    """The trial's Job as Katib renders it: the template's JSON text with each
    ``${trialParameters.NAME}`` replaced by its value as raw text, then read back."""
    template = experiment["spec"]["trialTemplate"]
    text = template_text(template["trialSpec"])
    for p in template["trialParameters"]:
        meta = _META.match(p["reference"])
        if meta and meta.group(1) == "Name":
            value = trial
        elif meta and meta.group(1) == "Namespace":
            value = experiment["metadata"]["namespace"]
        else:
            value = assignments[p["reference"]]
        text = text.replace("${trialParameters." + p["name"] + "}", value)
    job = json.loads(text)
    job.setdefault("metadata", {}).update(name=trial,
                                          namespace=experiment["metadata"]["namespace"])
    return job


def first_feasible(parameter: dict[str, Any]) -> str:
    """A parameter's first feasible value, as Katib writes an assignment."""
    space = parameter["feasibleSpace"]
    return space["list"][0] if space.get("list") else space["min"]


# --- the server ------------------------------------------------------------------------------

class FakeKatibApi:
    """``with FakeKatibApi() as api:``; ``api.url``, ``api.experiments``, ``api.calls``."""

    def __init__(self, *, outcome: str = "succeeded", katib_installed: bool = True,
                 not_found_body: str = "status",
                 namespaces: dict[str, dict[str, str]] | None = None,
                 pick: Callable[[dict[str, Any]], str] = first_feasible,
                 objective_value: str = "0.8731") -> None:
        self.outcome, self.katib_installed = outcome, katib_installed
        self.not_found_body = not_found_body
        self.namespaces = ({"ml": {INJECTION_LABEL: "enabled"}} if namespaces is None
                           else namespaces)
        self.pick, self.objective_value = pick, objective_value
        self.experiments: dict[tuple[str, str], dict[str, Any]] = {}
        self.created: list[dict[str, Any]] = []  # every accepted body, as sent
        self.refused: list[tuple[int, str]] = []
        self.trial_jobs: dict[str, dict[str, Any]] = {}
        self.calls: list[tuple[str, str, str]] = []
        self._gets: dict[tuple[str, str], int] = {}
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> FakeKatibApi:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    # -- the API -------------------------------------------------------------------------------
    def _handle(self, method: str, path: str, body: bytes) -> tuple[int, Any]:
        match = _PATH.match(path)
        if not match or not self.katib_installed:
            if self.not_found_body == "text":
                return 404, "404 page not found\n"
            return 404, _status(404, "the server could not find the requested resource",
                                "NotFound")
        namespace, name = match.groups()
        verb = {"POST": "create", "DELETE": "delete", "GET": "get" if name else "list"}.get(
            method, method.lower())
        with self._lock:
            self.calls.append(("kubeflow.org", "experiments", verb))
            if namespace not in self.namespaces:
                return 404, _status(404, f'namespaces "{namespace}" not found', "NotFound",
                                    {"name": namespace, "kind": "namespaces"})
            if method == "POST" and not name:
                return self._create(namespace, json.loads(body))
            if method == "GET" and not name:
                items = [self._observe(k) for k in sorted(self.experiments) if k[0] == namespace]
                return 200, {"apiVersion": "kubeflow.org/v1beta1", "kind": "ExperimentList",
                             "metadata": {}, "items": items}
            if (namespace, name) not in self.experiments:
                return 404, _status(404, f'experiments.kubeflow.org "{name}" not found',
                                    "NotFound", {"name": name, "group": "kubeflow.org",
                                                 "kind": "experiments"})
            if method == "GET":
                return 200, self._observe((namespace, name))
            if method == "DELETE":
                del self.experiments[(namespace, name)]
                return 200, {"kind": "Status", "apiVersion": "v1", "status": "Success",
                             "details": {"name": name, "group": "kubeflow.org",
                                         "kind": "experiments"}}
        return 405, _status(405, f"{method} is not allowed", "MethodNotAllowed")

    def _create(self, namespace: str, experiment: dict[str, Any]) -> tuple[int, Any]:
        meta = experiment.get("metadata") or {}
        name = meta.get("name")
        if meta.get("namespace", namespace) != namespace:
            return 400, _status(400, "the namespace of the provided object does not match the "
                                "namespace sent on the request", "BadRequest")
        if (namespace, name) in self.experiments:
            return 409, _status(409, f'experiments.kubeflow.org "{name}" already exists',
                                "AlreadyExists", {"name": name, "group": "kubeflow.org",
                                                  "kind": "experiments"})
        errors = schema_errors(experiment)
        if self.namespaces[namespace].get(INJECTION_LABEL) != "enabled":
            errors.append(f'Cannot create the Experiment "{name}" in namespace "{namespace}": '
                          f'the namespace lacks label "{INJECTION_LABEL}: enabled"')
        if not errors:
            errors = webhook_errors(experiment)
        if errors:
            message = ('admission webhook "validator.experiment.katib.kubeflow.org" denied the '
                       "request: " + "; ".join(errors))
            self.refused.append((400, message))
            return 400, _status(400, message, "BadRequest")
        self.created.append(copy.deepcopy(experiment))
        stored = copy.deepcopy(experiment)
        stored["metadata"].update(namespace=namespace, uid=f"uid-{len(self.created)}",
                                  creationTimestamp="2026-03-01T00:00:00Z")
        stored["status"] = {"conditions": [_condition("Created", "ExperimentCreated",
                                                      "Experiment is created")]}
        self.experiments[(namespace, name)] = stored
        self._gets[(namespace, name)] = 0
        return 201, stored

    def _observe(self, key: tuple[str, str]) -> dict[str, Any]:
        """A GET: Katib's controller moves the Experiment on (see ``outcome``)."""
        experiment = self.experiments[key]
        self._gets[key] += 1
        n, spec, name = self._gets[key], experiment["spec"], key[1]
        later = suggestion_errors(experiment)
        total = spec.get("maxTrialCount") or 1
        running = [_condition("Created", "ExperimentCreated", "Experiment is created"),
                   _condition("Running", "ExperimentRunning", "Experiment is running")]
        if later:
            experiment["status"] = {"conditions": [*running[:1], _condition(
                "Failed", "ExperimentFailed", "Suggestion service failed to validate the "
                "settings: " + "; ".join(later))]}
        elif self.outcome == "endless":
            experiment["status"] = {
                "conditions": running, "trials": n + 1, "trialsRunning": 2,
                "trialsSucceeded": n - 1,
                "runningTrialList": [f"{name}-trial-{n}", f"{name}-trial-{n + 1}"],
                "succeededTrialList": [f"{name}-trial-{i}" for i in range(1, n)]}
            if n >= 2:
                experiment["status"]["currentOptimalTrial"] = self._optimal(
                    experiment, f"{name}-trial-1")
        elif n == 1:
            experiment["status"] = {"conditions": running, "trials": 1, "trialsRunning": 1,
                                    "runningTrialList": [f"{name}-trial-1"]}
        elif self.outcome == "failed":
            failed = spec.get("maxFailedTrialCount") or 1
            experiment["status"] = {
                "conditions": [running[0], _condition("Running", "ExperimentRunning",
                                                      "Experiment is running", "False"),
                               _condition("Failed", "ExperimentFailed",
                                          "Experiment has failed because max failed count has "
                                          "reached")],
                "trials": failed, "trialsFailed": failed,
                "failedTrialList": [f"{name}-trial-{i}" for i in range(1, failed + 1)]}
        else:
            succeeded = [running[0], _condition("Running", "ExperimentRunning",
                                                "Experiment is running", "False"),
                         _condition("Succeeded", "ExperimentMaxTrialsReached",
                                    "Experiment has succeeded because max trial count has "
                                    "reached")]
            trial_names = [f"{name}-trial-{i}" for i in range(1, total + 1)]
            if self.outcome == "no-metrics":
                experiment["status"] = {"conditions": succeeded, "trials": total,
                                        "trialMetricsUnavailable": total,
                                        "metricsUnavailableTrialList": trial_names}
            else:
                experiment["status"] = {"conditions": succeeded, "trials": total,
                                        "trialsSucceeded": total,
                                        "succeededTrialList": trial_names,
                                        "currentOptimalTrial": self._optimal(
                                            experiment, trial_names[0])}
        return copy.deepcopy(experiment)

    def _optimal(self, experiment: dict[str, Any], trial: str) -> dict[str, Any]:
        assignments = {p["name"]: self.pick(p) for p in experiment["spec"]["parameters"]}
        self.trial_jobs[trial] = render_trial(experiment, trial, assignments)
        objective = experiment["spec"]["objective"]["objectiveMetricName"]
        value = self.objective_value
        return {"bestTrialName": trial,
                "parameterAssignments": [{"name": k, "value": v}
                                         for k, v in assignments.items()],
                "observation": {"metrics": [{"name": objective, "min": value, "max": value,
                                             "latest": value}]}}

    def _handler(self):
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def _serve(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                code, payload = fake._handle(self.command, self.path,
                                             self.rfile.read(length) if length else b"")
                if isinstance(payload, str):
                    data, kind = payload.encode(), "text/plain; charset=utf-8"
                else:
                    data, kind = json.dumps(payload).encode(), "application/json"
                self.send_response(code)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _serve

            def log_message(self, *args) -> None:  # keep test output clean
                pass

        return Handler


def _condition(kind: str, reason: str, message: str, status: str = "True") -> dict[str, str]:
    return {"type": kind, "status": status, "reason": reason, "message": message,
            "lastUpdateTime": "2026-03-01T00:00:00Z",
            "lastTransitionTime": "2026-03-01T00:00:00Z"}


def _status(code: int, message: str, reason: str, details: dict | None = None) -> dict:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "details": details or {}, "code": code}
