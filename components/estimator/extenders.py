"""Extending an Estimator (tf.estimator's ``extenders``): :func:`add_metrics`.

Example::

    def metric_fn(labels, predictions):
        return {"mean_squared_error": tf.compat.v1.metrics.mean_squared_error(
            tf.cast(labels, tf.float32), tf.cast(predictions, tf.float32))}

    est = estimator.add_metrics(est, metric_fn)
    est.evaluate(eval_input_fn)     # the model_fn's metrics plus mean_squared_error
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable

from estflow.dsl.model_fn import ModeKeys
from estflow.estimator.estimator import Estimator

__all__ = ["add_metrics"]

_METRIC_FN_ARGS = ("features", "labels", "predictions", "config")


def add_metrics(estimator: Estimator, metric_fn: Callable) -> Estimator:
    """A new Estimator on ``estimator``'s model_dir, config, params and warm start whose
    evaluation also reports ``metric_fn``'s metrics (tf.estimator's ``add_metrics``).

    Args:
        estimator: the Estimator to extend (it is not changed).
        metric_fn: ``metric_fn(features, labels, predictions, config) -> {name: metric}``,
            taking any subset of those arguments by name: the EVAL call's features and
            labels, the model_fn's EVAL ``predictions`` and ``estimator.config``. Metrics are
            what ``eval_metric_ops`` takes (TF 1 ``(value, update_op)`` pairs or Keras metric
            objects); a name the model_fn reports too is overridden.

    Raises:
        ValueError: ``metric_fn`` names another argument.
    """
    names = _metric_fn_args(metric_fn)
    inner = estimator.model_fn

    def model_fn(features, labels, mode, params, config):
        del params  # the inner model_fn has its own (the same)
        spec = inner(features, labels, mode)
        if mode != ModeKeys.EVAL:
            return spec
        given = {"features": features, "labels": labels, "predictions": spec.predictions,
                 "config": config}
        added = metric_fn(**{name: given[name] for name in names})
        if not isinstance(added, dict):
            raise TypeError(f"Expected metric_fn {metric_fn!r} to return a dict of metrics "
                            f"{{name: metric}}; received {type(added).__name__}")
        return dataclasses.replace(spec, eval_metric_ops={**(spec.eval_metric_ops or {}),
                                                          **added})

    model_fn.__name__ = model_fn.__qualname__ = (
        f"add_metrics({getattr(metric_fn, '__name__', 'metric_fn')})")
    return Estimator(model_fn, model_dir=estimator.model_dir, config=estimator.config,
                     params=estimator.params, warm_start_from=estimator.warm_start_from,
                     progress=estimator.progress)


def _metric_fn_args(metric_fn: Callable) -> tuple[str, ...]:
    if not callable(metric_fn):
        raise TypeError(f"Expected metric_fn to be callable; received {metric_fn!r}")
    parameters = inspect.signature(metric_fn).parameters
    invalid = [name for name, p in parameters.items()
               if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD) and name not in
               _METRIC_FN_ARGS]
    if invalid:
        raise ValueError(f"metric_fn ({metric_fn!r}) has following not expected args: "
                         f"{invalid}; expected any of {list(_METRIC_FN_ARGS)}")
    return tuple(name for name in parameters if name in _METRIC_FN_ARGS)
