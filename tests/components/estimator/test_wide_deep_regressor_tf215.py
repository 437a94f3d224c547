"""The unscaled wide & deep regressor against tf.estimator 2.15 (issue 23).

The compat corpus's babyweight program (``DNNLinearCombinedRegressor``, default optimizers,
unscaled ``mother_age`` / ``gestation_weeks`` in the DNN beside an embedding of a hashed cross,
rank-1 features and labels) ended at 6.17 average loss on estflow at seed 0 against 1.49-1.75
on 2.15. From the same initial weights the two train alike: this case
(``reference/wide_deep_regressor_cases.py``, the program in small) is evaluated after 1, 10 and
60 steps in both, and ``reference/wide_deep_regressor_tf215.json`` holds 2.15's figures
(``reference/record_wide_deep_regressor_tf215.py``). A wrong loss reduction, label or logits
shape ([batch] against [batch, 1] broadcast to [batch, batch]), Adagrad or FTRL accumulator
start or epsilon, embedding-gradient handling of hashed repeats, or a cross-talk between the
two parts' optimizers moves these figures by percents; float32 rounding moves them by 1e-6.
The corpus gap is the initial draw: the same ``tf_random_seed`` draws other weights in the two
frameworks (Keras 3's seeded initializers against TF 1's graph-level seed).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import tensorflow as tf

import estflow.estimator as estimator

sys.path.insert(0, str(Path(__file__).parent / "reference"))
import wide_deep_regressor_cases as cases  # noqa: E402

REFERENCE = json.loads((Path(__file__).parent / "reference" / "wide_deep_regressor_tf215.json")
                       .read_text())
RTOL, ATOL = 1e-4, 1e-6
fc = estimator.feature_column
# the engine's variable names by position (linear part first, as the model_fn creates them)
ENGINE_NAMES = {cases.EMBEDDING: f"005_{cases.CROSSED}_embedding_weights",
                "dnn/hiddenlayer_0/kernel": "006_hiddenlayer_0_kernel",
                "dnn/hiddenlayer_0/bias": "007_hiddenlayer_0_bias",
                "dnn/hiddenlayer_1/kernel": "008_hiddenlayer_1_kernel",
                "dnn/hiddenlayer_1/bias": "009_hiddenlayer_1_bias",
                "dnn/logits/kernel": "010_logits_kernel",
                "dnn/logits/bias": "011_logits_bias"}


def _columns():
    is_male = fc.categorical_column_with_vocabulary_list("is_male", list(cases.IS_MALE))
    plurality = fc.categorical_column_with_vocabulary_list("plurality", list(cases.PLURALITY))
    age, weeks = fc.numeric_column("mother_age"), fc.numeric_column("gestation_weeks")
    wide = [is_male, plurality, fc.bucketized_column(age, cases.AGE_BOUNDARIES),
            fc.bucketized_column(weeks, cases.WEEKS_BOUNDARIES)]
    crossed = fc.crossed_column(wide, hash_bucket_size=cases.HASH_BUCKETS)
    return wide, [age, weeks, fc.embedding_column(crossed, cases.EMBEDDING_DIM)]


def _warm_start(directory: Path) -> estimator.WarmStartSettings:
    """The initial weights under the engine's names (``store/model/NNN_...``)."""
    store = tf.Module()
    store.model = {ENGINE_NAMES[name]: tf.Variable(value)
                   for name, value in cases.initial_weights().items()}
    path = tf.train.Checkpoint(store=store).write(str(directory / "init"))
    return estimator.WarmStartSettings(path, vars_to_warm_start=r"store/model/(00[5-9]|01\d)_.*")


@pytest.mark.slow
def test_unscaled_wide_deep_regressor_trains_as_tf215(tmp_path):
    features, labels = cases.data()

    def train_fn():
        return tf.data.Dataset.from_tensor_slices((features, labels)).repeat().batch(cases.BATCH)

    def eval_fn():
        return tf.data.Dataset.from_tensor_slices((features, labels)).batch(cases.BATCH)

    wide, deep = _columns()
    est = estimator.DNNLinearCombinedRegressor(
        linear_feature_columns=wide, dnn_feature_columns=deep,
        dnn_hidden_units=list(cases.HIDDEN), warm_start_from=_warm_start(tmp_path),
        config=estimator.RunConfig(model_dir=str(tmp_path / "model"), tf_random_seed=0),
        progress=lambda message: None)
    got, done = [], 0
    for step in cases.STEPS:
        est.train(train_fn, steps=step - done)
        done = step
        got.append(est.evaluate(eval_fn))
    # the warm start took: the variables are the recorded ones, not a fresh draw
    kernel = est.get_variable_value("dnn/hiddenlayer_0/kernel")
    assert abs(kernel - cases.initial_weights()["dnn/hiddenlayer_0/kernel"]).max() < 0.1
    for ours, theirs in zip(got, REFERENCE["evaluations"], strict=True):
        assert ours["global_step"] == theirs["global_step"]
        for key in ("average_loss", "loss", "prediction/mean", "label/mean"):
            assert ours[key] == pytest.approx(theirs[key], rel=RTOL, abs=ATOL), (
                theirs["global_step"], key, [round(float(r["average_loss"]), 4) for r in got],
                [round(r["average_loss"], 4) for r in REFERENCE["evaluations"]])
