"""The premade models' training-dynamics cases, shared by the recording script (run on TF 2.15 +
tensorflow-estimator 2.15, ``record_premade_curves_tf215.py``) and the test on estflow
(``test_premade_curves.py``). NumPy only: it imports in both environments.

Every case trains one premade Estimator on the same data, from the same initial weights
(DNN kernels below, biases and linear weights zero), for ``STEPS`` with an evaluation after
each, in one ``train(steps=...)`` call per segment (each call re-reads the input from its
start, in both frameworks).
"""

from __future__ import annotations

import numpy as np

N_TRAIN, N_EVAL, N_FEATURES = 1024, 512, 6
BATCH = 64
HIDDEN = (16, 8)
# evaluation points: global steps after 0 + 1, 10, 25, 50, 100, 200 steps of training
STEPS = (1, 10, 25, 50, 100, 200)
FEATURES = tuple(f"x{i}" for i in range(N_FEATURES))
COLORS = ("red", "green", "blue")


def data(seed: int = 0) -> tuple[dict, dict, dict, dict]:
    """(train features, train labels by kind, eval features, eval labels by kind): numeric
    ``x0..x5`` (float32, [n, 1]) and ``color`` (bytes, [n, 1]); labels ``binary`` (int64),
    ``multi`` (3 classes), ``regression`` (float32)."""
    r = np.random.RandomState(seed)
    n = N_TRAIN + N_EVAL
    x = r.randn(n, N_FEATURES).astype("float32")
    color = np.array(COLORS)[r.randint(0, 3, n)]
    score = x[:, 0] + 0.5 * x[:, 1] - x[:, 2] + 0.8 * (color == "red") + 0.3 * r.randn(n)
    labels = {"binary": (score > 0.3).astype("int64"),
              "multi": np.digitize(score, [-0.5, 0.8]).astype("int64"),
              "regression": (score + 1.0).astype("float32")}
    features = {name: x[:, i:i + 1] for i, name in enumerate(FEATURES)}
    features["color"] = color.astype(bytes)[:, None]
    train = slice(0, N_TRAIN)
    test = slice(N_TRAIN, n)
    return ({k: v[train] for k, v in features.items()}, {k: v[train] for k, v in labels.items()},
            {k: v[test] for k, v in features.items()}, {k: v[test] for k, v in labels.items()})


def inputs_of(case: str, features: dict) -> dict:
    """The features a case's input_fn yields: all of them, but only ``x0`` for the baselines
    (they read no feature; tensorflow-estimator 2.15's BaselineClassifier fails with
    "iterator has not been initialized" on a dataset of several features)."""
    if CASES[case][0].startswith("Baseline"):
        return {"x0": features["x0"]}
    return features


def dnn_input_width() -> int:
    """DNN inputs: the six numeric columns and the color's indicator (3)."""
    return N_FEATURES + len(COLORS)


def initial_dnn_weights(units: int, seed: int = 1) -> dict[str, np.ndarray]:
    """Glorot-uniform kernels (NumPy, fixed seed) and zero biases of the DNN tower, by
    tf.estimator 2.15's variable names."""
    r = np.random.RandomState(seed + units)
    widths = (dnn_input_width(),) + HIDDEN + (units,)
    weights = {}
    for i, (fan_in, fan_out) in enumerate(zip(widths[:-1], widths[1:], strict=True)):
        name = f"dnn/hiddenlayer_{i}" if i < len(HIDDEN) else "dnn/logits"
        limit = np.sqrt(6.0 / (fan_in + fan_out))
        weights[f"{name}/kernel"] = r.uniform(-limit, limit, (fan_in, fan_out)).astype("float32")
        weights[f"{name}/bias"] = np.zeros(fan_out, "float32")
    return weights


# name -> (estimator class, label kind, options). Options name optimizers as
# ("Name", learning rate or None: the class's default); None: the Estimator's default.
CASES = {
    "dnn_classifier": ("DNNClassifier", "binary", {"optimizer": None}),
    "dnn_classifier_sgd": ("DNNClassifier", "binary", {"optimizer": ("SGD", 0.05)}),
    "dnn_classifier_adagrad_0.1": ("DNNClassifier", "binary", {"optimizer": ("Adagrad", 0.1)}),
    "dnn_classifier_multi": ("DNNClassifier", "multi", {"optimizer": ("Adagrad", 0.1),
                                                        "n_classes": 3}),
    "dnn_regressor": ("DNNRegressor", "regression", {"optimizer": ("Adagrad", 0.1)}),
    "linear_classifier": ("LinearClassifier", "binary", {"optimizer": None}),
    "linear_regressor": ("LinearRegressor", "regression", {"optimizer": ("SGD", 0.05)}),
    "wide_deep_classifier": ("DNNLinearCombinedClassifier", "binary", {}),
    "baseline_classifier": ("BaselineClassifier", "binary", {"optimizer": None}),
    "baseline_regressor": ("BaselineRegressor", "regression", {"optimizer": None}),
}
