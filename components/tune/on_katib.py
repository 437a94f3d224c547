"""The tune step's search on Katib (``--katib-experiment``, what ``estflow compile --tune-on
katib`` gives the tune task): the compiled Experiment filled in for this run, created, followed
to its end, and its best trial written as the search in the task writes it (see
:mod:`estflow.components.tune.__main__`)."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from collections.abc import Mapping
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from estflow.components._io.jsonfile import write_json
from estflow.components._runtime import katib
from estflow.dsl.contracts import TUNE_BEST
from estflow.dsl.contracts import Files
from estflow.dsl.models import LOWER_IS_BETTER
from estflow.dsl.pipeline import Pipeline

__all__ = ["run_on_katib", "KATIB_POLL_SECONDS"]

KATIB_POLL_SECONDS = 20.0
"""Seconds between two reads of the Experiment's status (a trial trains for minutes)."""
_PREFIX = "[tune]"


class _KatibRunError(Exception):
    """The Katib search cannot start on these inputs (said in one line)."""


def run_on_katib(args, pipeline: Pipeline, *, mounts: Sequence[tuple[str, str]],
              host: str | None, pod_folder: Path, poll_seconds: float,
              echo: Callable[[str], None]) -> int:
    """Run the search on Katib for the parsed arguments ``args``; returns the exit status
    (an error is one line on stderr)."""
    try:
        experiment, uris = _prepared(args, pipeline, mounts=mounts, pod_folder=pod_folder)
        meta = experiment["metadata"]
        echo(f"{_PREFIX} the trials run on Katib: Experiment {meta['namespace']}/"
             f"{meta['name']}, each trial a pod reading {uris['examples']} and "
             f"{uris['transformed']}")
        with katib.stopped_by_sigterm():
            best, final = katib.follow(katib.api(host), experiment,
                                       poll_seconds=poll_seconds, echo=echo)
    except (_KatibRunError, katib.KatibError) as err:
        print(f"{_PREFIX} error: {err}", file=sys.stderr, flush=True)
        return 1
    except Exception as err:  # the kubernetes client's configuration and transport errors
        if not katib.is_client_error(err):
            raise
        print(f"{_PREFIX} error: {type(err).__name__}: {err}", file=sys.stderr, flush=True)
        return 1
    _write_outputs(Path(args.hyperparameters), best, final, echo)
    return 0


def _prepared(args, pipeline: Pipeline, *, mounts: Sequence[tuple[str, str]],
              pod_folder: Path) -> tuple[dict[str, Any], dict[str, str]]:
    """The compiled Experiment filled in for this run (module docstring), and the inputs'
    URIs the trials read."""
    tune = pipeline.tune
    if tune is None:
        raise _KatibRunError("the spec declares no search: Pipeline.tune is None")
    try:
        compiled = json.loads(args.katib_experiment)
    except ValueError as err:
        raise _KatibRunError(f"--katib-experiment is not JSON: {err}") from None
    if not isinstance(compiled, dict):
        raise _KatibRunError("--katib-experiment is not a JSON object (a Katib Experiment)")
    differences = _differences(compiled, tune)
    if differences:
        raise _KatibRunError(
            "the run's spec declares another search than the Experiment compiled into the "
            "pipeline (" + "; ".join(differences) + "): a run that changes Pipeline.tune needs "
            "the pipeline compiled again (estflow compile)")
    uris = {}
    for artifact in ("examples", "transformed"):
        path = str(getattr(args, artifact))
        uri = katib.bucket_uri(path, mounts)
        if uri is None:
            raise _KatibRunError(
                f"--{artifact} {path} is no bucket path (KFP's local path of a gs://, s3:// "
                f"or minio:// artifact: {', '.join(p for p, _ in mounts)}), and Katib trial "
                "pods cannot see this pod's files: give the pipeline a bucket pipeline root, "
                "or compile with estflow compile --tune-on task (the search in this task)")
        uris[artifact] = uri
    namespace = ((compiled.get("metadata") or {}).get("namespace")
                 or katib.pod_namespace(pod_folder))
    if not namespace:
        raise _KatibRunError(f"no namespace for the Experiment: it was compiled without one and "
                             f"this is not a Kubernetes pod ({pod_folder}/namespace is absent)")
    name = katib.experiment_name(str(args.hyperparameters), prefix=f"{pipeline.name}-tune")
    spec = json.dumps(json.loads(pipeline.to_json()), sort_keys=True, separators=(",", ":"))
    return katib.filled(compiled, name=name, namespace=namespace,
                        values={"spec": spec, **uris},
                        service_account=katib.pod_service_account(pod_folder)), uris


def _differences(compiled: Mapping[str, Any], tune) -> list[str]:
    """What differs between the search the Experiment runs and ``tune`` (the run's)."""
    mapping = katib.parameter_mapping(compiled)
    spec = compiled.get("spec") or {}
    objective = spec.get("objective") or {}
    found = []
    compiled_paths = sorted(entry["path"] for entry in mapping.values())
    paths = sorted(path for path, _ in tune.dimensions())
    if compiled_paths != paths:
        found.append(f"the Experiment searches {compiled_paths}, the spec {paths}")
    if objective.get("objectiveMetricName") != tune.objective:
        found.append(f"objective {objective.get('objectiveMetricName')!r} vs "
                     f"{tune.objective!r}")
    higher = tune.higher_is_better
    if higher is None:  # as the pipeline's checks resolve it
        higher = tune.objective not in LOWER_IS_BETTER
    direction = "maximize" if higher else "minimize"
    if objective.get("type") != direction:
        found.append(f"the Experiment's objective is to {objective.get('type')}, the spec's "
                     f"to {direction}")
    if spec.get("maxTrialCount") != tune.trials:
        found.append(f"{spec.get('maxTrialCount')} trials vs {tune.trials}")
    return found


def _write_outputs(out: Path, best: Mapping[str, Any], final: Mapping[str, Any],
                   echo: Callable[[str], None]) -> None:
    """``best.json`` and ``metrics.json``, as the search in the task writes them (the trial
    named as Katib names it), and the line that says where the Experiment is."""
    spec = final.get("spec") or {}
    meta = final.get("metadata") or {}
    higher = (spec.get("objective") or {}).get("type") == "maximize"
    where = f"{meta.get('namespace')}/{meta.get('name')}"
    objective, value = best["objective"], best["value"]
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / TUNE_BEST, {
        "assignment": dict(best["assignment"]), "objective": objective, "value": value,
        "trial": best["trial"], "higher_is_better": higher, "metrics": {objective: value},
        "experiment": where})
    counts = katib.counts(final)
    write_json(out / Files.METRICS, {
        "objective": objective, "higher_is_better": higher, "best_trial": best["trial"],
        "complete": counts["complete"], "pruned": counts["pruned"],
        "failed": counts["failed"], "metrics": {objective: value}, "experiment": where})
    echo(f"{_PREFIX} best trial {best['trial']} of Experiment {where}: {objective}={value!r}; "
         f"wrote {out / TUNE_BEST}")
