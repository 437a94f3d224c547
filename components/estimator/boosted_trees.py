"""tf.estimator's ``BoostedTreesClassifier`` and ``BoostedTreesRegressor`` (gradient boosted
decision trees, layer by layer) with tf.estimator's constructor signatures, on core TensorFlow
ops::

    import estflow.estimator as estimator
    fc = estimator.feature_column

    cols = [fc.numeric_column("age"),                                 # quantile-bucketized
            fc.bucketized_column(fc.numeric_column("fare"), [8.0, 15.0, 30.0]),
            fc.indicator_column(fc.categorical_column_with_vocabulary_list("sex", ["m", "f"]))]
    est = estimator.BoostedTreesClassifier(cols, n_batches_per_layer=1)
    est.train(input_fn, max_steps=100)     # input_fn: the whole training set as one batch

tf.estimator's classes ran TensorFlow's ``BoostedTrees*`` kernels, which TensorFlow no longer
ships (TF 2.15 and 2.21 register no kernel for them, and tf.estimator dropped the classes in
2.9): here the same algorithm runs on core ops (:mod:`._boosted.trees`), the ensemble is a set
of variables (checkpointed with the model, warm-startable, exported), and the SavedModel's
prediction graph is ``Gather``/``Select``/``SearchSorted`` ops that any TensorFlow Serving
loads. The quantile sketch of numeric columns (:mod:`._boosted.quantiles`) runs in
``tf.numpy_function`` during training only.

Differences from tf.estimator 2.8 (the last release with these classes):

- the global step counts the quantile-sketch batches too (``n_batches_per_layer`` more steps
  for a model with numeric columns);
- training stops at the end of the loop (``RunConfig.steps_per_loop``) in which the ensemble
  became complete; the remaining steps of that loop change nothing;
- feature columns: ``bucketized_column`` (one-dimensional source), ``indicator_column`` and
  ``numeric_column`` (categorical columns with equality splits, ``weight_column`` as a
  ``numeric_column`` with a normalizer and sparse inputs are not supported);
- multi-class loss reduction is ``sum_over_batch_size`` (tf.estimator: over non-zero weights;
  equal without a ``weight_column``); ``experimental_feature_importances`` and
  ``experimental_predict_with_explanations`` are not provided;
- ``train_in_memory`` is accepted (it needs ``n_batches_per_layer=1``, as in tf.estimator) and
  changes nothing: every batch is read anyway.
"""

from __future__ import annotations

import numbers

from estflow.estimator._boosted.features import SUPPORTED
from estflow.estimator._boosted.features import layout_of_columns
from estflow.estimator._boosted.model_fn import TreeHParams
from estflow.estimator._boosted.model_fn import boosted_trees_model_fn
from estflow.estimator._boosted.model_fn import closed_form_applies
from estflow.estimator._boosted.model_fn import num_quantiles
from estflow.estimator._boosted.model_fn import per_example_maxent_loss
from estflow.estimator._boosted.trees import PRUNING_MODES
from estflow.estimator._fc.dense import BucketizedColumn
from estflow.estimator._fc.dense import IndicatorColumn
from estflow.estimator._fc.dense import NumericColumn
from estflow.estimator._fc.layers import normalize_columns
from estflow.estimator.estimator import Estimator
from estflow.estimator.heads import BinaryClassHead
from estflow.estimator.heads import MultiClassHead
from estflow.estimator.heads import RegressionHead

__all__ = ["BoostedTreesClassifier", "BoostedTreesRegressor", "tree_hparams",
           "check_tree_hparams"]


def _invalid(error: type, field: str, expected: str, value) -> Exception:
    return error(f"Received an invalid value for `{field}`, expected {expected}. "
                 f"Received: {field}={value!r}")


def _int(value, field: str, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise _invalid(ValueError, field, f"an integer >= {minimum}", value)
    return int(value)


def _real(value, field: str, positive: bool) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or (
            value <= 0 if positive else value < 0):
        raise _invalid(ValueError, field, "a number > 0" if positive else "a number >= 0",
                       value)
    return float(value)


def check_tree_hparams(n_trees, max_depth, learning_rate, l1_regularization,
                       l2_regularization, tree_complexity, min_node_weight, center_bias,
                       pruning_mode, quantile_sketch_epsilon) -> TreeHParams:
    """tf.estimator's ``_validate_input_params`` and pruning checks, naming the argument."""
    if pruning_mode not in PRUNING_MODES:
        raise _invalid(ValueError, "pruning_mode", f"one of {list(PRUNING_MODES)}",
                       pruning_mode)
    hp = TreeHParams(
        n_trees=_int(n_trees, "n_trees"), max_depth=_int(max_depth, "max_depth"),
        learning_rate=_real(learning_rate, "learning_rate", True),
        l1=_real(l1_regularization, "l1_regularization", False),
        l2=_real(l2_regularization, "l2_regularization", False),
        tree_complexity=_real(tree_complexity, "tree_complexity", False),
        min_node_weight=_real(min_node_weight, "min_node_weight", False),
        center_bias=bool(center_bias), pruning_mode=pruning_mode,
        quantile_sketch_epsilon=_real(quantile_sketch_epsilon, "quantile_sketch_epsilon", True))
    if hp.quantile_sketch_epsilon >= 1:
        raise _invalid(ValueError, "quantile_sketch_epsilon", "a number in (0, 1)",
                       quantile_sketch_epsilon)
    if hp.tree_complexity > 0 and pruning_mode == "none":
        raise ValueError("Received an invalid value for `tree_complexity`: it has no effect "
                         "unless pruning_mode is 'pre' or 'post'. Received: "
                         f"tree_complexity={tree_complexity!r}, pruning_mode='none'")
    if hp.tree_complexity <= 0 and pruning_mode != "none":
        raise ValueError("Received an invalid value for `tree_complexity`, expected a number "
                         f"> 0 with pruning_mode={pruning_mode!r}. Received: "
                         f"tree_complexity={tree_complexity!r}")
    return hp


tree_hparams = check_tree_hparams


def _columns(feature_columns, owner: str) -> tuple:
    columns = normalize_columns(feature_columns, (BucketizedColumn, IndicatorColumn,
                                                  NumericColumn), SUPPORTED, owner)
    for i, col in enumerate(columns):
        if isinstance(col, BucketizedColumn) and col.source_column.width != 1:
            raise ValueError(f"Received an invalid value for `feature_columns` of {owner}, "
                             "expected bucketized columns of one-element numeric columns. "
                             f"Received: feature_columns[{i}]={col!r}")
    return columns


def _batches(n_batches_per_layer, train_in_memory) -> int:
    n = _int(n_batches_per_layer, "n_batches_per_layer")
    if train_in_memory and n != 1:
        raise ValueError("Received an invalid value for `n_batches_per_layer`, expected 1 with "
                         "train_in_memory=True (the input_fn gives the whole dataset as one "
                         f"batch). Received: n_batches_per_layer={n_batches_per_layer!r}")
    return n


def _weight(weight_column):
    if weight_column is None or isinstance(weight_column, str):
        return weight_column
    if isinstance(weight_column, NumericColumn) and weight_column.normalizer_fn is None:
        return weight_column.key
    raise _invalid(TypeError, "weight_column", "None, a feature name or a numeric_column "
                   "without normalizer_fn", weight_column)


class _BoostedTrees(Estimator):
    def __init__(self, head, feature_columns, n_batches_per_layer, model_dir, config, hp,
                 train_in_memory, progress, prediction_keys=None) -> None:
        columns = _columns(feature_columns, type(self).__name__)
        layout = layout_of_columns(columns, num_quantiles(hp))
        n = _batches(n_batches_per_layer, train_in_memory)
        model_fn = boosted_trees_model_fn(head, layout, hp, n, closed_form_applies(head),
                                          f"{type(self).__name__}_model_fn", prediction_keys)
        super().__init__(model_fn, model_dir=model_dir, config=config, progress=progress)
        self.feature_columns = columns
        self.tree_hparams = hp


class BoostedTreesClassifier(_BoostedTrees):
    """tf.estimator.BoostedTreesClassifier: gradient boosted trees, binary (closed-form
    logistic gradients) or multi-class (full hessian); tf.estimator 2.8's arguments and
    defaults. ``progress`` (estflow) receives progress lines.

    Raises:
        ValueError, TypeError: an invalid argument (the message names it).
    """

    def __init__(self, feature_columns, n_batches_per_layer, model_dir=None, n_classes=2,
                 weight_column=None, label_vocabulary=None, n_trees=100, max_depth=6,
                 learning_rate=0.1, l1_regularization=0.0, l2_regularization=0.0,
                 tree_complexity=0.0, min_node_weight=0.0, config=None, center_bias=False,
                 pruning_mode="none", quantile_sketch_epsilon=0.01, train_in_memory=False, *,
                 progress=None) -> None:
        if isinstance(n_classes, bool) or not isinstance(n_classes, numbers.Integral) or \
                n_classes < 2:
            raise _invalid(ValueError, "n_classes", "an integer > 1", n_classes)
        if n_classes > 2 and center_bias:
            raise ValueError("Received an invalid value for `center_bias`: bias centering "
                             f"supports n_classes=2 only. Received: center_bias=True, "
                             f"n_classes={n_classes}")
        hp = check_tree_hparams(n_trees, max_depth, learning_rate, l1_regularization,
                                l2_regularization, tree_complexity, min_node_weight,
                                center_bias, pruning_mode, quantile_sketch_epsilon)
        weight = _weight(weight_column)
        if n_classes == 2:
            head = BinaryClassHead(weight, label_vocabulary=label_vocabulary)
        else:
            head = MultiClassHead(int(n_classes), weight, label_vocabulary,
                                  loss_fn=per_example_maxent_loss)
        super().__init__(head, feature_columns, n_batches_per_layer, model_dir, config, hp,
                         train_in_memory, progress)


class BoostedTreesRegressor(_BoostedTrees):
    """tf.estimator.BoostedTreesRegressor: gradient boosted trees on the squared error;
    tf.estimator 2.8's arguments and defaults. ``progress`` (estflow) receives progress lines.

    Raises:
        ValueError, TypeError: an invalid argument (the message names it).
    """

    def __init__(self, feature_columns, n_batches_per_layer, model_dir=None, label_dimension=1,
                 weight_column=None, n_trees=100, max_depth=6, learning_rate=0.1,
                 l1_regularization=0.0, l2_regularization=0.0, tree_complexity=0.0,
                 min_node_weight=0.0, config=None, center_bias=False, pruning_mode="none",
                 quantile_sketch_epsilon=0.01, train_in_memory=False, *,
                 progress=None) -> None:
        label_dimension = _int(label_dimension, "label_dimension")
        if label_dimension > 1 and center_bias:
            raise ValueError("Received an invalid value for `center_bias`: bias centering "
                             "supports label_dimension=1 only. Received: center_bias=True, "
                             f"label_dimension={label_dimension}")
        hp = check_tree_hparams(n_trees, max_depth, learning_rate, l1_regularization,
                                l2_regularization, tree_complexity, min_node_weight,
                                center_bias, pruning_mode, quantile_sketch_epsilon)
        head = RegressionHead(label_dimension, _weight(weight_column))
        super().__init__(head, feature_columns, n_batches_per_layer, model_dir, config, hp,
                         train_in_memory, progress)
