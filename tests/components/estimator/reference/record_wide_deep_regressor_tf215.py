"""Record the unscaled wide & deep regressor's evaluations on TF 2.15 + tensorflow-estimator 2.15.

    /root/venv-tf215/bin/python \
        tests/components/estimator/reference/record_wide_deep_regressor_tf215.py

Writes ``wide_deep_regressor_tf215.json`` next to this file: the evaluation (on the training
rows) after each of ``STEPS``, from ``initial_weights`` (warm-started from a TF 1 checkpoint of
them), plus the date and the versions; ``test_wide_deep_regressor_tf215.py`` holds estflow's to
them.
"""

from __future__ import annotations

import datetime
import json
import os
import sys
import tempfile

import tensorflow as tf

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import wide_deep_regressor_cases as cases  # noqa: E402
from record_premade_curves_tf215 import init_checkpoint  # noqa: E402
from record_premade_curves_tf215 import versions  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "wide_deep_regressor_tf215.json")
fc = tf.feature_column


def columns():
    is_male = fc.categorical_column_with_vocabulary_list("is_male", list(cases.IS_MALE))
    plurality = fc.categorical_column_with_vocabulary_list("plurality", list(cases.PLURALITY))
    age, weeks = fc.numeric_column("mother_age"), fc.numeric_column("gestation_weeks")
    wide = [is_male, plurality, fc.bucketized_column(age, cases.AGE_BOUNDARIES),
            fc.bucketized_column(weeks, cases.WEEKS_BOUNDARIES)]
    crossed = fc.crossed_column(wide, hash_bucket_size=cases.HASH_BUCKETS)
    return wide, [age, weeks, fc.embedding_column(crossed, cases.EMBEDDING_DIM)]


def main() -> None:
    features, labels = cases.data()

    def train_fn():
        return tf.data.Dataset.from_tensor_slices((features, labels)).repeat().batch(cases.BATCH)

    def eval_fn():
        return tf.data.Dataset.from_tensor_slices((features, labels)).batch(cases.BATCH)

    with tempfile.TemporaryDirectory() as tmp:
        warm = tf.estimator.WarmStartSettings(init_checkpoint(cases.initial_weights(), tmp),
                                              vars_to_warm_start="dnn/.*")
        wide, deep = columns()
        est = tf.estimator.DNNLinearCombinedRegressor(
            os.path.join(tmp, "model"), linear_feature_columns=wide, dnn_feature_columns=deep,
            dnn_hidden_units=list(cases.HIDDEN), warm_start_from=warm,
            config=tf.estimator.RunConfig(tf_random_seed=0))
        evaluations, done = [], 0
        for step in cases.STEPS:
            est.train(train_fn, steps=step - done)
            done = step
            evaluations.append({k: float(v) for k, v in est.evaluate(eval_fn).items()})
    with open(OUT, "w") as f:
        json.dump({"recorded": datetime.date.today().isoformat(), "versions": versions(),
                   "evaluations": evaluations}, f, indent=1)
        f.write("\n")
    print(json.dumps(evaluations, indent=1))


if __name__ == "__main__":
    main()
