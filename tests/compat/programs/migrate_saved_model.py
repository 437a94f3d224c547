# estflow compat corpus: migrate_saved_model
#
# Source:  https://github.com/tensorflow/docs/blob/7c3650212740204359d4ceae481abc79345541be/site/en/guide/migrate/saved_model.ipynb
#          tensorflow/docs @ 7c3650212740, code cells 5, 14, in order, verbatim
# License: Apache License 2.0 (Copyright The TensorFlow Authors; the notebook's license cell and
#          tensorflow/docs' LICENSE)
# What:    Migration guide 'SavedModel', Estimator part: model_fn with
#          train_op=global_step.assign_add(1), export_outputs PredictOutput,
#          build_raw_serving_input_receiver_fn, export_saved_model.
# Omitted: the Session/SavedModelBuilder/TF2 cells and the `!rm`/`!saved_model_cli` lines
# Data:    none
#
# Everything below is the published code, cell by cell (a `# [cell N]` line marks each cell).

# [cell 5]
import tensorflow as tf
import tensorflow.compat.v1 as tf1
import shutil

def remove_dir(path):
  try:
    shutil.rmtree(path)
  except:
    pass

def add_two(input):
  return input + 2

# [cell 14]
def model_fn(features, labels, mode):
  output = add_two(features['input'])
  step = tf1.train.get_global_step()
  return tf.estimator.EstimatorSpec(
      mode,
      predictions=output,
      train_op=step.assign_add(1),
      loss=tf.constant(0.),
      export_outputs={
          tf.saved_model.DEFAULT_SERVING_SIGNATURE_DEF_KEY: \
          tf.estimator.export.PredictOutput({'output': output})})
est = tf.estimator.Estimator(model_fn, 'estimator-checkpoints')

# Train for one step to create a checkpoint.
def train_fn():
  return tf.data.Dataset.from_tensors({'input': 3.})
est.train(train_fn, steps=1)

# This utility function `build_raw_serving_input_receiver_fn` takes in raw
# tensor features and builds an "input serving receiver function", which
# creates placeholder inputs to the model.
serving_input_fn = tf.estimator.export.build_raw_serving_input_receiver_fn(
    {'input': tf.constant(3.)})  # Pass in a dummy input batch.
estimator_path = est.export_saved_model('exported-estimator', serving_input_fn)

# Estimator's export_saved_model creates a time stamped directory. Move this
# to a set path so it can be inspected with `saved_model_cli` in the cell below.
import shutil
shutil.move(estimator_path, 'estimator-model')
