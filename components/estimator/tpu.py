"""``tf.compat.v1.estimator.tpu`` on the engine, for TPUEstimator programs run with
``use_tpu=False`` (what they do on a CPU or GPU): ``TPUEstimator`` is an :class:`Estimator`
that gives the input_fn and model_fn ``params['batch_size']`` (``train_batch_size``,
``eval_batch_size`` or ``predict_batch_size`` by mode, as TPUEstimator did) and turns a
``TPUEstimatorSpec`` into an ``EstimatorSpec`` (``eval_metrics=(metric_fn, tensors)`` ->
``eval_metric_ops``, ``scaffold_fn()`` -> ``scaffold``; ``host_call`` is not run).
``TPUConfig``, ``InputPipelineConfig`` and ``RunConfig(tpu_config=...)`` are accepted and their
TPU fields kept unused. ``use_tpu=True`` raises naming the replacement: a TPU runs under
``RunConfig(train_distribute=tf.distribute.TPUStrategy(...))`` with ``Estimator``.
"""

from __future__ import annotations

import logging

from estflow.dsl.model_fn import EstimatorSpec
from estflow.estimator import _tpu_experimental as experimental
from estflow.estimator._engine.binding import bind_model_fn
from estflow.estimator._unavailable import UnavailableError
from estflow.estimator.estimator import Estimator
from estflow.estimator.run_config import RunConfig as _RunConfig

__all__ = ["TPUEstimator", "TPUEstimatorSpec", "TPUConfig", "RunConfig", "InputPipelineConfig",
           "experimental"]

_log = logging.getLogger("estflow.estimator")
_ON_TPU = ("Estimator(model_fn, config=RunConfig(train_distribute="
           "tf.distribute.TPUStrategy(resolver))), or TPUEstimator(..., use_tpu=False) on CPU/GPU")


class InputPipelineConfig:
    """tf.estimator.tpu.InputPipelineConfig's values (TPU infeed modes; unused here)."""
    PER_SHARD_V1 = 1
    PER_HOST_V1 = 2
    PER_HOST_V2 = 3
    BROADCAST = 4
    SLICED = 5


class TPUConfig:
    """tf.estimator.tpu.TPUConfig: kept as given (the TPU's loop and infeed settings)."""

    def __init__(self, iterations_per_loop=2, num_shards=None, num_cores_per_replica=None,
                 per_host_input_for_training=True, tpu_job_name=None,
                 initial_infeed_sleep_secs=None, input_partition_dims=None,
                 eval_training_input_configuration=InputPipelineConfig.PER_HOST_V1,
                 experimental_host_call_every_n_steps=1,
                 experimental_allow_per_host_v2_parallel_get_next=False,
                 experimental_feed_hook=None) -> None:
        self.__dict__.update({k: v for k, v in locals().items() if k != "self"})


class RunConfig(_RunConfig):
    """tf.estimator.tpu.RunConfig: the engine's :class:`RunConfig` (``**kwargs``) plus the TPU
    fields (``tpu_config``, ``evaluation_master``, ``master``, ``cluster``: a TPU cluster
    resolver), kept and unused."""

    def __init__(self, tpu_config=None, evaluation_master=None, master=None, cluster=None,
                 **kwargs) -> None:
        super().__init__(**kwargs)
        for name, value in (("tpu_config", tpu_config or TPUConfig()),
                            ("evaluation_master", evaluation_master), ("master", master),
                            ("tpu_cluster", cluster)):
            object.__setattr__(self, name, value)


class TPUEstimatorSpec:
    """tf.estimator.tpu.TPUEstimatorSpec; :meth:`as_estimator_spec` is what the engine runs."""

    def __init__(self, mode, predictions=None, loss=None, train_op=None, eval_metrics=None,
                 export_outputs=None, scaffold_fn=None, host_call=None, training_hooks=None,
                 evaluation_hooks=None, prediction_hooks=None) -> None:
        if eval_metrics is not None and (not isinstance(eval_metrics, (tuple, list)) or
                                         len(eval_metrics) != 2 or not callable(eval_metrics[0])):
            raise ValueError("eval_metrics: expected (metric_fn, tensors), tensors a list or a "
                             f"dict of metric_fn's arguments; received {eval_metrics!r}")
        self.__dict__.update({k: v for k, v in locals().items() if k != "self"})

    def as_estimator_spec(self) -> EstimatorSpec:
        """The ``EstimatorSpec`` (TPUEstimatorSpec's method of the same name)."""
        metric_ops = None
        if self.eval_metrics is not None:
            metric_fn, tensors = self.eval_metrics
            metric_ops = metric_fn(**tensors) if isinstance(tensors, dict) else \
                metric_fn(*tensors)
        if self.host_call is not None:
            _log.warning("TPUEstimatorSpec(host_call=...) is not run (it fed TPU summaries)")
        return EstimatorSpec(
            mode=self.mode, predictions=self.predictions, loss=self.loss,
            train_op=self.train_op, eval_metric_ops=metric_ops,
            export_outputs=self.export_outputs,
            scaffold=self.scaffold_fn() if self.scaffold_fn is not None else None,
            training_hooks=self.training_hooks, evaluation_hooks=self.evaluation_hooks,
            prediction_hooks=self.prediction_hooks)


def _spec_model_fn(model_fn):
    """A model_fn binding the user's by name and returning an ``EstimatorSpec``."""
    binding = bind_model_fn(model_fn)

    def tpu_model_fn(features, labels, mode, params, config):
        values = {"features": features, "labels": labels, "mode": mode, "params": params,
                  "config": config}
        args, kwargs = binding.arguments(values)
        spec = model_fn(*args, **kwargs)
        return spec.as_estimator_spec() if isinstance(spec, TPUEstimatorSpec) else spec

    tpu_model_fn.__name__ = getattr(model_fn, "__name__", "model_fn")
    return tpu_model_fn


class TPUEstimator(Estimator):
    """tf.estimator.tpu.TPUEstimator with ``use_tpu=False``: an :class:`Estimator` whose
    input_fn and model_fn get ``params['batch_size']`` by mode; the model_fn may return a
    :class:`TPUEstimatorSpec`.

    Raises:
        UnavailableError: ``use_tpu=True`` (TPUEstimator's default) or an
            ``embedding_config_spec`` (TPU embeddings), naming the replacement.
        ValueError: ``params`` has ``'batch_size'`` (TPUEstimator reserved it).
    """

    def __init__(self, model_fn=None, model_dir=None, config=None, params=None, use_tpu=True,
                 train_batch_size=None, eval_batch_size=None, predict_batch_size=None,
                 batch_axis=None, eval_on_tpu=True, export_to_tpu=True, export_to_cpu=True,
                 warm_start_from=None, embedding_config_spec=None,
                 export_saved_model_api_version=1, *, progress=None) -> None:
        if use_tpu:
            raise UnavailableError("tf.estimator.tpu.TPUEstimator(use_tpu=True) is not in "
                                   f"estflow's engine; use {_ON_TPU}")
        if embedding_config_spec is not None:
            raise UnavailableError("TPUEstimator(embedding_config_spec=...): TPU embeddings are "
                                   "not in estflow's engine; use estimator.feature_column."
                                   "embedding_column with TPUEstimator(use_tpu=False)")
        params = dict(params or {})
        if "batch_size" in params:
            raise ValueError("params: 'batch_size' is reserved by TPUEstimator (it passes "
                             "train_batch_size/eval_batch_size/predict_batch_size there); "
                             f"received params={params!r}")
        super().__init__(_spec_model_fn(model_fn), model_dir, config, params, warm_start_from,
                         progress=progress)
        self._batch_sizes = {"train": train_batch_size, "eval": eval_batch_size,
                             "infer": predict_batch_size}

    def _batch_for(self, mode: str) -> None:
        # the engine's ModelFn and input_fn calls read this dict when they run
        size = self._batch_sizes[mode]
        if size is None:
            self.params.pop("batch_size", None)
        else:
            self.params["batch_size"] = size

    def train(self, *args, **kwargs):
        self._batch_for("train")
        return super().train(*args, **kwargs)

    def evaluate(self, *args, **kwargs):
        self._batch_for("eval")
        return super().evaluate(*args, **kwargs)

    def predict(self, *args, **kwargs):
        self._batch_for("infer")
        return super().predict(*args, **kwargs)

    def export_saved_model(self, *args, **kwargs):
        self._batch_for("infer")
        return super().export_saved_model(*args, **kwargs)
