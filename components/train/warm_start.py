"""Warm start from the served model (``TrainSpec.warm_start``): find the version served at
the push target and the training checkpoint its export carries; carry this run's checkpoint in
its own export for the next run."""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Callable
from pathlib import Path

import tensorflow as tf

from estflow.components._io import model_repo
from estflow.components._io import storage
from estflow.components.train.inputs import TrainStepError
from estflow.dsl.pipeline import Pipeline
from estflow.estimator import Estimator
from estflow.estimator.warm_starting import WarmStartSettings

__all__ = ["WarmStart", "resolve", "copy_checkpoint"]


@dataclasses.dataclass(frozen=True)
class WarmStart:
    """What ``TrainSpec.warm_start`` resolved to: the engine's settings (None: from scratch)
    and what ``train.json`` records (``{"version", "path", "checkpoint"}`` or a reason)."""

    settings: WarmStartSettings | None
    record: dict | None


def resolve(pipeline: Pipeline, model_dir: Path,
                progress: Callable[[str], None]) -> WarmStart:
    """Resolve ``TrainSpec.warm_start`` against the version served at the push target."""
    declared = pipeline.train.warm_start
    if declared is None:
        return WarmStart(None, None)
    if pipeline.push is None:
        raise TrainStepError("train.warm_start: expected a push target (Pipeline.push) to "
                             "find the served version; received None")
    destination = model_repo.destination_for(pipeline.push.base_path, pipeline.push.model_name)
    version = model_repo.latest_servable(destination)
    if version is None:
        progress(f"warm start: no version is served at {destination.model_base} yet; "
                 "training from scratch")
        return WarmStart(None, {"version": None, "reason": "no served version"})
    found, recorded = _served_checkpoint(model_repo.served_checkpoint_dir(destination, version))
    path = f"{destination.model_base}/{version}"
    if found is None:
        progress(f"warm start: served version {version} at {path} carries no training "
                 f"checkpoint ({model_repo.SERVED_CHECKPOINT}/); training from scratch")
        return WarmStart(None, {"version": version, "path": path,
                                 "reason": "no checkpoint in the served version"})
    record = {"version": version, "path": path, "checkpoint": recorded}
    if tf.train.latest_checkpoint(str(model_dir)):
        progress(f"warm start: {model_dir} has a checkpoint of its own: resuming from it "
                 f"(served version {version} is not read)")
        return WarmStart(None, {**record, "reason": "resumed from the model_dir"})
    progress(f"warm start: from served version {version} ({recorded})")
    settings = WarmStartSettings(found, vars_to_warm_start=declared.settings_vars(),
                                 var_name_to_prev_var_name=declared.var_name_to_prev_var_name)
    return WarmStart(settings, record)


def _served_checkpoint(folder: str) -> tuple[str | None, str | None]:
    """(the checkpoint prefix to read, the one to record) of a served version's checkpoint
    directory; (None, None) when it has none. A ``gs://``/``s3://`` directory is downloaded
    first (removed when the process exits): TensorFlow has no filesystem for them without
    tensorflow-io, which has no build for the TensorFlow estflow runs on."""
    if not storage.is_remote(folder):
        found = tf.train.latest_checkpoint(folder)
        return found, found
    try:
        local = storage.materialize(folder)
    except FileNotFoundError:  # nothing below it: a version pushed without a checkpoint
        return None, None
    found = tf.train.latest_checkpoint(local)
    return found, (f"{folder}/{Path(found).name}" if found else None)


def copy_checkpoint(estimator: Estimator, export_dir: Path) -> None:
    """Copy the latest training checkpoint into ``export_dir``'s ``assets.extra`` (a warm
    start's source once the export is pushed): its data and index files and a ``checkpoint``
    state file naming it relatively, so the copy is found wherever it lands."""
    latest = estimator.latest_checkpoint()
    if latest is None:
        return
    target = export_dir / model_repo.SERVED_CHECKPOINT
    target.mkdir(parents=True, exist_ok=True)
    prefix = Path(latest)
    for source in prefix.parent.glob(prefix.name + ".*"):
        shutil.copyfile(source, target / source.name)
    (target / "checkpoint").write_text(f'model_checkpoint_path: "{prefix.name}"\n'
                                       f'all_model_checkpoint_paths: "{prefix.name}"\n')


