# estflow compat corpus: guide_object_checkpoints
#
# Source:  https://github.com/tensorflow/docs/blob/7c3650212740204359d4ceae481abc79345541be/site/en/guide/estimator.ipynb
#          tensorflow/docs @ 7c3650212740, code cells 8, 39, 40, 41, 42, 44, in order, verbatim
# License: Apache License 2.0 (Copyright The TensorFlow Authors; the notebook's license cell and
#          tensorflow/docs' LICENSE)
# What:    Estimator guide, 'Object-based checkpoints': custom model_fn with a Keras Model,
#          GradientTape, tf.train.Checkpoint in a Scaffold; reads the checkpoint back with
#          tf.train.Checkpoint.
# Omitted: cell 7 (`!pip install`); the other sections are their own programs
# Data:    none
#
# Everything below is the published code, cell by cell (a `# [cell N]` line marks each cell).

# [cell 8]
import tempfile
import os

import tensorflow as tf
import tensorflow_datasets as tfds

# [cell 39]
import tensorflow.compat.v1 as tf_compat

# [cell 40]
def toy_dataset():
  inputs = tf.range(10.)[:, None]
  labels = inputs * 5. + tf.range(5.)[None, :]
  return tf.data.Dataset.from_tensor_slices(
    dict(x=inputs, y=labels)).repeat().batch(2)

# [cell 41]
class Net(tf.keras.Model):
  """A simple linear model."""

  def __init__(self):
    super(Net, self).__init__()
    self.l1 = tf.keras.layers.Dense(5)

  def call(self, x):
    return self.l1(x)

# [cell 42]
def model_fn(features, labels, mode):
  net = Net()
  opt = tf.keras.optimizers.Adam(0.1)
  ckpt = tf.train.Checkpoint(step=tf_compat.train.get_global_step(),
                             optimizer=opt, net=net)
  with tf.GradientTape() as tape:
    output = net(features['x'])
    loss = tf.reduce_mean(tf.abs(output - features['y']))
  variables = net.trainable_variables
  gradients = tape.gradient(loss, variables)
  return tf.estimator.EstimatorSpec(
    mode,
    loss=loss,
    train_op=tf.group(opt.apply_gradients(zip(gradients, variables)),
                      ckpt.step.assign_add(1)),
    # Tell the Estimator to save "ckpt" in an object-based format.
    scaffold=tf_compat.train.Scaffold(saver=ckpt))

tf.keras.backend.clear_session()
est = tf.estimator.Estimator(model_fn, './tf_estimator_example/')
est.train(toy_dataset, steps=10)

# [cell 44]
opt = tf.keras.optimizers.Adam(0.1)
net = Net()
ckpt = tf.train.Checkpoint(
  step=tf.Variable(1, dtype=tf.int64), optimizer=opt, net=net)
ckpt.restore(tf.train.latest_checkpoint('./tf_estimator_example/'))
ckpt.step.numpy()  # From est.train(..., steps=10)
