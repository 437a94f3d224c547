# estflow compat corpus: tutorial_linear
#
# Source:  https://github.com/tensorflow/docs/blob/7c3650212740204359d4ceae481abc79345541be/site/en/tutorials/estimator/linear.ipynb
#          tensorflow/docs @ 7c3650212740, code cells 7, 9, 10, 13, 14, 16, 29, 31, 33, 35, 37, 39, 42, 44, 47, in order, verbatim
# License: Apache License 2.0 (Copyright The TensorFlow Authors; the notebook's license cell and
#          tensorflow/docs' LICENSE)
# What:    Linear model tutorial: LinearClassifier on titanic, then with a crossed column;
#          DenseFeatures outside a model.
# Omitted: cell 6 (`!pip install sklearn`), plotting cells 18-24 and 49 (matplotlib/sklearn ROC), the
#          `import matplotlib.pyplot as plt` line of cell 7 and the `probs.plot(...)` line of cell 47
# Data:    titanic train.csv / eval.csv (pd.read_csv of the URLs); served by tests/compat/harness.py
#          from tests/compat/data/ (the program text is unchanged)
#
# Everything below is the published code, cell by cell (a `# [cell N]` line marks each cell).

# [cell 7]
import os
import sys

import numpy as np
import pandas as pd
from IPython.display import clear_output
from six.moves import urllib

# [cell 9]
import tensorflow.compat.v2.feature_column as fc

import tensorflow as tf

# [cell 10]
# Load dataset.
dftrain = pd.read_csv('https://storage.googleapis.com/tf-datasets/titanic/train.csv')
dfeval = pd.read_csv('https://storage.googleapis.com/tf-datasets/titanic/eval.csv')
y_train = dftrain.pop('survived')
y_eval = dfeval.pop('survived')

# [cell 13]
dftrain.head()

# [cell 14]
dftrain.describe()

# [cell 16]
dftrain.shape[0], dfeval.shape[0]

# [cell 29]
CATEGORICAL_COLUMNS = ['sex', 'n_siblings_spouses', 'parch', 'class', 'deck',
                       'embark_town', 'alone']
NUMERIC_COLUMNS = ['age', 'fare']

feature_columns = []
for feature_name in CATEGORICAL_COLUMNS:
  vocabulary = dftrain[feature_name].unique()
  feature_columns.append(tf.feature_column.categorical_column_with_vocabulary_list(feature_name, vocabulary))

for feature_name in NUMERIC_COLUMNS:
  feature_columns.append(tf.feature_column.numeric_column(feature_name, dtype=tf.float32))

# [cell 31]
def make_input_fn(data_df, label_df, num_epochs=10, shuffle=True, batch_size=32):
  def input_function():
    ds = tf.data.Dataset.from_tensor_slices((dict(data_df), label_df))
    if shuffle:
      ds = ds.shuffle(1000)
    ds = ds.batch(batch_size).repeat(num_epochs)
    return ds
  return input_function

train_input_fn = make_input_fn(dftrain, y_train)
eval_input_fn = make_input_fn(dfeval, y_eval, num_epochs=1, shuffle=False)

# [cell 33]
ds = make_input_fn(dftrain, y_train, batch_size=10)()
for feature_batch, label_batch in ds.take(1):
  print('Some feature keys:', list(feature_batch.keys()))
  print()
  print('A batch of class:', feature_batch['class'].numpy())
  print()
  print('A batch of Labels:', label_batch.numpy())

# [cell 35]
age_column = feature_columns[7]
tf.keras.layers.DenseFeatures([age_column])(feature_batch).numpy()

# [cell 37]
gender_column = feature_columns[0]
tf.keras.layers.DenseFeatures([tf.feature_column.indicator_column(gender_column)])(feature_batch).numpy()

# [cell 39]
linear_est = tf.estimator.LinearClassifier(feature_columns=feature_columns)
linear_est.train(train_input_fn)
result = linear_est.evaluate(eval_input_fn)

clear_output()
print(result)

# [cell 42]
age_x_gender = tf.feature_column.crossed_column(['age', 'sex'], hash_bucket_size=100)

# [cell 44]
derived_feature_columns = [age_x_gender]
linear_est = tf.estimator.LinearClassifier(feature_columns=feature_columns+derived_feature_columns)
linear_est.train(train_input_fn)
result = linear_est.evaluate(eval_input_fn)

clear_output()
print(result)

# [cell 47]
pred_dicts = list(linear_est.predict(eval_input_fn))
probs = pd.Series([pred['probabilities'][1] for pred in pred_dicts])
