# estflow compat corpus: cloudml_iris_estimator
#
# Source:  https://github.com/GoogleCloudPlatform/cloudml-samples/tree/efddc4a9898127e55edc0946557aca4bfaf59705/tensorflow/standard/iris/trainer
#          GoogleCloudPlatform/cloudml-samples @ efddc4a98981, trainer/model.py then trainer/task.py,
#          run as the sample's sample.sh runs it locally (`python -m trainer.task --train-files
#          iris_data/iris_training.csv --eval-files iris_data/iris_test.csv --job-dir ...
#          --train-steps 1000 --eval-steps 100`)
# License: Apache License 2.0 (Copyright 2018 Google Inc.; the files' license headers)
# What:    AI Platform iris sample: DNNClassifier([10, 20, 10], AdamOptimizer(0.01)) over
#          numeric_column(shape=(1,)), a TF 1 TextLineDataset + decode_csv input_fn returning
#          make_one_shot_iterator().get_next(), RunConfig(session_config=None,
#          save_checkpoints_steps=100), train_and_evaluate with a named EvalSpec and a
#          FinalExporter whose serving_input_fn decodes CSV rows from a placeholder.
# Changes (for TF 2.15 + tensorflow-estimator 2.15, offline):
#   - `import tensorflow as tf` -> `import tensorflow.compat.v1 as tf` (both files; TF 1 code)
#   - `from __future__ import ...` (no-ops on Python 3) dropped: they must open a file
#   - task.py is appended to model.py (one file per corpus program), `from . import model` ->
#     `model = sys.modules[__name__]` (with `import sys`)
#   - sample.sh's command line is given to `parser.parse_known_args([...])`, the job dir
#     relative (iris_job); its --train-steps 1000 -> 200
# Data:    iris_data/iris_training.csv / iris_test.csv: TensorFlow's iris split (the files the
#          sample copies from gs://cloud-samples-data/ml-engine/iris/; tests/compat/data/iris_*)
# corpus: data-file iris_training.csv iris_data/iris_training.csv
# corpus: data-file iris_test.csv iris_data/iris_test.csv

# ---- trainer/model.py ----
# Copyright 2018 Google Inc. All Rights Reserved. Licensed under the Apache
# License, Version 2.0 (the "License"); you may not use this file except in
# compliance with the License. You may obtain a copy of the License at
# http://www.apache.org/licenses/LICENSE-2.0

# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
# WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
# License for the specific language governing permissions and limitations under
# the License.

import tensorflow.compat.v1 as tf

# The CSV features in our training & test data.
column_names = [
    'SepalLength', 'SepalWidth', 'PetalLength', 'PetalWidth', 'Species'
]

try:
	xrange  # Python 2
except NameError:
	xrange = range  # Python 3


def get_feature_columns():
  # All our inputs are feature columns of type numeric_column.
  return [
      tf.feature_column.numeric_column(feature, shape=(1,))
      for feature in column_names[:4]
  ]


def build_estimator(config,
                    hidden_units=None,
                    learning_rate=1e-4,
                    num_classes=3):
  """Creates a Deep Neural Network estimator for Multi-class classification.

  By default builds a 3 layer DNN with 10, 20, 10 units respectively.

  Args:
    config: (tf.estimator.RunConfig) Configuration options to save model.
    hidden_units: [int] DNN structure. Example: [10, 20, 10]
    learning_rate: (float) Learning rate.
    num_classes: (int) Number of classes in label.

  Returns:
    A tf.estimator.DNNClassifier object.
  """
  optimizer = tf.train.AdamOptimizer(learning_rate=learning_rate)
  return tf.estimator.DNNClassifier(
      optimizer=optimizer,
      config=config,
      feature_columns=get_feature_columns(),
      hidden_units=hidden_units,
      n_classes=num_classes)


def _make_input_parser(with_target=True):
  """Returns a parser func according to file_type, task_type and target.

  Need to set record_default for last column to integer instead of float in
  case of classification tasks.

  Args:
    with_target (boolean): Pass label or not.

  Returns:
    It returns a parser.
  """

  def _decode_csv(line):
    """Takes the string input tensor and parses it to feature dict and target.

    All the columns except the first one are treated as feature column. The
    first column is expected to be the target.
    Only returns target for if with_target is True.

    Args:
      line: csv rows in tensor format.

    Returns:
      features: A dictionary of features with key as "column_names" from
        self._column_header.
      target: tensor of target values which is the first column of the file.
        This will only be returned if with_target==True.
    """
    column_header = column_names if with_target else column_names[:4]
    record_defaults = [[0.] for _ in xrange(len(column_names) - 1)]
    # Pass label as integer.
    if with_target:
      record_defaults.append([0])
    columns = tf.decode_csv(line, record_defaults=record_defaults)
    features = dict(zip(column_header, columns))
    target = features.pop(column_names[4]) if with_target else None
    return features, target

  return _decode_csv


def serving_input_receiver_fn():
  """This is used to define inputs to serve the model.

  Returns:
    A ServingInputReciever object.
  """
  csv_row = tf.placeholder(shape=[None], dtype=tf.string)
  features, _ = _make_input_parser(with_target=False)(csv_row)
  return tf.estimator.export.ServingInputReceiver(features,
                                                  {'csv_row': csv_row})


def input_fn(filename, batch_size=32, shuffle=False):
  """Creates an input function reading a file using the Dataset API.

  Args:
    filename: (str) The data file to read.
    batch_size: (int) The size of training examples in one iteration.
    shuffle: (boolean) Whether the record order should be randomized.

  Returns:
    Features and Labels for processing.
  """

  def _input_fn():
    """The input_fn."""
    dataset = (
        tf.data.TextLineDataset(filename).skip(
            1)  # Skip the first line (which does not have data)
        .map(_make_input_parser(with_target=True))
    )  # Transform each elem _make_input_parser.

    if shuffle:
      dataset = dataset.shuffle(buffer_size=256)
    dataset = dataset.repeat().batch(batch_size)
    iterator = dataset.make_one_shot_iterator()
    features, labels = iterator.get_next()
    return features, labels

  return _input_fn()

# ---- trainer/task.py ----

import argparse
import json
import os

import sys
model = sys.modules[__name__]

import tensorflow.compat.v1 as tf


def get_args():
  """Argument parser.

	 Returns:
		Dictionary of arguments.
	"""
  parser = argparse.ArgumentParser()
  # Input Arguments.
  parser.add_argument(
      '--train-files',
      help='GCS or local paths to training data',
      nargs='+',
      required=True)
  parser.add_argument(
      '--eval-files',
      help='GCS or local paths to evaluation data',
      nargs='+',
      required=True)
  parser.add_argument(
      '--job-dir',
      help='GCS location to write checkpoints and export models',
      required=True)
  # Train arguments.
  parser.add_argument(
      '--train-steps',
      help="""
        Steps to run the training job for. If --num-epochs is not specified,
        this must be. Otherwise the training job will run indefinitely.""",
      type=int,
      default=400)
  parser.add_argument(
      '--eval-steps',
      help='Number of steps to run evalution for at each checkpoint',
      type=int,
      default=100)
  parser.add_argument(
      '--num-epochs',
      help="""
        Maximum number of training data epochs on which to train.
        If both --train-steps and --num-epochs are specified,
        the training job will run for --train-steps or --num-epochs,
        whichever occurs first. If unspecified will run for --train-steps.""",
      type=int,
      default=200)
  parser.add_argument(
      '--learning-rate',
      help='Learning rate',
      type=float,
      default=0.01)
  parser.add_argument(
      '--train-batch-size',
      help='Batch size for training steps',
      type=int,
      default=32)
  parser.add_argument(
      '--eval-batch-size',
      help='Batch size for evaluation steps',
      type=int,
      default=32)
  parser.add_argument(
    '--verbosity',
    choices=['DEBUG', 'ERROR', 'FATAL', 'INFO', 'WARN'],
    default='INFO')

  args, _ = parser.parse_known_args(
      ['--train-files', 'iris_data/iris_training.csv', '--eval-files', 'iris_data/iris_test.csv',
       '--job-dir', 'iris_job', '--train-steps', '200', '--eval-steps', '100'])
  return args


def _get_session_config_from_env_var():
  """Returns a tf.ConfigProto instance with appropriate device_filters set."""

  tf_config = json.loads(os.environ.get('TF_CONFIG', '{}'))
  if (tf_config and 'task' in tf_config and 'type' in tf_config['task'] and
      'index' in tf_config['task']):
    # Master should only communicate with itself and ps.
    if tf_config['task']['type'] == 'master':
      return tf.ConfigProto(device_filters=['/job:ps', '/job:master'])
    # Worker should only communicate with itself and ps.
    elif tf_config['task']['type'] == 'worker':
      return tf.ConfigProto(device_filters=[
          '/job:ps',
          '/job:worker/task:%d' % tf_config['task']['index']
      ])
  return None


def train_and_evaluate(args):
  """Runs the training and evaluate using the high level API."""

  # Running configuration.
  run_config = tf.estimator.RunConfig(
      session_config=_get_session_config_from_env_var(),
      save_checkpoints_steps=100,
      save_summary_steps=100,
      model_dir=args.job_dir)

  # Create TrainSpec.
  train_input_fn = lambda: model.input_fn(
      filename=args.train_files,
      batch_size=args.train_batch_size,
      shuffle=True)
  train_spec = tf.estimator.TrainSpec(
      train_input_fn, max_steps=args.train_steps)

  # Define evaluating spec. Don't shuffle evaluation data.
  exporter = tf.estimator.FinalExporter('exporter',
                                        model.serving_input_receiver_fn)
  # Create EvalSpec.
  eval_input_fn = lambda: model.input_fn(
      filename=args.eval_files,
      batch_size=args.eval_batch_size,
      shuffle=False)
  eval_spec = tf.estimator.EvalSpec(
      eval_input_fn,
      steps=args.eval_steps,
      exporters=[exporter],
      name='iris-eval')

  print('Model dir: %s' % run_config.model_dir)

  # Create the Estimator.
  estimator = model.build_estimator(
      # Construct layers sizes.
      config=run_config,
      learning_rate=args.learning_rate,
      hidden_units=[10, 20, 10],
      num_classes=3)

  # Train and evaluate the model.
  tf.estimator.train_and_evaluate(estimator, train_spec, eval_spec)


if __name__ == '__main__':
  args = get_args()
  tf.logging.set_verbosity(args.verbosity)

  train_and_evaluate(args)
