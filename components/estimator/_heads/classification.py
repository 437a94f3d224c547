"""Classification heads: binary, multi-class and multi-label (tf.estimator's v2 heads)."""

from __future__ import annotations

import keras
import tensorflow as tf

from estflow.estimator._fc.inputs import as_sparse
from estflow.estimator._fc.lookup import VocabularyLookup
from estflow.estimator._heads.base import Head
from estflow.estimator._heads.base import LossReduction
from estflow.estimator._heads.base import assert_range
from estflow.estimator._heads.base import check_thresholds
from estflow.estimator._heads.base import check_vocabulary
from estflow.estimator._heads.base import dense_labels
from estflow.estimator._heads.base import label_ids
from estflow.estimator._heads.base import mean_metric
from estflow.estimator._heads.base import select_predictions
from estflow.estimator._heads.base import update_mean
from estflow.estimator.export import ClassificationOutput
from estflow.estimator.export import RegressionOutput

__all__ = ["BinaryClassHead", "MultiClassHead", "MultiLabelHead"]

_SOR = LossReduction.SUM_OVER_BATCH_SIZE


class _AccuracyBaseline(keras.metrics.Mean):
    """Accuracy of always predicting the majority class: ``max(mean label, 1 - mean)``."""

    def result(self):
        mean = super().result()
        return keras.ops.maximum(mean, 1.0 - mean)


def _class_predictions(logits, class_ids, n_classes, vocabulary) -> dict:
    """``classes``, ``all_class_ids`` and ``all_classes`` (strings from the vocabulary, or the
    ids as text)."""
    names = tf.constant(list(vocabulary) if vocabulary
                        else [str(i) for i in range(n_classes)])
    batch = tf.shape(logits)[0]
    # int32, as tf.estimator's heads (class_ids is int64 there too)
    all_ids = tf.tile(tf.range(n_classes, dtype=tf.int32)[tf.newaxis], [batch, 1])
    return {"classes": tf.gather(names, class_ids), "all_class_ids": all_ids,
            "all_classes": tf.tile(names[tf.newaxis], [batch, 1])}


class _ClassHead(Head):
    """Label vocabulary handling shared by the classification heads."""

    def __init__(self, n_classes, weight_column, label_vocabulary, loss_reduction, loss_fn,
                 name) -> None:
        super().__init__(weight_column, loss_reduction, loss_fn, name)
        self.n_classes = n_classes
        self.label_vocabulary = check_vocabulary(label_vocabulary, n_classes)
        self._lookup = (VocabularyLookup(self.label_vocabulary, field="label_vocabulary")
                        if self.label_vocabulary else None)

    def _ids(self, labels: tf.Tensor) -> tf.Tensor:
        return label_ids(labels, self.label_vocabulary, self._lookup)

    def _serving_output(self, logits):
        """Classification: every class's probability and name (TF Serving's Classify)."""
        full = self.predictions(logits)
        return "classification", ClassificationOutput(
            scores=full["probabilities"], classes=full.get("all_classes", full.get("classes")))


class BinaryClassHead(_ClassHead):
    """Two classes, sigmoid cross-entropy on one logit (tf.estimator.BinaryClassHead).

    Labels: ``[batch]`` or ``[batch, 1]`` in [0, 1] (class ids or soft labels), or strings of
    ``label_vocabulary`` (integer ids are accepted too). Predictions: ``logits``,
    ``logistic``, ``probabilities`` ``[batch, 2]``, ``class_ids`` (int64 ``[batch, 1]``),
    ``classes``, ``all_class_ids``, ``all_classes``. Metrics: ``average_loss``, ``accuracy``,
    ``precision``, ``recall``, ``auc``, ``auc_precision_recall``, ``accuracy_baseline``,
    ``label/mean``, ``prediction/mean`` and per threshold ``accuracy/positive_threshold_T``,
    ``precision/...``, ``recall/...``.

    Args:
        weight_column: feature weighting each example (loss and metrics).
        thresholds: probabilities in (0, 1) for the per-threshold metrics.
        label_vocabulary: the two class names (id 0, id 1).
        loss_reduction: ``"sum_over_batch_size"`` (default) or ``"sum"``.
        loss_fn: a custom ``loss_fn(labels, logits[, features][, loss_reduction])``.
        name: metric key suffix.

    Example:
        >>> import numpy as np
        >>> head = BinaryClassHead()
        >>> logits = np.array([[45.0], [-41.0]], np.float32)
        >>> labels = np.array([[1], [1]], np.int32)
        >>> round(float(head.loss(labels, logits, features={})), 2)  # (0 + 41) / 2
        20.5
        >>> metrics = head.update_metrics(head.metrics(), {}, logits, labels)
        >>> round(float(metrics["accuracy"].result()), 2)
        0.5
    """

    logits_dimension = 1

    def __init__(self, weight_column=None, thresholds=None, label_vocabulary=None,
                 loss_reduction: str = _SOR, loss_fn=None, name: str | None = None) -> None:
        super().__init__(2, weight_column, label_vocabulary, loss_reduction, loss_fn, name)
        self.thresholds = check_thresholds(thresholds)

    def _processed_labels(self, logits, labels):
        labels = self._ids(dense_labels(labels, 1, "BinaryClassHead"))
        return assert_range(tf.cast(labels, tf.float32), 0.0, 1.0,
                            "BinaryClassHead labels must be in [0, 1]; received")

    def _loss(self, labels, logits):
        return tf.nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits)

    def export_outputs(self, logits, predictions):
        """tf.estimator's binary head's: ``serving_default`` and ``classification``
        (Classify), ``regression`` (Regress, on the logistic) and ``predict``."""
        outputs = super().export_outputs(logits, predictions)
        outputs["regression"] = RegressionOutput(tf.sigmoid(logits))
        return outputs

    def predictions(self, logits, keys=None):
        """All tf.estimator predictions, or those in ``keys``."""
        logistic = tf.sigmoid(logits)
        two_class = tf.concat([tf.zeros_like(logits), logits], axis=-1)
        class_ids = tf.argmax(two_class, axis=-1, output_type=tf.int64)[:, tf.newaxis]
        out = {"logits": logits, "logistic": logistic,
               "probabilities": tf.nn.softmax(two_class), "class_ids": class_ids}
        out.update(_class_predictions(logits, class_ids, 2, self.label_vocabulary))
        return select_predictions(out, keys)

    def metrics(self, regularization_losses=None):
        """Fresh (unupdated) metric objects keyed like tf.estimator's."""
        k = self._summary_key
        out = self._base_metrics(regularization_losses)
        out.update({
            k("accuracy"): keras.metrics.Accuracy(name="accuracy"),
            k("precision"): keras.metrics.Precision(name="precision"),
            k("recall"): keras.metrics.Recall(name="recall"),
            k("prediction/mean"): mean_metric("prediction_mean"),
            k("label/mean"): mean_metric("label_mean"),
            k("accuracy_baseline"): _AccuracyBaseline(name="accuracy_baseline"),
            k("auc"): keras.metrics.AUC(name="auc"),
            k("auc_precision_recall"): keras.metrics.AUC(curve="PR",
                                                         name="auc_precision_recall")})
        for t in self.thresholds:
            out[k(f"accuracy/positive_threshold_{t:g}")] = keras.metrics.BinaryAccuracy(
                threshold=t, name=f"accuracy_at_{t:g}")
            out[k(f"precision/positive_threshold_{t:g}")] = keras.metrics.Precision(
                thresholds=t, name=f"precision_at_{t:g}")
            out[k(f"recall/positive_threshold_{t:g}")] = keras.metrics.Recall(
                thresholds=t, name=f"recall_at_{t:g}")
        return out

    def _update_head_metrics(self, m, logits, labels, unweighted, weights):
        k = self._summary_key
        logistic = tf.sigmoid(logits)
        class_ids = tf.cast(logits > 0.0, tf.float32)
        for key in ("accuracy", "precision", "recall"):
            m[k(key)].update_state(labels, class_ids, sample_weight=weights)
        update_mean(m[k("prediction/mean")], logistic, weights)
        update_mean(m[k("label/mean")], labels, weights)
        update_mean(m[k("accuracy_baseline")], labels, weights)
        for key in ("auc", "auc_precision_recall"):
            m[k(key)].update_state(labels, logistic, sample_weight=weights)
        for t in self.thresholds:
            for key in ("accuracy", "precision", "recall"):
                m[k(f"{key}/positive_threshold_{t:g}")].update_state(
                    labels, logistic, sample_weight=weights)


class MultiClassHead(_ClassHead):
    """``n_classes`` > 2, softmax cross-entropy (tf.estimator.MultiClassHead).

    Labels: ids in ``[0, n_classes)`` (``[batch]`` or ``[batch, 1]``) or strings of
    ``label_vocabulary``. Predictions: ``logits``, ``probabilities``, ``class_ids``,
    ``classes``, ``all_class_ids``, ``all_classes``. Metrics: ``average_loss``, ``accuracy``.

    Example:
        >>> import numpy as np
        >>> head = MultiClassHead(3, label_vocabulary=["a", "b", "c"])
        >>> logits = np.array([[10.0, 0.0, 0.0], [0.0, 0.0, 10.0]], np.float32)
        >>> float(head.loss(np.array(["a", "c"]), logits, {})) < 1e-3
        True
        >>> head.predictions(logits)["classes"].numpy().tolist()
        [[b'a'], [b'c']]
    """

    def __init__(self, n_classes: int, weight_column=None, label_vocabulary=None,
                 loss_reduction: str = _SOR, loss_fn=None, name: str | None = None) -> None:
        if isinstance(n_classes, bool) or not isinstance(n_classes, int) or n_classes <= 2:
            raise ValueError("Received an invalid value for `n_classes`, expected an integer "
                             "> 2 (use BinaryClassHead for 2 classes). Received: "
                             f"n_classes={n_classes!r}")
        super().__init__(n_classes, weight_column, label_vocabulary, loss_reduction, loss_fn,
                         name)
        self.logits_dimension = n_classes

    def _processed_labels(self, logits, labels):
        ids = tf.cast(self._ids(dense_labels(labels, 1, "MultiClassHead")), tf.int64)
        return assert_range(ids, 0, self.n_classes - 1,
                            f"MultiClassHead labels must be ids in [0, {self.n_classes}); "
                            "received")

    def _loss(self, labels, logits):
        return tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=labels[:, 0], logits=logits)[:, tf.newaxis]

    def predictions(self, logits, keys=None):
        """All tf.estimator predictions, or those in ``keys``."""
        class_ids = tf.argmax(logits, axis=-1, output_type=tf.int64)[:, tf.newaxis]
        out = {"logits": logits, "probabilities": tf.nn.softmax(logits),
               "class_ids": class_ids}
        out.update(_class_predictions(logits, class_ids, self.n_classes,
                                      self.label_vocabulary))
        return select_predictions(out, keys)

    def metrics(self, regularization_losses=None):
        """Fresh metric objects: ``average_loss`` and ``accuracy``."""
        out = self._base_metrics(regularization_losses)
        out[self._summary_key("accuracy")] = keras.metrics.Accuracy(name="accuracy")
        return out

    def _update_head_metrics(self, m, logits, labels, unweighted, weights):
        class_ids = tf.argmax(logits, axis=-1, output_type=tf.int64)[:, tf.newaxis]
        m[self._summary_key("accuracy")].update_state(labels, class_ids, sample_weight=weights)


class MultiLabelHead(_ClassHead):
    """Zero or more of ``n_classes`` labels per example, sigmoid cross-entropy averaged over
    the classes (tf.estimator.MultiLabelHead).

    Labels: a multi-hot ``[batch, n_classes]`` tensor, or sparse class ids (a
    ``SparseTensor``/``RaggedTensor`` of ints, or of strings with ``label_vocabulary``).
    Predictions: ``logits``, ``probabilities``, ``classes`` (all class names). Metrics:
    ``average_loss``, ``auc``, ``auc_precision_recall``, per-threshold accuracy, precision
    and recall.

    Example:
        >>> import numpy as np
        >>> head = MultiLabelHead(2)
        >>> logits = np.array([[-1.0, 1.0], [-1.5, 1.5]], np.float32)
        >>> labels = np.array([[1, 0], [1, 1]], np.int64)
        >>> round(float(head.loss(labels, logits, {})), 2)
        1.13
    """

    def __init__(self, n_classes: int, weight_column=None, thresholds=None,
                 label_vocabulary=None, loss_reduction: str = _SOR, loss_fn=None,
                 name: str | None = None) -> None:
        if isinstance(n_classes, bool) or not isinstance(n_classes, int) or n_classes < 2:
            raise ValueError("Received an invalid value for `n_classes`, expected an integer "
                             f"> 1. Received: n_classes={n_classes!r}")
        super().__init__(n_classes, weight_column, label_vocabulary, loss_reduction, loss_fn,
                         name)
        self.logits_dimension = n_classes
        self.thresholds = check_thresholds(thresholds)

    def _processed_labels(self, logits, labels):
        if isinstance(labels, tf.RaggedTensor):
            labels = labels.to_sparse()
        if labels is not None and not isinstance(labels, tf.SparseTensor):
            labels = tf.convert_to_tensor(labels)
        if isinstance(labels, tf.SparseTensor) or (labels is not None and
                                                    labels.dtype == tf.string):
            ids = as_sparse(labels, "labels")
            values = tf.cast(self._ids(ids.values), tf.int64)
            values = assert_range(values, 0, self.n_classes - 1,
                                  f"MultiLabelHead label ids must be in [0, "
                                  f"{self.n_classes}); received")
            ids = tf.SparseTensor(ids.indices, values, ids.dense_shape)
            hot = tf.sparse.to_indicator(tf.sparse.reorder(ids), self.n_classes)
            return tf.cast(hot, tf.float32)
        hot = dense_labels(labels, self.n_classes, "MultiLabelHead")
        return assert_range(tf.cast(hot, tf.float32), 0.0, 1.0,
                            "MultiLabelHead multi-hot labels must be in [0, 1]; received")

    def _loss(self, labels, logits):
        per_class = tf.nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits)
        return tf.reduce_mean(per_class, axis=-1, keepdims=True)

    def predictions(self, logits, keys=None):
        """``logits``, ``probabilities`` and ``classes``, or those in ``keys``."""
        names = tf.constant(list(self.label_vocabulary) if self.label_vocabulary
                            else [str(i) for i in range(self.n_classes)])
        out = {"logits": logits, "probabilities": tf.sigmoid(logits),
               "classes": tf.tile(names[tf.newaxis], [tf.shape(logits)[0], 1])}
        return select_predictions(out, keys)

    def metrics(self, regularization_losses=None):
        """Fresh metric objects keyed like tf.estimator's."""
        k = self._summary_key
        out = self._base_metrics(regularization_losses)
        out[k("auc")] = keras.metrics.AUC(name="auc")
        out[k("auc_precision_recall")] = keras.metrics.AUC(curve="PR",
                                                           name="auc_precision_recall")
        for t in self.thresholds:
            out[k(f"accuracy/positive_threshold_{t:g}")] = keras.metrics.BinaryAccuracy(
                threshold=t, name=f"accuracy_at_{t:g}")
            out[k(f"precision/positive_threshold_{t:g}")] = keras.metrics.Precision(
                thresholds=t, name=f"precision_at_{t:g}")
            out[k(f"recall/positive_threshold_{t:g}")] = keras.metrics.Recall(
                thresholds=t, name=f"recall_at_{t:g}")
        return out

    def _update_head_metrics(self, m, logits, labels, unweighted, weights):
        k = self._summary_key
        probabilities = tf.sigmoid(logits)
        per_class = tf.broadcast_to(weights, tf.shape(probabilities))
        for key in ("auc", "auc_precision_recall"):
            m[k(key)].update_state(labels, probabilities, sample_weight=per_class)
        for t in self.thresholds:
            for key in ("accuracy", "precision", "recall"):
                m[k(f"{key}/positive_threshold_{t:g}")].update_state(
                    labels, probabilities, sample_weight=per_class)
