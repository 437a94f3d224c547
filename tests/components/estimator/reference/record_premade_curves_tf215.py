"""Record the premade Estimators' loss curves on TF 2.15 + tensorflow-estimator 2.15.

    /root/venv-tf215/bin/python tests/components/estimator/reference/record_premade_curves_tf215.py

(the venv of ``tests/compat/record_tf215.py``). Writes ``premade_curves_tf215.json`` next to
this file: per case of ``premade_cases.CASES``, the evaluation results after each segment of
``STEPS``, plus the date and the versions. The DNN parts start from ``initial_dnn_weights``
(warm-started from a TF 1 checkpoint of them), so the curves are those of the same model, data
and optimizer; ``test_premade_curves.py`` holds estflow's to them.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import sys
import tempfile

import numpy as np
import tensorflow as tf

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import premade_cases as cases  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "premade_curves_tf215.json")
fc = tf.feature_column
NUMERIC = [fc.numeric_column(k) for k in cases.FEATURES]
COLOR = fc.categorical_column_with_vocabulary_list("color", list(cases.COLORS))
DNN_COLUMNS = NUMERIC + [fc.indicator_column(COLOR)]
LINEAR_COLUMNS = NUMERIC + [COLOR]
OPTIMIZERS = {"SGD": tf.keras.optimizers.legacy.SGD, "Adagrad": tf.keras.optimizers.legacy.Adagrad}


def versions() -> dict:
    from importlib import metadata

    return {"python": platform.python_version(),
            **{name: metadata.version(name) for name in (
                "tensorflow", "tensorflow-estimator", "numpy")}}


def init_checkpoint(weights: dict, directory: str) -> str:
    """A TF 1 checkpoint holding ``weights`` under their names."""
    with tf.Graph().as_default():
        variables = [tf.compat.v1.Variable(value, name=name) for name, value in weights.items()]
        saver = tf.compat.v1.train.Saver(variables)
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            return saver.save(session, os.path.join(directory, "init.ckpt"))


def optimizer(spec):
    if spec is None:
        return None
    name, rate = spec
    return lambda: OPTIMIZERS[name](learning_rate=rate)


def build(case: str, model_dir: str, warm: str | None):
    cls_name, kind, options = cases.CASES[case]
    cls = getattr(tf.estimator, cls_name)
    config = tf.estimator.RunConfig(model_dir=model_dir, tf_random_seed=0)
    kwargs = {"config": config}
    if "optimizer" in options and options["optimizer"] is not None:
        kwargs["optimizer"] = optimizer(options["optimizer"])
    if "n_classes" in options:
        kwargs["n_classes"] = options["n_classes"]
    warm_start = tf.estimator.WarmStartSettings(warm, vars_to_warm_start="dnn/.*") \
        if warm else None
    if cls_name.startswith("DNNLinearCombined"):
        return cls(linear_feature_columns=LINEAR_COLUMNS, dnn_feature_columns=DNN_COLUMNS,
                   dnn_hidden_units=list(cases.HIDDEN), warm_start_from=warm_start, **kwargs)
    if cls_name.startswith("DNN"):
        return cls(list(cases.HIDDEN), DNN_COLUMNS, warm_start_from=warm_start, **kwargs)
    if cls_name.startswith("Linear"):
        return cls(LINEAR_COLUMNS, **kwargs)
    return cls(**kwargs)


def record(case: str, train_x, train_y, eval_x, eval_y) -> list[dict]:
    cls_name, kind, options = cases.CASES[case]
    units = options.get("n_classes", 2) if kind == "multi" else 1
    with tempfile.TemporaryDirectory() as tmp:
        warm = None
        initial = cases.initial_dnn_weights(units)
        if cls_name.startswith("DNN"):
            warm = init_checkpoint(initial, tmp)
        est = build(case, os.path.join(tmp, "model"), warm)

        def train_fn():
            return tf.data.Dataset.from_tensor_slices(
                (cases.inputs_of(case, train_x), train_y[kind])).repeat().batch(cases.BATCH)

        def eval_fn():
            return tf.data.Dataset.from_tensor_slices(
                (cases.inputs_of(case, eval_x), eval_y[kind])).batch(256)

        results, done = [], 0
        for step in cases.STEPS:
            est.train(train_fn, steps=step - done)
            done = step
            metrics = est.evaluate(eval_fn)
            results.append({k: float(v) for k, v in metrics.items()
                            if np.ndim(v) == 0 and k != "global_step"}
                           | {"global_step": int(metrics["global_step"])})
            if step == cases.STEPS[0] and warm:  # the warm start took: 1 step from the init
                kernel = est.get_variable_value("dnn/hiddenlayer_0/kernel")
                assert np.abs(kernel - initial["dnn/hiddenlayer_0/kernel"]).max() < 0.2
        return results


def main() -> None:
    train_x, train_y, eval_x, eval_y = cases.data()
    out = {"date": datetime.date.today().isoformat(), "versions": versions(), "curves": {}}
    for case in cases.CASES:
        out["curves"][case] = record(case, train_x, train_y, eval_x, eval_y)
        print(case, [round(r["loss"], 4) for r in out["curves"][case]], flush=True)
    with open(OUT, "w") as f:
        json.dump(out, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
