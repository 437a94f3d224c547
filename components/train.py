"""Train: the Estimator engine on the transformed examples, then the serving export.

``python -m estflow.components.train --spec S --transformed IN_DIR --model OUT_DIR``

Distributed (``RunConfig.train_distribute`` / ``RunConfig.cluster``): every process of the
cluster runs this same command and :func:`main` reads its task from ``TF_CONFIG`` (as a Kubeflow
TFJob or ``estflow run --workers N`` sets it). Training tasks build the strategy first, then
train together; only the chief (``chief``, else ``worker`` 0) writes ``OUT_DIR``. Under
``parameter_server`` the ``worker`` and ``ps`` tasks serve the chief's coordinator; an
``evaluator`` task evaluates each new checkpoint (:func:`evaluate_checkpoints`).

Input (the transform step's output, names from :class:`estflow.dsl.contracts.Files`)::

    IN_DIR/transform_fn/          TFTransformOutput dir
    IN_DIR/train/*.tfrecord.gz    GZIP TFRecords of transformed tf.Examples
    IN_DIR/transform.json         "cardinalities": {categorical feature: number of ids}

    IN_DIR/eval/*.tfrecord.gz     the eval split, evaluated while training

Output::

    OUT_DIR/checkpoints/          model_dir: checkpoints + TensorBoard events (training resumes
                                  from here when it holds checkpoints)
    OUT_DIR/checkpoints/eval/     the evaluations' TensorBoard events (``eval_<name>/`` for an
                                  ``EvalSpec.name`` other than ``eval``): TensorBoard on
                                  ``checkpoints/`` draws train and eval curves together
    OUT_DIR/export/               the serving SavedModel (written under a temporary name,
                                  then renamed)
    OUT_DIR/train.json            global step, first and final loss, examples/s, elapsed,
                                  paths, the evaluations ({step, metrics}), the warm start

Evaluation while training (tf.estimator's ``train_and_evaluate`` with the declared
``EvalSpec``): after a checkpoint is saved, the model is evaluated on the eval split once
``start_delay_secs`` of training have passed, then at most every ``throttle_secs``; the final
checkpoint is always evaluated. Each evaluation is a progress line (step, loss, the key
metric), so an overfitting run shows while it runs. With an evaluator task in the cluster, that
task evaluates instead (:func:`evaluate_checkpoints`).

Warm start (``TrainSpec.warm_start``): a model_dir without a checkpoint starts from the
training checkpoint of the version served at the push target, which the export carries for
that purpose (``export/assets.extra/estflow_checkpoint/``, pushed with it; TF Serving ignores
``assets.extra``). No served version, or one without a checkpoint: training starts from
scratch (a progress line says so).

SavedModel signatures (raw features are run through the tf.Transform graph in the model, so
serving cannot skew from training):

- ``serving_default``: ``examples`` (serialized raw ``tf.Example``s, string ``[None]``) -> the
  model's predictions; features with declared defaults may be left out of an example.
- ``predict_raw``: one input per raw column the features read (``fare``: float ``[None]``,
  ``payment_type``: string ``[None]``, ...) -> the same predictions. TF Serving (and KServe,
  and ``estflow serve``) feed a signature with named inputs straight from JSON, so
  ``{"signature_name": "predict_raw", "instances": [{"fare": 12.5, ...}]}`` works with no
  tf.Example on the client; every input must be given (TF Serving's row format requires
  every input). Raw columns no feature reads (e.g. those only ``derive`` reads to compute the
  label) are not inputs.
- ``transform_features``: ``examples`` (with the label columns) -> every transformed feature,
  the label included (what the evaluate step reads labels from).
- classifiers: ``classify`` (TF Serving Classify API): ``inputs`` (serialized tf.Examples) ->
  ``classes`` (string ``[N, n_classes]``) and ``scores`` (float ``[N, n_classes]``).
- regressors (one label dimension): ``regress``: ``inputs`` -> ``outputs`` (float ``[N]``).

Next to them, ``export/assets.extra/estflow_raw_features.json`` lists the raw features a
request sends, with their types (``{"columns": [{"name": "fare", "dtype": "float",
"required": true}, ...]}``): ``estflow serve`` reads it to build each tf.Example feature of a
``:classify``/``:regress`` request with the type the model parses (a JSON ``12`` for a float
feature is ``float_list [12.0]``, as TF Serving users expect) and to refuse feature names the
model does not know. TF Serving ignores ``assets.extra``.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import tensorflow as tf
import tensorflow_transform as tft

from estflow.components._io import leftovers
from estflow.components._io import model_repo
from estflow.components._io import raw_features
from estflow.components._io.jsonfile import read_json
from estflow.components._io.jsonfile import write_json
from estflow.components._io.raw_features import raw_feature_spec
from estflow.components._runtime import accelerators
from estflow.components._runtime import entry
from estflow.components.estimator import Estimator
from estflow.components.estimator import NanLossError
from estflow.components.estimator import TrainHook
from estflow.components.estimator import distribute
from estflow.components.estimator import export as export_lib
from estflow.components.estimator import model_fn_for
from estflow.components.estimator import training
from estflow.components.estimator.exporters import Exporter
from estflow.components.estimator.run_config import RunConfig
from estflow.components.estimator.warm_starting import WarmStartSettings
from estflow.dsl import models as m
from estflow.dsl.contracts import Files
from estflow.dsl.contracts import step_named
from estflow.dsl.pipeline import Pipeline

__all__ = ["run", "main", "make_input_fn", "model_fn_of", "export_serving_model",
           "evaluate_checkpoints", "TrainStepError"]

_EXAMPLES = "examples"
_STRINGS = tf.TensorSpec([None], tf.string)
RAW_SIGNATURE = "predict_raw"


class TrainStepError(RuntimeError):
    """The train step cannot run on its inputs (missing transform outputs)."""


def model_fn_of(model, cardinalities: dict[str, int]) -> tuple[Callable, dict]:
    """(model_fn, params): a premade declaration's model_fn, or a CustomModel's resolved one."""
    if isinstance(model, m.CustomModel):
        return model.checked_model_fn(entry.resolve(model.model_fn)), dict(model.params)
    return model_fn_for(model, cardinalities), {}


def make_input_fn(pattern: str, feature_spec: dict, label: str, batch_size: int, *,
                  shuffle_buffer: int | None = None, seed: int | None = None,
                  repeat: bool = True) -> Callable[[], tf.data.Dataset]:
    """An input_fn over GZIP TFRecords of transformed examples: shuffle (seeded), repeat,
    batch (``drop_remainder`` when repeating), parse, pop the label, prefetch."""

    def input_fn() -> tf.data.Dataset:
        files = sorted(tf.io.gfile.glob(pattern))
        if not files:
            raise TrainStepError(f"no transformed examples match {pattern}")
        dataset = tf.data.TFRecordDataset(files, compression_type="GZIP")
        if shuffle_buffer:
            dataset = dataset.shuffle(shuffle_buffer, seed=seed)
        if repeat:
            dataset = dataset.repeat()
        dataset = dataset.batch(batch_size, drop_remainder=repeat)

        def parse(serialized):
            features = tf.io.parse_example(serialized, feature_spec)
            return features, features.pop(label)

        dataset = dataset.map(parse, num_parallel_calls=tf.data.AUTOTUNE)
        return dataset.prefetch(tf.data.AUTOTUNE)

    return input_fn


class _LastLoss(TrainHook):
    """The loss after the first and the last training loop (a warm start shows in the first:
    near the served model's loss rather than an untrained model's)."""

    def __init__(self) -> None:
        self.loss: float | None = None
        self.first_loss: float | None = None
        self.start: int | None = None

    def begin(self, global_step, variables) -> None:
        self.start = global_step

    def after_loop(self, global_step, loss) -> None:
        if self.first_loss is None:
            self.first_loss = loss
        self.loss = loss


def run(pipeline: Pipeline, transformed_dir: str | os.PathLike, model_dir: str | os.PathLike,
        progress: Callable[[str], None] | None = None, *,
        cluster: distribute.ClusterSpec | None = None,
        strategy: tf.distribute.Strategy | None = None) -> dict[str, Any]:
    """Train ``pipeline.model`` to ``pipeline.train.max_steps`` and export it.

    Args:
        cluster: this process's task (parsed from TF_CONFIG by :func:`main`); None: one process.
        strategy: the strategy to train under (default: ``run_config.train_distribute``'s).
            In a multi-worker run every worker calls this; only the chief writes
            ``model_dir`` (other workers write their checkpoints and export to a scratch
            directory that is deleted).

    Returns:
        The summary also written to ``OUT_DIR/train.json`` (by the chief).
    """
    progress = progress or entry.Progress("train")
    transformed, out = Path(transformed_dir), Path(model_dir)
    for leftover in leftovers.clean_temporary_exports(out):  # a killed run's, when resumed
        progress(f"removed {leftover.name}, a temporary export a stopped run left")
    tft_output, cardinalities = _read_transform(transformed)
    model_fn, params = model_fn_of(pipeline.model, cardinalities)
    # distribution: the engine config carries the strategy object and the cluster.
    changes = {"cluster": cluster, **({"train_distribute": strategy} if strategy else {})}
    config = RunConfig.from_dsl(pipeline.run_config, **changes)
    warm = _warm_start(pipeline, out / Files.CHECKPOINTS, progress)
    estimator = Estimator(model_fn, out / Files.CHECKPOINTS, config, params,
                          warm_start_from=warm.settings, progress=progress)
    if not config.is_chief:  # distribution: every worker exports; a non-chief's is discarded
        scratch = Path(tempfile.mkdtemp(prefix="estflow-train-"))
        try:
            return _train_and_export(pipeline, estimator, transformed, tft_output, scratch,
                                     progress, chief=False)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    return _train_and_export(pipeline, estimator, transformed, tft_output, out, progress,
                             warm=warm)


def _train_and_export(pipeline: Pipeline, estimator: Estimator, transformed: Path, tft_output,
                      out: Path, progress: Callable[[str], None], chief: bool = True,
                      warm: _WarmStart | None = None) -> dict:
    """Train (evaluating on the eval split meanwhile), export to ``out/export``, summarise
    (in ``out/train.json`` on the chief)."""
    spec = pipeline.train
    input_fn = make_input_fn(str(transformed / Files.TRANSFORMED_TRAIN / "*.tfrecord.gz"),
                             tft_output.transformed_feature_spec(), pipeline.label.name,
                             spec.batch_size, shuffle_buffer=spec.shuffle_buffer,
                             seed=pipeline.run_config.tf_random_seed)
    hook = _LastLoss()
    evaluations = _EvalRecorder(progress)
    eval_spec = _eval_spec(pipeline, transformed, tft_output, evaluations, progress)
    start = time.monotonic()
    if eval_spec is None:
        estimator.train(input_fn, max_steps=spec.max_steps, hooks=[hook])
    else:
        training.train_and_evaluate(
            estimator, training.TrainSpec(input_fn, max_steps=spec.max_steps, hooks=(hook,)),
            eval_spec)
    train_seconds = time.monotonic() - start - evaluations.seconds
    step = estimator.global_step
    export_dir = export_serving_model(estimator, tft_output, pipeline, out / Files.EXPORT)
    if not chief:
        progress(f"trained to step {step}; the chief writes the model (non-chief worker)")
        return {"global_step": step, "final_loss": hook.loss}
    progress(f"exported the serving model to {export_dir}")
    examples = (step - hook.start) * spec.batch_size if hook.start is not None else 0
    result = {"global_step": step, "final_loss": hook.loss, "first_loss": hook.first_loss,
              "examples": examples,
              "examples_per_sec": round(examples / train_seconds, 1) if examples else None,
              "train_seconds": round(train_seconds, 3),
              "eval_seconds": round(evaluations.seconds, 3),
              "elapsed_seconds": round(time.monotonic() - start, 3),
              "checkpoint": estimator.latest_checkpoint(),
              "checkpoint_dir": str(out / Files.CHECKPOINTS),
              "tensorboard_dir": str(out / Files.CHECKPOINTS),
              "eval_dir": estimator.eval_dir(_eval_name(pipeline)) if eval_spec else None,
              "evaluations": evaluations.rows,
              "warm_start": warm.record if warm else None,
              "export_dir": str(export_dir), "model": type(pipeline.model).__name__}
    write_json(out / Files.TRAIN_RESULT, result)
    return result


# -- evaluation while training ---------------------------------------------------------------
_KEY_METRICS = ("auc", "accuracy", "rmse", "average_loss")  # the first one present is shown


def _eval_name(pipeline: Pipeline) -> str | None:
    """The engine's evaluation name: None for the default ``eval`` (``checkpoints/eval``, as
    tf.estimator's unnamed evaluations), else the declared one (``checkpoints/eval_<name>``)."""
    return None if pipeline.eval.name == "eval" else pipeline.eval.name


def _eval_input_fn(pipeline: Pipeline, transformed: Path, tft_output) -> Callable:
    return make_input_fn(str(transformed / Files.TRANSFORMED_EVAL / "*.tfrecord.gz"),
                         tft_output.transformed_feature_spec(), pipeline.label.name,
                         pipeline.eval.batch_size, repeat=False)


class _EvalRecorder(Exporter):
    """Runs after each evaluation during training (an exporter that exports nothing): a
    progress line (step, loss, the key metric), a ``train.json`` row (step, metrics) and the
    evaluation's time (so examples/s counts training only)."""

    name = "estflow_evaluations"

    def __init__(self, progress: Callable[[str], None]) -> None:
        self._progress = progress
        self.rows: list[dict] = []
        self.seconds = 0.0  # the evaluations' wall time, input and tracing included
        self._began: float | None = None

    def timed(self, input_fn: Callable) -> Callable:
        """``input_fn``, noting when an evaluation starts (it calls the input_fn first)."""

        def eval_input_fn():
            self._began = time.monotonic()
            return input_fn()

        return eval_input_fn

    def export(self, estimator, export_path, checkpoint_path, eval_result, is_the_final_export):
        metrics = {k: float(v) for k, v in eval_result.items()
                   if isinstance(v, (int, float, np.number)) and not isinstance(v, bool)
                   and k != "global_step"}
        if self._began is not None:
            self.seconds += time.monotonic() - self._began
            self._began = None
        step = int(eval_result["global_step"])
        self.rows.append({"step": step, "metrics": metrics})
        key = next((k for k in _KEY_METRICS if k in metrics), None)
        shown = [f"loss={metrics['loss']:.4g}"] if "loss" in metrics else []
        shown += [f"{key}={metrics[key]:.4g}"] if key else []
        self._progress(f"evaluation at step {step}: {', '.join(shown)}"
                       + (" (final)" if is_the_final_export else ""))
        return None


def _eval_spec(pipeline: Pipeline, transformed: Path, tft_output, recorder: _EvalRecorder,
               progress: Callable[[str], None]) -> training.EvalSpec | None:
    """The engine's EvalSpec for the declared one (None, with a progress line, when the
    transform output has no eval split)."""
    if not tf.io.gfile.glob(str(transformed / Files.TRANSFORMED_EVAL / "*.tfrecord.gz")):
        progress(f"no eval split in {transformed}: training without evaluations")
        return None
    declared = pipeline.eval
    return training.EvalSpec(recorder.timed(_eval_input_fn(pipeline, transformed, tft_output)),
                             steps=declared.steps, name=_eval_name(pipeline),
                             exporters=(recorder,),
                             start_delay_secs=declared.start_delay_secs,
                             throttle_secs=declared.throttle_secs)


# -- warm start ------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class _WarmStart:
    """What ``TrainSpec.warm_start`` resolved to: the engine's settings (None: from scratch)
    and what ``train.json`` records (``{"version", "path", "checkpoint"}`` or a reason)."""

    settings: WarmStartSettings | None
    record: dict | None


def _warm_start(pipeline: Pipeline, model_dir: Path,
                progress: Callable[[str], None]) -> _WarmStart:
    """Resolve ``TrainSpec.warm_start`` against the version served at the push target."""
    declared = pipeline.train.warm_start
    if declared is None:
        return _WarmStart(None, None)
    if pipeline.push is None:
        raise TrainStepError("train.warm_start: expected a push target (Pipeline.push) to "
                             "find the served version; received None")
    destination = model_repo.destination_for(pipeline.push.base_path, pipeline.push.model_name)
    version = model_repo.latest_servable(destination)
    if version is None:
        progress(f"warm start: no version is served at {destination.model_base} yet; "
                 "training from scratch")
        return _WarmStart(None, {"version": None, "reason": "no served version"})
    found = tf.train.latest_checkpoint(model_repo.served_checkpoint_dir(destination, version))
    path = f"{destination.model_base}/{version}"
    if found is None:
        progress(f"warm start: served version {version} at {path} carries no training "
                 f"checkpoint ({model_repo.SERVED_CHECKPOINT}/); training from scratch")
        return _WarmStart(None, {"version": version, "path": path,
                                 "reason": "no checkpoint in the served version"})
    record = {"version": version, "path": path, "checkpoint": found}
    if tf.train.latest_checkpoint(str(model_dir)):
        progress(f"warm start: {model_dir} has a checkpoint of its own: resuming from it "
                 f"(served version {version} is not read)")
        return _WarmStart(None, {**record, "reason": "resumed from the model_dir"})
    progress(f"warm start: from served version {version} ({found})")
    settings = WarmStartSettings(found, vars_to_warm_start=declared.settings_vars(),
                                 var_name_to_prev_var_name=declared.var_name_to_prev_var_name)
    return _WarmStart(settings, record)


def _copy_checkpoint(estimator: Estimator, export_dir: Path) -> None:
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


def _read_transform(transformed: Path):
    stats_path = transformed / Files.TRANSFORM_STATS
    if not stats_path.exists() or not (transformed / Files.TRANSFORM_FN).is_dir():
        raise TrainStepError(f"{transformed} is not a transform output: it needs "
                             f"{Files.TRANSFORM_FN}/ and {Files.TRANSFORM_STATS}")
    cardinalities = read_json(stats_path).get("cardinalities", {})
    return tft.TFTransformOutput(str(transformed / Files.TRANSFORM_FN)), cardinalities


# -- export --------------------------------------------------------------------------------
def _raw_spec(tft_output, pipeline: Pipeline) -> dict:
    """The raw parsing spec: the transform output's raw schema, or (when the transform step did
    not write one) the same spec rebuilt from the declarations."""
    try:
        return dict(tft_output.raw_feature_spec())
    except OSError:
        return dict(raw_feature_spec(pipeline))


def _training_only(pipeline: Pipeline) -> set[str]:
    """Raw columns a serving request does not send: the label's (when it is raw) and the
    weight column's when no feature reads it."""
    read = {getattr(f, "column", None) for f in pipeline.features}
    dropped = {pipeline.label.column} - set(pipeline.derived_names())
    weight = getattr(pipeline.model, "weight_column", None)
    if weight is not None and weight not in read:
        dropped.add(weight)
    return dropped


def _dense(value):
    if isinstance(value, tf.SparseTensor):
        return tf.sparse.to_dense(value)
    if isinstance(value, tf.RaggedTensor):
        return value.to_tensor()
    return value


def export_serving_model(estimator: Estimator, tft_output, pipeline: Pipeline,
                         export_dir: str | os.PathLike) -> Path:
    """Write the serving SavedModel (signatures in the module docstring) and the raw feature
    types to ``export_dir``, replacing an older export only once the new one is complete."""
    raw_spec = _raw_spec(tft_output, pipeline)
    serving_spec = {k: v for k, v in raw_spec.items() if k not in _training_only(pipeline)}
    layer = tft_output.transform_features_layer()
    not_features = {pipeline.label.name, getattr(pipeline.model, "weight_column", None)}

    def transform(examples, spec):
        return layer(tf.io.parse_example(examples, spec))

    def predict_parsed(parsed):
        transformed = layer(parsed)
        features = {k: v for k, v in transformed.items() if k not in not_features}
        return export_lib.as_outputs(estimator.predictions(features))

    def predict(inputs):
        return predict_parsed(tf.io.parse_example(inputs[_EXAMPLES], serving_spec))

    signatures = {
        "serving_default": export_lib.signature_function(predict, {_EXAMPLES: _STRINGS}),
        "transform_features": export_lib.signature_function(
            lambda inputs: {k: _dense(v) for k, v in
                            transform(inputs[_EXAMPLES], raw_spec).items()},
            {_EXAMPLES: _STRINGS}),
    }
    raw_inputs = _raw_input_specs({k: v for k, v in serving_spec.items()
                                   if k in _read_by_features(pipeline, serving_spec)})
    if raw_inputs:
        signatures[RAW_SIGNATURE] = export_lib.signature_function(
            lambda inputs: predict_parsed(_as_parsed(inputs, serving_spec)), raw_inputs)
    method_names = _add_serving_api_signatures(signatures, predict, pipeline)
    module = export_lib.export_module(estimator, {"transform_layer": layer})

    def write(tmp: Path) -> Path:
        path = export_lib.save(module, estimator, tmp, signatures, method_names)
        raw_features.write_types(Path(path), serving_spec)
        if pipeline.train.warm_start is not None:  # what the next run warm-starts from
            _copy_checkpoint(estimator, Path(path))
        return path

    return _replace_dir(export_dir, write)


def _read_by_features(pipeline: Pipeline, serving_spec: dict) -> set[str]:
    """The raw columns a ``predict_raw`` request sends: those the features read (every serving
    column when a feature reads a derived column: ``derive`` may read any)."""
    read = {f.column for f in pipeline.features if hasattr(f, "column")}
    if read & set(pipeline.derived_names()):
        return set(serving_spec)
    return read & set(serving_spec)


def _raw_input_specs(serving_spec: dict) -> dict[str, tf.TensorSpec] | None:
    """The inputs of ``predict_raw``: one tensor per raw feature, a value per example (a
    fixed-length feature of shape ``[k]``: ``[None, k]``); None when a feature's kind has no
    such tensor (the signature is then left out)."""
    specs = {}
    for name, feature in sorted(serving_spec.items()):
        if isinstance(feature, tf.io.FixedLenFeature):
            specs[name] = tf.TensorSpec([None, *feature.shape], feature.dtype, name=name)
        elif isinstance(feature, tf.io.VarLenFeature):
            specs[name] = tf.TensorSpec([None], feature.dtype, name=name)
        else:
            return None
    return specs


def _as_parsed(inputs: dict, serving_spec: dict) -> dict:
    """Raw feature tensors as ``tf.io.parse_example`` gives them for ``serving_spec``: a
    variable-length feature is a SparseTensor ``[N, 1]`` holding each example's one value; a
    column no feature reads (not an input) is absent (empty), or zeros when it is required."""
    batch = tf.shape(next(iter(inputs.values())), out_type=tf.int64)[0]
    parsed = {}
    for name, feature in serving_spec.items():
        value = inputs.get(name)
        if isinstance(feature, tf.io.VarLenFeature):
            if value is None:
                value = tf.SparseTensor(tf.zeros([0, 2], tf.int64), tf.zeros([0], feature.dtype),
                                        tf.stack([batch, tf.constant(0, tf.int64)]))
            else:
                rows = tf.range(batch, dtype=tf.int64)
                value = tf.SparseTensor(tf.stack([rows, tf.zeros_like(rows)], axis=1), value,
                                        tf.stack([batch, tf.constant(1, tf.int64)]))
        elif value is None:
            value = tf.zeros(tf.concat([[batch], tf.constant(feature.shape, tf.int64)], 0),
                             feature.dtype)
        parsed[name] = value
    return parsed


def _classes(pipeline: Pipeline, n_classes: int) -> tf.Tensor:
    names = pipeline.label.vocabulary or tuple(str(i) for i in range(n_classes))
    return tf.constant(list(names)[:n_classes])


def _add_serving_api_signatures(signatures: dict, predict, pipeline: Pipeline) -> dict:
    """Add ``classify`` or ``regress`` when the predictions allow it; their method names."""
    outputs = signatures["serving_default"].structured_outputs
    head = _head_kind(pipeline.model)
    probabilities = outputs.get("probabilities")
    if head in ("binary", "multi_class") and probabilities is not None \
            and probabilities.shape[-1] is not None:
        classes = _classes(pipeline, int(probabilities.shape[-1]))

        def classify(inputs):
            scores = predict({_EXAMPLES: inputs["inputs"]})["probabilities"]
            tiled = tf.tile(classes[tf.newaxis], [tf.shape(scores)[0], 1])
            return {"classes": tiled, "scores": scores}

        signatures["classify"] = export_lib.signature_function(classify, {"inputs": _STRINGS})
        return {"classify": tf.saved_model.CLASSIFY_METHOD_NAME}
    values = outputs.get("predictions")
    if head == "regression" and values is not None and values.shape[-1] in (1, None):
        signatures["regress"] = export_lib.signature_function(
            lambda inputs: {"outputs": tf.reshape(
                predict({_EXAMPLES: inputs["inputs"]})["predictions"], [-1])},
            {"inputs": _STRINGS})
        return {"regress": tf.saved_model.REGRESS_METHOD_NAME}
    return {}


def _head_kind(model) -> str:
    if isinstance(model, m.CustomModel):
        return model.head
    if hasattr(model, "n_classes"):
        return "binary" if model.n_classes == 2 else "multi_class"
    return "regression"


def _replace_dir(target: str | os.PathLike, write: Callable[[Path], Path]) -> Path:
    """``write`` a complete new directory next to ``target``, then swap it in: readers see the
    old export or the new one, and a failed export leaves the old one in place."""
    target = Path(target)
    staged = target.with_name(f".{target.name}-new-{os.getpid()}")
    retired = target.with_name(f".{target.name}-old-{os.getpid()}")
    for leftover in (staged, retired):
        shutil.rmtree(leftover, ignore_errors=True)
    write(staged)
    if target.exists():
        os.replace(target, retired)
    os.replace(staged, target)
    shutil.rmtree(retired, ignore_errors=True)
    return target


def main(argv: list[str] | None = None) -> int:
    """Entry point: ``python -m estflow.components.train --spec S --transformed IN --model
    OUT``."""
    parser = entry.step_parser(step_named("train"), __doc__)
    args = parser.parse_args(argv)
    pipeline = entry.load_pipeline(args.spec)
    try:
        # An accelerator that was asked for but is not usable fails now, not after hours of
        # silent CPU training (in estflow's images and KFP pods).
        accelerators.check(pipeline, os.environ)
        # distribution: the environment is read here, once: which task of which cluster this
        # process is (TF_CONFIG, as a TFJob or `estflow run --workers N` sets it).
        cluster = distribute.parse_tf_config(os.environ.get("TF_CONFIG"))
        name = pipeline.run_config.train_distribute
        role = distribute.task_role(name, cluster)
        if role == "serve":  # a parameter-server strategy's worker or ps: the chief drives it
            distribute.serve(cluster)
        elif role == "evaluate":
            evaluate_checkpoints(pipeline, args.transformed, args.model)
        else:  # the strategy first: it must configure the TF runtime before any op runs
            strategy = distribute.strategy_for(name, cluster)
            run(pipeline, args.transformed, args.model,
                progress=entry.Progress(_task_label(cluster)), cluster=cluster,
                strategy=strategy)
    except (TrainStepError, NanLossError, distribute.DistributeError,
            accelerators.AcceleratorError) as err:
        print(f"[train] error: {err}", file=sys.stderr, flush=True)
        return 1
    return 0


def _task_label(cluster: distribute.ClusterSpec | None) -> str:
    """``train`` for the chief (or a single process), ``train worker N`` for the others."""
    if cluster is None or cluster.is_chief:
        return "train"
    return f"train {cluster.task.type} {cluster.task.index}"


def evaluate_checkpoints(pipeline: Pipeline, transformed_dir: str | os.PathLike,
                         model_dir: str | os.PathLike,
                         progress: Callable[[str], None] | None = None, *,
                         timeout_secs: float = 3600) -> dict[str, Any]:
    """The evaluator task of a distributed run: evaluate each new checkpoint in
    ``OUT_DIR/checkpoints`` on the eval split (at most every ``eval.throttle_secs``; scalars
    for TensorBoard under ``checkpoints/eval``, or ``eval_<name>``, as when the chief
    evaluates) until one reaches ``train.max_steps``.

    Raises:
        TrainStepError: no new checkpoint came for ``timeout_secs``.
    """
    progress = progress or entry.Progress("train evaluator")
    transformed = Path(transformed_dir)
    tft_output, cardinalities = _read_transform(transformed)
    model_fn, params = model_fn_of(pipeline.model, cardinalities)
    config = dataclasses.replace(pipeline.run_config, train_distribute=None, cluster=None)
    checkpoints = str(Path(model_dir) / Files.CHECKPOINTS)
    estimator = Estimator(model_fn, checkpoints, config, params, progress=progress)
    input_fn = _eval_input_fn(pipeline, transformed, tft_output)
    for path in tf.train.checkpoints_iterator(checkpoints, timeout=timeout_secs,
                                              min_interval_secs=pipeline.eval.throttle_secs):
        metrics = estimator.evaluate(input_fn, steps=pipeline.eval.steps, checkpoint_path=path,
                                     name=_eval_name(pipeline))
        progress(f"evaluated {path}: " + ", ".join(
            f"{k}={v:.4g}" for k, v in metrics.items() if isinstance(v, float)))
        if metrics["global_step"] >= pipeline.train.max_steps:
            return metrics
    raise TrainStepError(f"evaluator: no new checkpoint in {checkpoints} for {timeout_secs}s")


if __name__ == "__main__":
    sys.exit(main())
