"""Warm start: variables of a new model_dir initialised from a previous model's checkpoint by
name (regex selection, renames, vocabulary remapping), once, with errors listing what does not
match."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from estflow.estimator import Estimator
from estflow.estimator import EstimatorSpec
from estflow.estimator import ModeKeys
from estflow.estimator import VocabInfo
from estflow.estimator import WarmStartSettings
from tests.components.estimator import _hook_fixtures as fx


@pytest.fixture(scope="module")
def previous(tmp_path_factory):
    """Last week's model: trained 20 steps."""
    est = fx.estimator(tmp_path_factory.mktemp("previous"))
    est.train(fx.train_input_fn, max_steps=20)
    return est


def _first_values(est, **train_kwargs):
    """The state right before the first training step (warm start done), then train 1 step."""
    seen = {}

    class Snapshot(tf.compat.v1.train.SessionRunHook):
        def after_create_session(self, session, coord):
            seen.update({n: v.numpy().copy() for n, v in session.variables().items()})
            seen["global_step"] = session.global_step

    est.train(fx.train_input_fn, hooks=[Snapshot()], steps=1, **train_kwargs)
    return seen


def test_warm_start_from_a_previous_model_dir(previous, tmp_path):
    est = fx.estimator(tmp_path, warm_start_from=previous.model_dir)
    seen = _first_values(est)
    assert seen["global_step"] == 0
    for name in ("store/model/000_w", "store/model/001_b"):
        np.testing.assert_array_equal(seen[name], previous.get_variable_value(name))
    # Optimizer state is not warm-started: the new run's Adagrad accumulators start at 0.1.
    accumulators = [n for n in est.get_variable_names() if n.startswith("optimizers/")
                    and n.split("/")[-1] not in ("_iterations", "_learning_rate")]
    assert accumulators and all(
        not np.allclose(est.get_variable_value(n), previous.get_variable_value(n))
        for n in accumulators)


def test_regex_selects_variables(previous, tmp_path):
    settings = WarmStartSettings(previous.latest_checkpoint(), vars_to_warm_start=".*_w$")
    seen = _first_values(fx.estimator(tmp_path, warm_start_from=settings))
    np.testing.assert_array_equal(seen["store/model/000_w"],
                                  previous.get_variable_value("store/model/000_w"))
    np.testing.assert_array_equal(seen["store/model/001_b"], np.zeros(1))
    nothing = WarmStartSettings(previous.model_dir, vars_to_warm_start=None)
    seen = _first_values(fx.estimator(tmp_path / "none", warm_start_from=nothing))
    np.testing.assert_array_equal(seen["store/model/000_w"], np.zeros((2, 1)))


def test_warm_start_happens_once(previous, tmp_path):
    est = fx.estimator(tmp_path, warm_start_from=previous.model_dir)
    est.train(fx.train_input_fn, max_steps=10)
    own = est.get_variable_value("store/model/000_w")
    again = fx.estimator(tmp_path, warm_start_from=previous.model_dir)
    seen = _first_values(again)
    assert seen["global_step"] == 10
    np.testing.assert_array_equal(seen["store/model/000_w"], own)


def test_missing_variables_and_bad_mappings_are_listed(previous, tmp_path):
    renamed = WarmStartSettings(previous.model_dir,
                                var_name_to_prev_var_name={"store/model/000_w": "dnn/kernel"})
    with pytest.raises(ValueError, match=r"not found: store/model/000_w \(as dnn/kernel\)\)\. "
                                         r"The checkpoint has: global_step, "):
        fx.estimator(tmp_path / "a", warm_start_from=renamed).train(fx.train_input_fn, steps=1)
    unused = WarmStartSettings(previous.model_dir, vars_to_warm_start=".*_b$",
                               var_name_to_prev_var_name={"store/model/000_w": "x"})
    with pytest.raises(ValueError, match=r"these are not: \['store/model/000_w'\]"):
        fx.estimator(tmp_path / "b", warm_start_from=unused).train(fx.train_input_fn, steps=1)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ValueError, match="has none"):
        fx.estimator(tmp_path / "c", warm_start_from=str(empty)).train(fx.train_input_fn,
                                                                       steps=1)
    with pytest.raises(TypeError, match="warm_start_from"):
        fx.estimator(tmp_path / "d", warm_start_from=3)


def embedding_model_fn(features, labels, mode):
    """An embedding over a 3-token vocabulary + 1 OOV bucket (ids in features["id"])."""
    emb = tf.Variable(lambda: tf.fill([4, 2], -1.0), name="emb")
    logits = tf.reduce_sum(tf.gather(emb, features["id"]), axis=1, keepdims=True)
    if mode == ModeKeys.PREDICT:
        return EstimatorSpec(mode, predictions={"logits": logits})
    loss = tf.reduce_mean(tf.square(logits - labels))
    return EstimatorSpec(mode, loss=loss, optimizer=keras.optimizers.SGD(0.0))


def test_tf1_checkpoint_with_rename_and_vocabulary_remap(tmp_path):
    """A tf.estimator-era, name-based checkpoint ("dnn/emb" over vocabulary a, b, c) warm-
    starts ``store/model/000_emb`` over the new vocabulary c, a, d (+1 OOV row)."""
    old = np.arange(6, dtype="float32").reshape(3, 2)
    saver = tf.compat.v1.train.Saver(var_list={"dnn/emb": tf.Variable(old)})
    ckpt = saver.save(None, str(tmp_path / "old" / "model.ckpt"), global_step=5)
    (tmp_path / "old.txt").write_text("a\nb\nc\n")
    (tmp_path / "new.txt").write_text("c\na\nd\n")
    vocab = VocabInfo(str(tmp_path / "new.txt"), 3, 1, str(tmp_path / "old.txt"))
    settings = WarmStartSettings(ckpt, var_name_to_prev_var_name={"store/model/000_emb":
                                                                  "dnn/emb"},
                                 var_name_to_vocab_info={"store/model/000_emb": vocab})
    est = Estimator(embedding_model_fn, str(tmp_path / "new"), warm_start_from=settings,
                    progress=lambda m: None)
    data = lambda: tf.data.Dataset.from_tensor_slices(  # noqa: E731
        ({"id": np.array([0, 1], "int64")}, np.zeros((2, 1), "float32"))).batch(2)
    est.train(data, steps=1)  # SGD(0): the values stay as warm-started
    np.testing.assert_array_equal(est.get_variable_value("store/model/000_emb"),
                                  [old[2], old[0], [-1, -1], [-1, -1]])
    mismatch = WarmStartSettings(str(tmp_path / "new"), vars_to_warm_start=".*_w$",
                                 var_name_to_prev_var_name={"store/model/000_w":
                                                            "store/model/000_emb"})
    with pytest.raises(ValueError, match=r"shape mismatches: store/model/000_w \[2, 1\] vs "
                                         r"store/model/000_emb \[4, 2\]"):
        fx.estimator(tmp_path / "mismatch", warm_start_from=mismatch).train(fx.train_input_fn,
                                                                            steps=1)


def test_a_list_matching_optimizers_also_warm_starts_the_optimizer_state(previous, tmp_path):
    """Continuing a schedule: Adagrad's accumulators (and iteration count) carry over."""
    settings = WarmStartSettings(previous.model_dir, vars_to_warm_start=[".*"])
    est = fx.estimator(tmp_path, warm_start_from=settings)
    seen = _first_values(est)
    assert seen["global_step"] == 0
    names = [n for n in previous.get_variable_names() if n.startswith("optimizers/")]
    accumulators = [n for n in names if "/_variables/" in n]
    assert accumulators
    # The new run took 1 step from the warm-started state: its accumulators are the previous
    # run's plus one update (Adagrad accumulators only grow), never the fresh 0.1 start.
    for name in accumulators:
        prev, now = previous.get_variable_value(name), est.get_variable_value(name)
        assert np.all(now >= prev) and not np.allclose(now, 0.1), name
    iterations = "optimizers/optimizers/0/_iterations"
    assert est.get_variable_value(iterations) == previous.get_variable_value(iterations) + 1


def test_optimizer_state_from_a_checkpoint_without_it_is_an_error(tmp_path):
    saver = tf.compat.v1.train.Saver(var_list={"w": tf.Variable(np.zeros((2, 1), "float32"))})
    ckpt = saver.save(None, str(tmp_path / "old" / "model.ckpt"), global_step=1)
    settings = WarmStartSettings(ckpt, vars_to_warm_start=["optimizers/.*"])
    with pytest.raises(ValueError, match=r"optimizer state .*has none.*Drop the regex"):
        fx.estimator(tmp_path / "new", warm_start_from=settings).train(fx.train_input_fn,
                                                                       steps=1)
