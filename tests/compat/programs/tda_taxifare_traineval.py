# estflow compat corpus: tda_taxifare_traineval
#
# Source:  https://github.com/GoogleCloudPlatform/training-data-analyst/blob/34af4c4a25a63fc6e9d457102afae09ab17d6127/courses/machine_learning/deepdive/03_tensorflow/d_traineval.ipynb
#          GoogleCloudPlatform/training-data-analyst @ 34af4c4a25a6, code cells 3, 5, 7, 9, 11, 13
# License: Apache License 2.0 (the repository's LICENSE; Copyright Google)
# What:    ML on GCP course, "TensorFlow: train_and_evaluate" (TF 2-era notebook): LinearRegressor
#          over numeric columns, a Dataset input_fn (list_files + flat_map TextLineDataset +
#          compat.v1.decode_csv), a JSON serving_input_fn with compat.v1 placeholders, LatestExporter,
#          EvalSpec(start_delay_secs, throttle_secs), compat.v1 FileWriterCache.clear().
# Omitted: cells 1, 2 (!sudo, !pip), the markdown cells
# Changes (for TF 2.15 + tensorflow-estimator 2.15, offline):
#   - `from google.cloud import bigquery` dropped (unused by these cells; not installed)
# Data:    taxi-train.csv / taxi-valid.csv: synthetic NYC taxi rides in the course's CSV format
#          (tests/compat/data/taxi-*.csv, see its README); the course makes them from BigQuery
# corpus: data-file taxi-train.csv taxi-train.csv
# corpus: data-file taxi-valid.csv taxi-valid.csv
#
# Everything below is the published code, cell by cell (a `# [cell N]` line marks each cell).

# [cell 3]
import tensorflow as tf
import numpy as np
import shutil
print(tf.__version__)

# [cell 5]
CSV_COLUMNS = ['fare_amount', 'pickuplon','pickuplat','dropofflon','dropofflat','passengers', 'key']
LABEL_COLUMN = 'fare_amount'
DEFAULTS = [[0.0], [-74.0], [40.0], [-74.0], [40.7], [1.0], ['nokey']]

def read_dataset(filename, mode, batch_size = 512):
      def decode_csv(value_column):
          columns = tf.compat.v1.decode_csv(value_column, record_defaults = DEFAULTS)
          features = dict(zip(CSV_COLUMNS, columns))
          label = features.pop(LABEL_COLUMN)
          # No need to features.pop('key') since it is not specified in the INPUT_COLUMNS.
          # The key passes through the graph unused.
          return features, label

      # Create list of file names that match "glob" pattern (i.e. data_file_*.csv)
      filenames_dataset = tf.data.Dataset.list_files(filename)
      # Read lines from text files
      textlines_dataset = filenames_dataset.flat_map(tf.data.TextLineDataset)
      # Parse text lines as comma-separated values (CSV)
      dataset = textlines_dataset.map(decode_csv)

      # Note:
      # use tf.data.Dataset.flat_map to apply one to many transformations (here: filename -> text lines)
      # use tf.data.Dataset.map      to apply one to one  transformations (here: text line -> feature list)

      if mode == tf.estimator.ModeKeys.TRAIN:
          num_epochs = None # indefinitely
          dataset = dataset.shuffle(buffer_size = 10 * batch_size)
      else:
          num_epochs = 1 # end-of-input after this

      dataset = dataset.repeat(num_epochs).batch(batch_size)
      
      return dataset

# [cell 7]
INPUT_COLUMNS = [
    tf.feature_column.numeric_column('pickuplon'),
    tf.feature_column.numeric_column('pickuplat'),
    tf.feature_column.numeric_column('dropofflat'),
    tf.feature_column.numeric_column('dropofflon'),
    tf.feature_column.numeric_column('passengers'),
]

def add_more_features(feats):
    # Nothing to add (yet!)
    return feats

feature_cols = add_more_features(INPUT_COLUMNS)

# [cell 9]
# Defines the expected shape of the JSON feed that the model
# will receive once deployed behind a REST API in production.
def serving_input_fn():
    json_feature_placeholders = {
        'pickuplon' : tf.compat.v1.placeholder(tf.float32, [None]),
        'pickuplat' : tf.compat.v1.placeholder(tf.float32, [None]),
        'dropofflat' : tf.compat.v1.placeholder(tf.float32, [None]),
        'dropofflon' : tf.compat.v1.placeholder(tf.float32, [None]),
        'passengers' : tf.compat.v1.placeholder(tf.float32, [None]),
    }
    # You can transforma data here from the input format to the format expected by your model.
    features = json_feature_placeholders # no transformation needed
    return tf.estimator.export.ServingInputReceiver(features, json_feature_placeholders)

# [cell 11]
def train_and_evaluate(output_dir, num_train_steps):
    estimator = tf.estimator.LinearRegressor(
                       model_dir = output_dir,
                       feature_columns = feature_cols)
    
    train_spec=tf.estimator.TrainSpec(
                       input_fn = lambda: read_dataset('./taxi-train.csv', mode = tf.estimator.ModeKeys.TRAIN),
                       max_steps = num_train_steps)

    exporter = tf.estimator.LatestExporter('exporter', serving_input_fn)

    eval_spec=tf.estimator.EvalSpec(
                       input_fn = lambda: read_dataset('./taxi-valid.csv', mode = tf.estimator.ModeKeys.EVAL),
                       steps = None,
                       start_delay_secs = 1, # start evaluating after N seconds
                       throttle_secs = 10,  # evaluate every N seconds
                       exporters = exporter)
    
    tf.estimator.train_and_evaluate(estimator, train_spec, eval_spec)

# [cell 13]
OUTDIR = './taxi_trained'
shutil.rmtree(OUTDIR, ignore_errors = True) # start fresh each time
tf.compat.v1.summary.FileWriterCache.clear()
train_and_evaluate(OUTDIR, num_train_steps = 500)

