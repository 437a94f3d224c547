# estflow compat corpus: tutorial_keras_model_to_estimator
#
# Source:  https://github.com/tensorflow/docs/blob/7c3650212740204359d4ceae481abc79345541be/site/en/tutorials/estimator/keras_model_to_estimator.ipynb
#          tensorflow/docs @ 7c3650212740, code cells 7, 10, 12, 14, 16, 18, 20, in order, verbatim
# License: Apache License 2.0 (Copyright The TensorFlow Authors; the notebook's license cell and
#          tensorflow/docs' LICENSE)
# What:    Keras model to Estimator tutorial: model_to_estimator on a Sequential model, iris.
# Omitted: none
# Data:    tfds.load('iris') (tensorflow_datasets, replaced by the harness's local loader); served by
#          tests/compat/harness.py from tests/compat/data/ (the program text is unchanged)
#
# Everything below is the published code, cell by cell (a `# [cell N]` line marks each cell).

# [cell 7]
import tensorflow as tf

import numpy as np
import tensorflow_datasets as tfds

# [cell 10]
model = tf.keras.models.Sequential([
    tf.keras.layers.Dense(16, activation='relu', input_shape=(4,)),
    tf.keras.layers.Dropout(0.2),
    tf.keras.layers.Dense(3)
])

# [cell 12]
model.compile(loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
              optimizer='adam')
model.summary()

# [cell 14]
def input_fn():
  split = tfds.Split.TRAIN
  dataset = tfds.load('iris', split=split, as_supervised=True)
  dataset = dataset.map(lambda features, labels: ({'dense_input':features}, labels))
  dataset = dataset.batch(32).repeat()
  return dataset

# [cell 16]
for features_batch, labels_batch in input_fn().take(1):
  print(features_batch)
  print(labels_batch)

# [cell 18]
import tempfile
model_dir = tempfile.mkdtemp()
keras_estimator = tf.keras.estimator.model_to_estimator(
    keras_model=model, model_dir=model_dir)

# [cell 20]
keras_estimator.train(input_fn=input_fn, steps=500)
eval_result = keras_estimator.evaluate(input_fn=input_fn, steps=10)
print('Eval result: {}'.format(eval_result))
