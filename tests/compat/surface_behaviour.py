"""What tf.estimator 2.15 does beyond its names and signatures, written as a tf.estimator 2.15
program: return values and their types, the signatures an export writes, the order and batching
of the ``*_input_fn`` helpers.

``record_surface_tf215.py`` runs this module unmodified on TF 2.15.1 + tensorflow-estimator
2.15.0 and stores what it returns in ``tf215_surface.json`` (``returns``, ``exports``,
``inputs``); ``test_surface.py`` takes its text through ``estflow migrate``, as a user's
program, runs that on estflow and compares. Everything here is plain tf.estimator code; the two
drivers only read what it returns (``input_cases``' input_fns are read by the drivers: a TF 1
queue on 2.15, a ``tf.data.Dataset`` on estflow).
"""

import os
import re

import numpy as np
import pandas as pd
import tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2

# -- input_fn helpers --------------------------------------------------------------------------
ROWS = 5
BATCH_SIZES = (1, 2, 3, 5, 7)
EPOCHS = (1, 2, 3, None)
FOREVER_BATCHES = 6  # num_epochs=None: the first batches read


def frame(rows=ROWS, index=None):
    """Row i: a=i (int64), b=i/2 (float64), c="r<i>" (object), d=i is even (bool),
    e=i (float32)."""
    return pd.DataFrame({
        "a": np.arange(rows, dtype=np.int64), "b": np.arange(rows) / 2.0,
        "c": [f"r{i}" for i in range(rows)], "d": np.arange(rows) % 2 == 0,
        "e": np.arange(rows, dtype=np.float32)}, index=index)


def arrays(rows=ROWS):
    return {"a": np.arange(rows, dtype=np.int64), "b": np.arange(rows) / 2.0,
            "m": np.arange(rows * 2, dtype=np.float32).reshape(rows, 2)}


def labels(rows=ROWS):
    return 1000 + np.arange(rows, dtype=np.int64)


def input_cases():
    """{case: (input_fn, how)}: ``how`` is "exact" (every batch read, in order), "first" (the
    first FOREVER_BATCHES batches), "shuffled" (batch sizes and the rows read, sorted) or
    "shuffled first" (the sizes of the first FOREVER_BATCHES batches)."""
    cases = {}
    for batch_size in BATCH_SIZES:
        for epochs in EPOCHS:
            how = "exact" if epochs else "first"
            key = f"bs={batch_size} epochs={epochs}"
            cases["pandas " + key] = (tf.compat.v1.estimator.inputs.pandas_input_fn(
                x=frame(), y=pd.Series(labels()), batch_size=batch_size, num_epochs=epochs,
                shuffle=False), how)
            cases["numpy " + key] = (tf.compat.v1.estimator.inputs.numpy_input_fn(
                x=arrays(), y=labels(), batch_size=batch_size, num_epochs=epochs,
                shuffle=False), how)
    # the forms of x and y
    cases["pandas no y"] = (tf.compat.v1.estimator.inputs.pandas_input_fn(
        frame(), batch_size=2, shuffle=False), "exact")
    cases["pandas y DataFrame"] = (tf.compat.v1.estimator.inputs.pandas_input_fn(
        frame(), pd.DataFrame({"t": labels(), "u": labels() * 0.5}), batch_size=2,
        shuffle=False), "exact")
    cases["pandas other index"] = (tf.compat.v1.estimator.inputs.pandas_input_fn(
        frame(index=[40, 30, 20, 10, 0]),
        pd.Series(labels(), index=[40, 30, 20, 10, 0]), batch_size=2, shuffle=False), "exact")
    popped = frame()
    popped["t"] = labels()
    cases["pandas y popped"] = (tf.compat.v1.estimator.inputs.pandas_input_fn(
        x=popped, y=popped.pop("t"), batch_size=3, shuffle=False), "exact")
    cases["pandas target_column"] = (tf.compat.v1.estimator.inputs.pandas_input_fn(
        frame(), pd.Series(labels()), batch_size=2, shuffle=False, target_column="a_target"),
        "exact")
    cases["pandas defaults"] = (tf.compat.v1.estimator.inputs.pandas_input_fn(
        frame(130), pd.Series(labels(130)), shuffle=False), "exact")
    cases["numpy no y"] = (tf.compat.v1.estimator.inputs.numpy_input_fn(
        arrays(), batch_size=2, shuffle=False), "exact")
    cases["numpy x array"] = (tf.compat.v1.estimator.inputs.numpy_input_fn(
        arrays()["m"], labels(), batch_size=2, shuffle=False), "exact")
    cases["numpy y dict"] = (tf.compat.v1.estimator.inputs.numpy_input_fn(
        arrays(), {"t": labels(), "u": labels() * 0.5}, batch_size=2, shuffle=False), "exact")
    cases["numpy y 2-d"] = (tf.compat.v1.estimator.inputs.numpy_input_fn(
        arrays(), arrays()["m"], batch_size=2, shuffle=False), "exact")
    cases["numpy defaults"] = (tf.compat.v1.estimator.inputs.numpy_input_fn(
        arrays(130), labels(130), shuffle=False), "exact")
    # shuffled: TF 1 read through a RandomShuffleQueue, so only sizes and contents compare
    for epochs in (1, 3, None):
        key = f"bs=2 epochs={epochs}"
        cases["pandas shuffled " + key] = (tf.compat.v1.estimator.inputs.pandas_input_fn(
            frame(), pd.Series(labels()), batch_size=2, num_epochs=epochs, shuffle=True),
            "shuffled" if epochs else "shuffled first")
        cases["numpy shuffled " + key] = (tf.compat.v1.estimator.inputs.numpy_input_fn(
            arrays(), labels(), batch_size=2, num_epochs=epochs, shuffle=True),
            "shuffled" if epochs else "shuffled first")
    # num_epochs is per thread (2.15 warned): num_threads passes each
    cases["numpy bs=2 epochs=1 num_threads=2"] = (tf.compat.v1.estimator.inputs.numpy_input_fn(
        arrays(), labels(), batch_size=2, num_epochs=1, shuffle=False, num_threads=2),
        "shuffled")
    cases["pandas shuffled bs=2 epochs=2 num_threads=3"] = (
        tf.compat.v1.estimator.inputs.pandas_input_fn(
            frame(), pd.Series(labels()), batch_size=2, num_epochs=2, shuffle=True,
            num_threads=3), "shuffled")
    cases["pandas shuffled queue_capacity=None"] = (
        tf.compat.v1.estimator.inputs.pandas_input_fn(
            frame(), pd.Series(labels()), batch_size=2, num_epochs=2, shuffle=True,
            queue_capacity=None), "shuffled")
    return cases


def _rows(value):
    """The row numbers a batch's features or labels carry (a=i, m=[2i, 2i+1]; labels and t:
    1000+i)."""
    if value is None:
        return None
    if isinstance(value, dict):
        value = value["a"] if "a" in value else value["t"] if "t" in value else value["m"]
    value = np.asarray(value)
    if value.ndim == 2:
        return [int(v) // 2 for v in value[:, 0]]
    return [int(v) % 1000 for v in value]


def _structure(dtypes, batch):
    """{"dtype", "shape" (after the batch dimension)} of each tensor of an element."""
    if dtypes is None:
        return None
    if isinstance(dtypes, dict):
        return {k: _structure(dtypes[k], batch[k]) for k in sorted(dtypes)}
    return {"dtype": dtypes, "shape": list(np.shape(batch))[1:]}


def summarize(batches, dtypes, how, again=None):
    """What an input_fn read: ``batches`` (numpy values: a features dict or array, or a
    (features, labels) tuple, per batch), ``dtypes`` (its tensors' dtype names, in the same
    structure), ``again`` (the batches of a second call of the same input_fn)."""
    def split(element):
        return tuple(element) if isinstance(element, (tuple, list)) else (element, None)

    features, labels = split(batches[0])
    feature_dtypes, label_dtypes = split(dtypes)
    out = {"structure": {"features": _structure(feature_dtypes, features),
                         "labels": _structure(label_dtypes, labels)}}
    rows = [_rows(split(b)[0]) for b in batches]
    label_rows = [_rows(split(b)[1]) for b in batches]
    out["labels follow features"] = labels is None or rows == label_rows
    if how.startswith("shuffled"):
        out["sizes"] = [len(r) for r in rows]
        if how == "shuffled":
            out["rows, sorted"] = sorted(i for r in rows for i in r)
    else:
        out["rows"] = rows
        if again is not None:
            out["rows of a second call"] = [_rows(split(b)[0]) for b in again]
    return out


# -- a model_fn, and each kind of predictions and export_outputs ------------------------------
def _export_outputs(kind, value, probabilities, all_classes, classes):
    predict = tf.estimator.export.PredictOutput({"value": value, "classes": classes})
    classification = tf.estimator.export.ClassificationOutput(
        scores=probabilities, classes=all_classes)
    if kind == "none":
        return None
    if kind == "predict dict":
        return {"serving_default": predict}
    if kind == "predict tensor":
        return {"serving_default": tf.estimator.export.PredictOutput(value)}
    if kind == "predict under another key":
        return {"out": predict}
    if kind == "classification":
        return {"serving_default": classification}
    if kind == "classification scores":
        return {"serving_default": tf.estimator.export.ClassificationOutput(
            scores=probabilities)}
    if kind == "classification classes":
        return {"serving_default": tf.estimator.export.ClassificationOutput(classes=classes)}
    if kind == "regression":
        return {"serving_default": tf.estimator.export.RegressionOutput(value=value)}
    if kind == "regression under another key":
        return {"reg": tf.estimator.export.RegressionOutput(value=value)}
    if kind == "head":
        return {"serving_default": classification, "classification": classification,
                "predict": predict}
    if kind == "two, no serving_default":
        return {"out": predict, "reg": tf.estimator.export.RegressionOutput(value=value)}
    raise ValueError(kind)


EXPORT_KINDS = ("none", "predict dict", "predict tensor", "predict under another key",
                "classification", "classification scores", "classification classes",
                "regression", "regression under another key", "head",
                "two, no serving_default")


def model_fn(features, labels, mode, params):
    x = features["x"]
    w = tf.compat.v1.get_variable("w", [1, 1], initializer=tf.compat.v1.zeros_initializer())
    b = tf.compat.v1.get_variable("b", [1], initializer=tf.compat.v1.zeros_initializer())
    value = tf.matmul(x, w) + b
    probabilities = tf.concat([tf.sigmoid(-value), tf.sigmoid(value)], 1)
    class_ids = tf.argmax(probabilities, 1)
    names = tf.constant(["no", "yes"])
    classes = tf.gather(names, class_ids)
    all_classes = tf.tile(tf.expand_dims(names, 0), [tf.shape(x)[0], 1])
    if params["predictions"] == "dict":
        predictions = {"value": value, "class_ids": class_ids, "classes": classes}
    else:
        predictions = value
    if mode == tf.estimator.ModeKeys.PREDICT:
        return tf.estimator.EstimatorSpec(mode, predictions=predictions, export_outputs=(
            _export_outputs(params["export"], value, probabilities, all_classes, classes)))
    loss = tf.compat.v1.losses.mean_squared_error(labels, value)
    train_op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(
        loss, global_step=tf.compat.v1.train.get_global_step())
    metrics = {"mae": tf.compat.v1.metrics.mean_absolute_error(labels, value)}
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op,
                                      eval_metric_ops=metrics)


XS = np.linspace(-1, 1, 8, dtype=np.float32).reshape(8, 1)
YS = 2 * XS + 1


def train_input_fn():
    return tf.data.Dataset.from_tensor_slices(({"x": XS}, YS)).repeat().batch(4)


def eval_input_fn():
    return tf.data.Dataset.from_tensor_slices(({"x": XS}, YS)).batch(4)


def predict_input_fn():
    return tf.data.Dataset.from_tensor_slices({"x": XS}).batch(4)


def raw_receiver_fn():
    return tf.estimator.export.build_raw_serving_input_receiver_fn(
        {"x": tf.constant(XS)})()


def parsing_receiver_fn():
    return tf.estimator.export.build_parsing_serving_input_receiver_fn(
        {"x": tf.io.FixedLenFeature([1], tf.float32)})()


def single_receiver_fn():
    """A TF 1 receiver of one tensor (its signature input is named "input")."""
    x = tf.compat.v1.placeholder(tf.float32, [None, 1])
    return tf.estimator.export.ServingInputReceiver({"x": x}, x)


RECEIVERS = {"raw": raw_receiver_fn, "parsing": parsing_receiver_fn,
             "one tensor": single_receiver_fn}


def type_name(value):
    kind = type(value)
    return kind.__name__ if kind.__module__ == "builtins" else \
        f"{kind.__module__}.{kind.__name__}"


def describe(value, owner=None):
    """A value's type, and for containers and arrays what they hold, as JSON."""
    if owner is not None and value is owner:
        return "the Estimator itself"
    if isinstance(value, dict):
        return {"type": "dict", "items": {str(k): describe(v) for k, v in value.items()}}
    if isinstance(value, (list, tuple)):
        return {"type": type_name(value), "items": [describe(v) for v in value]}
    if isinstance(value, np.ndarray):
        return {"type": "numpy.ndarray", "dtype": str(value.dtype), "shape": list(value.shape)}
    return type_name(value)


def attempt(call, describe=describe):
    """``describe(call())``, or {"error": the exception's type}."""
    try:
        value = call()
    except Exception as err:  # noqa: BLE001 (what failed is what is recorded)
        return {"error": type(err).__name__}
    return describe(value)


def signatures(export_dir):
    """{signature key: {"method", "inputs", "outputs": {key: dtype}}} of a SavedModel."""
    proto = saved_model_pb2.SavedModel()
    with open(os.path.join(export_dir, "saved_model.pb"), "rb") as f:
        proto.ParseFromString(f.read())
    found = {}
    for key, signature in proto.meta_graphs[0].signature_def.items():
        if key.startswith("__"):
            continue
        found[key] = {
            "method": signature.method_name,
            "inputs": {k: tf.dtypes.as_dtype(v.dtype).name
                       for k, v in sorted(signature.inputs.items())},
            "outputs": {k: tf.dtypes.as_dtype(v.dtype).name
                        for k, v in sorted(signature.outputs.items())}}
    return found


def timestamped(path, base):
    text = path.decode("utf-8") if isinstance(path, bytes) else str(path)
    return os.path.dirname(text) == base and re.fullmatch(r"\d{10}", os.path.basename(text)) \
        is not None


def _estimator(model_dir, predictions="dict", export="none"):
    config = tf.estimator.RunConfig(tf_random_seed=0, model_dir=model_dir)
    return tf.estimator.Estimator(model_fn, config=config,
                                  params={"predictions": predictions, "export": export})


def returns(work_dir):
    """{call: what it returned, described}."""
    model_dir = os.path.join(work_dir, "model")
    est = _estimator(model_dir)
    out = {"Estimator.train": describe(est.train(train_input_fn, steps=4), est)}
    out["Estimator.evaluate"] = describe(est.evaluate(eval_input_fn))
    out["Estimator.evaluate(name=...)"] = describe(est.evaluate(eval_input_fn, name="other"))
    predicted = est.predict(predict_input_fn)
    out["Estimator.predict"] = type_name(predicted)
    out["Estimator.predict, each"] = describe(next(predicted))
    out["Estimator.predict(yield_single_examples=False), each"] = describe(
        next(est.predict(predict_input_fn, yield_single_examples=False)))
    out["Estimator.predict(predict_keys=['value']), each"] = describe(
        next(est.predict(predict_input_fn, predict_keys=["value"])))
    tensor_est = _estimator(model_dir, predictions="tensor")
    out["Estimator.predict, each (a single-tensor predictions)"] = describe(
        next(tensor_est.predict(predict_input_fn)))
    out["Estimator.predict(yield_single_examples=False), each (a single-tensor predictions)"] = \
        describe(next(tensor_est.predict(predict_input_fn, yield_single_examples=False)))
    out["Estimator.get_variable_names"] = describe(est.get_variable_names()[:1])
    out["Estimator.get_variable_value('global_step')"] = describe(
        est.get_variable_value("global_step"))
    model_name = [n for n in est.get_variable_names() if n.endswith("w")][0]
    out["Estimator.get_variable_value(<get_variable_names()'s name of w>)"] = describe(
        est.get_variable_value(model_name))
    out["Estimator.get_variable_value('w')"] = attempt(lambda: est.get_variable_value("w"))
    out["Estimator.latest_checkpoint"] = type_name(est.latest_checkpoint())
    out["Estimator.eval_dir"] = type_name(est.eval_dir())
    out["Estimator.model_dir"] = type_name(est.model_dir)
    base = os.path.join(work_dir, "export")
    path = est.export_saved_model(base, raw_receiver_fn)
    out["Estimator.export_saved_model"] = type_name(path)
    out["Estimator.export_saved_model: base/<timestamp>"] = timestamped(path, base)
    v1 = tf.compat.v1.estimator.Estimator(model_fn, model_dir=model_dir,
                                          params={"predictions": "dict", "export": "none"})
    path = v1.export_savedmodel(base, raw_receiver_fn)
    out["compat.v1 Estimator.export_savedmodel"] = type_name(path)
    out["compat.v1 Estimator.export_savedmodel: base/<timestamp>"] = timestamped(path, base)
    path = attempt(lambda: est.experimental_export_all_saved_models(
        base, {tf.estimator.ModeKeys.PREDICT: raw_receiver_fn}), describe=lambda p: p)
    out["Estimator.experimental_export_all_saved_models"] = path if isinstance(path, dict) \
        else type_name(path)
    out["Estimator.experimental_export_all_saved_models: base/<timestamp>"] = \
        not isinstance(path, dict) and timestamped(path, base)
    exporter = tf.estimator.LatestExporter("latest", raw_receiver_fn)
    result = tf.estimator.train_and_evaluate(
        est, tf.estimator.TrainSpec(train_input_fn, max_steps=8),
        tf.estimator.EvalSpec(eval_input_fn, steps=None, exporters=[exporter],
                              throttle_secs=0, start_delay_secs=0))
    out["train_and_evaluate"] = describe(result)
    return out


def canned(work_dir):
    """Premade Estimators: what evaluate and predict return, and what they export."""
    x = tf.feature_column.numeric_column("x")
    labels_of = {"binary": (XS > 0).astype(np.int64), "three": (XS * 1.4 + 1.5).astype(
        np.int64), "regression": YS}
    made = {
        "LinearClassifier": (tf.estimator.LinearClassifier, {}, "binary"),
        "LinearClassifier(n_classes=3)": (tf.estimator.LinearClassifier, {"n_classes": 3},
                                          "three"),
        "DNNClassifier": (tf.estimator.DNNClassifier, {"hidden_units": [2]}, "binary"),
        "LinearRegressor": (tf.estimator.LinearRegressor, {}, "regression"),
    }
    out = {}
    for name, (cls, kwargs, kind) in made.items():
        config = tf.estimator.RunConfig(tf_random_seed=0)
        est = cls(feature_columns=[x], model_dir=os.path.join(work_dir, name), config=config,
                  **kwargs)
        y = labels_of[kind]
        est.train(lambda y=y: tf.data.Dataset.from_tensor_slices(({"x": XS}, y)).repeat()
                  .batch(4), steps=2)
        out[name + ".evaluate"] = describe(est.evaluate(
            lambda y=y: tf.data.Dataset.from_tensor_slices(({"x": XS}, y)).batch(4)))
        out[name + ".predict, each"] = describe(next(est.predict(predict_input_fn)))
        for receiver in ("raw", "parsing"):
            path = est.export_saved_model(os.path.join(work_dir, "export"), RECEIVERS[receiver])
            out[f"{name}.export_saved_model, {receiver} receiver"] = signatures(
                path.decode("utf-8") if isinstance(path, bytes) else path)
    return out


def export_cases():
    """(predictions kind, export_outputs kind, receiver) exported."""
    cases = [(p, e, "raw") for p in ("dict", "tensor") for e in EXPORT_KINDS]
    cases += [("dict", e, "parsing") for e in ("none", "predict dict", "classification",
                                               "classification classes", "regression",
                                               "head")]
    cases += [("tensor", e, "parsing") for e in ("none", "regression")]
    cases += [("dict", "none", "one tensor"), ("tensor", "none", "one tensor"),
              ("dict", "predict dict", "one tensor")]
    return cases


def exports(work_dir):
    """{"predictions=... export_outputs=... receiver=...": the SavedModel's signatures, or
    {"error": the exception's type}}."""
    model_dir = os.path.join(work_dir, "model")
    _estimator(model_dir).train(train_input_fn, steps=2)
    out = {}
    for predictions, export, receiver in export_cases():
        key = f"predictions={predictions} export_outputs={export} receiver={receiver}"
        est = _estimator(model_dir, predictions, export)
        try:
            path = est.export_saved_model(os.path.join(work_dir, "export"), RECEIVERS[receiver])
        except (ValueError, TypeError) as err:
            out[key] = {"error": type(err).__name__}
            continue
        out[key] = signatures(path.decode("utf-8") if isinstance(path, bytes) else path)
    return out
