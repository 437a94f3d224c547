"""A scikit-learn stand-in for the TF 1-era corpus programs (neither venv has scikit-learn).

``harness.py`` installs it in both frameworks' runs, so the 2.15 figures and estflow's see the
same data: ``datasets.load_iris`` (the 150 rows of ``data/iris_{training,test}.csv``),
``model_selection.train_test_split`` (a seeded permutation, like scikit-learn's shuffle split),
``metrics.accuracy_score`` / ``mean_squared_error`` / ``mean_absolute_error`` / ``log_loss``
(each result also handed to ``record`` when one is given) and ``preprocessing.StandardScaler``.
"""

from __future__ import annotations

import os
import sys
import types


def install(data_dir: str, np, record=None) -> None:
    """Register ``sklearn`` and its submodules in ``sys.modules``."""
    root = types.ModuleType("sklearn")
    modules = {name: types.ModuleType(f"sklearn.{name}")
               for name in ("datasets", "model_selection", "metrics", "preprocessing")}

    def load_iris():
        rows = []
        for file in ("iris_training.csv", "iris_test.csv"):
            with open(os.path.join(data_dir, file)) as f:
                rows += [line.strip().split(",") for line in f.readlines()[1:] if line.strip()]
        data = np.array([[float(v) for v in r[:4]] for r in rows], np.float64)
        target = np.array([int(r[4]) for r in rows], np.int64)
        return types.SimpleNamespace(data=data, target=target)

    def train_test_split(*arrays, test_size=0.25, random_state=None, **kwargs):
        n = len(arrays[0])
        n_test = int(np.ceil(test_size * n)) if isinstance(test_size, float) else int(test_size)
        order = np.random.RandomState(random_state).permutation(n)
        test, train = order[:n_test], order[n_test:]
        out = []
        for a in arrays:
            a = np.asarray(a)
            out += [a[train], a[test]]
        return out

    class StandardScaler:
        def fit(self, x):
            self.mean_, self.scale_ = np.mean(x, 0), np.std(x, 0) + 1e-12
            return self

        def transform(self, x):
            return (np.asarray(x) - self.mean_) / self.scale_

        def fit_transform(self, x):
            return self.fit(x).transform(x)

    modules["datasets"].load_iris = load_iris
    modules["model_selection"].train_test_split = train_test_split
    def recorded(function):
        def metric(*args, **kwargs):
            value = function(*args, **kwargs)
            if record is not None:
                record(function.__name__, value)
            return value

        return metric

    def accuracy_score(y, p):
        return float(np.mean(np.asarray(y) == np.asarray(p)))

    def mean_squared_error(y, p):
        return float(np.mean((np.asarray(y, float).ravel() - np.asarray(p, float).ravel()) ** 2))

    def mean_absolute_error(y, p):
        return float(np.mean(np.abs(np.asarray(y, float).ravel() - np.asarray(p, float).ravel())))

    def log_loss(y, p, eps=1e-15):
        """scikit-learn's: labels 0..k-1 (or binary), p one row of probabilities per example
        (or the positive class's probability); rows renormalised after clipping."""
        y = np.asarray(y).ravel().astype(int)
        p = np.clip(np.asarray(p, float), eps, 1 - eps)
        if p.ndim == 1 or p.shape[1] == 1:
            p = p.reshape(-1)
            p = np.stack([1 - p, p], axis=1)
        p = p / p.sum(axis=1, keepdims=True)
        return float(-np.mean(np.log(p[np.arange(len(y)), y])))

    for function in (accuracy_score, mean_squared_error, mean_absolute_error, log_loss):
        setattr(modules["metrics"], function.__name__, recorded(function))
    modules["preprocessing"].StandardScaler = StandardScaler
    sys.modules["sklearn"] = root
    for name, module in modules.items():
        setattr(root, name, module)
        sys.modules[module.__name__] = module
