# estflow compat corpus: models_r1_mnist
#
# Source:  https://github.com/tensorflow/models/blob/714e077aa3d97969b53e9dc5b4e5b7ff44f28e40/official/r1/mnist/mnist.py
#          and its module official/r1/mnist/dataset.py @ baab84b0cad1bcd4fa24ddfdc15b0c26db59fa15
#          (both inlined); the official.utils / official.r1.utils helpers it calls, trimmed to the
#          branches this run takes (see Changes)
# License: Apache License 2.0 (Copyright 2017/2018 The TensorFlow Authors; the files' headers)
# What:    tensorflow/models' r1 MNIST: a tf.keras.Sequential (Reshape, Conv2D, shared
#          MaxPooling2D, Flatten, Dense, Dropout) built inside the model_fn and called with
#          `training=`, params['data_format'], tf.compat.v1 AdamOptimizer + get_or_create_global_step,
#          tf.identity-named tensors logged by a LoggingTensorHook, tf.summary.scalar,
#          RunConfig(train_distribute=OneDeviceStrategy('device:CPU:0'), session_config=ConfigProto),
#          FixedLengthRecordDataset input_fns (train: a Dataset; eval: iterator.get_next()),
#          a train/evaluate loop; PredictOutput export_outputs (the export itself is off by default).
# Changes (for TF 2.15 + tensorflow-estimator 2.15, offline, fast; each line marked `# corpus:`):
#   - dataset.py is inlined above the program; `from official.r1.mnist import dataset` ->
#     `dataset = _DatasetModule()` (its train/test, and callable as its function `dataset`); `from __future__ import ...` dropped (they must open a file)
#   - absl flags (official.utils.flags.core.define_base/define_performance/define_image and
#     set_defaults) -> a FLAGS namespace holding the flags' defaults, except: data_dir and
#     model_dir relative (were /tmp/mnist_data, /tmp/mnist_model), train_epochs 40 -> 1 (7
#     steps of 100 images); `absl_app.run(main)` -> `main(None)`. export_dir keeps its default
#     None: the export's tf.compat.v1.placeholder outside a graph fails on TF 2.15 itself
#   - official.utils.misc.distribution_utils.get_distribution_strategy, official.utils.flags
#     core.get_num_gpus, official.r1.utils.logs.hooks_helper.get_train_hooks and
#     official.utils.misc.model_helpers.apply_clean/past_stop_threshold: inlined, trimmed to the
#     branches taken here (no GPU: OneDeviceStrategy('device:CPU:0'); hooks ['LoggingTensorHook']
#     every 100 steps over learning_rate, cross_entropy, train_accuracy; no clean, no threshold)
#   - the download: served by the harness (MNIST's idx files at the program's URLs, made from
#     tests/compat/data/mnist_small.npz: 640 train, 160 test images)
# Data:    mnist_small.npz (tests/compat/data), as gzipped idx files

# ---- official/r1/mnist/dataset.py ----
#  Copyright 2018 The TensorFlow Authors. All Rights Reserved.
#
#  Licensed under the Apache License, Version 2.0 (the "License");
#  you may not use this file except in compliance with the License.
#  You may obtain a copy of the License at
#
#   http://www.apache.org/licenses/LICENSE-2.0
#
#  Unless required by applicable law or agreed to in writing, software
#  distributed under the License is distributed on an "AS IS" BASIS,
#  WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
#  See the License for the specific language governing permissions and
#  limitations under the License.
"""tf.data.Dataset interface to the MNIST dataset."""

import gzip
import os
import shutil
import tempfile

import numpy as np
from six.moves import urllib
import tensorflow as tf


def read32(bytestream):
    """Read 4 bytes from bytestream as an unsigned 32-bit integer."""
    dt = np.dtype(np.uint32).newbyteorder('>')
    return np.frombuffer(bytestream.read(4), dtype=dt)[0]


def check_image_file_header(filename):
    """Validate that filename corresponds to images for the MNIST dataset."""
    with tf.io.gfile.GFile(filename, 'rb') as f:
        magic = read32(f)
        read32(f)  # num_images, unused
        rows = read32(f)
        cols = read32(f)
        if magic != 2051:
            raise ValueError('Invalid magic number %d in MNIST file %s' %
                             (magic, f.name))
        if rows != 28 or cols != 28:
            raise ValueError(
                'Invalid MNIST file %s: Expected 28x28 images, found %dx%d' %
                (f.name, rows, cols))


def check_labels_file_header(filename):
    """Validate that filename corresponds to labels for the MNIST dataset."""
    with tf.io.gfile.GFile(filename, 'rb') as f:
        magic = read32(f)
        read32(f)  # num_items, unused
        if magic != 2049:
            raise ValueError('Invalid magic number %d in MNIST file %s' %
                             (magic, f.name))


def download(directory, filename):
    """Download (and unzip) a file from the MNIST dataset if not already done."""
    filepath = os.path.join(directory, filename)
    if tf.io.gfile.exists(filepath):
        return filepath
    if not tf.io.gfile.exists(directory):
        tf.io.gfile.makedirs(directory)
    # CVDF mirror of http://yann.lecun.com/exdb/mnist/
    url = 'https://storage.googleapis.com/cvdf-datasets/mnist/' + filename + '.gz'
    _, zipped_filepath = tempfile.mkstemp(suffix='.gz')
    print('Downloading %s to %s' % (url, zipped_filepath))
    urllib.request.urlretrieve(url, zipped_filepath)
    with gzip.open(zipped_filepath, 'rb') as f_in, \
        tf.io.gfile.GFile(filepath, 'wb') as f_out:
        shutil.copyfileobj(f_in, f_out)
    os.remove(zipped_filepath)
    return filepath


def dataset(directory, images_file, labels_file):
    """Download and parse MNIST dataset."""

    images_file = download(directory, images_file)
    labels_file = download(directory, labels_file)

    check_image_file_header(images_file)
    check_labels_file_header(labels_file)

    def decode_image(image):
        # Normalize from [0, 255] to [0.0, 1.0]
        image = tf.io.decode_raw(image, tf.uint8)
        image = tf.cast(image, tf.float32)
        image = tf.reshape(image, [784])
        return image / 255.0

    def decode_label(label):
        label = tf.io.decode_raw(label, tf.uint8)  # tf.string -> [tf.uint8]
        label = tf.reshape(label, [])  # label is a scalar
        return tf.cast(label, tf.int32)

    images = tf.data.FixedLengthRecordDataset(images_file,
                                              28 * 28,
                                              header_bytes=16).map(decode_image)
    labels = tf.data.FixedLengthRecordDataset(labels_file, 1,
                                              header_bytes=8).map(decode_label)
    return tf.data.Dataset.zip((images, labels))


def train(directory):
    """tf.data.Dataset object for MNIST training data."""
    return dataset(directory, 'train-images-idx3-ubyte',
                   'train-labels-idx1-ubyte')


def test(directory):
    """tf.data.Dataset object for MNIST test data."""
    return dataset(directory, 't10k-images-idx3-ubyte',
                   't10k-labels-idx1-ubyte')


# ---- the official.utils / official.r1.utils helpers mnist.py calls (trimmed) ----
# Copyright 2018 The TensorFlow Authors. All Rights Reserved. Apache License 2.0.
import sys  # corpus: for the inlined modules
import types  # corpus: the FLAGS namespace


class distribution_utils:  # corpus: official/utils/misc/distribution_utils.py, trimmed
  @staticmethod
  def get_distribution_strategy(distribution_strategy="default", num_gpus=0,
                                all_reduce_alg=None):
    """Return a DistributionStrategy for running the model (CPU branches only)."""
    if distribution_strategy == "off":
      return None
    if (distribution_strategy == "one_device" or
        (distribution_strategy == "default" and num_gpus <= 1)):
      if num_gpus == 0:
        return tf.distribute.OneDeviceStrategy("device:CPU:0")
      return tf.distribute.OneDeviceStrategy("device:GPU:0")
    return tf.distribute.MirroredStrategy(
        devices=["device:GPU:%d" % i for i in range(num_gpus)] or ["device:CPU:0"])


class hooks_helper:  # corpus: official/r1/utils/logs/hooks_helper.py, trimmed
  _TENSORS_TO_LOG = dict((x, x) for x in ['learning_rate',
                                          'cross_entropy',
                                          'train_accuracy'])

  @staticmethod
  def get_train_hooks(name_list, use_tpu=False, **kwargs):
    """Factory for getting a list of TensorFlow hooks for training by name."""
    if not name_list:
      return []
    train_hooks = []
    for name in name_list:
      if name.strip().lower() != 'loggingtensorhook':
        raise ValueError('Unrecognized training hook requested: {}'.format(name))
      tensors_to_log = kwargs.get('tensors_to_log') or hooks_helper._TENSORS_TO_LOG
      train_hooks.append(tf.estimator.LoggingTensorHook(
          tensors=tensors_to_log, every_n_iter=100))
    return train_hooks


class model_helpers:  # corpus: official/utils/misc/model_helpers.py, trimmed
  @staticmethod
  def apply_clean(flags_obj):
    if flags_obj.clean and tf.io.gfile.exists(flags_obj.model_dir):
      tf.io.gfile.rmtree(flags_obj.model_dir)

  @staticmethod
  def past_stop_threshold(stop_threshold, eval_metric):
    if stop_threshold is None:
      return False
    return eval_metric >= stop_threshold


class flags_core:  # corpus: official/utils/flags/core.py get_num_gpus, trimmed
  @staticmethod
  def get_num_gpus(flags_obj):
    if flags_obj.num_gpus != -1:
      return flags_obj.num_gpus
    return len(tf.config.list_physical_devices('GPU'))


# corpus: the absl flags mnist.py defines, with their defaults (see the header)
FLAGS = types.SimpleNamespace(
    data_dir='mnist_data', model_dir='mnist_model', clean=False, train_epochs=1,
    epochs_between_evals=1, stop_threshold=None, batch_size=100, num_gpus=1
    if tf.config.list_physical_devices('GPU') else 0, hooks=['LoggingTensorHook'],
    export_dir=None, distribution_strategy='default',
    inter_op_parallelism_threads=0, intra_op_parallelism_threads=0, all_reduce_alg=None,
    data_format=None)


# ---- official/r1/mnist/mnist.py ----
#  Copyright 2017 The TensorFlow Authors. All Rights Reserved.
#
#  Licensed under the Apache License, Version 2.0 (the "License");
#  you may not use this file except in compliance with the License.
#  You may obtain a copy of the License at
#
#   http://www.apache.org/licenses/LICENSE-2.0
#
#  Unless required by applicable law or agreed to in writing, software
#  distributed under the License is distributed on an "AS IS" BASIS,
#  WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
#  See the License for the specific language governing permissions and
#  limitations under the License.
"""Convolutional Neural Network Estimator for MNIST, built with tf.layers."""

from absl import logging
from six.moves import range
import tensorflow.compat.v1 as tf



_dataset_function = dataset  # corpus: the inlined module's function `dataset` (the module's name)


class _DatasetModule:  # corpus: the inlined module `dataset`, callable as its function `dataset`
  train = staticmethod(train)
  test = staticmethod(test)

  def __call__(self, directory, images_file, labels_file):
    return _dataset_function(directory, images_file, labels_file)


dataset = _DatasetModule()  # corpus: was `from official.r1.mnist import dataset`


LEARNING_RATE = 1e-4


def create_model(data_format):
  """Model to recognize digits in the MNIST dataset.

  Network structure is equivalent to:
  https://github.com/tensorflow/tensorflow/blob/r1.5/tensorflow/examples/tutorials/mnist/mnist_deep.py

  But uses the tf.keras API.

  Args:
    data_format: Either 'channels_first' or 'channels_last'. 'channels_first' is
      typically faster on GPUs while 'channels_last' is typically faster on
      CPUs. See
      https://www.tensorflow.org/performance/performance_guide#data_formats

  Returns:
    A tf.keras.Model.
  """
  if data_format == 'channels_first':
    input_shape = [1, 28, 28]
  else:
    assert data_format == 'channels_last'
    input_shape = [28, 28, 1]

  l = tf.keras.layers
  max_pool = l.MaxPooling2D(
      (2, 2), (2, 2), padding='same', data_format=data_format)
  # The model consists of a sequential chain of layers, so tf.keras.Sequential
  # (a subclass of tf.keras.Model) makes for a compact description.
  return tf.keras.Sequential(
      [
          l.Reshape(
              target_shape=input_shape,
              input_shape=(28 * 28,)),
          l.Conv2D(
              32,
              5,
              padding='same',
              data_format=data_format,
              activation=tf.nn.relu),
          max_pool,
          l.Conv2D(
              64,
              5,
              padding='same',
              data_format=data_format,
              activation=tf.nn.relu),
          max_pool,
          l.Flatten(),
          l.Dense(1024, activation=tf.nn.relu),
          l.Dropout(0.4),
          l.Dense(10)
      ])


def model_fn(features, labels, mode, params):
  """The model_fn argument for creating an Estimator."""
  model = create_model(params['data_format'])
  image = features
  if isinstance(image, dict):
    image = features['image']

  if mode == tf.estimator.ModeKeys.PREDICT:
    logits = model(image, training=False)
    predictions = {
        'classes': tf.argmax(logits, axis=1),
        'probabilities': tf.nn.softmax(logits),
    }
    return tf.estimator.EstimatorSpec(
        mode=tf.estimator.ModeKeys.PREDICT,
        predictions=predictions,
        export_outputs={
            'classify': tf.estimator.export.PredictOutput(predictions)
        })
  if mode == tf.estimator.ModeKeys.TRAIN:
    optimizer = tf.compat.v1.train.AdamOptimizer(learning_rate=LEARNING_RATE)

    logits = model(image, training=True)
    loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(labels=labels,
                                                            logits=logits)
    accuracy = tf.compat.v1.metrics.accuracy(
        labels=labels, predictions=tf.argmax(logits, axis=1))

    # Name tensors to be logged with LoggingTensorHook.
    tf.identity(LEARNING_RATE, 'learning_rate')
    tf.identity(loss, 'cross_entropy')
    tf.identity(accuracy[1], name='train_accuracy')

    # Save accuracy scalar to Tensorboard output.
    tf.summary.scalar('train_accuracy', accuracy[1])

    return tf.estimator.EstimatorSpec(
        mode=tf.estimator.ModeKeys.TRAIN,
        loss=loss,
        train_op=optimizer.minimize(
            loss,
            tf.compat.v1.train.get_or_create_global_step()))
  if mode == tf.estimator.ModeKeys.EVAL:
    logits = model(image, training=False)
    loss = tf.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
    return tf.estimator.EstimatorSpec(
        mode=tf.estimator.ModeKeys.EVAL,
        loss=loss,
        eval_metric_ops={
            'accuracy':
                tf.metrics.accuracy(
                    labels=labels, predictions=tf.argmax(logits, axis=1)),
        })


def run_mnist(flags_obj):
  """Run MNIST training and eval loop.

  Args:
    flags_obj: An object containing parsed flag values.
  """
  model_helpers.apply_clean(flags_obj)
  model_function = model_fn

  session_config = tf.compat.v1.ConfigProto(
      inter_op_parallelism_threads=flags_obj.inter_op_parallelism_threads,
      intra_op_parallelism_threads=flags_obj.intra_op_parallelism_threads,
      allow_soft_placement=True)

  distribution_strategy = distribution_utils.get_distribution_strategy(
      distribution_strategy=flags_obj.distribution_strategy,
      num_gpus=flags_core.get_num_gpus(flags_obj),
      all_reduce_alg=flags_obj.all_reduce_alg)

  run_config = tf.estimator.RunConfig(
      train_distribute=distribution_strategy, session_config=session_config)

  data_format = flags_obj.data_format
  if data_format is None:
    data_format = ('channels_first' if tf.config.list_physical_devices('GPU')
                   else 'channels_last')
  mnist_classifier = tf.estimator.Estimator(
      model_fn=model_function,
      model_dir=flags_obj.model_dir,
      config=run_config,
      params={
          'data_format': data_format,
      })

  # Set up training and evaluation input functions.
  def train_input_fn():
    """Prepare data for training."""

    # When choosing shuffle buffer sizes, larger sizes result in better
    # randomness, while smaller sizes use less memory. MNIST is a small
    # enough dataset that we can easily shuffle the full epoch.
    ds = dataset.train(flags_obj.data_dir)
    ds = ds.cache().shuffle(buffer_size=50000).batch(flags_obj.batch_size)

    # Iterate through the dataset a set number (`epochs_between_evals`) of times
    # during each training session.
    ds = ds.repeat(flags_obj.epochs_between_evals)
    return ds

  def eval_input_fn():
    return dataset.test(flags_obj.data_dir).batch(
        flags_obj.batch_size).make_one_shot_iterator().get_next()

  # Set up hook that outputs training logs every 100 steps.
  train_hooks = hooks_helper.get_train_hooks(
      flags_obj.hooks, model_dir=flags_obj.model_dir,
      batch_size=flags_obj.batch_size)

  # Train and evaluate model.
  for _ in range(flags_obj.train_epochs // flags_obj.epochs_between_evals):
    mnist_classifier.train(input_fn=train_input_fn, hooks=train_hooks)
    eval_results = mnist_classifier.evaluate(input_fn=eval_input_fn)
    print('\nEvaluation results:\n\t%s\n' % eval_results)

    if model_helpers.past_stop_threshold(flags_obj.stop_threshold,
                                         eval_results['accuracy']):
      break

  # Export the model
  if flags_obj.export_dir is not None:
    image = tf.compat.v1.placeholder(tf.float32, [None, 28, 28])
    input_fn = tf.estimator.export.build_raw_serving_input_receiver_fn({
        'image': image,
    })
    mnist_classifier.export_savedmodel(flags_obj.export_dir, input_fn,
                                       strip_default_attrs=True)


def main(_):
  run_mnist(FLAGS)  # corpus: was run_mnist(flags.FLAGS)


if __name__ == '__main__':
  logging.set_verbosity(logging.INFO)
  main(None)  # corpus: was define_mnist_flags(); absl_app.run(main)
