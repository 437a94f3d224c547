"""Published TF 1-era Estimator programs' shapes on the engine (issue 23): input_fns that return
``make_one_shot_iterator(dataset).get_next()`` tensors (with code after it), model_fns bound by
argument NAME (``model_fn(mode, features, labels)``), HParams-like ``params`` and a lookup table
built inside the model_fn. Each test names the program it is made from; data are generated
here, small, in the program's format. Where TF 2.15 has no TF 1 name the port uses the nearest
TF 2 one (noted at the line)."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

import estflow.estimator as estimator

CSV_COLUMNS = ["age", "education_num", "hours_per_week", "gender", "income_bracket"]
CSV_COLUMN_DEFAULTS = [[0], [0], [0], [""], [""]]
LABEL_COLUMN = "income_bracket"
LABELS = [" <=50K", " >50K"]


def _census_csv(path, rows=240, seed=0):
    """Rows in the census CSV format (adult.data: comma + space separated, string label)."""
    r = np.random.RandomState(seed)
    lines = []
    for _ in range(rows):
        age, edu, hours = r.randint(18, 70), r.randint(1, 16), r.randint(10, 70)
        gender = r.choice([" Female", " Male"])
        rich = edu * 3 + hours / 5 + r.randn() * 2 > 30
        lines.append(f"{age}, {edu}, {hours},{gender},{LABELS[int(rich)]}")
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def parse_csv(rows_string_tensor):
    """cloudml-samples' parse_csv: a dict of rank-2 tensors."""
    columns = tf.io.decode_csv(rows_string_tensor, record_defaults=CSV_COLUMN_DEFAULTS)
    features = dict(zip(CSV_COLUMNS, columns, strict=True))
    for key in list(features):
        features[key] = tf.expand_dims(features[key], -1)
    return features


def input_fn(filenames, num_epochs=None, shuffle=True, skip_header_lines=0, batch_size=40):
    """cloudml-samples' census input_fn, as published: the iterator's tensors, then code after
    get_next() (the label popped out of the features)."""
    dataset = tf.data.TextLineDataset(filenames).skip(skip_header_lines).map(parse_csv)
    if shuffle:
        dataset = dataset.shuffle(buffer_size=batch_size * 10, seed=1)
    dataset = dataset.repeat(num_epochs)
    dataset = dataset.batch(batch_size)
    # TF 1: dataset.make_one_shot_iterator(); estflow migrate writes this form
    iterator = tf.compat.v1.data.make_one_shot_iterator(dataset)
    features = iterator.get_next()
    return features, features.pop(LABEL_COLUMN)


def generate_model_fn(hidden_units=(16, 8), learning_rate=0.1):
    """cloudml-samples' generate_model_fn: ``_model_fn(mode, features, labels)`` (mode first),
    the string labels turned into indices by a table built inside the model_fn."""
    columns = [estimator.feature_column.numeric_column(c)
               for c in ("age", "education_num", "hours_per_week")]
    columns.append(estimator.feature_column.indicator_column(
        estimator.feature_column.categorical_column_with_vocabulary_list(
            "gender", [" Female", " Male"])))

    def _model_fn(mode, features, labels):
        inputs = estimator.feature_column.input_layer(features, columns) / 50.0
        label_values = tf.constant(LABELS)
        curr_layer = inputs
        for layer_size in hidden_units:  # TF 1: tf.layers.dense (migrate writes this)
            curr_layer = tf.keras.layers.Dense(layer_size, activation=tf.nn.relu)(curr_layer)
        logits = tf.keras.layers.Dense(len(LABELS))(curr_layer)
        probabilities = tf.nn.softmax(logits)
        predicted_indices = tf.argmax(probabilities, 1)
        if mode == estimator.ModeKeys.PREDICT:
            predictions = {"classes": tf.gather(label_values, predicted_indices),
                           "scores": tf.reduce_max(probabilities, axis=1)}
            return estimator.EstimatorSpec(mode, predictions=predictions, export_outputs={
                "prediction": estimator.export.PredictOutput(predictions)})
        # TF 1: tf.contrib.lookup.index_table_from_tensor(label_values)
        table = tf.lookup.StaticHashTable(tf.lookup.KeyValueTensorInitializer(
            label_values, tf.range(len(LABELS), dtype=tf.int64)), -1)
        label_indices = table.lookup(labels)
        label_indices_vector = tf.squeeze(label_indices, axis=[1])
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
            logits=logits, labels=label_indices_vector))
        if mode == estimator.ModeKeys.TRAIN:
            optimizer = tf.compat.v1.train.AdagradOptimizer(learning_rate=learning_rate)
            train_op = optimizer.minimize(loss,
                                          global_step=tf.compat.v1.train.get_global_step())
            return estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)
        return estimator.EstimatorSpec(mode, loss=loss, eval_metric_ops={
            "accuracy": tf.compat.v1.metrics.accuracy(label_indices_vector, predicted_indices)})
    return _model_fn


def test_census_custom_estimator_iterator_input_fn_and_mode_first_model_fn(tmp_path):
    """GoogleCloudPlatform/cloudml-samples census/customestimator/trainer/model.py (input_fn,
    generate_model_fn) and trainer/task.py (train_and_evaluate with a FinalExporter): the
    input_fn returns ``iterator.get_next()`` tensors with ``features.pop`` after it, the
    model_fn is ``_model_fn(mode, features, labels)``, a table maps string labels."""
    train = _census_csv(tmp_path / "adult.data.csv", seed=0)
    test = _census_csv(tmp_path / "adult.test.csv", rows=120, seed=1)
    est = estimator.Estimator(model_fn=generate_model_fn(), model_dir=str(tmp_path / "job"),
                              config=estimator.RunConfig(tf_random_seed=3,
                                                         save_checkpoints_steps=30))
    est.train(lambda: input_fn([train], batch_size=40), steps=60)
    result = est.evaluate(lambda: input_fn([test], num_epochs=1, shuffle=False, batch_size=40))
    assert result["global_step"] == 60
    assert result["accuracy"] > 0.6, result  # the rule is learnable: chance is ~0.5
    # evaluation read the file once: 120 rows in 3 batches (one_shot_iterator's end of input)
    predictions = list(est.predict(
        lambda: input_fn([test], num_epochs=1, shuffle=False, batch_size=40)))
    assert len(predictions) == 120
    assert {p["classes"] for p in predictions} <= {label.encode() for label in LABELS}


def test_code_after_get_next_runs_on_every_batch_not_once(tmp_path):
    """The shape of tensorflow/models r1.4 official/wide_deep/wide_deep.py's input_fn
    (``features, labels = iterator.get_next(); return features, labels``) with arithmetic
    after get_next(): each batch's features are transformed, not the first batch's repeated."""
    x = np.arange(8, dtype="float32").reshape(-1, 1)

    def shifted_input_fn():
        dataset = tf.data.Dataset.from_tensor_slices(({"x": x}, x[:, 0] * 2)).batch(2)
        features, labels = tf.compat.v1.data.make_one_shot_iterator(dataset).get_next()
        features["x"] = features["x"] + 100.0  # after get_next: per batch
        return features, labels

    def model_fn(features, labels, mode):
        b = tf.Variable(lambda: tf.zeros([]), name="b")
        x = features["x"][:, 0] + b
        if mode == estimator.ModeKeys.PREDICT:
            return estimator.EstimatorSpec(mode, predictions={"x": x})
        loss = tf.reduce_mean(tf.square(x - labels))
        return estimator.EstimatorSpec(mode, loss=loss, train_op=tf.compat.v1.train.
                                       GradientDescentOptimizer(0.0).minimize(loss))

    est = estimator.Estimator(model_fn, model_dir=str(tmp_path))
    est.train(shifted_input_fn, steps=1)
    seen = [float(p["x"]) for p in est.predict(shifted_input_fn)]
    assert seen == list(x[:, 0] + 100.0)


def test_model_fn_bound_by_name_any_order_and_optional_args_absent(tmp_path):
    """tensorflow/tensorflow tensorflow/python/estimator (1.x) bound model_fn arguments by
    name: ``model_fn(features, mode)`` (no labels) and ``model_fn(labels, features, mode,
    config)`` both work; an unknown argument fails with tf.estimator 2.15's message."""
    calls = []

    def reordered(labels, config, mode, features):
        calls.append((mode, isinstance(config, estimator.RunConfig), labels is None))
        b = tf.Variable(lambda: tf.zeros([]), name="b")
        y = features["x"] + b
        if mode == estimator.ModeKeys.PREDICT:
            return estimator.EstimatorSpec(mode, predictions={"y": y})
        loss = tf.reduce_mean(tf.square(y - labels))
        return estimator.EstimatorSpec(mode, loss=loss, train_op=tf.compat.v1.train.
                                       GradientDescentOptimizer(0.1).minimize(loss))

    data = tf.data.Dataset.from_tensor_slices(({"x": [1.0, 2.0]}, [2.0, 3.0])).batch(2)
    est = estimator.Estimator(reordered, model_dir=str(tmp_path / "a"))
    est.train(lambda: data, steps=2)
    list(est.predict(lambda: data.map(lambda f, _: f)))
    assert ("train", True, False) in calls and ("infer", True, True) in calls
    with pytest.raises(ValueError, match=r"has following not expected args: \['inputs'\]"):
        estimator.Estimator(lambda features, labels, mode, inputs: None)
    with pytest.raises(ValueError, match="must include features argument"):
        estimator.Estimator(lambda mode, labels: None)

    def no_labels(features, mode):
        return estimator.EstimatorSpec(mode, predictions={"y": features["x"]})

    unlabelled = estimator.Estimator(no_labels, model_dir=str(tmp_path / "b"))
    with pytest.raises(ValueError, match="model_fn does not take labels, but input_fn "
                                         "returns labels"):
        unlabelled.train(lambda: data, steps=1)


class HParams:
    """``tf.contrib.training.HParams``'s shape (attribute access, ``values()``), as
    GoogleCloudPlatform/cloudml-samples census/customestimator/trainer/task.py builds it
    (``hparam.HParams(**args.__dict__)``) and passes it on."""

    def __init__(self, **kwargs):
        self._names = sorted(kwargs)
        for name, value in kwargs.items():
            setattr(self, name, value)

    def values(self):
        return {name: getattr(self, name) for name in self._names}


def test_hparams_object_as_params(tmp_path):
    """myrywy/autoregressor autoregressor/hparams.py (``HParams(learning_rate=0.1, ...)``)
    passed as ``tf.estimator.Estimator(model_fn, params=hparams)``; the model_fn and the
    input_fn read ``params.learning_rate`` / ``params.batch_size``."""
    x = np.linspace(-1, 1, 64, dtype="float32").reshape(-1, 1)

    def train_input_fn(params):
        return tf.data.Dataset.from_tensor_slices(({"x": x}, 3 * x)).repeat().batch(
            params.batch_size)

    def model_fn(features, labels, mode, params):
        w = tf.Variable(lambda: tf.zeros([1, 1]), name="w")
        y = tf.matmul(features["x"], w)
        loss = tf.reduce_mean(tf.square(y - labels))
        opt = tf.compat.v1.train.GradientDescentOptimizer(params.learning_rate)
        return estimator.EstimatorSpec(mode, loss=loss, train_op=opt.minimize(
            loss, global_step=tf.compat.v1.train.get_global_step()))

    hparams = HParams(learning_rate=0.5, batch_size=16)
    est = estimator.Estimator(model_fn, model_dir=str(tmp_path), params=hparams)
    assert est.params.values() == {"batch_size": 16, "learning_rate": 0.5}
    est.train(train_input_fn, steps=40)
    w = [est.get_variable_value(n) for n in est.get_variable_names() if n.endswith("_w")]
    assert w and abs(float(np.ravel(w[0])[0]) - 3.0) < 0.1, w


def test_steps_given_as_a_float(tmp_path):
    """google/eng-edu's Machine Learning Crash Course exercises train in periods with
    ``train(input_fn, steps=steps / periods)`` (a float: 10.0); tf.estimator compared the global
    step with ``start + steps`` (a fractional count ends at the next whole step), and evaluate
    counted batches likewise."""
    x = np.linspace(-1, 1, 64, dtype="float32").reshape(-1, 1)

    def input_fn():
        return tf.data.Dataset.from_tensor_slices(({"x": x}, 2 * x)).repeat().batch(8)

    est = estimator.LinearRegressor([estimator.feature_column.numeric_column("x")],
                                    model_dir=str(tmp_path))
    est.train(input_fn, steps=100 / 10)
    assert est.get_variable_value("global_step") == 10
    est.train(input_fn, steps=2.5)
    assert est.get_variable_value("global_step") == 13
    est.train(input_fn, max_steps=15.0)
    assert est.get_variable_value("global_step") == 15
    assert est.evaluate(input_fn, steps=1.5)["global_step"] == 15
    with pytest.raises(ValueError, match="steps > 0"):
        est.train(input_fn, steps=0.0)


def test_export_savedmodel_the_tf1_name(tmp_path):
    """kubeflow/examples mnist/model.py ends with ``classifier.export_savedmodel(export_dir,
    serving_input_receiver_fn=serving_fn)``: tf.compat.v1.estimator.Estimator's name of
    export_saved_model; ``as_text`` (a text SavedModel proto) is warned about, not refused."""
    x = np.linspace(-1, 1, 32, dtype="float32").reshape(-1, 1)
    est = estimator.LinearRegressor([estimator.feature_column.numeric_column("x")],
                                    model_dir=str(tmp_path / "model"))
    est.train(lambda: tf.data.Dataset.from_tensor_slices(({"x": x}, x)).batch(8), steps=2)

    def serving_fn():
        inputs = {"x": tf.compat.v1.placeholder(tf.float32, [None, 1])}
        return estimator.export.ServingInputReceiver(inputs, inputs)

    path = est.export_savedmodel(str(tmp_path / "export"), serving_input_receiver_fn=serving_fn)
    assert tf.saved_model.contains_saved_model(path.decode())
    with pytest.warns(UserWarning, match="as_text"):
        path = est.export_savedmodel(str(tmp_path / "export"), serving_fn, as_text=True)
    assert tf.saved_model.contains_saved_model(path.decode())
