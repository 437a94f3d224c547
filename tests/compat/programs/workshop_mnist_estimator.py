# estflow compat corpus: workshop_mnist_estimator
#
# Source:  https://github.com/amygdala/tensorflow-workshop/blob/8f4cd5fc03852cc39aa02d05d1b51df6d289330e/workshop_sections/high_level_APIs/mnist_estimator.py
#          and its module workshop_sections/high_level_APIs/dataset.py (inlined above it)
#          amygdala/tensorflow-workshop @ 8f4cd5fc0385
# License: Apache License 2.0 (Copyright 2016 Google Inc.; the files' headers and the
#          repository's LICENSE)
# What:    DNNClassifier with tf.train.ProximalAdagradOptimizer over a numeric column, input_fns
#          returning make_one_shot_iterator().get_next() of a FixedLengthRecordDataset pipeline
#          (decode_raw of MNIST's idx files, cache/shuffle/repeat), TrainSpec/EvalSpec(name=...),
#          tf.estimator.train_and_evaluate, argparse + tf.app.run.
# Changed (to run on TF 2.15 + tensorflow-estimator 2.15, offline, fast; each line marked
#          `# corpus:`):
#          - `import tensorflow as tf` -> `import tensorflow.compat.v1 as tf` (TF 1 code), in both;
#          - dataset.py inlined (a corpus program is one file): its `dataset()` renamed
#            `mnist_dataset()` (the module's name), `import dataset` -> a namespace of train/test;
#          - tf.contrib.layers.real_valued_column("pixels", dimension=784) ->
#            tf.feature_column.numeric_column("pixels", shape=784) (no tf.contrib in TF 2);
#          - --num_steps default 15000 -> 200; --data_dir and --model_dir defaults relative (the
#            harness runs in a fresh directory) instead of under /tmp.
# Data:    MNIST's idx files downloaded by dataset.py (urllib.request.urlretrieve) are served by
#          tests/compat/harness.py from the small synthetic MNIST file (640 train, 160 test).
#
# Everything below is the published code, but for the lines marked `# corpus:`.

# ---- workshop_sections/high_level_APIs/dataset.py ----
from __future__ import absolute_import
from __future__ import division
from __future__ import print_function

import gzip
import os
import shutil
import tempfile

import numpy as np
from six.moves import urllib
import tensorflow.compat.v1 as tf  # corpus: was `import tensorflow as tf`

# CVDF mirror of http://yann.lecun.com/exdb/mnist/
DEFAULT_SOURCE_URL = 'https://storage.googleapis.com/cvdf-datasets/mnist/'


def read32(bytestream):
  """Read 4 bytes from bytestream as an unsigned 32-bit integer."""
  dt = np.dtype(np.uint32).newbyteorder('>')
  return np.frombuffer(bytestream.read(4), dtype=dt)[0]


def check_image_file_header(filename):
  """Validate that filename corresponds to images for the MNIST dataset."""
  with tf.gfile.Open(filename, 'rb') as f:
    magic = read32(f)
    read32(f)  # num_images, unused
    rows = read32(f)
    cols = read32(f)
    if magic != 2051:
      raise ValueError('Invalid magic number %d in MNIST file %s' % (magic,
                                                                     f.name))
    if rows != 28 or cols != 28:
      raise ValueError(
          'Invalid MNIST file %s: Expected 28x28 images, found %dx%d' %
          (f.name, rows, cols))


def check_labels_file_header(filename):
  """Validate that filename corresponds to labels for the MNIST dataset."""
  with tf.gfile.Open(filename, 'rb') as f:
    magic = read32(f)
    read32(f)  # num_items, unused
    if magic != 2049:
      raise ValueError('Invalid magic number %d in MNIST file %s' % (magic,
                                                                     f.name))


def download(directory, filename, source_url):
  """Download (and unzip) a file from the MNIST dataset if not already done."""
  if not source_url:  # empty string check
    source_url = DEFAULT_SOURCE_URL
  filepath = os.path.join(directory, filename)
  # print("in download, filepath is: %s" % filepath)
  if tf.gfile.Exists(filepath):
    return filepath
  if not tf.gfile.Exists(directory):
    tf.gfile.MakeDirs(directory)
  url = source_url + filename + '.gz'
  _, zipped_filepath = tempfile.mkstemp(suffix='.gz')
  print('Downloading %s to %s' % (url, zipped_filepath))
  urllib.request.urlretrieve(url, zipped_filepath)
  with gzip.open(zipped_filepath, 'rb') as f_in, \
      tf.gfile.Open(filepath, 'wb') as f_out:
    shutil.copyfileobj(f_in, f_out)
  os.remove(zipped_filepath)
  return filepath


def mnist_dataset(directory, images_file, labels_file, source_url=DEFAULT_SOURCE_URL):  # corpus: was dataset(...)
  """Download and parse MNIST dataset."""

  images_file = download(directory, images_file, source_url)
  labels_file = download(directory, labels_file, source_url)

  check_image_file_header(images_file)
  check_labels_file_header(labels_file)

  def decode_image(image):
    # Normalize from [0, 255] to [0.0, 1.0]
    image = tf.decode_raw(image, tf.uint8)
    image = tf.cast(image, tf.float32)
    image = tf.reshape(image, [784])
    return image / 255.0

  def decode_label(label):
    label = tf.decode_raw(label, tf.uint8)  # tf.string -> [tf.uint8]
    label = tf.reshape(label, [])  # label is a scalar
    return tf.to_int32(label)

  images = tf.data.FixedLengthRecordDataset(
      images_file, 28 * 28, header_bytes=16).map(decode_image)
  labels = tf.data.FixedLengthRecordDataset(
      labels_file, 1, header_bytes=8).map(decode_label)
  return tf.data.Dataset.zip((images, labels))


def train(directory):
  """tf.data.Dataset object for MNIST training data."""
  return mnist_dataset(directory, 'train-images-idx3-ubyte',  # corpus: was dataset(...)
                 'train-labels-idx1-ubyte')


def test(directory):
  """tf.data.Dataset object for MNIST test data."""
  return mnist_dataset(directory, 't10k-images-idx3-ubyte', 't10k-labels-idx1-ubyte')  # corpus: was dataset(...)


# ---- workshop_sections/high_level_APIs/mnist_estimator.py ----
import types  # corpus: for the inlined module
"""Trains MNIST using tf.estimator.
"""

# corpus: `from __future__ import absolute_import, division, print_function` (dataset.py's, above, stands)

import argparse
import os
import time

import tensorflow.compat.v1 as tf  # corpus: was `import tensorflow as tf`
dataset = types.SimpleNamespace(train=train, test=test)  # corpus: was `import dataset` (dataset.py, above)

ARGFLAGS = None

# comment out for less info during the training runs.
tf.logging.set_verbosity(tf.logging.INFO)


def train_input_fn(data_dir, batch_size=100):
  """Prepare data for training."""

  # When choosing shuffle buffer sizes, larger sizes result in better
  # randomness, while smaller sizes use less memory. MNIST is a small
  # enough dataset that we can easily shuffle the full epoch.
  ds = dataset.train(data_dir)
  ds = ds.cache().shuffle(buffer_size=50000).batch(batch_size=batch_size)

  # Iterate through the dataset a set number of times
  # during each training session.
  ds = ds.repeat(40)
  features = ds.make_one_shot_iterator().get_next()
  return {'pixels': features[0]}, features[1]


def eval_input_fn(data_dir, batch_size=100):
  features = dataset.test(data_dir).batch(
      batch_size=batch_size).make_one_shot_iterator().get_next()
  return {'pixels': features[0]}, features[1]


def define_and_run_linear_classifier(num_steps, logdir, batch_size=100):
    """Run a linear classifier."""
    feature_columns = [tf.feature_column.numeric_column(  # corpus: was tf.contrib.layers.real_valued_column(
        "pixels", shape=784)]  # corpus: was dimension=784

    linear_classifier = tf.estimator.LinearClassifier(
        feature_columns=feature_columns,
        n_classes=10,
        model_dir=logdir
    )
    train_input = lambda: train_input_fn(
        ARGFLAGS.data_dir,
        batch_size=batch_size
    )
    linear_classifier.train(input_fn=train_input, steps=num_steps)

    print("Finished training.")

    # Evaluate accuracy.
    print("\n---Evaluating linear classifier accuracy...")
    eval_input = lambda: eval_input_fn(
        ARGFLAGS.data_dir,
        batch_size=batch_size
    )
    accuracy_score = linear_classifier.evaluate(
        input_fn=eval_input, steps=100)['accuracy']

    print('Linear Classifier Accuracy: {0:f}'.format(accuracy_score))


# After you've done a training run with optimizer learning rate 0.1,
# change it to 0.5 and run the training again.  Use TensorBoard to take
# a look at the difference.  You can see both runs by pointing it to the
# parent model directory, which by default is:
#
#   tensorboard --logdir=/tmp/tfmodels/mnist_estimators
def define_and_run_dnn_classifier(num_steps, logdir, lr=.1, batch_size=100):
    """Run a DNN classifier."""
    feature_columns = [tf.feature_column.numeric_column("pixels", shape=784)]  # corpus: was tf.contrib.layers.real_valued_column("pixels", dimension=784)

    dnn_classifier = tf.estimator.DNNClassifier(
        feature_columns=feature_columns,
        n_classes=10,
        hidden_units=[128, 32],
        optimizer=tf.train.ProximalAdagradOptimizer(learning_rate=lr),
        model_dir=logdir
    )

    train_input = lambda: train_input_fn(
        ARGFLAGS.data_dir,
        batch_size=batch_size
    )
    eval_input = lambda: eval_input_fn(
        ARGFLAGS.data_dir,
        batch_size=batch_size
    )
    train_spec = tf.estimator.TrainSpec(train_input,
                                      max_steps=num_steps
                                      )

    # While not shown here, we can also add a model 'exporter' to the EvalSpec.
    eval_spec = tf.estimator.EvalSpec(eval_input,
                                    steps=num_steps,
                                    name='fashion-eval'
                                    )
    tf.estimator.train_and_evaluate(dnn_classifier,
                                train_spec,
                                eval_spec)


def main(_):

    # Uncomment this if you'd like to run the linear classifier first.
    # print("\n-----Running linear classifier...")
    # model_dir = os.path.join(ARGFLAGS.model_dir, "linear_" + str(int(time.time())))
    # define_and_run_linear_classifier(ARGFLAGS.num_steps/2, model_dir, batch_size=ARGFLAGS.batch_size)

    print("\n---- Running DNN classifier...")
    model_dir = os.path.join(ARGFLAGS.model_dir, "deep_" + str(int(time.time())))
    define_and_run_dnn_classifier(ARGFLAGS.num_steps, model_dir, batch_size=ARGFLAGS.batch_size)


if __name__ == '__main__':
    parser = argparse.ArgumentParser()
    parser.add_argument('--data_dir', type=str, default='MNIST_data',  # corpus: was /tmp/MNIST_data
                        help='Directory for storing data')
    parser.add_argument('--model_dir', type=str,
                        default="tfmodels/mnist_estimators",  # corpus: was /tmp/tfmodels/mnist_estimators
                        help='Directory for storing model info')
    parser.add_argument('--num_steps', type=int,
                        default=200,  # corpus: was 15000
                        help='Number of training steps to run')
    parser.add_argument('--batch_size', type=int,
                        default=100,
                        help='Batch size')
    ARGFLAGS = parser.parse_args()
    tf.app.run()
