"""What Keras a user's model_fn gets inside the pipeline's train step: the same as in a plain
``python program.py`` (Keras 3 with TF 2.21), although the step imports tensorflow_transform,
which would switch ``tf.keras`` to Keras 2 for the process (``TF_USE_LEGACY_KERAS=1``).

The model_fn records the facts a program sees (what ``tf.keras`` is, the Keras versions, the
module of a ``tf.keras.layers.Dense`` and of an optimizer), once in a plain process and once
inside ``python -m estflow.components.train`` on a real tf.Transform output; they must match.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import tensorflow as tf

import estflow.dsl as ef
from estflow.estimator import EstimatorSpec
from estflow.estimator import ModeKeys
from tests.components import _train_fixtures as fx

ROOT = Path(__file__).resolve().parents[2]


def facts() -> dict:
    """What a program's code sees of Keras."""
    import keras
    import tensorflow as tf

    return {"tf.keras": tf.keras.__name__,
            "tf.keras version": getattr(tf.keras, "__version__", None),
            "keras version": keras.__version__,
            "Dense": type(tf.keras.layers.Dense(1)).__module__,
            "SGD": type(tf.keras.optimizers.SGD(0.1)).__module__}


def keras_facts_model_fn(features, labels, mode, params):
    """A CustomModel that writes :func:`facts` to ``params['facts']`` and trains one Dense."""
    Path(params["facts"]).write_text(json.dumps(facts()))
    net = tf.stack([features["x"], features["z"]], axis=1)
    logits = tf.keras.layers.Dense(1, name="out")(net)
    predictions = {"logistic": tf.sigmoid(logits), "probabilities": tf.concat(
        [1 - tf.sigmoid(logits), tf.sigmoid(logits)], axis=1)}
    if mode == ModeKeys.PREDICT:
        return EstimatorSpec(mode, predictions=predictions)
    labels = tf.cast(tf.reshape(labels, [-1, 1]), tf.float32)
    loss = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits))
    optimizer = tf.keras.optimizers.SGD(0.1) if mode == ModeKeys.TRAIN else None
    return EstimatorSpec(mode, loss=loss, predictions=predictions, optimizer=optimizer)


def _env() -> dict:
    """A user's shell: no TF_USE_LEGACY_KERAS (tensorflow_transform sets it in this process)."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3",
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    env.pop("TF_USE_LEGACY_KERAS", None)
    return env


@pytest.fixture(scope="module")
def transformed_dir(tmp_path_factory):
    return fx.transformed(tmp_path_factory)


@pytest.mark.slow
def test_a_model_fn_gets_the_same_keras_in_the_train_step_as_in_a_plain_process(
        transformed_dir, tmp_path):
    plain = subprocess.run(
        [sys.executable, "-c", "import json; from tests.components.test_train_keras import "
         "facts; print(json.dumps(facts()))"],
        cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=300, check=True)
    in_plain = json.loads(plain.stdout.strip().splitlines()[-1])
    assert in_plain["keras version"].startswith("3."), in_plain

    recorded = tmp_path / "facts.json"
    model = ef.CustomModel(keras_facts_model_fn, params={"facts": str(recorded)})
    spec = tmp_path / "pipeline.json"
    spec.write_text(fx.pipeline(model=model).to_json())
    step = subprocess.run(
        [sys.executable, "-m", "estflow.components.train", "--spec", str(spec),
         "--transformed", str(transformed_dir), "--model", str(tmp_path / "model")],
        cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=600)
    assert step.returncode == 0, step.stderr[-3000:]
    assert json.loads(recorded.read_text()) == in_plain
