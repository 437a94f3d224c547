"""The boosted-trees comparison cases, shared by the reference recorder (tf.estimator 2.8.0 on
TF 2.8, ``record_boosted_trees_tf28.py``) and estflow's test (``test_boosted_trees.py``).

Stdlib + NumPy only (it runs under both interpreters). A case is a dict: ``kind``
("classifier"/"regressor"), ``columns`` (declarative: ``("numeric", key)``,
``("bucketized", key, boundaries)``, ``("indicator", key, vocabulary)``), ``params`` (the
Estimator's keyword arguments), ``batch_size``, ``max_steps`` (tf.estimator's count: tree
growing steps, the quantile batches excluded), ``train``/``eval`` (features, labels).
"""

from __future__ import annotations

import csv
import os

import numpy as np

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "compat",
                    "data")

TITANIC_CATEGORICAL = ("sex", "n_siblings_spouses", "parch", "class", "deck", "embark_town",
                       "alone")
TITANIC_NUMERIC = ("age", "fare")


def _titanic(name: str):
    with open(os.path.join(DATA, f"titanic_{name}.csv"), newline="") as f:
        rows = list(csv.DictReader(f))
    features = {k: np.array([r[k] for r in rows]) for k in TITANIC_CATEGORICAL}
    features.update({k: np.array([float(r[k]) for r in rows], np.float32)
                     for k in TITANIC_NUMERIC})
    labels = np.array([int(r["survived"]) for r in rows], np.int64)
    return features, labels


def _iris(name: str):
    with open(os.path.join(DATA, f"iris_{name}.csv"), newline="") as f:
        rows = list(csv.reader(f))[1:]
    values = np.array([[float(v) for v in r[:4]] for r in rows], np.float32)
    keys = ("sepal_length", "sepal_width", "petal_length", "petal_width")
    return ({k: values[:, i] for i, k in enumerate(keys)},
            np.array([int(r[4]) for r in rows], np.int64))


def _synthetic(n: int, seed: int):
    r = np.random.RandomState(seed)
    x = r.uniform(-2, 2, size=(n, 3)).astype(np.float32)
    y = np.sin(x[:, 0]) + 0.5 * x[:, 1] ** 2 - x[:, 2] + 0.1 * r.randn(n)
    return {f"x{i}": x[:, i] for i in range(3)}, y.astype(np.float32)


def cases() -> dict[str, dict]:
    train, evals = _titanic("train"), _titanic("eval")
    vocab = {k: sorted(set(train[0][k].tolist())) for k in TITANIC_CATEGORICAL}
    indicators = [("indicator", k, vocab[k]) for k in TITANIC_CATEGORICAL]
    iris_train, iris_eval = _iris("training"), _iris("test")
    return {
        # the TF Boosted Trees tutorial's setup: whole dataset per batch, numeric columns
        # through the quantile sketch
        "titanic_numeric": {
            "kind": "classifier", "train": train, "eval": evals, "batch_size": 627,
            "max_steps": 100,
            "columns": indicators + [("numeric", k) for k in TITANIC_NUMERIC],
            "params": {"n_batches_per_layer": 1},
        },
        # bucketized columns, two batches per layer, bias centering, post pruning, l2
        "titanic_bucketized": {
            "kind": "classifier", "train": train, "eval": evals, "batch_size": 314,
            "max_steps": 80,
            "columns": indicators + [
                ("bucketized", "age", [5.0, 12.0, 18.0, 25.0, 30.0, 35.0, 40.0, 50.0, 60.0]),
                ("bucketized", "fare", [7.9, 8.1, 10.0, 14.5, 26.0, 31.0, 52.0, 80.0])],
            "params": {"n_batches_per_layer": 2, "n_trees": 20, "max_depth": 4,
                       "center_bias": True, "l2_regularization": 0.01,
                       "tree_complexity": 0.001, "pruning_mode": "post"},
        },
        # multi-class: full hessian
        "iris_multiclass": {
            "kind": "classifier", "train": iris_train, "eval": iris_eval, "batch_size": 120,
            "max_steps": 40,
            "columns": [("numeric", k) for k in sorted(iris_train[0])],
            "params": {"n_batches_per_layer": 1, "n_classes": 3, "max_depth": 4},
        },
        "synthetic_regression": {
            "kind": "regressor", "train": _synthetic(600, 0), "eval": _synthetic(200, 1),
            "batch_size": 600, "max_steps": 50,
            "columns": [("numeric", f"x{i}") for i in range(3)],
            "params": {"n_batches_per_layer": 1, "max_depth": 4, "learning_rate": 0.2,
                       "l2_regularization": 0.01, "pruning_mode": "pre",
                       "tree_complexity": 0.0001},
        },
    }


def has_numeric(case: dict) -> bool:
    return any(col[0] == "numeric" for col in case["columns"])
