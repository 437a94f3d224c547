"""The unscaled wide & deep regressor case (issue 23), shared by the recording script (TF 2.15 +
tensorflow-estimator 2.15, ``record_wide_deep_regressor_tf215.py``) and the test on estflow
(``test_wide_deep_regressor_tf215.py``). NumPy only: it imports in both environments.

The compat corpus's babyweight program in small: ``DNNLinearCombinedRegressor`` with its
default optimizers (DNN Adagrad 0.001, linear FTRL ``min(0.005, 1/sqrt(4))``), the unscaled
numeric ``mother_age`` / ``gestation_weeks`` (13-50, 20-47) in the DNN with an embedding (3) of
the crossed bucketized and vocabulary columns, those four columns in the linear part; features
and labels of rank 1 (``[batch]``, as ``decode_csv`` gives them). Every trained variable starts
from :func:`initial_weights` (NumPy, fixed seed) in both frameworks.
"""

from __future__ import annotations

import numpy as np

N_TRAIN, BATCH = 600, 128
HIDDEN = (16, 8)
HASH_BUCKETS, EMBEDDING_DIM = 500, 3
# evaluation points: global steps after 1, 10 and 60 steps of training
STEPS = (1, 10, 60)
IS_MALE = ("True", "False", "Unknown")
PLURALITY = ("Single(1)", "Twins(2)", "Triplets(3)", "Quadruplets(4)", "Quintuplets(5)",
             "Multiple(2+)")
AGE_BOUNDARIES = list(range(15, 45))
WEEKS_BOUNDARIES = list(range(17, 47))
CROSSED = "gestation_weeks_bucketized_X_is_male_X_mother_age_bucketized_X_plurality"
EMBEDDING = ("dnn/input_from_feature_columns/input_layer/"
             f"{CROSSED}_embedding/embedding_weights")
DNN_INPUT_WIDTH = EMBEDDING_DIM + 2  # gestation_weeks, the embedding, mother_age (name order)


def data(seed: int = 0) -> tuple[dict, np.ndarray]:
    """(features, labels): the corpus program's synthetic births, rank 1."""
    r = np.random.RandomState(seed)
    male = r.choice(IS_MALE, N_TRAIN, p=[0.45, 0.45, 0.1])
    plurality = r.choice(4, N_TRAIN, p=[0.9, 0.06, 0.01, 0.03])
    age = np.clip(r.normal(28, 6, N_TRAIN), 13, 50).astype(int)
    weeks = np.clip(r.normal(39 - 2.5 * np.minimum(plurality, 2), 2), 20, 47).round(1)
    weight = np.maximum(0.5, 7.3 + 0.35 * (weeks - 39) - 1.3 * np.minimum(plurality, 2)
                        + 0.25 * (male == "True") + r.normal(0, 1.0, N_TRAIN))
    names = np.array(["Single(1)", "Twins(2)", "Triplets(3)", "Multiple(2+)"])
    features = {"is_male": male.astype(bytes), "plurality": names[plurality].astype(bytes),
                "mother_age": age.astype("float32"), "gestation_weeks": weeks.astype("float32")}
    return features, weight.astype("float32")


def initial_weights(seed: int = 1) -> dict[str, np.ndarray]:
    """By tf.estimator 2.15's names: Glorot-uniform DNN kernels, the embedding drawn from a
    normal of stddev 1/sqrt(dimension) truncated at two stddevs, zero biases and linear
    weights."""
    r = np.random.RandomState(seed)
    widths = (DNN_INPUT_WIDTH,) + HIDDEN + (1,)
    weights = {}
    for i, (fan_in, fan_out) in enumerate(zip(widths[:-1], widths[1:], strict=True)):
        name = f"dnn/hiddenlayer_{i}" if i < len(HIDDEN) else "dnn/logits"
        limit = np.sqrt(6.0 / (fan_in + fan_out))
        weights[f"{name}/kernel"] = r.uniform(-limit, limit, (fan_in, fan_out)).astype("float32")
        weights[f"{name}/bias"] = np.zeros(fan_out, "float32")
    stddev = 1.0 / np.sqrt(EMBEDDING_DIM)
    weights[EMBEDDING] = np.clip(r.normal(0, stddev, (HASH_BUCKETS, EMBEDDING_DIM)),
                                 -2 * stddev, 2 * stddev).astype("float32")
    return weights
