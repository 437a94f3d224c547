# estflow compat corpus: handson_ann_dnn_estimator
#
# Source:  https://github.com/ageron/handson-ml/blob/b7051594afbb1d835f5e031af8664c4363878050/10_introduction_to_artificial_neural_networks.ipynb
#          ageron/handson-ml @ b7051594afbb (last changed in 7f30984876ed), the notebook of chapter
#          10 of 'Hands-On Machine Learning with Scikit-Learn and TensorFlow' (1st ed.), section
#          'FNN for MNIST / Using the Estimator API': code cells 18, 20, 21, 22, 23, 24, after the
#          imports of the setup cell 5
# License: Apache License 2.0 (the repository's LICENSE)
# What:    Book tutorial: DNNClassifier(hidden_units=[300, 100], n_classes=10) over a
#          numeric_column of shape [784], trained by numpy_input_fn(num_epochs=40, batch_size=50,
#          shuffle=True) with no steps (runs to the end of the input), evaluate, predict;
#          tf.keras.datasets.mnist.load_data.
# Changes (for TF 2.15 + tensorflow-estimator 2.15, offline, fast; each line marked `# corpus:`):
#   - `import tensorflow as tf` -> `import tensorflow.compat.v1 as tf` (the notebook selects
#     TF 1.x; tf.estimator.inputs is compat.v1 only)
#   - the validation split X_train[:5000] -> X_train[:100] (and y): the served MNIST has 640
#     training images, so 5000 would leave none to train on
#   - cell 5 (setup): only its imports are kept; the Colab `%tensorflow_version` magic, the
#     unused reset_graph, and the matplotlib / figure-saving setup are left out
#   - the notebook's other sections (perceptrons, plain TensorFlow, exercises) are left out: they
#     do not use the Estimator API
# Data:    tf.keras.datasets.mnist.load_data, served by tests/compat/harness.py: the corpus's
#          small synthetic MNIST (640 train, 160 test)
#
# Everything below is the published code, cell by cell (a `# [cell N]` line marks each cell),
# but for the lines marked `# corpus:`.

# [cell 5] (its imports; see the header)
# To support both python 2 and python 3
from __future__ import division, print_function, unicode_literals

# Common imports
import numpy as np
import os

# [cell 18]
import tensorflow.compat.v1 as tf  # corpus: TF 1 code (the notebook runs %tensorflow_version 1.x)

# [cell 20]
(X_train, y_train), (X_test, y_test) = tf.keras.datasets.mnist.load_data()
X_train = X_train.astype(np.float32).reshape(-1, 28*28) / 255.0
X_test = X_test.astype(np.float32).reshape(-1, 28*28) / 255.0
y_train = y_train.astype(np.int32)
y_test = y_test.astype(np.int32)
X_valid, X_train = X_train[:100], X_train[100:]  # corpus: 5000 (the served set has 640 images)
y_valid, y_train = y_train[:100], y_train[100:]  # corpus: 5000

# [cell 21]
feature_cols = [tf.feature_column.numeric_column("X", shape=[28 * 28])]
dnn_clf = tf.estimator.DNNClassifier(hidden_units=[300,100], n_classes=10,
                                     feature_columns=feature_cols)

input_fn = tf.estimator.inputs.numpy_input_fn(
    x={"X": X_train}, y=y_train, num_epochs=40, batch_size=50, shuffle=True)
dnn_clf.train(input_fn=input_fn)

# [cell 22]
test_input_fn = tf.estimator.inputs.numpy_input_fn(
    x={"X": X_test}, y=y_test, shuffle=False)
eval_results = dnn_clf.evaluate(input_fn=test_input_fn)

# [cell 23]
eval_results

# [cell 24]
y_pred_iter = dnn_clf.predict(input_fn=test_input_fn)
y_pred = list(y_pred_iter)
y_pred[0]
