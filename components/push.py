"""The push step: publish a *blessed* model's export as ``<base>/<model_name>/<version>/``.

The layout is TF Serving's (and KServe's tensorflow runtime): a server watching the model base
path loads the highest integer version. The step first reads the evaluate step's
``blessing.json``: a model that is not blessed is not pushed, and the step still succeeds,
writing ``push.json`` = ``{"pushed": false, "reasons": [...]}`` (a rejection is a result). A
blessed model is published through a :class:`~estflow.components._io.model_repo.PushDestination`
(local directory: atomic rename; ``gs://``/``s3://``: staged copy, verified, then renamed with
``saved_model.pb`` last), never overwriting a version; then the oldest versions beyond
``keep_versions`` are deleted, and staging directories left by killed pushes (unchanged for an
hour) are removed. With ``PushTarget.kserve_manifest`` it also writes a KServe
``InferenceService`` manifest next to ``push.json``.

Push only what is new: given the model's fingerprint (``--model-fingerprint``, the train
step's cache key), a model whose fingerprint the served version already carries is not pushed
again (``push.json``: ``{"pushed": false, "already_served": true, "version": N, ...}``). Every
pushed version carries its lineage, ``assets.extra/estflow_lineage.json``: the fingerprint and
the run that made it (``--run``; :mod:`estflow.components._io.lineage`), and its outputs on the
eval rows (``assets.extra/estflow_eval_outputs.npz``, from the evaluation), which a later
evaluation on the same rows reads instead of scoring this version as its baseline again.

``python -m estflow.components.push --spec S --model DIR --evaluation DIR --pushed DIR
[--model-fingerprint FP] [--run RUN]``
"""

from __future__ import annotations

import dataclasses
import json
import re
import sys
import time
from pathlib import Path

from estflow.components._io import lineage
from estflow.components._io.jsonfile import read_json
from estflow.components._io.jsonfile import write_json
from estflow.components._io.model_repo import STALE_STAGING_SECONDS
from estflow.components._io.model_repo import LocalDestination
from estflow.components._io.model_repo import PushDestination
from estflow.components._io.model_repo import destination_for
from estflow.components._runtime import entry
from estflow.dsl.contracts import Files
from estflow.dsl.contracts import step_named
from estflow.dsl.fingerprints import baseline_key
from estflow.dsl.pipeline import Pipeline
from estflow.dsl.specs import PushTarget

__all__ = ["Published", "run", "main", "push_to", "push_directory", "list_versions",
           "kserve_manifest", "kserve_name", "read_blessing"]


@dataclasses.dataclass(frozen=True)
class Published:
    """A pushed version: its number, its path, and the old versions deleted to make room."""

    version: int
    path: str
    removed: tuple[int, ...] = ()


def list_versions(model_base: Path) -> list[int]:
    """The published (integer-named) versions under a local ``model_base``, ascending."""
    return LocalDestination(model_base).list_versions()


def push_to(destination: PushDestination, export_dir: str | Path, *, version: int | None = None,
            keep_versions: int | None = None) -> Published:
    """Publish ``export_dir`` as a new version of ``destination``.

    Args:
        version: the version number; default: the current Unix time, or one more than the
            newest existing version if that is larger (versions only grow). A default version
            taken meanwhile by a concurrent push (two pushes in the same second) is not an
            error: the next free number is used.
        keep_versions: delete all but the newest N versions after a successful push.

    Raises:
        FileExistsError: an explicit ``version`` is already published.
        FileNotFoundError: ``export_dir`` holds no ``saved_model.pb``.
    """
    existing = destination.list_versions()
    take_next = version is None
    if version is None:
        version = max(int(time.time()), existing[-1] + 1 if existing else 0)
    elif version in existing:
        raise FileExistsError(f"version {version} already exists at "
                              f"{destination.model_base}/{version}; versions are never "
                              "overwritten")
    path = destination.publish(str(export_dir), version, take_next=take_next)
    version = int(path.rstrip("/").rsplit("/", 1)[-1])
    removed = []
    if keep_versions:
        for old in destination.list_versions()[:-keep_versions]:
            if old != version:
                destination.remove_version(old)
                removed.append(old)
    return Published(version, path, tuple(removed))


def push_directory(export_dir: Path, model_base: Path, *, version: int | None = None,
                   keep_versions: int | None = None) -> Path:
    """Push to a local ``model_base`` (see :func:`push_to`); return the new version's path."""
    published = push_to(LocalDestination(model_base), export_dir, version=version,
                        keep_versions=keep_versions)
    return Path(published.path)


def kserve_name(model_name: str) -> str:
    """``model_name`` as a Kubernetes resource name (DNS-1035 label: ``chicago_taxi`` ->
    ``chicago-taxi``)."""
    name = re.sub(r"[^a-z0-9-]+", "-", model_name.lower()).strip("-")[:63].rstrip("-")
    return name if name[:1].isalpha() else f"m-{name}"[:63].rstrip("-")


def kserve_manifest(target: PushTarget, storage_uri: str, version: int) -> str:
    """A KServe ``InferenceService`` (``serving.kserve.io/v1beta1``) serving ``storage_uri``
    with KServe's TF Serving runtime, as YAML text.

    The predictor is the ``model`` form (``modelFormat: tensorflow``), with the TF Serving
    image tag always set: KServe's own default (2.6.2) cannot load a TF 2.21 export ("Op type
    not registered 'DisableCopyOnRead'"); the default here is
    ``PushTarget.serving_runtime_version``. The manifest is checked against KServe's
    InferenceService CRD schema in tests/pipelines/test_kserve_manifest.py.
    """
    name = kserve_name(target.model_name)
    metadata = {"name": name}
    if target.kserve_namespace:
        metadata["namespace"] = target.kserve_namespace
    metadata["annotations"] = {"estflow/model-version": str(version)}
    predictor = {}
    if target.kserve_service_account:
        predictor["serviceAccountName"] = target.kserve_service_account
    predictor["model"] = {"modelFormat": {"name": "tensorflow", "version": "2"},
                          "runtimeVersion": target.serving_runtime_version,
                          "storageUri": storage_uri}
    document = {"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
                "metadata": metadata, "spec": {"predictor": predictor}}
    header = (
        f"# KServe InferenceService for estflow model {target.model_name!r}, written when "
        f"version {version} was pushed.\n"
        f"# TF Serving {target.serving_runtime_version} (KServe's kserve-tensorflow-serving "
        "runtime) serves the highest\n"
        "# version under storageUri; KServe's storage initializer copies storageUri when a\n"
        "# predictor pod starts, so a later push is served by pods started after it (re-apply\n"
        "# this file: the version annotation changes, or restart the predictor). Clients call\n"
        f"# /v1/models/{name}:predict (TF Serving's model name is the service name).\n")
    return header + _yaml(document)


def _yaml(value: dict, indent: int = 0) -> str:
    """Block-style YAML for nested dicts of strings (each scalar JSON-quoted, valid YAML)."""
    lines = []
    for key, item in value.items():
        if isinstance(item, dict):
            lines.append(f"{' ' * indent}{key}:\n{_yaml(item, indent + 2)}")
        else:
            lines.append(f"{' ' * indent}{key}: {json.dumps(item)}\n")
    return "".join(lines)


def read_blessing(evaluation_dir: Path) -> dict:
    """The evaluate step's verdict; a missing file is an error (no blessing, no push)."""
    path = evaluation_dir / Files.BLESSING
    if not path.is_file():
        raise FileNotFoundError(f"expected the evaluate step's {Files.BLESSING} in "
                                f"{evaluation_dir}; it is missing, so the model cannot be "
                                "known to be blessed and is not pushed")
    blessing = read_json(path)
    if not isinstance(blessing.get("blessed"), bool):
        raise ValueError(f"{path}: expected 'blessed' to be true or false. Received: "
                         f"{blessing.get('blessed')!r}")
    return blessing


def _not_pushed(target: PushTarget, blessing: dict, pushed_dir: str,
                progress: entry.Progress) -> dict:
    failed = [c["reason"] for c in blessing.get("checks", []) if not c.get("passed", True)]
    reasons = failed or list(blessing.get("reasons", [])) or ["not blessed"]
    result = {"pushed": False, "model_name": target.model_name, "reasons": reasons}
    write_json(Path(pushed_dir) / Files.PUSH_RESULT, result)
    progress("not pushed: the model is not blessed: " + "; ".join(reasons))
    return result


def _already_served(target: PushTarget, served: dict, pushed_dir: str,
                    progress: entry.Progress) -> dict:
    result = {"pushed": False, "already_served": True, "model_name": target.model_name,
              "version": served["version"], "path": served["path"],
              "fingerprint": served["fingerprint"],
              "reasons": [f"version {served['version']} already serves this model (same "
                          f"fingerprint {served['fingerprint'][:12]})"]}
    write_json(Path(pushed_dir) / Files.PUSH_RESULT, result)
    progress(f"not pushed again: version {served['version']} at {served['path']} already "
             f"serves this model (fingerprint {served['fingerprint'][:12]})")
    return result


def run(pipeline: Pipeline, model_dir: str, evaluation_dir: str, pushed_dir: str,
        progress: entry.Progress | None = None, *, fingerprint: str | None = None,
        run_ref: str | None = None) -> dict:
    """Push the trained model's export to the pipeline's push target if it is blessed and
    not already served.

    Args:
        fingerprint: the model's fingerprint (the train step's key over data, spec and code):
            when the served version has the same one, nothing is pushed (``push.json`` says
            ``already_served`` and which version); else the new version records it.
        run_ref: the run that made the model, recorded in the version's lineage.
    """
    progress = progress or entry.Progress("push")
    target = pipeline.push
    if target is None:
        raise ValueError("the pipeline declares no push target (Pipeline.push is None)")
    blessing = read_blessing(Path(evaluation_dir))
    if not blessing["blessed"]:
        return _not_pushed(target, blessing, pushed_dir, progress)
    destination = destination_for(target.base_path, target.model_name)
    served = lineage.served_in(destination) if fingerprint else None
    if served is not None and served["fingerprint"] == fingerprint:
        return _already_served(target, served, pushed_dir, progress)
    for stale in destination.clean_staging(STALE_STAGING_SECONDS):
        progress(f"removed stale staging directory {stale} (a push killed over an hour ago)")
    metrics = read_json(Path(evaluation_dir) / Files.METRICS)["metrics"]
    record = lineage.lineage_record(
        fingerprint=fingerprint, run=run_ref, pipeline=pipeline.name,
        model_name=target.model_name, metrics=metrics,
        evaluated_against=baseline_key(blessing.get("baseline")))
    # the model's outputs on the eval rows go with it: the next evaluation on the same rows
    # reads them instead of scoring this version again as its baseline
    outputs = {Files.SERVED_EVAL_OUTPUTS: Path(evaluation_dir) / Files.EVAL_OUTPUTS}
    with lineage.staged_with_lineage(Path(model_dir) / Files.EXPORT, record,
                                     outputs) as export:
        published = push_to(destination, export, keep_versions=target.keep_versions)
    result = {"pushed": True, "model_name": target.model_name, "version": published.version,
              "path": published.path, "model_base": destination.model_base,
              "base_path": destination.model_base.rsplit("/", 1)[0],
              "removed_versions": list(published.removed), "metrics": metrics,
              "fingerprint": fingerprint, "run": run_ref}
    if target.kserve_manifest:
        manifest = Path(pushed_dir) / Files.KSERVE_MANIFEST
        manifest.parent.mkdir(parents=True, exist_ok=True)
        manifest.write_text(kserve_manifest(target, destination.model_base, published.version))
        result["kserve_manifest"] = str(manifest)
        if "://" not in destination.model_base:
            progress(f"warning: the manifest's storageUri {destination.model_base} is a local "
                     "path; KServe reads gs://, s3://, pvc:// or https:// storage")
        progress(f"KServe manifest: {manifest} (kubectl apply -f {manifest})")
    write_json(Path(pushed_dir) / Files.PUSH_RESULT, result)
    progress(f"pushed version {published.version} to {published.path}" +
             (f"; removed old versions {list(published.removed)}" if published.removed else ""))
    return result


def main(argv: list[str] | None = None) -> int:
    parser = entry.step_parser(step_named("push"), __doc__)
    args = parser.parse_args(argv)
    run(entry.load_pipeline(args.spec), args.model, args.evaluation, args.pushed,
        fingerprint=args.model_fingerprint, run_ref=args.run)
    return 0


if __name__ == "__main__":
    sys.exit(main())
