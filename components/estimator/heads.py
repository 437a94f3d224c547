"""Heads: the problem type (loss, predictions, EVAL metrics) apart from the network, as
tf.estimator's v2 heads (``tf.estimator.BinaryClassHead`` ...). Use them from a model_fn::

    from estflow.estimator import heads

    def model_fn(features, labels, mode):
        head = heads.BinaryClassHead(weight_column="w", thresholds=[0.3, 0.7])
        logits = ...                                      # [batch, head.logits_dimension]
        return head.create_estimator_spec(features, mode, logits, labels,
                                          optimizer=keras.optimizers.Adagrad(0.05))

Every head has ``logits_dimension``, ``loss(labels, logits, features, mode)``,
``predictions(logits, keys=None)``, ``metrics()`` + ``update_metrics(...)`` and
``create_estimator_spec(...)``. Losses are per-example, weighted by ``weight_column`` and
reduced with ``loss_reduction`` (default SUM_OVER_BATCH_SIZE: weighted sum / number of loss
elements). Metric objects are Keras metrics; the engine keeps their variables out of
checkpoints and resets them before each evaluation, then adds ``loss`` and ``global_step``.

Differences from tf.estimator 2.15: optimizers are Keras 3 optimizers the engine applies (or
``train_op_fn``); ``MultiHead`` prediction keys are ``"head/key"`` strings; with a
``label_vocabulary`` integer labels are accepted as already-mapped ids (what the transform
step feeds); no ``classes_for_class_based_metrics``. In PREDICT mode the spec's
``export_outputs`` are tf.estimator's: ``serving_default`` and ``classification``
(``ClassificationOutput(scores=probabilities, classes=all class names)``) or ``regression``
(one output), plus ``predict``; ``MultiHead`` exports ``predict`` only.
"""

from __future__ import annotations

from estflow.estimator._heads.base import Head
from estflow.estimator._heads.base import LossReduction
from estflow.estimator._heads.classification import BinaryClassHead
from estflow.estimator._heads.classification import MultiClassHead
from estflow.estimator._heads.classification import MultiLabelHead
from estflow.estimator._heads.multi import MultiHead
from estflow.estimator._heads.regression import LogisticRegressionHead
from estflow.estimator._heads.regression import PoissonRegressionHead
from estflow.estimator._heads.regression import RegressionHead

__all__ = ["Head", "LossReduction", "BinaryClassHead", "MultiClassHead", "MultiLabelHead",
           "RegressionHead", "PoissonRegressionHead", "LogisticRegressionHead", "MultiHead",
           "head_for"]


def head_for(kind: str, n_classes: int = 2, label_dimension: int = 1, weight_column=None,
             label_vocabulary=None, thresholds=None,
             loss_reduction: str = LossReduction.SUM_OVER_BATCH_SIZE) -> Head:
    """The head of a premade model: ``"classifier"`` (binary when ``n_classes`` is 2, else
    multi-class) or ``"regressor"`` (tf.estimator's ``binary_or_multi_class_head``).

    Raises:
        ValueError: an unknown ``kind``, or options the head does not take (``thresholds``
            with more than 2 classes).

    Example:
        >>> type(head_for("classifier", n_classes=3)).__name__
        'MultiClassHead'
    """
    if kind == "classifier":
        if n_classes == 2:
            return BinaryClassHead(weight_column, thresholds, label_vocabulary, loss_reduction)
        if thresholds:
            raise ValueError("Received an invalid value for `thresholds`, expected none for "
                             f"n_classes={n_classes} (per-threshold metrics are binary). "
                             f"Received: thresholds={thresholds!r}")
        return MultiClassHead(n_classes, weight_column, label_vocabulary, loss_reduction)
    if kind == "regressor":
        return RegressionHead(label_dimension, weight_column, loss_reduction)
    raise ValueError(f"Received an invalid value for `kind`, expected 'classifier' or "
                     f"'regressor'. Received: kind={kind!r}")
