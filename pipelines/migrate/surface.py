"""``estflow migrate``'s table of tf.estimator 2.15 names beyond :data:`.migrate.ESTIMATOR_NAMES`
and :data:`.migrate.EXPORT_NAMES`: those the engine has under the same path
(``tf.estimator.tpu.TPUEstimator`` -> ``estimator.tpu.TPUEstimator``), and those it does not
implement, each with its replacement (migrate leaves them as they are and names the replacement
in its report; the engine's name of the same path raises naming it too).

Paths are relative to ``tf.estimator`` (``tf.compat.v1.estimator`` has the same ones).
``tests/compat/test_surface.py`` checks both tables against tf.estimator 2.15's recorded surface
and the engine.
"""

from __future__ import annotations

__all__ = ["SURFACE_NAMES", "REPLACED", "surface_target", "replacement"]

# In the engine under the same path.
SURFACE_NAMES = frozenset({
    "BaselineEstimator", "NanLossDuringTrainingError", "SecondOrStepTimer",
    "classifier_parse_example_spec", "regressor_parse_example_spec",
    "experimental", "experimental.call_logit_fn",
    "inputs", "inputs.numpy_input_fn", "inputs.pandas_input_fn",
    "tpu", "tpu.TPUEstimator", "tpu.TPUEstimatorSpec", "tpu.TPUConfig", "tpu.RunConfig",
    "tpu.InputPipelineConfig", "tpu.experimental",
})

_CHECKPOINTS = ("RunConfig(save_checkpoints_steps=... or save_checkpoints_secs=...): the engine "
                "saves checkpoints itself; a CheckpointSaverListener in "
                "train(saving_listeners=[...]) runs code around each save")
_RNN = ("an Estimator whose model_fn runs tf.keras.layers.LSTM/GRU over the sequence "
        "features (Keras 3 has no TF 1 RNN cells)")
# Not implemented: what to use instead (the engine's errors say the same).
REPLACED = {
    "CheckpointSaverHook": _CHECKPOINTS,
    "SummarySaverHook": "RunConfig(save_summary_steps=...): the engine writes the loss and "
                        "step-rate summaries itself",
    "ProfilerHook": "tf.profiler.experimental.start(logdir) before estimator.train(...) and "
                    "tf.profiler.experimental.stop() after it",
    "FeedFnHook": "an input_fn returning a tf.data.Dataset (TF 2 has no feed_dict)",
    "FinalOpsHook": "estimator.get_variable_value(name) or evaluate()'s metrics after train() "
                    "returns",
    "GlobalStepWaiterHook": "RunConfig(train_distribute=tf.distribute.MultiWorkerMirroredStrategy"
                            "()): workers train in step, none waits for the chief's global step",
    "export.ExportOutput": "export.ClassificationOutput, export.RegressionOutput or "
                           "export.PredictOutput (the outputs the engine exports)",
    "export.EvalOutput": "EstimatorSpec(eval_metric_ops=...) and estimator.evaluate(...) (the "
                         "engine exports serving signatures, not EVAL graphs)",
    "experimental.LinearSDCA": "LinearClassifier/LinearRegressor (optimizer='Ftrl' or a Keras "
                               "optimizer; there is no SDCA optimizer)",
    "experimental.RNNClassifier": _RNN,
    "experimental.RNNEstimator": _RNN,
    "experimental.KMeans": "sklearn.cluster.KMeans, or an Estimator with a model_fn that "
                           "assigns and updates the cluster centers",
    "experimental.InMemoryEvaluatorHook": "train_and_evaluate(estimator, TrainSpec(...), "
                                          "EvalSpec(..., throttle_secs=...)), which evaluates "
                                          "while training, or estimator.evaluate(...) between "
                                          "train(...) calls",
    "experimental.build_raw_supervised_input_receiver_fn":
        "export.build_raw_serving_input_receiver_fn (the engine exports serving signatures, not "
        "TRAIN/EVAL graphs)",
    "experimental.make_stop_at_checkpoint_step_hook":
        "train_and_evaluate(...), whose evaluation ends with training at "
        "TrainSpec(max_steps=...)",
    "experimental.dnn_logit_fn_builder": "DNNEstimator(head, hidden_units, feature_columns), or "
                                         "a model_fn over estimator.feature_column."
                                         "DenseFeatures and tf.keras.layers.Dense",
    "experimental.linear_logit_fn_builder": "LinearEstimator(head, feature_columns), or a "
                                            "model_fn over estimator.feature_column.LinearModel",
    "tpu.experimental.EmbeddingConfigSpec": "estimator.feature_column.embedding_column with "
                                            "TPUEstimator(use_tpu=False) (TPU embeddings are not "
                                            "in the engine)",
}


def _prefixes(rest: tuple[str, ...]):
    """The dotted prefixes of ``rest``, longest first."""
    for depth in range(len(rest), 0, -1):
        yield depth, ".".join(rest[:depth])


def surface_target(rest: tuple[str, ...]) -> tuple[int, str] | None:
    """(elements of ``rest`` consumed, estflow path) for a name in :data:`SURFACE_NAMES`;
    None for a replaced name (reported instead) or an unknown one."""
    if replacement(rest) is not None:
        return None
    for depth, dotted in _prefixes(rest):
        if dotted in SURFACE_NAMES:
            return depth, dotted
    return None


def replacement(rest: tuple[str, ...]) -> str | None:
    """What replaces the tf.estimator name ``rest`` (a path under ``tf.estimator``), if it is
    one the engine does not implement."""
    for _, dotted in _prefixes(rest):
        if dotted in REPLACED:
            return REPLACED[dotted]
    return None
