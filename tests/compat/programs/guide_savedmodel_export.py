# estflow compat corpus: guide_savedmodel_export
#
# Source:  https://github.com/tensorflow/docs/blob/7c3650212740204359d4ceae481abc79345541be/site/en/guide/estimator.ipynb
#          tensorflow/docs @ 7c3650212740, code cells 8, 46, 49, 51, 52, in order, verbatim
# License: Apache License 2.0 (Copyright The TensorFlow Authors; the notebook's license cell and
#          tensorflow/docs' LICENSE)
# What:    Estimator guide, 'SavedModels from Estimators': LinearClassifier, export with
#          build_parsing_serving_input_receiver_fn, call the 'predict' signature on tf.Examples.
# Omitted: cell 7 (`!pip install`); the other sections are their own programs
# Data:    none
#
# Everything below is the published code, cell by cell (a `# [cell N]` line marks each cell).

# [cell 8]
import tempfile
import os

import tensorflow as tf
import tensorflow_datasets as tfds

# [cell 46]
input_column = tf.feature_column.numeric_column("x")

estimator = tf.estimator.LinearClassifier(feature_columns=[input_column])

def input_fn():
  return tf.data.Dataset.from_tensor_slices(
    ({"x": [1., 2., 3., 4.]}, [1, 1, 0, 0])).repeat(200).shuffle(64).batch(16)
estimator.train(input_fn)

# [cell 49]
tmpdir = tempfile.mkdtemp()

serving_input_fn = tf.estimator.export.build_parsing_serving_input_receiver_fn(
  tf.feature_column.make_parse_example_spec([input_column]))

estimator_base_path = os.path.join(tmpdir, 'from_estimator')
estimator_path = estimator.export_saved_model(estimator_base_path, serving_input_fn)

# [cell 51]
imported = tf.saved_model.load(estimator_path)

def predict(x):
  example = tf.train.Example()
  example.features.feature["x"].float_list.value.extend([x])
  return imported.signatures["predict"](
    examples=tf.constant([example.SerializeToString()]))

# [cell 52]
print(predict(1.5))
print(predict(3.5))
