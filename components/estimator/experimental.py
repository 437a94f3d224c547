"""``tf.estimator.experimental`` (and ``tf.compat.v1.estimator.experimental``) under the
engine: the early-stopping hooks (also at ``estflow.estimator``'s top level) and
``call_logit_fn``; the rest (``LinearSDCA``, ``RNNClassifier``/``RNNEstimator``, ``KMeans``,
``InMemoryEvaluatorHook``, the logit_fn builders...) raise when used, naming what to use
instead (:mod:`._unavailable`).
"""

from __future__ import annotations

import inspect

import tensorflow as tf

from estflow.estimator._engine.session_hooks import SessionRunHook
from estflow.estimator._unavailable import unavailable_class
from estflow.estimator._unavailable import unavailable_function
from estflow.estimator.early_stopping import make_early_stopping_hook
from estflow.estimator.early_stopping import stop_if_higher_hook
from estflow.estimator.early_stopping import stop_if_lower_hook
from estflow.estimator.early_stopping import stop_if_no_decrease_hook
from estflow.estimator.early_stopping import stop_if_no_increase_hook

__all__ = ["make_early_stopping_hook", "stop_if_higher_hook", "stop_if_lower_hook",
           "stop_if_no_decrease_hook", "stop_if_no_increase_hook", "call_logit_fn",
           "LinearSDCA", "RNNClassifier", "RNNEstimator", "KMeans", "InMemoryEvaluatorHook",
           "build_raw_supervised_input_receiver_fn", "make_stop_at_checkpoint_step_hook",
           "dnn_logit_fn_builder", "linear_logit_fn_builder"]


def call_logit_fn(logit_fn, features, mode, params, config):
    """tf.estimator.experimental.call_logit_fn: call ``logit_fn(features[, mode][, params]
    [, config])`` with the arguments it names; its result must be a tensor or a dict of them.

    Raises:
        ValueError: the result is neither (named, with its type).
    """
    names = inspect.signature(logit_fn).parameters
    given = {"mode": mode, "params": params, "config": config}
    result = logit_fn(features=features, **{k: v for k, v in given.items() if k in names})
    values = result.values() if isinstance(result, dict) else [result]
    if not all(isinstance(v, (tf.Tensor, tf.Variable)) or tf.is_tensor(v) for v in values):
        raise ValueError("logit_fn should return a Tensor or a dictionary mapping strings to "
                         f"Tensors; received {type(result).__name__}: {result!r}")
    return result


_PREMADE_LINEAR = ("LinearClassifier/LinearRegressor (optimizer='Ftrl' or a Keras optimizer; "
                   "there is no SDCA optimizer)")
LinearSDCA = unavailable_class("estimator.experimental.LinearSDCA", _PREMADE_LINEAR)
_RNN = ("an Estimator whose model_fn runs tf.keras.layers.LSTM/GRU over the sequence "
        "features (Keras 3 has no TF 1 RNN cells)")
RNNClassifier = unavailable_class("estimator.experimental.RNNClassifier", _RNN)
RNNEstimator = unavailable_class("estimator.experimental.RNNEstimator", _RNN)
KMeans = unavailable_class(
    "compat.v1.estimator.experimental.KMeans", "sklearn.cluster.KMeans, or an Estimator with "
    "a model_fn that assigns and updates the cluster centers")
InMemoryEvaluatorHook = unavailable_class(
    "estimator.experimental.InMemoryEvaluatorHook", "train_and_evaluate(estimator, "
    "TrainSpec(...), EvalSpec(..., throttle_secs=...)), which evaluates while training, or "
    "estimator.evaluate(...) between train(...) calls", (SessionRunHook,))
build_raw_supervised_input_receiver_fn = unavailable_function(
    "estimator.experimental.build_raw_supervised_input_receiver_fn",
    "export.build_raw_serving_input_receiver_fn (the engine exports serving signatures, not "
    "TRAIN/EVAL graphs)")
make_stop_at_checkpoint_step_hook = unavailable_function(
    "estimator.experimental.make_stop_at_checkpoint_step_hook",
    "train_and_evaluate(...), whose evaluation ends with training at TrainSpec(max_steps=...)")
dnn_logit_fn_builder = unavailable_function(
    "compat.v1.estimator.experimental.dnn_logit_fn_builder",
    "DNNEstimator(head, hidden_units, feature_columns), or a model_fn over "
    "estimator.feature_column.DenseFeatures and tf.keras.layers.Dense")
linear_logit_fn_builder = unavailable_function(
    "compat.v1.estimator.experimental.linear_logit_fn_builder",
    "LinearEstimator(head, feature_columns), or a model_fn over "
    "estimator.feature_column.LinearModel")
