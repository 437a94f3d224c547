"""``estflow.estimator.layers``: tf.compat.v1.layers' functional layers sharing variables by
variable scope name as TF 1 did (issue 23: aymericdamien/TensorFlow-Examples'
convolutional_network.py builds its network twice under ``variable_scope('ConvNet',
reuse=True)``, train and test graphs on one set of weights)."""

import numpy as np
import pytest
import tensorflow as tf

import estflow.estimator as tf_estimator
from estflow.estimator import layers

R = np.random.RandomState(0)
LABELS = R.randint(0, 2, size=256).astype("int32")
IMAGES = (R.rand(256, 8, 8, 1) * 0.5 + LABELS[:, None, None, None] * 0.5).astype("float32")


def conv_net(x, reuse, is_training, norm=True):
    with tf.compat.v1.variable_scope("ConvNet", reuse=reuse):
        x = layers.conv2d(x, 4, 3, activation=tf.nn.relu)
        x = layers.max_pooling2d(x, 2, 2)
        if norm:
            x = layers.batch_normalization(x, training=is_training)
        x = layers.dropout(layers.flatten(x), rate=0.25, training=is_training)
        return layers.dense(x, 2)


def _graph_layers():
    return dict(tf.compat.v1.get_default_graph().get_collection_ref("__estflow_v1_layers")[0])


def test_a_network_built_twice_under_reuse_shares_one_set_of_variables():
    with tf.Graph().as_default():  # the graph a model_fn call builds (TF 1 graph mode)
        x = tf.constant(IMAGES[:8])
        train = conv_net(x, reuse=False, is_training=True)
        first = tf.compat.v1.trainable_variables()
        test = conv_net(x, reuse=True, is_training=False)
        assert tf.compat.v1.trainable_variables() == first  # nothing new: the same layers
        with tf.compat.v1.variable_scope("Other"):
            conv_net(x, reuse=False, is_training=False)
        names = sorted(_graph_layers())
        everything = tf.compat.v1.trainable_variables()
    # conv kernel/bias, batch-norm gamma/beta, dense kernel/bias
    assert len(first) == 6 and len(everything) == 12
    assert train.shape == test.shape == (8, 2)
    # TF 1's scope names: re-entering ConvNet restarts the count, so the second build finds the
    # first one's layers; another scope gets its own
    assert "ConvNet/conv2d" in names and "ConvNet/dense" in names
    assert "Other/ConvNet/dense" in names


def test_an_explicit_name_with_auto_reuse_shares_siamese_towers():
    with tf.Graph().as_default():
        a, b = tf.zeros([4, 5]), tf.ones([4, 5])
        layers.dense(a, 3, name="fc", reuse=tf.compat.v1.AUTO_REUSE)
        layers.dense(b, 3, name="fc", reuse=tf.compat.v1.AUTO_REUSE)
        layers.dense(b, 3)
        assert len(tf.compat.v1.trainable_variables()) == 4
        assert sorted(_graph_layers()) == ["dense", "fc"]


def test_tf1_arguments_and_refusals():
    x = tf.constant(R.rand(2, 6, 3).astype("float32"))
    y = layers.conv1d(x, 5, 3, 1, "same", kernel_initializer=None, use_bias=False)
    assert y.shape == (2, 6, 5)
    with pytest.raises(TypeError, match="unexpected keyword argument 'units'"):
        layers.conv1d(x, units=3)
    with pytest.raises(ValueError, match="renorm=...\\): batch renormalisation"):
        layers.batch_normalization(x, renorm=True)


def _model_fn(features, labels, mode):
    logits_train = conv_net(features["images"], reuse=False, is_training=True, norm=False)
    logits_test = conv_net(features["images"], reuse=True, is_training=False, norm=False)
    if mode == tf_estimator.ModeKeys.PREDICT:
        return tf_estimator.EstimatorSpec(mode, predictions=tf.argmax(logits_test, axis=1))
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
        logits=logits_train, labels=labels))
    train_op = tf.compat.v1.train.AdamOptimizer(0.01).minimize(
        loss, global_step=tf.compat.v1.train.get_global_step())
    accuracy = tf.compat.v1.metrics.accuracy(labels, tf.argmax(logits_test, axis=1))
    return tf_estimator.EstimatorSpec(mode, loss=loss, train_op=train_op,
                                      eval_metric_ops={"accuracy": accuracy})


def test_an_estimator_evaluates_the_weights_it_trained_through_the_reused_scope(tmp_path):
    def input_fn():
        return tf.data.Dataset.from_tensor_slices(({"images": IMAGES}, LABELS)).repeat() \
            .batch(32)

    est = tf_estimator.Estimator(_model_fn, model_dir=str(tmp_path))
    est.train(input_fn, steps=60)
    # one set of weights: the test tower's variables are the trained ones (its own, untrained,
    # would score about 0.5)
    kernels = [n for n in est.get_variable_names() if "kernel" in n]
    assert len(kernels) == 2, est.get_variable_names()
    metrics = est.evaluate(lambda: input_fn().take(8))
    assert metrics["accuracy"] > 0.95, metrics
