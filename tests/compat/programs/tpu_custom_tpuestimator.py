# estflow compat corpus: tpu_custom_tpuestimator
#
# Source:  https://github.com/tensorflow/tpu/blob/ccc4cede78e44095001e2bd2a40c7cba2ae74cea/models/samples/core/get_started/custom_tpuestimator.py
#          and its module iris_data_tpu.py @ 50eeea0f130afd2656637febc80493ad945b931a (same folder)
# License: Apache License 2.0 (Copyright 2018 The TensorFlow Authors; the files' license headers)
# What:    Cloud TPU's 'Get started' custom TPUEstimator, run with use_tpu=False: tf.flags,
#          model_fn(features, labels, mode, params) with tf.feature_column.input_layer,
#          tf.layers.dense, TPUEstimatorSpec(eval_metrics=(metric_fn, [labels, logits])),
#          AdagradOptimizer.minimize(global_step); input_fns taking `params` and reading
#          params['batch_size'] (drop_remainder=True), train(max_steps), evaluate(steps), predict.
# Changes (for TF 2.15 + tensorflow-estimator 2.15, offline, on CPU, fast; each marked `# corpus:`):
#   - `from tensorflow.contrib import tpu as contrib_tpu` -> `contrib_tpu = tf_estimator.tpu`
#     (tf.contrib is gone; tf.compat.v1.estimator.tpu has RunConfig, TPUConfig, TPUEstimator and
#     TPUEstimatorSpec); `contrib_cluster_resolver.TPUClusterResolver(FLAGS.tpu)` -> None (without
#     a TPU the resolver looks for one on the GCE metadata server), so the contrib
#     cluster_resolver import is dropped
#   - flag defaults: use_tpu True -> False, model_dir '' -> 'iris_tpu_model', train_steps
#     1000 -> 200; log_device_placement True -> False (it prints every op's placement)
#   - iris_data_tpu.py is inlined above the program (one file per corpus program), and
#     `import iris_data_tpu as iris_data` -> `iris_data = sys.modules[__name__]`
#   - `from __future__ import ...` (no-ops on Python 3) dropped: they must open a file
#   - downloads: served from tests/compat/data by the harness (the text is unchanged)
# Data:    iris_training.csv / iris_test.csv (tests/compat/data)

# ---- iris_data_tpu.py ----
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

"""Module to generate Iris dataset for using in custom TPUEstimator."""
import numpy as np
import pandas as pd
import tensorflow.compat.v1 as tf

TRAIN_URL = 'http://download.tensorflow.org/data/iris_training.csv'
TEST_URL = 'http://download.tensorflow.org/data/iris_test.csv'

CSV_COLUMN_NAMES = ['SepalLength', 'SepalWidth',
                    'PetalLength', 'PetalWidth', 'Species']
SPECIES = ['Setosa', 'Versicolor', 'Virginica']

PREDICTION_INPUT_DATA = {
    'SepalLength': [6.9, 5.1, 5.9],
    'SepalWidth': [3.1, 3.3, 3.0],
    'PetalLength': [5.4, 1.7, 4.2],
    'PetalWidth': [2.1, 0.5, 1.5],
}

PREDICTION_OUTPUT_DATA = ['Virginica', 'Setosa', 'Versicolor']


def maybe_download():
  train_path = tf.keras.utils.get_file(TRAIN_URL.split('/')[-1], TRAIN_URL)
  test_path = tf.keras.utils.get_file(TEST_URL.split('/')[-1], TEST_URL)

  return train_path, test_path


def load_data(y_name='Species'):
  """Returns the iris dataset as (train_x, train_y), (test_x, test_y)."""
  train_path, test_path = maybe_download()

  train = pd.read_csv(
      train_path,
      names=CSV_COLUMN_NAMES,
      header=0,
      dtype={
          'SepalLength': np.float32,
          'SepalWidth': np.float32,
          'PetalLength': np.float32,
          'PetalWidth': np.float32,
          'Species': np.int32,
      },
  )
  train_x, train_y = train, train.pop(y_name)

  test = pd.read_csv(
      test_path,
      names=CSV_COLUMN_NAMES,
      header=0,
      dtype={
          'SepalLength': np.float32,
          'SepalWidth': np.float32,
          'PetalLength': np.float32,
          'PetalWidth': np.float32,
          'Species': np.int32,
      },
  )
  test_x, test_y = test, test.pop(y_name)

  return (train_x, train_y), (test_x, test_y)


def train_input_fn(features, labels, batch_size):
  """An input function for training."""

  # Convert the inputs to a Dataset.
  dataset = tf.data.Dataset.from_tensor_slices((dict(features), labels))

  # Shuffle, repeat, and batch the examples.
  dataset = dataset.shuffle(1000).repeat()

  dataset = dataset.batch(batch_size, drop_remainder=True)

  # Return the dataset.
  return dataset


def eval_input_fn(features, labels, batch_size):
  """An input function for evaluation."""
  features = dict(features)
  inputs = (features, labels)

  # Convert the inputs to a Dataset.
  dataset = tf.data.Dataset.from_tensor_slices(inputs)
  dataset = dataset.shuffle(1000).repeat()

  dataset = dataset.batch(batch_size, drop_remainder=True)

  # Return the dataset.
  return dataset


def predict_input_fn(features, batch_size):
  """An input function for prediction."""

  dataset = tf.data.Dataset.from_tensor_slices(features)
  dataset = dataset.batch(batch_size)
  return dataset


# ---- custom_tpuestimator.py ----
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

"""An Example of a custom TPUEstimator for the Iris dataset."""

import sys  # corpus: for the inlined iris_data_tpu module

iris_data = sys.modules[__name__]  # corpus: was `import iris_data_tpu as iris_data`
import tensorflow.compat.v1 as tf
from tensorflow.compat.v1 import estimator as tf_estimator
contrib_tpu = tf_estimator.tpu  # corpus: was `from tensorflow.contrib import tpu as contrib_tpu`

# Cloud TPU Cluster Resolver flags
tf.flags.DEFINE_string(
    "tpu", default=None,
    help="The Cloud TPU to use for training. This should be the name used when "
    "creating the Cloud TPU. To find out hte name of TPU, either use command "
    "'gcloud compute tpus list --zone=<zone-name>', or use "
    "'ctpu status --details' if you have created Cloud TPU using 'ctpu up'.")

# Model specific parameters
tf.flags.DEFINE_string(
    "model_dir", default="iris_tpu_model",  # corpus: was default=""
    help="This should be the path of GCS bucket which will be used as "
    "model_directory to export the checkpoints during training.")
tf.flags.DEFINE_integer(
    "batch_size", default=128,
    help="This is the global batch size and not the per-shard batch.")
tf.flags.DEFINE_integer(
    "train_steps", default=200,  # corpus: was default=1000
    help="Total number of training steps.")
tf.flags.DEFINE_integer(
    "eval_steps", default=4,
    help="Total number of evaluation steps. If `0`, evaluation "
    "after training is skipped.")

# TPU specific parameters.
tf.flags.DEFINE_bool(
    "use_tpu", default=False,  # corpus: was default=True
    help="True, if want to run the model on TPU. False, otherwise.")
tf.flags.DEFINE_integer(
    "iterations", default=500,
    help="Number of iterations per TPU training loop.")

FLAGS = tf.flags.FLAGS


def metric_fn(labels, logits):
  """Function to return metrics for evaluation."""

  predicted_classes = tf.argmax(logits, 1)
  accuracy = tf.metrics.accuracy(labels=labels,
                                 predictions=predicted_classes,
                                 name="acc_op")
  return {"accuracy": accuracy}


def my_model(features, labels, mode, params):
  """Deep Neural Network(DNN) model.

  This is a DNN Model with 3 hidden layers. First 2 hidden layers are having
  10 neurons in each. And number of neurons in the last layer is equal to the
  number of output classes. This is a densely connected network where each
  neuron of previous layer is connected to each neuron of next layer.

  Args:
    features: Feature values for input samples.
    labels: label/class assigned to the corresponding input sample.
    mode: "TRAIN"/"EVAL"/"PREDICT"
    params: Dictionary used to pass extra parameters to model function from
      the main function.

  Returns:
    TPUEstimator object.

  """

  # Create three fully connected layers.
  net = tf.feature_column.input_layer(features, params["feature_columns"])
  for units in params["hidden_units"]:
    net = tf.layers.dense(net, units=units, activation=tf.nn.relu)

  # Compute logits (1 per class).
  logits = tf.layers.dense(net, params["n_classes"], activation=None)

  # Compute predictions.
  predicted_classes = tf.argmax(logits, 1)
  if mode == tf_estimator.ModeKeys.PREDICT:
    predictions = {
        "class_ids": predicted_classes[:, tf.newaxis],
        "probabilities": tf.nn.softmax(logits),
        "logits": logits,
    }
    return contrib_tpu.TPUEstimatorSpec(mode, predictions=predictions)

  # Compute loss.
  loss = tf.losses.sparse_softmax_cross_entropy(labels=labels,
                                                logits=logits)

  if mode == tf_estimator.ModeKeys.EVAL:
    return contrib_tpu.TPUEstimatorSpec(
        mode=mode, loss=loss, eval_metrics=(metric_fn, [labels, logits]))

  # Create training op.
  if mode == tf_estimator.ModeKeys.TRAIN:
    optimizer = tf.train.AdagradOptimizer(learning_rate=0.1)
    if FLAGS.use_tpu:
      optimizer = contrib_tpu.CrossShardOptimizer(optimizer)
    train_op = optimizer.minimize(loss, global_step=tf.train.get_global_step())
    return contrib_tpu.TPUEstimatorSpec(mode, loss=loss, train_op=train_op)


def main(argv):
  del argv  # Unused
  if FLAGS.use_tpu:
    assert FLAGS.model_dir.startswith("gs://"), ("'model_dir' should be a "
                                                 "GCS bucket path!")

  # Fetch the data
  (train_x, train_y), (test_x, test_y) = iris_data.load_data()

  # Feature columns describe how to use the input.
  my_feature_columns = []
  for key in train_x.keys():
    my_feature_columns.append(tf.feature_column.numeric_column(key=key))

  # Resolve TPU cluster and runconfig for this.
  tpu_cluster_resolver = None  # corpus: was contrib_cluster_resolver.TPUClusterResolver(FLAGS.tpu)

  run_config = contrib_tpu.RunConfig(
      model_dir=FLAGS.model_dir,
      cluster=tpu_cluster_resolver,
      session_config=tf.ConfigProto(
          allow_soft_placement=True, log_device_placement=False),  # corpus: was True
      tpu_config=contrib_tpu.TPUConfig(FLAGS.iterations),
  )

  # Build 2 hidden layer DNN with 10, 10 units respectively.
  classifier = contrib_tpu.TPUEstimator(
      model_fn=my_model,
      use_tpu=FLAGS.use_tpu,
      train_batch_size=FLAGS.batch_size,
      eval_batch_size=FLAGS.batch_size,
      predict_batch_size=FLAGS.batch_size,
      config=run_config,
      params={
          # Name of the feature columns in the input data.
          "feature_columns": my_feature_columns,
          # Two hidden layers of 10 nodes each.
          "hidden_units": [10, 10],
          # The model must choose between 3 classes.
          "n_classes": 3,
          "use_tpu": FLAGS.use_tpu,
      })

  # Train the Model.
  classifier.train(
      input_fn=lambda params: iris_data.train_input_fn(
          train_x, train_y, params["batch_size"]),
      max_steps=FLAGS.train_steps)

  # Evaluate the model.
  eval_result = classifier.evaluate(
      input_fn=lambda params: iris_data.eval_input_fn(
          test_x, test_y, params["batch_size"]),
      steps=FLAGS.eval_steps)

  print("\nTest set accuracy: {accuracy:0.3f}\n".format(**eval_result))

  # Generate predictions from the model
  predictions = classifier.predict(
      input_fn=lambda params: iris_data.predict_input_fn(
          iris_data.PREDICTION_INPUT_DATA, params["batch_size"]))

  for pred_dict, expec in zip(predictions, iris_data.PREDICTION_OUTPUT_DATA):
    template = ("\nPrediction is \"{}\" ({:.1f}%), expected \"{}\"")

    class_id = pred_dict["class_ids"][0]
    probability = pred_dict["probabilities"][class_id]

    print(template.format(iris_data.SPECIES[class_id],
                          100 * probability, expec))

if __name__ == "__main__":
  tf.logging.set_verbosity(tf.logging.INFO)
  tf.app.run(main)
