"""Test helper: the tiny logistic model_fn the distribution tests train (in this process and in
worker subprocesses, hence the imports inside: importing this module imports no TensorFlow)."""


def logistic_model_fn(features, labels, mode, params):
    """estflow style: plain variables ``w``/``b``; the engine applies the returned Adagrad(0.5)
    (and averages replicas)."""
    import keras
    import tensorflow as tf

    from estflow.estimator import EstimatorSpec
    from estflow.estimator import ModeKeys

    w = tf.Variable(lambda: tf.zeros([2, 1]), name="w")
    b = tf.Variable(lambda: tf.zeros([1]), name="b")
    logits = tf.matmul(features["x"], w) + b
    if mode == ModeKeys.PREDICT:
        return EstimatorSpec(mode, predictions={"logits": logits})
    loss = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits))
    return EstimatorSpec(mode, loss=loss, optimizer=keras.optimizers.Adagrad(0.5)
                         if mode == ModeKeys.TRAIN else None)
