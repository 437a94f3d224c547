"""A lookup table over a vocabulary file built inside the model_fn (issue 23), the shape of
GoogleCloudPlatform/training-data-analyst
courses/machine_learning/deepdive/09_sequence/txtcls1/trainer/model.py: ``get_embedding``
builds ``lookup.index_table_from_file(vocabulary_file=WORD_VOCAB_FILE, num_oov_buckets=1)``
on every model_fn call, splits titles into words and looks them up; ``cnn_model`` exports a
``PredictOutput``. TF 2.15 has no ``index_table_from_file``; the port uses its TF 2 form,
``tf.lookup.StaticVocabularyTable(tf.lookup.TextFileInitializer(...), 1)``. The export
carries the table (and its vocabulary file as an asset)."""

import os

import numpy as np
import pytest
import tensorflow as tf

import estflow.estimator as estimator

PADWORD = "ZYXW"
TARGETS = ["github", "nytimes", "techcrunch"]
MAX_DOCUMENT_LENGTH = 4


def _model_fn_over(vocab_file, n_words):
    def get_embedding(titles):
        table = tf.lookup.StaticVocabularyTable(tf.lookup.TextFileInitializer(
            vocab_file, tf.string, tf.lookup.TextFileIndex.WHOLE_LINE, tf.int64,
            tf.lookup.TextFileIndex.LINE_NUMBER), num_oov_buckets=1)
        words = tf.strings.split(titles)
        densewords = words.to_tensor(default_value=PADWORD)
        numbers = table.lookup(densewords)
        padded = tf.pad(numbers, [[0, 0], [0, MAX_DOCUMENT_LENGTH]])
        sliced = tf.slice(padded, [0, 0], [-1, MAX_DOCUMENT_LENGTH])
        embeddings = tf.Variable(lambda: tf.random.stateless_normal([n_words, 3], [1, 2]),
                                 name="embed")
        return tf.nn.embedding_lookup(embeddings, sliced)

    def cnn_model(features, labels, mode, params):
        titles = tf.squeeze(features["title"], [1])
        words = tf.reshape(get_embedding(titles), [-1, MAX_DOCUMENT_LENGTH * 3])
        logits = tf.keras.layers.Dense(len(TARGETS))(words)  # TF 1: tf.layers.dense
        predictions_dict = {"source": tf.gather(TARGETS, tf.argmax(logits, 1)),
                            "class": tf.argmax(logits, 1)}
        loss = train_op = None
        if mode != estimator.ModeKeys.PREDICT:
            loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(labels, logits)
            train_op = tf.compat.v1.train.AdamOptimizer(0.05).minimize(
                loss, global_step=tf.compat.v1.train.get_global_step())
        return estimator.EstimatorSpec(
            mode=mode, predictions=predictions_dict, loss=loss, train_op=train_op,
            export_outputs={"classes": estimator.export.PredictOutput(predictions_dict)})
    return cnn_model


def serving_input_fn():
    feature_placeholders = {"title": tf.compat.v1.placeholder(tf.string, [None])}
    features = {key: tf.expand_dims(tensor, -1)
                for key, tensor in feature_placeholders.items()}
    return estimator.export.ServingInputReceiver(features, feature_placeholders)


def test_a_vocabulary_table_built_in_the_model_fn_is_exported(tmp_path):
    vocab = tmp_path / "vocab_words"
    vocab.write_text("\n".join([PADWORD, "rust", "election", "startup", "funding"]) + "\n")
    titles = np.array([["rust release"], ["election results"], ["startup funding"]] * 8)
    labels = np.array([0, 1, 2] * 8)
    est = estimator.Estimator(_model_fn_over(str(vocab), 6), model_dir=str(tmp_path / "m"),
                              config=estimator.RunConfig(tf_random_seed=1))
    est.train(lambda: tf.data.Dataset.from_tensor_slices(
        ({"title": titles}, labels)).repeat().batch(6), steps=30)
    path = os.fsdecode(est.export_saved_model(str(tmp_path / "export"), serving_input_fn))
    assert os.listdir(os.path.join(path, "assets")) == ["vocab_words"]
    vocab.unlink()  # the SavedModel's own copy is what serving reads
    served = tf.saved_model.load(path).signatures["classes"](
        title=tf.constant(["election results", "startup funding", "rust unknownword"]))
    assert [s.decode() for s in served["source"].numpy()] == [
        "nytimes", "techcrunch", "github"]


def test_a_table_over_in_graph_keys_fails_naming_the_table_not_feature_columns(tmp_path):
    """The label table of GoogleCloudPlatform/cloudml-samples
    census/customestimator/trainer/model.py (``index_table_from_tensor(label_values)``, TF 2:
    ``StaticHashTable(KeyValueTensorInitializer(...))``), here used in PREDICT too: its keys
    are the trace's tensors, so a loaded SavedModel would hold it empty; the export refuses,
    naming the table's resource."""
    def model_fn(features, labels, mode):
        table = tf.lookup.StaticHashTable(tf.lookup.KeyValueTensorInitializer(
            tf.constant(["a", "b"]), tf.constant([0, 1], tf.int64)), -1)
        ids = table.lookup(tf.squeeze(features["title"], [1]))
        w = tf.Variable(lambda: tf.zeros([]), name="w")
        y = tf.cast(ids, tf.float32) + w
        if mode == estimator.ModeKeys.PREDICT:
            return estimator.EstimatorSpec(mode, predictions={"y": y})
        loss = tf.reduce_mean(tf.square(y - labels))
        return estimator.EstimatorSpec(mode, loss=loss, train_op=tf.compat.v1.train.
                                       GradientDescentOptimizer(0.1).minimize(loss))

    est = estimator.Estimator(model_fn, model_dir=str(tmp_path / "m"))
    est.train(lambda: tf.data.Dataset.from_tensor_slices(
        ({"title": [["a"], ["b"]]}, [0.0, 1.0])).batch(2), steps=1)
    with pytest.raises(ValueError, match=r"cannot carry: resource '[^']+'.*vocabulary file"):
        est.export_saved_model(str(tmp_path / "export"), serving_input_fn)
