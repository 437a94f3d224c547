# estflow compat corpus: guide_premade_titanic
#
# Source:  https://github.com/tensorflow/docs/blob/7c3650212740204359d4ceae481abc79345541be/site/en/guide/estimator.ipynb
#          tensorflow/docs @ 7c3650212740, code cells 8, 13, 16, 18, 21, 22, 23, in order, verbatim
# License: Apache License 2.0 (Copyright The TensorFlow Authors; the notebook's license cell and
#          tensorflow/docs' LICENSE)
# What:    Estimator guide, 'Using premade Estimators': LinearClassifier over
#          make_csv_dataset(titanic).
# Omitted: cell 7 (`!pip install`); the other sections are their own programs
# Data:    titanic train.csv (tf.keras.utils.get_file); served by tests/compat/harness.py from
#          tests/compat/data/ (the program text is unchanged)
#
# Everything below is the published code, cell by cell (a `# [cell N]` line marks each cell).

# [cell 8]
import tempfile
import os

import tensorflow as tf
import tensorflow_datasets as tfds

# [cell 13]
def train_input_fn():
  titanic_file = tf.keras.utils.get_file("train.csv", "https://storage.googleapis.com/tf-datasets/titanic/train.csv")
  titanic = tf.data.experimental.make_csv_dataset(
      titanic_file, batch_size=32,
      label_name="survived")
  titanic_batches = (
      titanic.cache().repeat().shuffle(500)
      .prefetch(tf.data.AUTOTUNE))
  return titanic_batches

# [cell 16]
age = tf.feature_column.numeric_column('age')
cls = tf.feature_column.categorical_column_with_vocabulary_list('class', ['First', 'Second', 'Third']) 
embark = tf.feature_column.categorical_column_with_hash_bucket('embark_town', 32)

# [cell 18]
model_dir = tempfile.mkdtemp()
model = tf.estimator.LinearClassifier(
    model_dir=model_dir,
    feature_columns=[embark, cls, age],
    n_classes=2
)

# [cell 21]
model = model.train(input_fn=train_input_fn, steps=100)

# [cell 22]
result = model.evaluate(train_input_fn, steps=10)

for key, value in result.items():
  print(key, ":", value)

# [cell 23]
for pred in model.predict(train_input_fn):
  for key, value in pred.items():
    print(key, ":", value)
  break
