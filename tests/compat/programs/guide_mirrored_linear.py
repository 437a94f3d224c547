# estflow compat corpus: guide_mirrored_linear
#
# Source:  https://github.com/tensorflow/docs/blob/7c3650212740204359d4ceae481abc79345541be/site/en/guide/estimator.ipynb
#          tensorflow/docs @ 7c3650212740, code cells 8, 55, 57, in order, verbatim
# License: Apache License 2.0 (Copyright The TensorFlow Authors; the notebook's license cell and
#          tensorflow/docs' LICENSE)
# What:    Estimator guide, 'Using tf.distribute.Strategy with Estimator': LinearRegressor under
#          MirroredStrategy.
# Omitted: cell 7 (`!pip install`); the other sections are their own programs
# Data:    none
#
# Everything below is the published code, cell by cell (a `# [cell N]` line marks each cell).

# [cell 8]
import tempfile
import os

import tensorflow as tf
import tensorflow_datasets as tfds

# [cell 55]
mirrored_strategy = tf.distribute.MirroredStrategy()
config = tf.estimator.RunConfig(
    train_distribute=mirrored_strategy, eval_distribute=mirrored_strategy)
regressor = tf.estimator.LinearRegressor(
    feature_columns=[tf.feature_column.numeric_column('feats')],
    optimizer='SGD',
    config=config)

# [cell 57]
def input_fn():
  dataset = tf.data.Dataset.from_tensors(({"feats":[1.]}, [1.]))
  return dataset.repeat(1000).batch(10)
regressor.train(input_fn=input_fn, steps=10)
regressor.evaluate(input_fn=input_fn, steps=10)
