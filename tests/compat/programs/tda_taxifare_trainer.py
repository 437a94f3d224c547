# estflow compat corpus: tda_taxifare_trainer
#
# Source:  https://github.com/GoogleCloudPlatform/training-data-analyst/tree/a681bd179524128544b658923b1440a18b232414/courses/machine_learning/deepdive/03_tensorflow/taxifare/trainer
#          GoogleCloudPlatform/training-data-analyst @ a681bd179524: taxifare/trainer/model.py then
#          trainer/task.py, run as e_ai_platform.ipynb runs it locally (`python -m trainer.task
#          --train_data_paths=taxi-train.csv --eval_data_paths=taxi-valid.csv --output_dir=...`)
# License: Apache License 2.0 (Copyright 2017 Google Inc.; the files' license headers)
# What:    ML on GCP course's packaged trainer: DNNRegressor(hidden_units=[128, 32, 4]) over
#          numeric columns, a TF 1 iterator input_fn (compat.v1 TextLineDataset ...
#          make_one_shot_iterator().get_next()) under `import tensorflow as tf`,
#          compat.v1 placeholders in the serving_input_fn, LatestExporter, train_and_evaluate.
# Changes (for TF 2.15 + tensorflow-estimator 2.15, offline):
#   - `from __future__ import ...` (no-ops on Python 3) dropped: they must open a file
#   - task.py is appended; `from . import model` -> `model = sys.modules[__name__]`; its
#     command line is given to `parser.parse_args([...])`: --train_data_paths=taxi-train.csv
#     --eval_data_paths=taxi-valid.csv --output_dir=taxi_trained --train_steps=500 (the
#     notebook's 1000 steps halved)
# Data:    taxi-train.csv / taxi-valid.csv: synthetic NYC taxi rides in the course's CSV format
#          (tests/compat/data/taxi-*.csv, see its README); the course makes them from BigQuery
# corpus: data-file taxi-train.csv taxi-train.csv
# corpus: data-file taxi-valid.csv taxi-valid.csv

# ---- trainer/model.py ----
from __future__ import absolute_import
from __future__ import division
from __future__ import print_function

import tensorflow as tf
import numpy as np
import shutil

tf.compat.v1.logging.set_verbosity(tf.compat.v1.logging.INFO)

# List the CSV columns
CSV_COLUMNS = ['fare_amount', 'pickuplon','pickuplat','dropofflon','dropofflat','passengers', 'key']

#Choose which column is your label
LABEL_COLUMN = 'fare_amount'

# Set the default values for each CSV column in case there is a missing value
DEFAULTS = [[0.0], [-74.0], [40.0], [-74.0], [40.7], [1.0], ['nokey']]

# Create an input function that stores your data into a dataset
def read_dataset(filename, mode, batch_size = 512):
    def _input_fn():
        def decode_csv(value_column):
            columns = tf.compat.v1.decode_csv(value_column, record_defaults = DEFAULTS)
            features = dict(zip(CSV_COLUMNS, columns))
            label = features.pop(LABEL_COLUMN)
            return features, label

        # Create list of files that match pattern
        file_list = tf.compat.v1.gfile.Glob(filename)

        # Create dataset from file list
        dataset = tf.compat.v1.data.TextLineDataset(file_list).map(decode_csv)

        if mode == tf.estimator.ModeKeys.TRAIN:
            num_epochs = None # indefinitely
            dataset = dataset.shuffle(buffer_size = 10 * batch_size)
        else:
            num_epochs = 1 # end-of-input after this

        dataset = dataset.repeat(num_epochs).batch(batch_size)
        return dataset.make_one_shot_iterator().get_next()
    return _input_fn

# Define your feature columns
INPUT_COLUMNS = [
    tf.feature_column.numeric_column('pickuplon'),
    tf.feature_column.numeric_column('pickuplat'),
    tf.feature_column.numeric_column('dropofflat'),
    tf.feature_column.numeric_column('dropofflon'),
    tf.feature_column.numeric_column('passengers'),
]

# Create a function that will augment your feature set
def add_more_features(feats):
    # Nothing to add (yet!)
    return feats

feature_cols = add_more_features(INPUT_COLUMNS)

# Create your serving input function so that your trained model will be able to serve predictions
def serving_input_fn():
    feature_placeholders = {
        column.name: tf.compat.v1.placeholder(tf.float32, [None]) for column in INPUT_COLUMNS
    }

    features = feature_placeholders
    return tf.estimator.export.ServingInputReceiver(features, feature_placeholders)

# Create an estimator that we are going to train and evaluate
def train_and_evaluate(args):
    tf.compat.v1.summary.FileWriterCache.clear() # ensure filewriter cache is clear for TensorBoard events file
    estimator = tf.estimator.DNNRegressor(
        model_dir = args['output_dir'],
        feature_columns = feature_cols,
        hidden_units = args['hidden_units'])
    train_spec = tf.estimator.TrainSpec(
        input_fn = read_dataset(args['train_data_paths'],
                                batch_size = args['train_batch_size'],
                                mode = tf.estimator.ModeKeys.TRAIN),
        max_steps = args['train_steps'])
    exporter = tf.estimator.LatestExporter('exporter', serving_input_fn)
    eval_spec = tf.estimator.EvalSpec(
        input_fn = read_dataset(args['eval_data_paths'],
                                batch_size = 10000,
                                mode = tf.estimator.ModeKeys.EVAL),
        steps = None,
        start_delay_secs = args['eval_delay_secs'],
        throttle_secs = args['throttle_secs'],
        exporters = exporter)
    tf.estimator.train_and_evaluate(estimator, train_spec, eval_spec)

# ---- trainer/task.py ----
"""Example implementation of code to run on the Cloud ML service.
"""

import argparse
import json
import os

# for python2
# import model
# for python3
import sys
model = sys.modules[__name__]

if __name__ == '__main__':
    parser = argparse.ArgumentParser()
    # Input Arguments
    parser.add_argument(
        '--train_data_paths',
        help = 'GCS or local path to training data',
        required = True
    )
    parser.add_argument(
        '--train_batch_size',
        help = 'Batch size for training steps',
        type = int,
        default = 512
    )
    parser.add_argument(
        '--train_steps',
        help = 'Steps to run the training job for',
        type = int
    )
    parser.add_argument(
        '--eval_steps',
        help = 'Number of steps to run evalution for at each checkpoint',
        default = 10,
        type = int
    )
    parser.add_argument(
        '--eval_data_paths',
        help = 'GCS or local path to evaluation data',
        required = True
    )
    # Training arguments
    parser.add_argument(
        '--hidden_units',
        help = 'List of hidden layer sizes to use for DNN feature columns',
        nargs = '+',
        type = int,
        default = [128, 32, 4]
    )
    parser.add_argument(
        '--output_dir',
        help = 'GCS location to write checkpoints and export models',
        required = True
    )
    parser.add_argument(
        '--job-dir',
        help = 'this model ignores this field, but it is required by gcloud',
        default = 'junk'
    )

    # Eval arguments
    parser.add_argument(
        '--eval_delay_secs',
        help = 'How long to wait before running first evaluation',
        default = 10,
        type = int
    )
    parser.add_argument(
        '--throttle_secs',
        help = 'Seconds between evaluations',
        default = 300,
        type = int
    )

    args = parser.parse_args(['--train_data_paths=taxi-train.csv', '--eval_data_paths=taxi-valid.csv',
                              '--output_dir=taxi_trained', '--train_steps=500'])
    arguments = args.__dict__

    # Unused args provided by service
    arguments.pop('job_dir', None)
    arguments.pop('job-dir', None)

    output_dir = arguments['output_dir']
    # Append trial_id to path if we are doing hptuning
    # This code can be removed if you are not using hyperparameter tuning
    output_dir = os.path.join(
        output_dir,
        json.loads(
            os.environ.get('TF_CONFIG', '{}')
        ).get('task', {}).get('trail', '')
    )

    # Run the training job
    model.train_and_evaluate(arguments)
