# estflow compat corpus: kfto_keras_model_to_estimator
#
# Source:  https://github.com/kubeflow/training-operator/blob/e1505acfa92e6be287ff2f6af41926bf61119902/examples/tensorflow/distribution_strategy/estimator-API/keras_model_to_estimator.py
#          kubeflow/training-operator (formerly tf-operator) @ e1505acfa92e (the last commit
#          with the estimator-API example, removed in ec176e39), whole file
# License: Apache License 2.0 (the repository's LICENSE and the file's header)
# What:    the TFJob distribution-strategy example: a Keras Sequential compiled with a TF 1
#          GradientDescentOptimizer, keras.backend.set_learning_phase, model_to_estimator
#          with RunConfig(train_distribute=multi-worker, eval_distribute=mirrored),
#          train_and_evaluate with TrainSpec/EvalSpec and no max_steps (the input's end).
# Changes (for TF 2.15 + tensorflow-estimator 2.15, offline):
#   - `import tensorflow as tf` -> `import tensorflow.compat.v1 as tf` (TF 1 code)
#   - `RunConfig(experimental_distribute=tf.contrib.distribute.DistributeConfig(
#     train_distribute=CollectiveAllReduceStrategy(num_gpus_per_worker=0),
#     eval_distribute=MirroredStrategy(num_gpus_per_worker=0)))` -> `RunConfig(
#     train_distribute=tf.distribute.experimental.MultiWorkerMirroredStrategy(),
#     eval_distribute=tf.distribute.MirroredStrategy())` (tf.contrib is gone; these are its
#     TF 2.15 names, CPU only as num_gpus_per_worker=0 was)
#   - `dataset.repeat(100)` -> `dataset.repeat(5)` (run time: 160 steps, not 3200)
#   - the model_dir argument (the TFJob's command line) given in `tf.app.run(argv=...)`
# corpus: fresh-dir /tmp/estflow-compat-kfto/
#
# Everything below is the published file.

# Copyright 2018 The Kubeflow Authors. All Rights Reserved.
#
# Licensed under the Apache License, Version 2.0 (the "License");
# you may not use this file except in compliance with the License.
# You may obtain a copy of the License at
#
#     http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS,
# WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
# See the License for the specific language governing permissions and
# limitations under the License.
# ==============================================================================
"""An example of training Keras model with multi-worker strategies."""
from __future__ import absolute_import, division, print_function

import sys

import numpy as np
import tensorflow.compat.v1 as tf


def input_fn():
    x = np.random.random((1024, 10))
    y = np.random.randint(2, size=(1024, 1))
    x = tf.cast(x, tf.float32)
    dataset = tf.data.Dataset.from_tensor_slices((x, y))
    dataset = dataset.repeat(5)
    dataset = dataset.batch(32)
    return dataset


def main(args):
    if len(args) < 2:
        print(
            "You must specify model_dir for checkpoints such as"
            " /tmp/tfkeras_example/."
        )
        return

    model_dir = args[1]
    print("Using %s to store checkpoints." % model_dir)

    # Define a Keras Model.
    model = tf.keras.Sequential()
    model.add(tf.keras.layers.Dense(16, activation="relu", input_shape=(10,)))
    model.add(tf.keras.layers.Dense(1, activation="sigmoid"))

    # Compile the model.
    optimizer = tf.train.GradientDescentOptimizer(0.2)
    model.compile(loss="binary_crossentropy", optimizer=optimizer)
    model.summary()
    tf.keras.backend.set_learning_phase(True)

    # Define DistributionStrategies and convert the Keras Model to an
    # Estimator that utilizes these DistributionStrateges.
    # Evaluator is a single worker, so using MirroredStrategy.
    config = tf.estimator.RunConfig(
        train_distribute=tf.distribute.experimental.MultiWorkerMirroredStrategy(),
        eval_distribute=tf.distribute.MirroredStrategy(),
    )
    keras_estimator = tf.keras.estimator.model_to_estimator(
        keras_model=model, config=config, model_dir=model_dir
    )

    # Train and evaluate the model. Evaluation will be skipped if there is not an
    # "evaluator" job in the cluster.
    tf.estimator.train_and_evaluate(
        keras_estimator,
        train_spec=tf.estimator.TrainSpec(input_fn=input_fn),
        eval_spec=tf.estimator.EvalSpec(input_fn=input_fn),
    )


if __name__ == "__main__":
    tf.logging.set_verbosity(tf.logging.INFO)
    tf.app.run(argv=sys.argv + ["/tmp/estflow-compat-kfto/"])
