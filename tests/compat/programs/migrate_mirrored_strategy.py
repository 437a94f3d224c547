# estflow compat corpus: migrate_mirrored_strategy
#
# Source:  https://github.com/tensorflow/docs/blob/7c3650212740204359d4ceae481abc79345541be/site/en/guide/migrate/mirrored_strategy.ipynb
#          tensorflow/docs @ 7c3650212740, code cells 6, 7, 10, in order, verbatim
# License: Apache License 2.0 (Copyright The TensorFlow Authors; the notebook's license cell and
#          tensorflow/docs' LICENSE)
# What:    Migration guide 'Single-worker, multiple-GPU training', TF1 part: custom model_fn under
#          tf1.distribute.MirroredStrategy (train_distribute + eval_distribute), train_and_evaluate.
# Omitted: the TF2/Keras cells
# Data:    none
#
# Everything below is the published code, cell by cell (a `# [cell N]` line marks each cell).

# [cell 6]
import tensorflow as tf
import tensorflow.compat.v1 as tf1

# [cell 7]
features = [[1., 1.5], [2., 2.5], [3., 3.5]]
labels = [[0.3], [0.5], [0.7]]
eval_features = [[4., 4.5], [5., 5.5], [6., 6.5]]
eval_labels = [[0.8], [0.9], [1.]]

# [cell 10]
def _input_fn():
  return tf1.data.Dataset.from_tensor_slices((features, labels)).batch(1)

def _eval_input_fn():
  return tf1.data.Dataset.from_tensor_slices(
      (eval_features, eval_labels)).batch(1)

def _model_fn(features, labels, mode):
  logits = tf1.layers.Dense(1)(features)
  loss = tf1.losses.mean_squared_error(labels=labels, predictions=logits)
  optimizer = tf1.train.AdagradOptimizer(0.05)
  train_op = optimizer.minimize(loss, global_step=tf1.train.get_global_step())
  return tf1.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)

strategy = tf1.distribute.MirroredStrategy()
config = tf1.estimator.RunConfig(
    train_distribute=strategy, eval_distribute=strategy)
estimator = tf1.estimator.Estimator(model_fn=_model_fn, config=config)

train_spec = tf1.estimator.TrainSpec(input_fn=_input_fn)
eval_spec = tf1.estimator.EvalSpec(input_fn=_eval_input_fn)
tf1.estimator.train_and_evaluate(estimator, train_spec, eval_spec)
