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
                                  the evaluations ({step, metrics}), the warm start, and the
                                  paths of the latest checkpoint, the TensorBoard and eval
                                  events and the export, relative to OUT_DIR

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

import tensorflow as tf

from estflow.components._io import leftovers
from estflow.components._io.jsonfile import write_json
from estflow.components._runtime import accelerators
from estflow.components._runtime import entry
from estflow.components.train import evaluation
from estflow.components.train import warm_start
from estflow.components.train.export import RAW_SIGNATURE
from estflow.components.train.export import export_serving_model
from estflow.components.train.inputs import TrainStepError
from estflow.components.train.inputs import eval_input_fn
from estflow.components.train.inputs import make_input_fn
from estflow.components.train.inputs import read_transform
from estflow.dsl import models as m
from estflow.dsl.contracts import Files
from estflow.dsl.contracts import step_named
from estflow.dsl.pipeline import Pipeline
from estflow.estimator import Estimator
from estflow.estimator import NanLossError
from estflow.estimator import TrainHook
from estflow.estimator import distribute
from estflow.estimator import model_fn_for
from estflow.estimator import training
from estflow.estimator.run_config import RunConfig

__all__ = ["run", "main", "make_input_fn", "model_fn_of", "export_serving_model",
           "evaluate_checkpoints", "TrainStepError", "RAW_SIGNATURE"]

def model_fn_of(model, cardinalities: dict[str, int]) -> tuple[Callable, dict]:
    """(model_fn, params): a premade declaration's model_fn, or a CustomModel's resolved one."""
    if isinstance(model, m.CustomModel):
        return model.checked_model_fn(entry.resolve(model.model_fn)), dict(model.params)
    return model_fn_for(model, cardinalities), {}




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
    tft_output, cardinalities = read_transform(transformed)
    model_fn, params = model_fn_of(pipeline.model, cardinalities)
    # distribution: the engine config carries the strategy object and the cluster.
    changes = {"cluster": cluster, **({"train_distribute": strategy} if strategy else {})}
    config = RunConfig.from_dsl(pipeline.run_config, **changes)
    warm = warm_start.resolve(pipeline, out / Files.CHECKPOINTS, progress)
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
                      warm: warm_start.WarmStart | None = None) -> dict:
    """Train (evaluating on the eval split meanwhile), export to ``out/export``, summarise
    (in ``out/train.json`` on the chief)."""
    spec = pipeline.train
    input_fn = make_input_fn(str(transformed / Files.TRANSFORMED_TRAIN / "*.tfrecord.gz"),
                             tft_output.transformed_feature_spec(), pipeline.label.name,
                             spec.batch_size, shuffle_buffer=spec.shuffle_buffer,
                             seed=pipeline.run_config.tf_random_seed)
    hook = _LastLoss()
    evaluations = evaluation.EvalRecorder(progress)
    eval_spec = evaluation.eval_spec(pipeline, transformed, tft_output, evaluations, progress)
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
              "eval_dir": estimator.eval_dir(evaluation.eval_name(pipeline)) if eval_spec else None,
              "evaluations": evaluations.rows,
              "warm_start": warm.record if warm else None,
              "export_dir": str(export_dir), "model": type(pipeline.model).__name__}
    write_json(out / Files.TRAIN_RESULT, _relative_paths(result, out))
    return result


_PATH_KEYS = ("checkpoint", "checkpoint_dir", "tensorboard_dir", "eval_dir", "export_dir")


def _relative_paths(result: dict[str, Any], out: Path) -> dict[str, Any]:
    """``result`` as ``train.json`` keeps it: its paths relative to ``out`` (the model
    artifact), so that they still hold once the artifact has moved (the local step cache writes
    it under a temporary name; a pipeline reads it from a bucket)."""
    kept = dict(result)
    for key in _PATH_KEYS:
        if kept.get(key):
            kept[key] = os.path.relpath(kept[key], out)
    return kept


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
    tft_output, cardinalities = read_transform(transformed)
    model_fn, params = model_fn_of(pipeline.model, cardinalities)
    config = dataclasses.replace(pipeline.run_config, train_distribute=None, cluster=None)
    checkpoints = str(Path(model_dir) / Files.CHECKPOINTS)
    estimator = Estimator(model_fn, checkpoints, config, params, progress=progress)
    input_fn = eval_input_fn(pipeline, transformed, tft_output)
    for path in tf.train.checkpoints_iterator(checkpoints, timeout=timeout_secs,
                                              min_interval_secs=pipeline.eval.throttle_secs):
        metrics = estimator.evaluate(input_fn, steps=pipeline.eval.steps, checkpoint_path=path,
                                     name=evaluation.eval_name(pipeline))
        progress(f"evaluated {path}: " + ", ".join(
            f"{k}={v:.4g}" for k, v in metrics.items() if isinstance(v, float)))
        if metrics["global_step"] >= pipeline.train.max_steps:
            return metrics
    raise TrainStepError(f"evaluator: no new checkpoint in {checkpoints} for {timeout_secs}s")


if __name__ == "__main__":
    entry.exit_after(main)
