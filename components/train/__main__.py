"""Train: the Estimator engine on the transformed examples, then the serving export.

``python -m estflow.components.train --spec S --transformed IN_DIR --model OUT_DIR``

With ``Pipeline.tune``, also ``--hyperparameters DIR`` (the tune step's output): the best
trial's assignment (``DIR/best.json``) is applied to the model and train spec before training.

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
checkpoint is always evaluated. Each evaluation is a progress line (step, ``average_loss``,
the key metric), so an overfitting run shows while it runs. ``average_loss`` is the mean over
the eval examples, the evaluate step's ``average_loss`` for the same checkpoint and rows;
``train.json`` and TensorBoard also hold tf.estimator's eval ``loss``, the mean of the eval
batches' losses (a short last batch weighs as much as a full one), which the evaluate step does
not compute. With an evaluator task in the cluster, that task evaluates instead
(:func:`evaluate_checkpoints`).

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

import json
import os
import sys
from pathlib import Path

from estflow.components._runtime import accelerators
from estflow.components._runtime import entry
from estflow.components.train.evaluator import evaluate_checkpoints
from estflow.components.train.export import RAW_SIGNATURE
from estflow.components.train.export import export_serving_model
from estflow.components.train.inputs import TrainStepError
from estflow.components.train.inputs import make_input_fn
from estflow.components.train.step import model_fn_of
from estflow.components.train.step import run
from estflow.components.train.task import run_task
from estflow.dsl import tune
from estflow.dsl.contracts import TUNE_BEST
from estflow.dsl.contracts import TUNED
from estflow.dsl.contracts import step_named
from estflow.dsl.contracts import tuned_train
from estflow.estimator import NanLossError
from estflow.estimator import distribute

__all__ = ["run", "main", "make_input_fn", "model_fn_of", "export_serving_model",
           "evaluate_checkpoints", "TrainStepError", "RAW_SIGNATURE"]


def _tuned(pipeline, hyperparameters: Path):
    """``pipeline`` with the tune step's best assignment applied (``best.json``)."""
    best = json.loads((hyperparameters / TUNE_BEST).read_text())

    def shown(value):
        return f"{value:.4g}" if isinstance(value, float) else json.dumps(value)

    entry.Progress("train")(
        f"training with the tuned hyperparameters of trial {best.get('trial')} "
        f"({best.get('objective')}={shown(best.get('value'))}): "
        + ", ".join(f"{k}={shown(v)}" for k, v in best["assignment"].items()))
    return tune.apply(pipeline, best["assignment"])


def main(argv: list[str] | None = None) -> int:
    """Entry point: ``python -m estflow.components.train --spec S --transformed IN --model
    OUT``."""
    argv = sys.argv[1:] if argv is None else list(argv)
    row = step_named("train")
    if any(a == f"--{TUNED}" or a.startswith(f"--{TUNED}=") for a in argv):
        row = tuned_train(row)  # a pipeline with Pipeline.tune: the tune step's best assignment
    args = entry.step_parser(row, __doc__).parse_args(argv)
    pipeline = entry.load_pipeline(args.spec)
    if getattr(args, TUNED, None):
        pipeline = _tuned(pipeline, Path(getattr(args, TUNED)))
    try:
        # An accelerator that was asked for but is not usable fails now, not after hours of
        # silent CPU training (in estflow's images and KFP pods).
        accelerators.check(pipeline, os.environ)
        # distribution: the environment is read here, once: which task of which cluster this
        # process is (TF_CONFIG, as a TFJob or `estflow run --workers N` sets it).
        cluster = distribute.parse_tf_config(os.environ.get("TF_CONFIG"))
        run_task(pipeline, args.transformed, args.model, cluster)
    except (TrainStepError, NanLossError, distribute.DistributeError,
            accelerators.AcceleratorError) as err:
        print(f"[train] error: {err}", file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    entry.exit_after(main)
