# estflow compat corpus: tfet_mnist_autoencoder
#
# Source:  https://github.com/GoogleCloudPlatform/tf-estimator-tutorials/blob/ed1d56c08606478f012c67ef9a1fd78d90938512/05_Autoencoding/04.0%20-%20Dimensionality%20Reduction%20-%20Autoencoding%20%2B%20Custom%20Estimator%20with%20MNIST.ipynb
#          GoogleCloudPlatform/tf-estimator-tutorials @ ed1d56c08606 (last changed in 4fe42eb3508a),
#          '04.0 - Dimensionality Reduction - Autoencoding + Custom Estimator with MNIST', code
#          cells in order
# License: Apache License 2.0 (the repository's LICENSE)
# What:    Image autoencoder custom model_fn (unsupervised: labels are the images): a
#          numeric_column of shape (784,) through tf.feature_column.input_layer, Gaussian noise +
#          tf.layers.dropout, dense encoder/decoder with kernel regularizers,
#          tf.losses.mean_squared_error + tf.losses.get_regularization_loss(),
#          tf.metrics.root_mean_squared_error, PredictOutput; numpy_input_fn built inside a
#          generator, RunConfig(save_checkpoints_steps, keep_checkpoint_max, tf_random_seed), a
#          params object, train_and_evaluate with a LatestExporter (placeholder serving_input_fn).
# Changes (for TF 2.15 + tensorflow-estimator 2.15, offline, fast; each line marked `# corpus:`):
#   - `import tensorflow as tf` -> `import tensorflow.compat.v1 as tf` (TF 1.x-era code)
#   - tf.contrib.layers.l2_regularizer(scale) -> its body (`scale * tf.nn.l2_loss(weights)`);
#     tf.contrib.layers.stack(layer=tf.contrib.layers.fully_connected, stack_args=units, ...) ->
#     a loop of tf.layers.dense(units, relu, kernel_regularizer=...) (the regularization losses
#     go to the same collection tf.losses.get_regularization_loss() reads);
#     tf.contrib.training.HParams(...) -> types.SimpleNamespace(...); tf.contrib is gone from TF 2
#   - FLAGS.max_steps 10000 -> 300
#   - cells 15 (tf.contrib.predictor.from_saved_model, gone) and 16 (the plot of its output)
#     left out
# Data:    tensorflow.examples.tutorials.mnist.input_data.read_data_sets (gone from TF 2), served
#          by tests/compat/harness.py over the corpus's small synthetic MNIST (640 train images;
#          validation = the 160 test images)
#
# Everything below is the published code, cell by cell (a `# [cell N]` line marks each cell),
# but for the lines marked `# corpus:`.

# [cell 0]
import os
import matplotlib.pyplot as plt
import numpy as np
import shutil
import tensorflow.compat.v1 as tf  # corpus: TF 1 code
import types  # corpus: for SimpleNamespace (HParams)

from tensorflow.examples.tutorials.mnist import input_data
from tensorflow.python.feature_column import feature_column

print(tf.__version__)

# [cell 2]
class FLAGS():
  pass

FLAGS.model_dir = './trained_models'
FLAGS.data_dir = './mnist_data'
FLAGS.model_name = 'auto-encoder-03'
FLAGS.batch_size = 100
FLAGS.encoder_hidden_units = [50]
FLAGS.learning_rate = 0.01
FLAGS.l2_reg = 0.0001
FLAGS.noise_level = 0.0
FLAGS.dropout_rate = 0.1
FLAGS.resume_training = False
FLAGS.max_steps = 300  # corpus: 10000
FLAGS.eval_steps = 100

# [cell 3]
mnist = input_data.read_data_sets(FLAGS.data_dir, one_hot=True)

# [cell 5]
def generate_input_fn(mnist_data,
                      mode=tf.estimator.ModeKeys.EVAL,
                      batch_size=1):
  
  def input_fn():
    if mode == tf.estimator.ModeKeys.EVAL:
      images = mnist.validation.images
      labels = images
    elif mode == tf.estimator.ModeKeys.TRAIN:
      images = mnist.train.images
      labels = images
    else:
      assert(False)
      
    is_shuffle = (mode == tf.estimator.ModeKeys.TRAIN)

    return tf.estimator.inputs.numpy_input_fn(
      batch_size=batch_size,
      shuffle=is_shuffle,
      x={'images': images},
      y=labels)
  
  return input_fn()

# [cell 7]
def get_feature_columns():
  feature_columns = {
    'images': tf.feature_column.numeric_column('images', (784,))
  }
  return feature_columns

# [cell 9]
def get_estimator(run_config, hparams):
  def _model_fn(features, labels, mode, params):
    encoder_hidden_units = params.encoder_hidden_units
    decoder_hidden_units = encoder_hidden_units

    # Remove a middle unit if length of encoder hidden units exceeds 1.
    if len(encoder_hidden_units) > 1:
      decoder_hidden_units.reverse()
      decoder_hidden_units.pop(0)

    output_layer_size = 784

    # corpus: tf.contrib.layers.l2_regularizer(scale=params.l2_reg) -> its body (scale * l2_loss)
    l2_regularizer = lambda weights: params.l2_reg * tf.nn.l2_loss(weights)  # corpus

    is_training = (mode == tf.estimator.ModeKeys.TRAIN)

    with tf.name_scope('input'):
      feature_columns = list(get_feature_columns().values())
      input_layer = tf.feature_column.input_layer(
        features=features, feature_columns=feature_columns)

    with tf.name_scope('noisy_input'):
      # Adding Gaussian Noise to input layer
      noisy_input_layer = input_layer + (
        params.noise_level * tf.random_normal(tf.shape(input_layer)))
      # Dropout layer
      dropout_layer = tf.layers.dropout(
        inputs=noisy_input_layer, rate=params.dropout_rate, training=is_training)

    with tf.name_scope('encoder'):
      # Encoder layers stack
      # corpus: tf.contrib.layers.stack(inputs=dropout_layer,
      # layer=tf.contrib.layers.fully_connected, stack_args=encoder_hidden_units,
      # weights_regularizer=l2_regularizer, activation_fn=tf.nn.relu) -> one tf.layers.dense per unit count
      encoding_hidden_layers = dropout_layer  # corpus
      for units in encoder_hidden_units:  # corpus
        encoding_hidden_layers = tf.layers.dense(  # corpus
          encoding_hidden_layers, units, activation=tf.nn.relu,  # corpus
          kernel_regularizer=l2_regularizer)  # corpus

    with tf.name_scope('decoder'):
      # Decoder layers stack
      # corpus: tf.contrib.layers.stack(inputs=encoding_hidden_layers, ..., stack_args=decoder_hidden_units,
      # ...) -> as above
      decoding_hidden_layers = encoding_hidden_layers  # corpus
      for units in decoder_hidden_units:  # corpus
        decoding_hidden_layers = tf.layers.dense(  # corpus
          decoding_hidden_layers, units, activation=tf.nn.relu,  # corpus
          kernel_regularizer=l2_regularizer)  # corpus

      # Output (reconstructured) layer
      output_layer = tf.layers.dense(inputs=decoding_hidden_layers,
                                     units=output_layer_size,
                                     activation=None)

      # Encoding output (i.e., extracted features) reshaped
      encoding_output = tf.squeeze(encoding_hidden_layers)

      # Reconstruction output reshaped (for loss calculation)
      reconstruction_output = tf.squeeze(output_layer)

    # Provide an estimator spec for `ModeKeys.PREDICT`.
    if mode == tf.estimator.ModeKeys.PREDICT:
      # Convert predicted_indices back into strings.
      predictions = {
        'encoding': encoding_output,
        'reconstruction': reconstruction_output,
      }
      export_outputs = {
        'predict': tf.estimator.export.PredictOutput(predictions)
      }
      # Provide an estimator spec for `ModeKeys.PREDICT` modes.
      return tf.estimator.EstimatorSpec(
        mode, predictions=predictions, export_outputs=export_outputs)

    with tf.name_scope('loss'):
      # Define loss based on reconstruction and regularization.
      loss = tf.losses.mean_squared_error(tf.squeeze(input_layer),
                                          reconstruction_output)
      loss = loss + tf.losses.get_regularization_loss()

    # Create optimizer
    optimizer = tf.train.AdamOptimizer(params.learning_rate)

    # Create training operation
    train_op = optimizer.minimize(loss=loss,
                                  global_step=tf.train.get_global_step())

    # Calculate root mean squared error as additional metric.
    eval_metric_ops = {
      'rmse': tf.metrics.root_mean_squared_error(tf.squeeze(input_layer),
                                                 reconstruction_output)
    }

    # Provide an estimator spec for `ModeKeys.EVAL` and `ModeKeys.TRAIN` modes.
    estimator_spec = tf.estimator.EstimatorSpec(mode=mode,
                                                loss=loss,
                                                train_op=train_op,
                                                eval_metric_ops=eval_metric_ops)
    return estimator_spec
  
  return tf.estimator.Estimator(model_fn=_model_fn, params=hparams, config=run_config)

# [cell 11]
def serving_input_fn():
  receiver_tensor = {'images': tf.placeholder(shape=[None, 784], dtype=tf.float32)}
  features = receiver_tensor
  return tf.estimator.export.ServingInputReceiver(features, receiver_tensor)

# [cell 13]
run_config = tf.estimator.RunConfig(
  model_dir=os.path.join(FLAGS.model_dir, FLAGS.model_name),
  save_checkpoints_steps=1000,
  #save_checkpoints_secs=None,
  keep_checkpoint_max=5,
  tf_random_seed=19851211
)

hparams = types.SimpleNamespace(  # corpus: tf.contrib.training.HParams(
  batch_size=FLAGS.batch_size,
  encoder_hidden_units=FLAGS.encoder_hidden_units,
  learning_rate=FLAGS.learning_rate,
  l2_reg=FLAGS.l2_reg,
  noise_level=FLAGS.noise_level,
  dropout_rate=FLAGS.dropout_rate)

estimator = get_estimator(run_config, hparams)

train_spec = tf.estimator.TrainSpec(
  input_fn=generate_input_fn(mnist,
                             mode=tf.estimator.ModeKeys.TRAIN,
                             batch_size=FLAGS.batch_size),
  max_steps=FLAGS.max_steps, hooks=None)

exporter = tf.estimator.LatestExporter(
  name='Servo',
  serving_input_receiver_fn=serving_input_fn,
  exports_to_keep=5)

eval_spec = tf.estimator.EvalSpec(
  input_fn=generate_input_fn(mnist,
                             mode=tf.estimator.ModeKeys.TRAIN,
                             batch_size=FLAGS.batch_size),
  steps=FLAGS.eval_steps, exporters=exporter)

if not FLAGS.resume_training:
  print('Removing previous artifacts...')
  shutil.rmtree(os.path.join(FLAGS.model_dir, FLAGS.model_name), ignore_errors=True)
  
tf.estimator.train_and_evaluate(estimator, train_spec, eval_spec)

# [cell 15] left out  # corpus: see the header

# [cell 16] left out  # corpus: see the header
