"""The hyperparameter search's task on Kubeflow: create the Katib ``Experiment`` estflow compiled
(``estflow.pipelines.kubeflow.katib.experiment``), follow it to its end, write the best trial.

``python -m estflow.components._runtime.katib --experiment FILE_OR_JSON --output DIR
[--name NAME] [--namespace NS] [--poll-seconds S] [--timeout-seconds S] [--host URL]``

1. create the Experiment (``kubeflow.org/v1beta1``, the Kubernetes API with the pod's service
   account; ``--host``: an API without credentials, for tests). Its name and namespace may be
   set at run time (``--name``, ``--namespace``). An Experiment of that name made by an earlier
   attempt of the task (same spec: :data:`SPEC_ANNOTATION`) is followed, not made again;
2. poll its status every ``--poll-seconds``, a line per change: its state, its trials' counts,
   the best trial so far; until its ``Succeeded`` or ``Failed`` condition is True;
3. write ``DIR/best.json``: ``{"assignment": {path: value}, "objective": name, "value":
   float, "trial": name}``, the best trial's values as estflow paths (tuples as JSON arrays; a
   conditional dimension inactive for them left out), its objective value as the Experiment's
   metric strategy takes it (the last reported), its trial's name.

A failed Experiment (more failed trials than ``max_failures``) is an error, the Experiment kept
for inspection; so is a search where no trial reported the objective. ``--timeout-seconds``
(default: the Experiment's ``estflow.dev/tune-timeout-seconds`` annotation, ``Tune.timeout_s``)
is Tune's: once passed, the trials running then are waited for, the best trial so far is taken
and the Experiment deleted (which stops the trials Katib started since). Stopped (SIGTERM,
Ctrl-C), the task deletes the Experiment, so its trials stop too.

Katib not installed (the API answers 404 for ``experiments.kubeflow.org``) is an error saying
so: install Katib (Kubeflow 26.03 includes it), or compile with ``estflow compile --tune-on
task`` (the search inside the tune task). The Kubernetes calls are :data:`API_CALLS`, which
the RBAC Role must allow (``estflow rbac``).

The tune step's task (``python -m estflow.components.tune --katib-experiment JSON``) uses
:func:`follow` and the helpers below it: the KFP input paths as the bucket URIs the trials
read (:func:`bucket_uri`), the Experiment's run-time name (:func:`experiment_name`), the pod's
namespace and service account (:func:`pod_namespace`, :func:`pod_service_account`), the
Experiment filled in for this run (:func:`filled`).

Stdlib and the ``kubernetes`` client only (components and pipelines are independent): the
compiler writes the Experiment, this module alone reads its best trial back (:func:`best_of`).
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import hashlib
import json
import os
import shlex
import signal
import sys
import threading
import time
from collections.abc import Callable
from collections.abc import Iterator
from collections.abc import Mapping
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from estflow.dsl.tune import frozen
from estflow.dsl.tune import same_choice

__all__ = ["GROUP", "VERSION", "PLURAL", "API_CALLS", "MAPPING_ANNOTATION", "SPEC_ANNOTATION",
           "TIMEOUT_ANNOTATION", "TOKENS", "KFP_MOUNTS", "POD_FOLDER", "KatibError",
           "KatibMissing", "SearchFailed", "state", "best_of", "counts", "parameter_mapping", "active", "follow",
           "run_search", "api", "bucket_uri", "experiment_name", "pod_namespace",
           "pod_service_account", "filled", "stopped_by_sigterm", "is_client_error", "main"]

GROUP, VERSION, PLURAL = "kubeflow.org", "v1beta1", "experiments"
API_CALLS = ((GROUP, PLURAL, "create"), (GROUP, PLURAL, "get"), (GROUP, PLURAL, "delete"))
"""(API group, resource, verb) of every Kubernetes call this task makes: create the
Experiment, get it (adopting one, polling), delete it (stopped, timed out)."""
MAPPING_ANNOTATION = "estflow.dev/tune-parameters"
TIMEOUT_ANNOTATION = "estflow.dev/tune-timeout-seconds"
SPEC_ANNOTATION = "estflow.dev/tune-spec-sha256"
"""The sha256 of the created spec (canonical JSON), so a retried task recognises its own
Experiment (Katib's defaulting webhook rewrites the spec it stores)."""
_PREFIX = "[tune]"
_MAX_POLL_ERRORS = 10
TOKENS = {"spec": "{spec}", "examples": "{examples}", "transformed": "{transformed}"}
"""The literal tokens the compiled trial command holds for what only the run knows (the
spec the tune task got, its input artifacts' URIs): :func:`filled` replaces them. The same
as ``estflow.pipelines.kubeflow.katib.TOKENS`` (a test keeps them equal)."""
KFP_MOUNTS = (("/gcs/", "gs://"), ("/s3/", "s3://"), ("/minio/", "s3://"))
"""KFP v2's launcher's local path of an artifact -> the URI it stands for (KFP's MinIO store
speaks S3: ``minio://`` is read as ``s3://``, its endpoint from the environment)."""
POD_FOLDER = Path("/var/run/secrets/kubernetes.io/serviceaccount")
"""Where a pod finds its namespace (``namespace``) and its service account's token (``token``)."""
_NAME_LIMIT = 40  # Katib's limit on an Experiment's name


class KatibError(RuntimeError):
    """The search could not run, failed, or found nothing."""


class KatibMissing(KatibError):
    """The cluster has no Katib (no experiments.kubeflow.org resource)."""


class SearchFailed(KatibError):
    """The Experiment failed or no trial reported the objective."""


# --- reading an Experiment -------------------------------------------------------------------

def state(experiment: Mapping[str, Any]) -> tuple[str, str]:
    """(state, message): ``Succeeded`` or ``Failed`` when that condition is True, else the
    latest True condition's type (``Created``, ``Running``, ``Restarting``), else
    ``Pending``."""
    conditions = [c for c in ((experiment.get("status") or {}).get("conditions") or ())
                  if str(c.get("status")) == "True"]
    for final in ("Failed", "Succeeded"):
        for c in conditions:
            if c.get("type") == final:
                return final, str(c.get("message") or c.get("reason") or "")
    if not conditions:
        return "Pending", ""
    last = conditions[-1]
    return str(last.get("type")), str(last.get("message") or last.get("reason") or "")


def _decoded(entry: Mapping[str, Any], text: str) -> Any:
    kind = entry["type"]
    if kind == "int":
        try:
            return int(text)
        except ValueError:
            return int(round(float(text)))
    if kind == "double":
        return float(text)
    inner = json.loads(f'"{text}"')
    if entry.get("slot") == "string":
        return json.loads(f'"{inner}"')
    return frozen(json.loads(inner))


def parameter_mapping(experiment: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The Experiment's parameter mapping (Katib name -> path, type, ...), which estflow's
    compiler put in its annotation.

    Raises:
        KatibError: the Experiment has none (not compiled by estflow).
    """
    return _mapping(experiment)


def _mapping(experiment: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    annotations = (experiment.get("metadata") or {}).get("annotations") or {}
    if MAPPING_ANNOTATION not in annotations:
        raise KatibError(f"the Experiment has no {MAPPING_ANNOTATION} annotation: compile it "
                         "with estflow (estflow.pipelines.kubeflow.katib.experiment)")
    return json.loads(annotations[MAPPING_ANNOTATION])


def _assignment(assigned: Mapping[str, str], mapping: Mapping[str, Mapping[str, Any]]
                ) -> dict[str, Any]:
    kept: dict[str, Any] = {}
    for name, entry in mapping.items():
        if name not in assigned:
            continue
        when = entry.get("when")
        if when is not None and not (when[0] in kept and same_choice(kept[when[0]], when[1])):
            continue
        kept[entry["path"]] = _decoded(entry, assigned[name])
    return kept


def best_of(experiment: Mapping[str, Any]) -> dict[str, Any] | None:
    """The best trial so far as ``best.json`` holds it (None: none has a value yet).

    Raises:
        KatibError: the Experiment was not compiled by estflow, or names a parameter its
            mapping lacks.
    """
    mapping = _mapping(experiment)
    spec, status = experiment.get("spec") or {}, experiment.get("status") or {}
    optimal = status.get("currentOptimalTrial") or {}
    assigned = {a.get("name"): a.get("value") for a in optimal.get("parameterAssignments") or ()}
    objective = (spec.get("objective") or {}).get("objectiveMetricName")
    metrics = {m.get("name"): m for m in (optimal.get("observation") or {}).get("metrics") or ()}
    if not assigned or objective not in metrics:
        return None
    unknown = sorted(set(assigned) - set(mapping))
    if unknown:
        raise KatibError(f"the best trial's parameters {unknown} are not in the Experiment's "
                         f"mapping ({sorted(mapping)})")
    strategies = {s.get("name"): s.get("value")
                  for s in (spec.get("objective") or {}).get("metricStrategies") or ()}
    field = strategies.get(objective) or "latest"
    try:
        value = float(metrics[objective].get(field))
    except (TypeError, ValueError):  # Katib writes "unavailable" for a trial without one
        return None
    return {"assignment": _assignment(assigned, mapping), "objective": objective,
            "value": value, "trial": optimal.get("bestTrialName") or ""}


def active(assignment: Mapping[str, Any], tune: Any) -> dict[str, Any]:
    """The part of a trial's ``--assignment`` (every path of the space: Katib has no
    conditional parameters) that applies: a dimension whose ``when`` does not hold for the
    values kept before it is left out. For the train-trial entry, before ``tune.apply``."""
    if callable(getattr(tune, "dimensions", None)):
        dimensions = list(tune.dimensions())
    else:
        space = tune.space
        dimensions = sorted(space.items() if isinstance(space, Mapping) else space,
                            key=lambda p: p[0])
    kept: dict[str, Any] = {}
    for path, dim in dimensions:
        if path not in assignment:
            continue
        when = getattr(dim, "when", None)
        if when is None or (when[0] in kept and same_choice(kept[when[0]], when[1])):
            kept[path] = frozen(assignment[path])
    return kept


def _progress(experiment: Mapping[str, Any]) -> str:
    status = experiment.get("status") or {}
    spec = experiment.get("spec") or {}
    counts = [(status.get(k) or 0, word) for k, word in (
        ("trialsSucceeded", "succeeded"), ("trialsFailed", "failed"),
        ("trialsEarlyStopped", "early stopped"), ("trialMetricsUnavailable", "without metrics"),
        ("trialsKilled", "killed"), ("trialsRunning", "running"),
        ("trialsPending", "pending"))]
    trials = ", ".join(f"{n} {w}" for n, w in counts if n) or "none yet"
    line = f"trials of {spec.get('maxTrialCount', '?')}: {trials}"
    try:
        best = best_of(experiment)
    except KatibError:
        best = None
    if best is not None:
        line += (f"; best {best['trial']}: {best['objective']}={best['value']!r} "
                 f"{json.dumps(best['assignment'])}")
    return line


# --- the task --------------------------------------------------------------------------------

def _spec_hash(spec: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(spec, sort_keys=True, separators=(",", ":"))
                          .encode()).hexdigest()


def _body(error: Exception) -> dict[str, Any]:
    try:
        body = json.loads(getattr(error, "body", None) or "{}")
    except ValueError:
        return {"message": str(getattr(error, "body", "") or "")}
    return body if isinstance(body, dict) else {}


def _missing_katib(where: str) -> KatibMissing:
    return KatibMissing(
        f"Katib is not installed in this cluster: the Kubernetes API has no "
        f"experiments.kubeflow.org/{VERSION} ({where} answered 404). Install Katib v0.19 "
        "(Kubeflow 26.03 includes it; standalone: kubectl apply -k "
        "'github.com/kubeflow/katib.git/manifests/v1beta1/installs/katib-standalone"
        "?ref=v0.19.0'), or compile the search without Katib: estflow compile --tune-on task "
        "runs it inside the tune task's pod (estflow has no KFP-only fan-out of trials, a "
        "ParallelFor over drawn assignments)")


def _create(api: Any, experiment: dict[str, Any], echo: Callable[[str], None]) -> None:
    from kubernetes.client.rest import ApiException

    meta = experiment["metadata"]
    namespace, name = meta["namespace"], meta["name"]
    try:
        api.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, experiment)
        echo(f"{_PREFIX} created Experiment {namespace}/{name} "
             f"({experiment['spec'].get('maxTrialCount')} trials, "
             f"{experiment['spec'].get('parallelTrialCount')} at once, "
             f"{experiment['spec']['algorithm']['algorithmName']})")
        return
    except ApiException as err:
        body, status = _body(err), err.status
        message = body.get("message") or err.reason or ""
        if status == 404:
            if (body.get("details") or {}).get("kind") == "namespaces":
                raise KatibError(f"namespace {namespace!r} does not exist: {message}") from None
            raise _missing_katib(f"POST .../namespaces/{namespace}/{PLURAL}") from None
        if status == 403:
            raise KatibError(
                f"the service account may not create Katib Experiments in {namespace!r} "
                f"({message}): apply estflow's RBAC (estflow rbac, pipelines/kubernetes/"
                "estflow-train-rbac.yaml)") from None
        if status == 400 and "metrics-collector-injection" in message:
            raise KatibError(
                f"Katib refused the Experiment: {message}. Label the namespace: kubectl "
                f"label namespace {namespace} katib.kubeflow.org/metrics-collector-injection"
                "=enabled") from None
        if status != 409:
            raise KatibError(f"Katib refused the Experiment {namespace}/{name} (HTTP "
                             f"{status}): {message}") from None
    existing = api.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)
    ours = meta["annotations"].get(SPEC_ANNOTATION)
    theirs = ((existing.get("metadata") or {}).get("annotations") or {}).get(SPEC_ANNOTATION)
    if ours is None or theirs != ours:
        raise KatibError(f"an Experiment {namespace}/{name} exists already, with another "
                         "spec: delete it (kubectl delete experiment -n "
                         f"{namespace} {name}) or run with another --name")
    echo(f"{_PREFIX} following Experiment {namespace}/{name}, created by an earlier attempt")


def _delete(api: Any, namespace: str, name: str, echo: Callable[[str], None]) -> None:
    from kubernetes.client.rest import ApiException

    try:
        api.delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)
        echo(f"{_PREFIX} deleted Experiment {namespace}/{name} (its trials stop)")
    except ApiException as err:
        if err.status != 404:
            echo(f"{_PREFIX} could not delete Experiment {namespace}/{name}: HTTP {err.status} "
                 f"{_body(err).get('message') or err.reason}")
    except Exception as err:  # unreachable API: say so, the original error follows
        echo(f"{_PREFIX} could not delete Experiment {namespace}/{name}: {err}")


def run_search(api: Any, experiment: Mapping[str, Any], output: Path | str, *,
               poll_seconds: float = 30.0, timeout_s: float | None = None,
               echo: Callable[[str], None] = print,
               sleep: Callable[[float], None] = time.sleep,
               clock: Callable[[], float] = time.monotonic) -> dict[str, Any]:
    """Create ``experiment``, follow it, write ``output/best.json``; returns what it wrote.

    Args:
        api: a ``kubernetes.client.CustomObjectsApi``.
        experiment: the compiled Experiment (its name and namespace as they are to be).
        output: the folder ``best.json`` is written into (made if absent).
        poll_seconds: seconds between two reads of its status.
        timeout_s: stop following after this many seconds (see the module's description);
            None: the Experiment's annotation, else no limit.

    Raises:
        KatibMissing: the cluster has no Katib.
        SearchFailed: the Experiment failed, or no trial reported the objective.
        KatibError: Katib or the API refused the Experiment.
    """
    best, _ = follow(api, experiment, poll_seconds=poll_seconds, timeout_s=timeout_s,
                     echo=echo, sleep=sleep, clock=clock)
    folder = Path(output)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "best.json").write_text(json.dumps(best, indent=2, sort_keys=True) + "\n")
    return best


def follow(api: Any, experiment: Mapping[str, Any], *, poll_seconds: float = 30.0,
           timeout_s: float | None = None, echo: Callable[[str], None] = print,
           sleep: Callable[[float], None] = time.sleep,
           clock: Callable[[], float] = time.monotonic
           ) -> tuple[dict[str, Any], dict[str, Any]]:
    """:func:`run_search` without writing: (the best trial as ``best.json`` holds it, the
    Experiment as last read: its status counts the trials, :func:`counts`). Same arguments
    and errors."""
    import urllib3
    from kubernetes.client.rest import ApiException

    experiment = json.loads(json.dumps(experiment))
    _mapping(experiment)  # refuse a foreign Experiment before touching the cluster
    meta = experiment["metadata"]
    annotations = meta.setdefault("annotations", {})
    annotations[SPEC_ANNOTATION] = _spec_hash(experiment["spec"])
    if timeout_s is None and annotations.get(TIMEOUT_ANNOTATION):
        timeout_s = float(annotations[TIMEOUT_ANNOTATION])
    namespace, name = meta["namespace"], meta["name"]
    _create(api, experiment, echo)

    started, last_line, errors = clock(), None, 0
    waiting_for: set[str] | None = None  # the trials running at the timeout
    delete = False
    try:
        while True:
            try:
                current = api.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL,
                                                           name)
                errors = 0
            except (ApiException, OSError, urllib3.exceptions.HTTPError) as err:
                if not isinstance(err, ApiException):  # the API did not answer
                    if errors >= _MAX_POLL_ERRORS:
                        raise KatibError(f"reading the Experiment {namespace}/{name}: {err}"
                                         ) from None
                    errors += 1
                    echo(f"{_PREFIX} reading the Experiment failed ({err}), retrying")
                    sleep(poll_seconds)
                    continue
                if err.status == 404 and (_body(err).get("details") or {}).get("name") != name:
                    raise _missing_katib(f"GET .../{PLURAL}/{name}") from None
                if err.status == 404:
                    raise KatibError(f"the Experiment {namespace}/{name} was deleted while "
                                     "the task followed it") from None
                if err.status < 500 or errors >= _MAX_POLL_ERRORS:
                    raise KatibError(f"reading the Experiment {namespace}/{name}: HTTP "
                                     f"{err.status} {_body(err).get('message') or err.reason}"
                                     ) from None
                errors += 1
                echo(f"{_PREFIX} reading the Experiment failed (HTTP {err.status}), retrying")
                sleep(poll_seconds)
                continue
            now_state, message = state(current)
            line = f"{_PREFIX} {now_state}: {_progress(current)}"
            if line != last_line:
                echo(line)
                last_line = line
            if now_state == "Failed":
                raise SearchFailed(f"the Experiment {namespace}/{name} failed: {message} "
                                   "(kept for inspection: kubectl get trials -n "
                                   f"{namespace} -l katib.kubeflow.org/experiment={name})")
            if now_state == "Succeeded":
                break
            if waiting_for is None and timeout_s is not None and clock() - started >= timeout_s:
                status = current.get("status") or {}
                waiting_for = set(status.get("runningTrialList") or ()) | set(
                    status.get("pendingTrialList") or ())
                echo(f"{_PREFIX} timeout_s ({timeout_s:g} s) passed: no further trial counts; "
                     f"waiting for the {len(waiting_for)} running")
            if waiting_for is not None:
                status = current.get("status") or {}
                still = waiting_for & (set(status.get("runningTrialList") or ()) | set(
                    status.get("pendingTrialList") or ()))
                if not still:
                    delete = True
                    break
            sleep(poll_seconds)
    except BaseException as err:
        if not isinstance(err, KatibError):
            echo(f"{_PREFIX} stopped ({type(err).__name__}): deleting the Experiment")
            _delete(api, namespace, name, echo)
        raise
    if delete:
        _delete(api, namespace, name, echo)
    best = best_of(current)
    if best is None:
        raise SearchFailed(
            f"no trial of the Experiment {namespace}/{name} reported "
            f"{current['spec']['objective']['objectiveMetricName']!r}: each trial must print "
            "lines '<objective>=<value>' to stdout (see the trials' logs)")
    echo(f"{_PREFIX} best trial {best['trial']}: {best['objective']}={best['value']!r} "
         f"{json.dumps(best['assignment'])}")
    return best, current


def counts(experiment: Mapping[str, Any]) -> dict[str, int]:
    """The Experiment's trials by outcome, from its status: ``complete`` (succeeded),
    ``pruned`` (early stopped), ``failed`` (failed, killed, or without the objective's
    metric), ``trials`` (all created)."""
    status = experiment.get("status") or {}

    def n(*keys: str) -> int:
        return sum(int(status.get(k) or 0) for k in keys)

    return {"complete": n("trialsSucceeded"), "pruned": n("trialsEarlyStopped"),
            "failed": n("trialsFailed", "trialsKilled", "trialMetricsUnavailable"),
            "trials": n("trials")}


# --- what the tune step's task fills in at run time ------------------------------------------

def bucket_uri(path: str, mounts: Sequence[tuple[str, str]] = KFP_MOUNTS) -> str | None:
    """The bucket URI ``path`` stands for when it is KFP's local path of one (``/gcs/b/x`` ->
    ``gs://b/x``, ``/minio/b/x`` -> ``s3://b/x``; ``mounts``: local prefix -> scheme, the
    default :data:`KFP_MOUNTS`); a ``gs://`` or ``s3://`` URI is itself; else None."""
    text = str(path)
    if text.startswith(("gs://", "s3://")):
        return text
    for prefix, scheme in mounts:
        if text.startswith(prefix) and len(text) > len(prefix):
            return scheme + text[len(prefix):]
    return None


def experiment_name(seed: str, prefix: str = "estflow-tune") -> str:
    """A Katib Experiment name unique to ``seed`` (the tune task's output path, which holds
    the KFP run's id: a retried attempt of the task gets the same name and follows the
    Experiment the first one created): ``prefix`` made a DNS label, cut to fit, then ``-``
    and 12 hex digits of ``seed``'s sha256; at most 40 characters, starting with a letter."""
    digest = hashlib.sha256(seed.encode()).hexdigest()[:12]
    base = "".join(c if c.isalnum() and c.isascii() else "-" for c in prefix.lower())
    base = "-".join(part for part in base.split("-") if part)
    if not base or not base[0].isalpha():
        base = f"t-{base}".rstrip("-")
    base = base[:_NAME_LIMIT - len(digest) - 1].rstrip("-")
    return f"{base}-{digest}"


def pod_namespace(folder: Path = POD_FOLDER) -> str | None:
    """The namespace this pod runs in (its service account's ``namespace`` file), or None
    outside a pod."""
    try:
        return (Path(folder) / "namespace").read_text().strip() or None
    except OSError:
        return None


def pod_service_account(folder: Path = POD_FOLDER) -> str | None:
    """This pod's service account's name, read from its token's claims (a JWT; nothing is
    verified: the name only chooses the trials' account), or None when there is no token or
    it does not say."""
    try:
        token = (Path(folder) / "token").read_text().strip()
        payload = token.split(".")[1]
        claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    except (OSError, IndexError, ValueError):
        return None
    account = ((claims.get("kubernetes.io") or {}).get("serviceaccount") or {}).get("name")
    if not account:
        subject = str(claims.get("sub") or "").split(":")
        account = subject[3] if len(subject) == 4 and subject[:2] == [
            "system", "serviceaccount"] else None
    return account or None


def filled(experiment: Mapping[str, Any], *, name: str, namespace: str,
           values: Mapping[str, str], service_account: str | None = None) -> dict[str, Any]:
    """The compiled ``experiment`` for this run: named ``name`` in ``namespace`` (a namespace
    compiled into it is kept), each of :data:`TOKENS` in the trial's command replaced by
    ``values[key]`` (quoted for the shell as the token was), and the trials' pods running as
    ``service_account`` unless it names one.

    Raises:
        KatibError: the Experiment has no trial command holding every token once (not
            compiled for the tune step), or a value holds Katib's ``${...}`` placeholders.
    """
    result = json.loads(json.dumps(experiment))
    meta = result.setdefault("metadata", {})
    meta["name"] = name
    meta["namespace"] = meta.get("namespace") or namespace
    try:
        job = result["spec"]["trialTemplate"]["trialSpec"]
        pod = job["spec"]["template"]["spec"]
        primary = result["spec"]["trialTemplate"]["primaryContainerName"]
        container = next(c for c in pod["containers"] if c.get("name") == primary)
        command = container["command"]
    except (KeyError, TypeError, StopIteration):
        raise KatibError("the Experiment has no trial container command to fill in: compile "
                         "it with estflow compile --tune-on katib") from None
    script = command[-1]
    for key, token in TOKENS.items():
        quoted = shlex.quote(token)
        if script.count(quoted) != 1:
            raise KatibError(f"the Experiment's trial command holds {token} "
                             f"{script.count(quoted)} times, expected once: compile it with "
                             "estflow compile --tune-on katib")
        value = str(values[key])
        if "${" in value:
            raise KatibError(f"the trial's {key} holds '${{', which Katib would read as its own "
                             f"placeholder: {value[:200]!r}")
        script = script.replace(quoted, shlex.quote(value))
    command[-1] = script
    if service_account and not pod.get("serviceAccountName"):
        pod["serviceAccountName"] = service_account
    return result


@contextlib.contextmanager
def stopped_by_sigterm() -> Iterator[None]:
    """SIGTERM (KFP stopping the task) raises SystemExit inside the block, so a search being
    followed deletes its Experiment (:func:`follow`); nothing changes off the main thread."""
    main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _stop_on_sigterm) if main_thread else None
    try:
        yield
    finally:
        if main_thread:
            signal.signal(signal.SIGTERM, previous)


# --- the entry point -------------------------------------------------------------------------

def _read_experiment(text: str) -> dict[str, Any]:
    stripped = text.lstrip()
    if stripped.startswith("{"):
        return json.loads(text)
    return json.loads(Path(text).read_text())


def api(host: str | None = None) -> Any:
    """A CustomObjectsApi: ``host`` (no credentials), else in-cluster, else the kubeconfig."""
    from kubernetes import client as k8s
    from kubernetes import config as k8s_config

    if host:
        configuration = k8s.Configuration()
        configuration.host = host
        return k8s.CustomObjectsApi(k8s.ApiClient(configuration))
    try:
        k8s_config.load_incluster_config()
    except k8s_config.ConfigException:
        k8s_config.load_kube_config(config_file=os.environ.get("KUBECONFIG"))
    return k8s.CustomObjectsApi()


def _stop_on_sigterm(signum, frame) -> None:
    raise SystemExit(f"stopped by signal {signum}")


def main(argv: list[str] | None = None) -> int:
    """Run the task with command-line arguments; returns the exit status."""
    parser = argparse.ArgumentParser(prog="python -m estflow.components._runtime.katib",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--experiment", required=True,
                        help="the compiled Experiment: a JSON file, or its JSON text")
    parser.add_argument("--output", required=True, help="folder to write best.json into")
    parser.add_argument("--name", help="the Experiment's name (default: as compiled)")
    parser.add_argument("--namespace", help="its namespace (default: as compiled)")
    parser.add_argument("--poll-seconds", type=float, default=30.0)
    parser.add_argument("--timeout-seconds", type=float, default=None)
    parser.add_argument("--host", help="Kubernetes API URL without credentials (tests)")
    args = parser.parse_args(argv)
    try:
        experiment = _read_experiment(args.experiment)
    except (OSError, ValueError) as err:
        print(f"{_PREFIX} error: --experiment: {err}", file=sys.stderr, flush=True)
        return 2
    for field in ("name", "namespace"):
        if getattr(args, field):
            experiment.setdefault("metadata", {})[field] = getattr(args, field)
    try:
        with stopped_by_sigterm():
            run_search(api(args.host), experiment, args.output,
                       poll_seconds=args.poll_seconds, timeout_s=args.timeout_seconds,
                       echo=lambda line: print(line, flush=True))
    except KatibError as err:
        print(f"{_PREFIX} error: {err}", file=sys.stderr, flush=True)
        return 1
    except Exception as err:  # the kubernetes client's configuration and transport errors
        if not is_client_error(err):
            raise
        print(f"{_PREFIX} error: {type(err).__name__}: {err}", file=sys.stderr, flush=True)
        return 1
    return 0


def is_client_error(error: BaseException) -> bool:
    """Whether ``error`` is the kubernetes client's (configuration, transport) or urllib3's:
    the API unreachable or not configured, said in one line rather than a traceback."""
    return type(error).__module__.split(".")[0] in ("kubernetes", "urllib3")


if __name__ == "__main__":
    sys.exit(main())
