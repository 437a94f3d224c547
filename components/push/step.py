"""The push step's work: read the blessing, publish a blessed model once (with its lineage
and eval outputs), write ``push.json`` and the KServe manifest, and roll the version out on
KServe when declared (:mod:`.rollout`)."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from estflow.components._io import lineage
from estflow.components._io import warmup_rows
from estflow.components._io.jsonfile import read_json
from estflow.components._io.jsonfile import write_json
from estflow.components._io.model_repo import STALE_STAGING_SECONDS
from estflow.components._io.model_repo import PushDestination
from estflow.components._io.model_repo import destination_for
from estflow.components._runtime import entry
from estflow.components.push import kserve
from estflow.components.push import rollout
from estflow.components.push.publish import Published
from estflow.components.push.publish import publish_once
from estflow.dsl.contracts import CANDIDATES_FILE
from estflow.dsl.contracts import Files
from estflow.dsl.fingerprints import baseline_key
from estflow.dsl.pipeline import Pipeline
from estflow.dsl.specs import PushTarget

__all__ = ["run", "read_blessing"]


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
                    progress: entry.Progress, kube: _KServe | None = None) -> dict:
    how = ("being published by another push of this model" if served.get("pending")
           else "already serves this model")
    result = {"pushed": False, "already_served": True, "model_name": target.model_name,
              "version": served["version"], "path": served["path"],
              "fingerprint": served["fingerprint"],
              "reasons": [f"version {served['version']} {how} (same fingerprint "
                          f"{served['fingerprint'][:12]})"]}
    if kube is not None and not served.get("pending"):
        # a retried push: the version may be published and not yet rolled out
        result.update(kube.serve(served["version"], pushed_dir, progress, result))
    write_json(Path(pushed_dir) / Files.PUSH_RESULT, result)
    progress(f"not pushed again: version {served['version']} at {served['path']} {how} "
             f"(fingerprint {served['fingerprint'][:12]})")
    return result


class _KServe:
    """Serving a version on KServe: its serving copy, the manifest, and with
    ``kserve_rollout`` the rollout through the Kubernetes API (connected before anything is
    published, so missing credentials fail the step first)."""

    def __init__(self, target: PushTarget, model_base: str, export_dir: Path) -> None:
        self.target, self.model_base, self.export_dir = target, model_base, export_dir
        self.api = rollout.connect() if target.kserve_rollout else None
        self.warmup: _Warmup | None = None  # the version's warm-up requests

    def serve(self, version: int, pushed_dir: str, progress: entry.Progress,
              result: dict) -> dict:
        """Facts for ``push.json``; writes it and raises RolloutError on a failed rollout."""
        uri = kserve.publish_for_kserve(self.export_dir, self.model_base, version,
                                        warmup=self.warmup and self.warmup.path())
        manifest = Path(pushed_dir) / Files.KSERVE_MANIFEST
        manifest.parent.mkdir(parents=True, exist_ok=True)
        manifest.write_text(kserve.kserve_manifest(self.target, uri, version))
        facts = {"kserve_manifest": str(manifest), "kserve_storage_uri": uri}
        if "://" not in uri:
            progress(f"warning: the manifest's storageUri {uri} is a local path; KServe reads "
                     "gs://, s3://, pvc:// or https:// storage")
        if self.api is None:
            progress(f"KServe manifest: {manifest} (kubectl apply -f {manifest})")
            return facts
        service = kserve.inference_service(self.target, uri, version)
        namespace = rollout.task_namespace(self.target.kserve_namespace)
        try:
            facts["kserve_rollout"] = rollout.roll_out(
                self.api, service, namespace, progress=progress,
                timeout=self.target.kserve_rollout_timeout or 600)
        except rollout.RolloutError as err:
            facts["kserve_rollout"] = {"failed": str(err)}
            write_json(Path(pushed_dir) / Files.PUSH_RESULT, {**result, **facts})
            raise
        progress(f"KServe serves version {version} as {namespace}/{service['metadata']['name']}"
                 f" (revision {facts['kserve_rollout']['revision']}, traffic "
                 f"{facts['kserve_rollout']['traffic']})")
        return facts


def run(pipeline: Pipeline, model_dir: str, evaluation_dir: str, pushed_dir: str,
        progress: entry.Progress | None = None, *, fingerprint: str | None = None,
        run_ref: str | None = None) -> dict:
    """Push the trained model's export to the pipeline's push target if it is blessed and
    not already served.

    Args:
        fingerprint: the model's fingerprint (the train step's key over data, spec and code):
            when the served version has the same one, nothing is pushed (``push.json`` says
            ``already_served`` and which version); else the new version records it. Pushes
            racing each other decide this under the destination's guard
            (:mod:`estflow.components.push.guard`): the model is published once.
        run_ref: the run that made the model, recorded in the version's lineage.

    Raises:
        RolloutError: ``kserve_rollout`` is declared and the new version is not served
            (``push.json`` is written first, saying why).
    """
    progress = progress or entry.Progress("push")
    target = pipeline.push
    if target is None:
        raise ValueError("the pipeline declares no push target (Pipeline.push is None)")
    blessing = read_blessing(Path(evaluation_dir))
    picked = Path(evaluation_dir) / CANDIDATES_FILE
    if fingerprint and picked.is_file():  # Candidates: the picked candidate's own model
        fingerprint = json.loads(picked.read_text()).get("fingerprint") or fingerprint
    if not blessing["blessed"]:
        return _not_pushed(target, blessing, pushed_dir, progress)
    destination = destination_for(target.base_path, target.model_name)
    kube = _KServe(target, destination.model_base, Path(model_dir) / Files.EXPORT) \
        if target.kserve_manifest else None
    with tempfile.TemporaryDirectory(prefix="estflow-warmup-") as tmp:
        warmup = _Warmup(Path(model_dir) / Files.EXPORT, Path(evaluation_dir), Path(tmp),
                         progress)
        if kube is not None:
            kube.warmup = warmup
        return _push(pipeline, destination, blessing, evaluation_dir, model_dir, pushed_dir,
                     progress, fingerprint, run_ref, kube, warmup)


class _Warmup:
    """The version's warm-up requests, built on first use (not at all for a model already
    served) in a temporary folder."""

    def __init__(self, export_dir: Path, evaluation_dir: Path, folder: Path,
                 progress: entry.Progress) -> None:
        self.args = (export_dir, evaluation_dir, folder / Path(Files.SERVED_WARMUP).name,
                     progress)
        self.built: tuple[Path | None] | None = None

    def path(self) -> Path | None:
        if self.built is None:
            self.built = (_warmup_file(*self.args),)
        return self.built[0]


def _warmup_file(export_dir: Path, evaluation_dir: Path, path: Path,
                 progress: entry.Progress) -> Path | None:
    """TF Serving's warm-up requests for the export, written to ``path`` from the eval rows
    the evaluate step kept; None (said why) when there are none."""
    rows = warmup_rows.read_rows(evaluation_dir)
    if not rows:
        progress(f"the version has no warm-up requests: {evaluation_dir} has no "
                 f"{Files.WARMUP_EXAMPLES} (an evaluation made before estflow kept one)")
        return None
    from google.protobuf.message import DecodeError  # noqa: PLC0415

    from estflow.components.push import warmup  # noqa: PLC0415 - TensorFlow, only here

    try:
        built = warmup.build_warmup(export_dir, rows, path)
    except (OSError, DecodeError) as e:
        progress(f"warning: the version has no warm-up requests: {export_dir}/saved_model.pb "
                 f"cannot be read ({type(e).__name__}: {e})")
        return None
    if built is None:
        progress("the version has no warm-up requests: no signature of the export takes "
                 "serialized tf.Examples")
    return built


def _push(pipeline: Pipeline, destination: PushDestination, blessing: dict,
          evaluation_dir: str, model_dir: str, pushed_dir: str, progress: entry.Progress,
          fingerprint: str | None, run_ref: str | None, kube: _KServe | None,
          warmup: _Warmup) -> dict:
    target = pipeline.push
    # unguarded first look: a model already served is not copied at all
    served = lineage.served_in(destination) if fingerprint else None
    if served is not None and served["fingerprint"] == fingerprint:
        return _already_served(target, served, pushed_dir, progress, kube)
    for stale in destination.clean_staging(STALE_STAGING_SECONDS):
        progress(f"removed stale staging directory {stale} (a push killed over an hour ago)")
    metrics = read_json(Path(evaluation_dir) / Files.METRICS)["metrics"]
    record = lineage.lineage_record(
        fingerprint=fingerprint, run=run_ref, pipeline=pipeline.name,
        model_name=target.model_name, metrics=metrics,
        evaluated_against=baseline_key(blessing.get("baseline")),
        checks=lineage.skew_thresholds(pipeline.checks))
    # the model's outputs on the eval rows go with it: the next evaluation on the same rows
    # reads them instead of scoring this version again as its baseline
    outputs = {Files.SERVED_EVAL_OUTPUTS: Path(evaluation_dir) / Files.EVAL_OUTPUTS,
               # and the statistics of its training data: the next runs' drift baseline
               Files.SERVED_STATISTICS: Path(evaluation_dir) / Files.STATISTICS}
    if warmup.path() is not None:  # TF Serving, KServe and estflow serve replay it on load
        outputs[Files.SERVED_WARMUP] = warmup.path()
    with lineage.staged_with_lineage(Path(model_dir) / Files.EXPORT, record,
                                     outputs) as export:
        published = publish_once(destination, export, fingerprint=fingerprint,
                                 keep_versions=target.keep_versions, progress=progress)
    if not isinstance(published, Published):
        return _already_served(target, published, pushed_dir, progress, kube)
    return _pushed(target, destination, published, pushed_dir, progress,
                   {"metrics": metrics, "fingerprint": fingerprint, "run": run_ref}, kube)


def _pushed(target: PushTarget, destination: PushDestination, published: Published,
            pushed_dir: str, progress: entry.Progress, facts: dict,
            kube: _KServe | None) -> dict:
    result = {"pushed": True, "model_name": target.model_name, "version": published.version,
              "path": published.path, "model_base": destination.model_base,
              "base_path": destination.model_base.rsplit("/", 1)[0],
              "removed_versions": list(published.removed), **facts}
    progress(f"pushed version {published.version} to {published.path}" +
             (f"; removed old versions {list(published.removed)}" if published.removed else ""))
    if kube is not None:
        for old in published.removed:
            kserve.remove_serving_copy(destination.model_base, old)
        result.update(kube.serve(published.version, pushed_dir, progress, result))
    write_json(Path(pushed_dir) / Files.PUSH_RESULT, result)
    return result

