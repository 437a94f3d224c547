"""Feature columns: values of every column kind on hand-made inputs (eagerly and inside
tf.function), sparse/ragged/dense inputs, ids equal to tf.lookup's and tf.sparse's, gradients,
SavedModel export -> load -> same outputs, and a model_fn that trains with the Estimator and
exports."""

import doctest

import keras
import numpy as np
import pytest
import tensorflow as tf

from estflow.dsl.specs import RunConfig
from estflow.estimator import Estimator
from estflow.estimator import ModeKeys
from estflow.estimator import feature_column as fc
from estflow.estimator import heads
from estflow.estimator import parsing_serving_input_receiver_fn


def _eager(fn, *args):
    return fn(*args)


def _traced(fn, *args):
    return tf.function(fn)(*args)


RUNNERS = pytest.mark.parametrize("run", [_eager, _traced], ids=["eager", "tf_function"])


def _dense(columns, features, run):
    layer = fc.DenseFeatures(columns)
    return run(layer, features).numpy()


@pytest.mark.parametrize("module", ["feature_column", "_fc.layers", "_fc.lookup"])
def test_docstring_examples_run(module):
    mod = __import__(f"estflow.estimator.{module}", fromlist=["_"])
    assert doctest.testmod(mod).failed == 0


@RUNNERS
def test_numeric_dense_sparse_shapes_and_normalizer(run):
    col = fc.numeric_column("x", shape=2, default_value=(7.0, 8.0),
                            normalizer_fn=lambda v: v - 1.0)
    out = _dense([col], {"x": tf.constant([[1.0, 2.0], [3.0, 4.0]])}, run)
    np.testing.assert_allclose(out, [[0, 1], [2, 3]])
    ints = fc.numeric_column("n", shape=(1, 2), dtype=tf.int64)
    np.testing.assert_allclose(_dense([ints], {"n": tf.constant([[[1, 2]]], tf.int64)}, run),
                               [[1.0, 2.0]])
    sparse = tf.SparseTensor([[0, 0], [1, 0], [1, 1], [1, 2]], [1.0, 2.0, 3.0, 9.0], [2, 3])
    np.testing.assert_allclose(_dense([col], {"x": sparse}, run), [[0, 7], [1, 2]])  # 8-1
    scalar = fc.numeric_column("y", default_value=5.0)
    ragged = tf.ragged.constant([[2.0], []])
    np.testing.assert_allclose(_dense([scalar], {"y": ragged}, run), [[2.0], [5.0]])


@RUNNERS
def test_bucketized_dense_and_as_categorical(run):
    col = fc.bucketized_column(fc.numeric_column("a", shape=2), [0.0, 10.0])
    features = {"a": tf.constant([[-5.0, 10.0], [5.0, 100.0]])}
    np.testing.assert_allclose(_dense([col], features, run),
                               [[1, 0, 0, 0, 0, 1], [0, 1, 0, 0, 0, 1]])
    assert col.num_buckets == 6
    ids = run(lambda f: col.sparse_ids(f).id_tensor.values, features).numpy()
    assert ids.tolist() == [0, 5, 1, 5]  # bucket + element * 3


@RUNNERS
def test_vocabulary_list_strings_ints_oov_and_missing(run):
    strings = fc.categorical_column_with_vocabulary_list("s", ["a", "b", "c"])
    oov = fc.categorical_column_with_vocabulary_list("s", ["a", "b", "c"], num_oov_buckets=4)
    ints = fc.categorical_column_with_vocabulary_list("i", [10, 20, 30], default_value=0)
    features = {"s": tf.constant([["c", ""], ["zz", "a"]]), "i": tf.constant([30, 99, -1])}

    def ids(column):
        return run(lambda f: column.sparse_ids(f).id_tensor.values, features).numpy().tolist()

    assert ids(strings) == [2, -1, 0]  # "" is missing: dropped; "zz" -> default -1
    table = tf.lookup.StaticVocabularyTable(tf.lookup.KeyValueTensorInitializer(
        ["a", "b", "c"], tf.constant([0, 1, 2], tf.int64)), 4)
    assert ids(oov) == table.lookup(tf.constant(["c", "zz", "a"])).numpy().tolist()
    assert ids(ints) == [2, 0]  # -1 is missing; 99 -> default_value 0
    np.testing.assert_allclose(_dense([fc.indicator_column(strings)], features, run),
                               [[0, 0, 1], [1, 0, 0]])


def test_vocabulary_list_from_numpy_and_pandas_as_tf_feature_column_took_it():
    """tf.estimator's linear tutorial passes ``df[name].unique()`` (a NumPy object array):
    NumPy and pandas vocabularies mean the list of their values."""
    import pandas as pd

    frame = pd.DataFrame({"s": ["b", "a", "b", "c"], "i": [30, 10, 30, 20]})
    for vocabulary, expected in ((frame["s"].unique(), ("b", "a", "c")),
                                 (np.array(["x", "y"]), ("x", "y")),
                                 (pd.Index(["p", "q"]), ("p", "q")),
                                 (frame["i"].unique(), (30, 10, 20)),
                                 ([np.int64(1), np.int64(2)], (1, 2))):
        col = fc.categorical_column_with_vocabulary_list("k", vocabulary)
        assert col.vocabulary_list == expected
        assert all(type(v) in (str, int) for v in col.vocabulary_list)
    ids = fc.categorical_column_with_vocabulary_list("s", frame["s"].unique()).sparse_ids(
        {"s": tf.constant(["c", "b", "zz"])}).id_tensor.values
    assert ids.numpy().tolist() == [2, 0, -1]
    with pytest.raises(ValueError, match="vocabulary_list"):
        fc.categorical_column_with_vocabulary_list("k", "abc")


def test_vocabulary_file_and_int_vocabulary_matches_static_table(tmp_path):
    path = tmp_path / "vocab.txt"
    path.write_text("red\ngreen\nblue\n")
    col = fc.categorical_column_with_vocabulary_file("c", str(path), vocabulary_size=2,
                                                     num_oov_buckets=3)
    assert col.num_buckets == 5
    got = col.sparse_ids({"c": tf.constant(["green", "blue", "red"])}).id_tensor.values
    table = tf.lookup.StaticVocabularyTable(tf.lookup.KeyValueTensorInitializer(
        ["red", "green"], tf.constant([0, 1], tf.int64)), 3)
    assert got.numpy().tolist() == table.lookup(tf.constant(["green", "blue", "red"])
                                                ).numpy().tolist()
    ints = tmp_path / "ints.txt"
    ints.write_text("5\n10\n")
    col = fc.categorical_column_with_vocabulary_file("n", str(ints), dtype=tf.int64,
                                                     num_oov_buckets=2)
    values = tf.constant([10, 7, 5], tf.int64)
    table = tf.lookup.StaticVocabularyTable(tf.lookup.KeyValueTensorInitializer(
        tf.constant([5, 10], tf.int64), tf.constant([0, 1], tf.int64)), 2)
    assert col.sparse_ids({"n": values}).id_tensor.values.numpy().tolist() == \
        table.lookup(values).numpy().tolist()
    with pytest.raises(ValueError, match="vocabulary_file"):
        fc.categorical_column_with_vocabulary_file("c", str(tmp_path / "missing.txt"))


@RUNNERS
def test_hash_identity_and_crossed_ids(run):
    hashed = fc.categorical_column_with_hash_bucket("h", 50)
    hashed_int = fc.categorical_column_with_hash_bucket("n", 50, dtype=tf.int64)
    identity = fc.categorical_column_with_identity("n", 40, default_value=3)
    crossed = fc.crossed_column(["h", identity], hash_bucket_size=100)
    features = {"h": tf.constant(["x", "y"]), "n": tf.constant([[7], [77]], tf.int64)}

    def ids(column):
        return run(lambda f: column.sparse_ids(f).id_tensor.values, features).numpy().tolist()

    assert ids(hashed) == tf.strings.to_hash_bucket_fast(["x", "y"], 50).numpy().tolist()
    assert ids(hashed_int) == tf.strings.to_hash_bucket_fast(["7", "77"], 50).numpy().tolist()
    assert ids(identity) == [7, 3]
    expected = tf.sparse.cross_hashed([tf.constant([["x"], ["y"]]),
                                       tf.constant([[7], [3]], tf.int64)], num_buckets=100)
    assert ids(crossed) == expected.values.numpy().tolist()
    assert crossed.name == "h_X_n"


def test_identity_without_default_fails_on_out_of_range_ids():
    col = fc.categorical_column_with_identity("n", 3)
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"\[0, 3\)"):
        fc.DenseFeatures([fc.indicator_column(col)])({"n": tf.constant([1, 5])})


@RUNNERS
def test_embedding_combiners_weights_and_sparse_inputs(run):
    table = np.arange(12, dtype=np.float32).reshape(4, 3)  # row i = [3i, 3i+1, 3i+2]

    def init(shape, dtype=None):
        return tf.constant(table)

    ids = fc.categorical_column_with_identity("ids", 4)
    weighted = fc.weighted_categorical_column(ids, "w")
    features = {"ids": tf.ragged.constant([[0, 2], [3], []], tf.int64),
                "w": tf.ragged.constant([[1.0, 3.0], [2.0], []])}
    for combiner, first in (("mean", (table[0] + table[2]) / 2),
                            ("sum", table[0] + table[2]),
                            ("sqrtn", (table[0] + table[2]) / np.sqrt(2))):
        col = fc.embedding_column(ids, 3, combiner=combiner, initializer=init)
        out = _dense([col], features, run)
        np.testing.assert_allclose(out, [first, table[3], [0, 0, 0]], rtol=1e-6)
    col = fc.embedding_column(weighted, 3, initializer=init)
    np.testing.assert_allclose(_dense([col], features, run)[0],
                               (table[0] * 1 + table[2] * 3) / 4, rtol=1e-6)
    np.testing.assert_allclose(_dense([fc.indicator_column(weighted)], features, run),
                               [[1, 0, 3, 0], [0, 0, 0, 2], [0, 0, 0, 0]])


def test_shared_embeddings_share_one_variable_and_gradients_flow():
    query = fc.categorical_column_with_identity("query", 5)
    doc = fc.categorical_column_with_identity("doc", 5)
    shared = fc.shared_embeddings([query, doc], dimension=2)
    layer = fc.DenseFeatures(shared + [fc.numeric_column("x")])
    assert len(layer.trainable_variables) == 1
    features = {"query": tf.constant([1, 4]), "doc": tf.constant([1, 2]),
                "x": tf.constant([1.0, 2.0])}
    out = layer(features)  # columns by name: doc, query, x
    np.testing.assert_allclose(out[0, 0:2], out[0, 2:4])  # both looked up id 1
    assert not np.allclose(out[1, 0:2], out[1, 2:4])
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(layer(features))
    grad = tf.convert_to_tensor(tape.gradient(loss, layer.trainable_variables[0]))
    np.testing.assert_allclose(grad.numpy().sum(axis=1), [0, 4, 2, 0, 2])  # row 1 used twice


def test_dense_features_order_errors_and_static_width():
    color = fc.categorical_column_with_vocabulary_list("color", ["r", "g"])
    layer = fc.DenseFeatures([fc.numeric_column("z"), fc.embedding_column(color, 4),
                              fc.numeric_column("a", shape=3)])
    assert [c.name for c in layer.feature_columns] == ["a", "color_embedding", "z"]

    @tf.function(input_signature=[{"a": tf.TensorSpec([None, 3]), "z": tf.TensorSpec([None]),
                                   "color": tf.TensorSpec([None], tf.string)}])
    def traced(features):
        out = layer(features)
        assert out.shape.as_list() == [None, 8]
        return out

    assert traced({"a": tf.zeros([2, 3]), "z": tf.ones([2]),
                   "color": tf.constant(["r", "x"])}).shape == (2, 8)
    with pytest.raises(ValueError, match="embedding_column or indicator_column"):
        fc.DenseFeatures([color])
    with pytest.raises(KeyError, match="'color'.*not among"):
        layer({"a": tf.zeros([1, 3]), "z": tf.ones([1])})
    with pytest.raises(TypeError, match="must hold strings"):
        layer({"a": tf.zeros([1, 3]), "z": tf.ones([1]), "color": tf.constant([1])})
    with pytest.raises(ValueError, match=r"`dimension`.*Received: dimension=0"):
        fc.embedding_column(color, 0)
    with pytest.raises(ValueError, match="boundaries"):
        fc.bucketized_column(fc.numeric_column("a"), [3.0, 1.0])
    with pytest.raises(ValueError, match="keys"):
        fc.crossed_column(["a", fc.categorical_column_with_hash_bucket("h", 5)], 10)


@RUNNERS
def test_linear_model_values(run):
    color = fc.categorical_column_with_vocabulary_list("color", ["r", "g", "b"])
    model = fc.LinearModel([fc.numeric_column("x"), color], units=2)
    model.weights["x"].assign([[1.0, -1.0]])
    model.weights["color"].assign([[10.0, 0.0], [20.0, 0.0], [30.0, 0.0]])
    model.bias.assign([0.5, 0.5])
    features = {"x": tf.constant([2.0, 3.0]), "color": tf.constant([["r", "b"], ["g", ""]])}
    out = run(model, features).numpy()
    np.testing.assert_allclose(out, [[2 + 40 + 0.5, -2 + 0.5], [3 + 20 + 0.5, -3 + 0.5]])
    mean = fc.LinearModel([color], sparse_combiner="mean")
    mean.weights["color"].assign([[10.0], [20.0], [30.0]])
    np.testing.assert_allclose(run(mean, features).numpy(), [[20.0], [20.0]])
    cols_to_vars = {}
    fc.linear_model(features, [fc.numeric_column("x")], cols_to_vars=cols_to_vars)
    assert set(cols_to_vars) == {fc.numeric_column("x"), "bias"}


def test_make_parse_example_spec():
    words = fc.categorical_column_with_hash_bucket("words", 10)
    spec = fc.make_parse_example_spec([
        fc.numeric_column("x", shape=2, default_value=0.0),
        fc.embedding_column(fc.weighted_categorical_column(words, "tfidf"), 2),
        fc.crossed_column(["a", "b"], 5)])
    assert spec["x"] == tf.io.FixedLenFeature((2,), tf.float32, 0.0)
    assert spec["tfidf"] == tf.io.VarLenFeature(tf.float32)
    assert spec["words"] == spec["a"] == tf.io.VarLenFeature(tf.string)


def _example(**values) -> bytes:
    feature = {}
    for key, value in values.items():
        if isinstance(value[0], str):
            feature[key] = tf.train.Feature(bytes_list=tf.train.BytesList(
                value=[v.encode() for v in value]))
        else:
            feature[key] = tf.train.Feature(float_list=tf.train.FloatList(value=value))
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


COLOR = fc.categorical_column_with_vocabulary_list("color", ["red", "green", "blue"],
                                                   num_oov_buckets=1)
COLUMNS = [fc.numeric_column("x", default_value=0.0),
           fc.bucketized_column(fc.numeric_column("x", default_value=0.0), [0.0]),
           fc.embedding_column(COLOR, 3),
           fc.indicator_column(fc.crossed_column([COLOR, "tag"], 7))]


def test_export_load_gives_the_same_outputs(tmp_path):
    module = tf.Module()
    module.dense = fc.DenseFeatures(COLUMNS)
    module.linear = fc.LinearModel([COLUMNS[0], COLUMNS[1], COLOR])
    module.linear.weights["color"].assign([[1.0], [2.0], [3.0], [4.0]])
    spec = fc.make_parse_example_spec(COLUMNS)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def serve(examples):
        features = tf.io.parse_example(examples, spec)
        return {"dense": module.dense(features), "logits": module.linear(features)}

    module.serve = serve
    examples = tf.constant([_example(x=[1.5], color=["green"], tag=["a", "b"]),
                            _example(color=["purple"], tag=["c"])])
    before = serve(examples)
    tf.saved_model.save(module, str(tmp_path), signatures={"serving_default": serve})
    loaded = tf.saved_model.load(str(tmp_path))
    after = loaded.signatures["serving_default"](examples=examples)
    for key in ("dense", "logits"):
        np.testing.assert_allclose(after[key], before[key], rtol=1e-6)
    assert before["logits"].numpy().ravel().tolist() == [2.0, 4.0]  # green, OOV bucket


def _train_input_fn(n=512, seed=0):
    r = np.random.RandomState(seed)
    x = r.randn(n).astype("float32")
    color = r.choice(["red", "green", "blue", "pink"], n)
    y = ((x > 0.3) | (color == "red")).astype("int64")
    return {"x": x, "color": color, "tag": np.where(y == 1, "t", "u")}, y


def _model_fn(features, labels, mode, params):
    dense = fc.DenseFeatures(COLUMNS[:3])(features)
    hidden = keras.layers.Dense(8, activation="relu")(dense)
    logits = keras.layers.Dense(1)(hidden) + fc.linear_model(features, [COLOR])
    head = heads.BinaryClassHead()
    optimizer = keras.optimizers.Adam(0.03) if mode == ModeKeys.TRAIN else None
    return head.create_estimator_spec(features, mode, logits, labels, optimizer=optimizer)


def test_model_fn_with_feature_columns_trains_with_estimator_and_exports(tmp_path):
    features, y = _train_input_fn()
    config = RunConfig(save_checkpoints_steps=1000, steps_per_loop=50,
                       log_step_count_steps=1000, save_summary_steps=1000)
    est = Estimator(_model_fn, str(tmp_path / "model"), config, params={},
                    progress=lambda m: None)
    est.train(lambda: tf.data.Dataset.from_tensor_slices((features, y)).repeat().batch(32),
              max_steps=200)
    metrics = est.evaluate(lambda: tf.data.Dataset.from_tensor_slices((features, y)).batch(128))
    assert metrics["accuracy"] > max(y.mean(), 1 - y.mean()) + 0.1, metrics
    receiver = parsing_serving_input_receiver_fn(fc.make_parse_example_spec(COLUMNS[:3]))
    export_dir = est.export_saved_model(str(tmp_path / "export"), receiver)
    loaded = tf.saved_model.load(export_dir)
    served = loaded.signatures["predict"]  # the head's signatures: serving_default classifies
    examples = tf.constant([_example(x=[float(x)], color=[str(c)])
                            for x, c in zip(features["x"][:5], features["color"][:5],
                                            strict=True)])
    predicted = next(est.predict(
        lambda: tf.data.Dataset.from_tensor_slices({k: v[:5] for k, v in features.items()}
                                                   ).batch(5),
        yield_single_examples=False))
    np.testing.assert_allclose(served(examples=examples)["logistic"], predicted["logistic"],
                               rtol=1e-5)
    scores = loaded.signatures["serving_default"](inputs=examples)["scores"]
    np.testing.assert_allclose(scores, predicted["probabilities"], rtol=1e-5)
