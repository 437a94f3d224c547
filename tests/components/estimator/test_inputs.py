"""``estflow.estimator.inputs``: numpy_input_fn/pandas_input_fn. The batches they read with
``shuffle=False`` are checked against tf.estimator 2.15's own, recorded, by
tests/compat/test_surface.py; here: what 2.15's shuffling queue did that a record cannot pin
down (a random start, passes mixing), the arguments read once, and the errors."""

import numpy as np
import pandas as pd
import pytest
import tensorflow as tf

from estflow.estimator import inputs


def _rows(input_fn):
    return [list(features["a"]) for features, _ in input_fn().as_numpy_iterator()]


def test_unshuffled_batches_cross_passes_and_end_short():
    fn = inputs.numpy_input_fn({"a": np.arange(5)}, np.arange(5), batch_size=3, num_epochs=2,
                               shuffle=False)
    assert _rows(fn) == [[0, 1, 2], [3, 4, 0], [1, 2, 3], [4]]


def test_shuffled_reads_start_anywhere_and_mix_passes_like_a_shuffle_queue():
    tf.random.set_seed(0)
    n = 50
    fn = inputs.pandas_input_fn(pd.DataFrame({"a": np.arange(n)}), pd.Series(np.arange(n)),
                                batch_size=10, num_epochs=2, shuffle=True, queue_capacity=20)
    firsts, mixed = set(), False
    for _ in range(8):
        batches = list(fn().as_numpy_iterator())
        rows = [int(r) for features, _ in batches for r in features["a"]]
        assert sorted(rows) == sorted(list(range(n)) * 2)
        assert all((f["a"] == labels).all() for f, labels in batches)
        firsts.add(rows[0])
        mixed |= len(set(rows[:n])) < n  # a row's second pass before another's first
    assert len(firsts) > 3 and mixed


def test_num_epochs_is_per_thread_as_in_2_15():
    fn = inputs.numpy_input_fn({"a": np.arange(5)}, None, batch_size=2, num_epochs=1,
                               shuffle=False, num_threads=3)
    rows = [int(r) for batch in fn().as_numpy_iterator() for r in batch["a"]]
    assert sorted(rows) == sorted(list(range(5)) * 3)


def test_arguments_are_read_when_the_input_fn_is_made():
    df = pd.DataFrame({"a": np.arange(4), "y": np.arange(4) * 10})
    fn = inputs.pandas_input_fn(df, df.pop("y"), batch_size=4, shuffle=False)
    df["a"] = -1  # x was copied at the call, as 2.15 did
    (features, labels), = fn().as_numpy_iterator()
    assert list(features) == ["a"] and list(features["a"]) == [0, 1, 2, 3]
    assert list(labels) == [0, 10, 20, 30]
    assert len(list(fn().as_numpy_iterator())) == 1  # called again, the same


def test_2_15s_errors():
    df = pd.DataFrame({"a": [1, 2], "target": [0, 1]})
    with pytest.raises(ValueError, match="shuffle must be provided"):
        inputs.numpy_input_fn({"a": np.arange(2)})
    with pytest.raises(ValueError, match="already has a column with that name"):
        inputs.pandas_input_fn(df, pd.Series([0, 1]), shuffle=False)
    with pytest.raises(ValueError, match="Index for x and y are mismatched"):
        inputs.pandas_input_fn(df[["a"]], pd.Series([0, 1], index=[5, 6]), shuffle=False)
    with pytest.raises(ValueError, match="duplicate keys"):
        inputs.numpy_input_fn({"a": np.arange(2)}, {"a": np.arange(2)}, shuffle=False)
    with pytest.raises(ValueError, match=r"mismatched.*x\['a'\].: 2, 'y': 3"):
        inputs.numpy_input_fn({"a": np.arange(2)}, np.arange(3), shuffle=False)
    with pytest.raises(TypeError, match="x must be a dict or array"):
        inputs.numpy_input_fn([1, 2], shuffle=False)
    with pytest.raises(ValueError, match="batch_size"):
        inputs.numpy_input_fn({"a": np.arange(2)}, batch_size=0, shuffle=False)
