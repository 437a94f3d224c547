"""The model_fn of the pipeline DSL's ``ef.BoostedTreesClassifier`` / ``ef.BoostedTreesRegressor``
(over *transformed* features, like the other premade declarations: :mod:`.inputs`).

A feature named by a string is numeric (float ``[batch]``), bucketized by the quantile sketch;
``ef.Indicator(name)`` is a categorical feature of ``cardinality`` ids, one 0/1 feature per id.
Columns are taken in name order (tf.estimator sorted its feature columns by name). The training
algorithm, state and export are :mod:`estflow.estimator.boosted_trees`'s.
"""

from __future__ import annotations

from collections.abc import Mapping

import tensorflow as tf

from estflow.dsl import models as m
from estflow.estimator._boosted.features import Feature
from estflow.estimator._boosted.features import Layout
from estflow.estimator._boosted.model_fn import TreeHParams
from estflow.estimator._boosted.model_fn import boosted_trees_model_fn
from estflow.estimator._boosted.model_fn import closed_form_applies
from estflow.estimator._boosted.model_fn import num_quantiles
from estflow.estimator._boosted.model_fn import per_example_maxent_loss
from estflow.estimator._premade.inputs import cardinality_of
from estflow.estimator.heads import BinaryClassHead
from estflow.estimator.heads import MultiClassHead
from estflow.estimator.heads import RegressionHead

__all__ = ["boosted_trees_model_fn_for", "layout_of_declaration"]


def _name(col) -> str:
    return col if isinstance(col, str) else col.feature


def layout_of_declaration(columns, cardinalities: Mapping[str, int],
                          quantiles: int) -> Layout:
    """The trees' features for a declaration's ``feature_columns`` (str or ``ef.Indicator``)."""
    cols = sorted(columns, key=_name)
    sizes = {c.feature: cardinality_of(c.feature, cardinalities, "Indicator")
             for c in cols if not isinstance(c, str)}
    features: list[Feature] = []
    for col in cols:
        if isinstance(col, str):
            features.append(Feature(col, True, quantiles))
        else:
            features += [Feature(col.feature, False, 2)] * sizes[col.feature]

    def read(batch) -> list:
        out = []
        for col in cols:
            name = _name(col)
            if name not in batch:
                raise KeyError(f"feature {name!r} is not in the input features {sorted(batch)}")
            if isinstance(col, str):
                out.append(tf.reshape(tf.cast(batch[name], tf.float32), [-1]))
            else:
                ids = tf.reshape(tf.cast(batch[name], tf.int32), [-1])
                hot = tf.one_hot(ids, sizes[name], dtype=tf.int32)
                out += [hot[:, i] for i in range(sizes[name])]
        return out

    return Layout(tuple(features), read)


def _head(model):
    if isinstance(model, m.BoostedTreesRegressor):
        return RegressionHead(model.label_dimension, model.weight_column)
    vocabulary = model.label_vocabulary or None
    if model.n_classes == 2:
        return BinaryClassHead(model.weight_column, model.thresholds or None, vocabulary)
    return MultiClassHead(model.n_classes, model.weight_column, vocabulary,
                          loss_fn=per_example_maxent_loss)


def boosted_trees_model_fn_for(model, cardinalities: Mapping[str, int], prediction_keys):
    """``model_fn(features, labels, mode, params)`` of a boosted-trees declaration."""
    hp = TreeHParams(model.n_trees, model.max_depth, float(model.learning_rate),
                     float(model.l1_regularization), float(model.l2_regularization),
                     float(model.tree_complexity), float(model.min_node_weight),
                     model.center_bias, model.pruning_mode,
                     float(model.quantile_sketch_epsilon))
    head = _head(model)
    layout = layout_of_declaration(model.feature_columns, cardinalities, num_quantiles(hp))
    return boosted_trees_model_fn(head, layout, hp, model.n_batches_per_layer,
                                  closed_form_applies(head), f"{type(model).__name__}_model_fn",
                                  prediction_keys(head))
