"""``tf.compat.v1.estimator.tpu.experimental`` (``estflow.estimator.tpu.experimental``):
``EmbeddingConfigSpec`` (TPU embeddings) raises naming the replacement."""

from __future__ import annotations

from estflow.estimator._unavailable import unavailable_class

__all__ = ["EmbeddingConfigSpec"]

EmbeddingConfigSpec = unavailable_class(
    "compat.v1.estimator.tpu.experimental.EmbeddingConfigSpec",
    "estimator.feature_column.embedding_column with TPUEstimator(use_tpu=False) (TPU "
    "embeddings are not in the engine)")
