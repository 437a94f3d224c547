"""TF 1 input_fns that return iterator tensors instead of a dataset.

The most common TF 1 input_fn ends with the batch tensors of an iterator, often with code
after it::

    dataset = tf.data.TextLineDataset(files).map(parse_csv).repeat(epochs).batch(200)
    features = tf.compat.v1.data.make_one_shot_iterator(dataset).get_next()
    return features, features.pop("income_bracket")

tf.estimator called the input_fn once, in graph mode: ``get_next()`` was a symbolic batch
and the code after it ran on every step. The engine needs the dataset, so such an input_fn
is run in two parts (:func:`dataset_of`):

1. the input_fn runs (eagerly) until it makes its iterator: the iterator factory records
   the dataset and stops it there (:class:`_Made`, which user code's ``except Exception``
   does not catch);
2. the result is ``dataset.map(rest)``: ``rest`` calls the input_fn again while tf.data
   traces the map function, and this time the factory hands back an iterator whose
   ``get_next()`` is the map function's element. The code after ``get_next()``
   (``features.pop``, casts, lookups in tables built there) thus runs on every batch in the
   dataset's graph, as it ran on every step in tf.estimator's.

The factories watched are ``tf.compat.v1.data.make_one_shot_iterator`` /
``make_initializable_iterator`` and the ``tf.compat.v1.data.Dataset`` methods of those names;
outside an input_fn call they are TensorFlow's own (the wrappers delegate).

An input_fn that returns tensors or arrays without an iterator (the whole data as one batch,
an early TF 1 idiom) gets ``Dataset.from_tensors(result)``: repeated for training, as
tf.estimator fed the same batch at every step, once for evaluation and prediction.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable
from typing import Any

import numpy as np
import tensorflow as tf

__all__ = ["dataset_of"]

_log = logging.getLogger("estflow.estimator")
_state = threading.local()  # .replay: the element get_next() returns (None: find the dataset)
_INSTALLED = False
_INSTALL_LOCK = threading.Lock()


class _Made(BaseException):  # noqa: N818 - a signal, not an error
    """Raised by a watched factory while finding an input_fn's dataset."""

    def __init__(self, dataset: tf.data.Dataset) -> None:
        super().__init__("the input_fn made an iterator")
        self.dataset = dataset


class _ReplayIterator:
    """What a watched factory returns while ``rest`` runs: ``get_next()`` is the batch."""

    def __init__(self, element) -> None:
        self._element = element

    def get_next(self, name: str | None = None):
        del name
        return self._element

    @property
    def initializer(self):
        return tf.no_op()  # tf.estimator programs run it in a hook; nothing to initialise


def _watched(original: Callable) -> Callable:
    @functools.wraps(original)
    def factory(dataset, *args, **kwargs):
        mode = getattr(_state, "mode", None)
        if mode == "find":
            raise _Made(dataset)
        if mode == "replay":
            return _ReplayIterator(_state.element)
        return original(dataset, *args, **kwargs)
    factory._estflow_original = original  # noqa: SLF001 - how a second install sees it
    return factory


def _install() -> None:
    """Wrap the TF 1 iterator factories once (they delegate outside input_fn calls)."""
    global _INSTALLED
    with _INSTALL_LOCK:
        if _INSTALLED:
            return
        v1_data = tf.compat.v1.data
        for owner in (v1_data, v1_data.Dataset):
            for name in ("make_one_shot_iterator", "make_initializable_iterator"):
                current = getattr(owner, name, None)
                if current is not None and not hasattr(current, "_estflow_original"):
                    setattr(owner, name, _watched(current))
        _INSTALLED = True


def _call(input_fn: Callable, kwargs: dict, mode: str | None, element=None):
    previous = (getattr(_state, "mode", None), getattr(_state, "element", None))
    _state.mode, _state.element = mode, element
    try:
        return input_fn(**kwargs())
    finally:
        _state.mode, _state.element = previous


def dataset_of(input_fn: Callable, kwargs: Callable[[], dict], mode: str | None
               ) -> tf.data.Dataset | Any:
    """Call ``input_fn(**kwargs())`` and return its dataset (module docstring): the one it
    returned, or the one behind the iterator it made with the code after ``get_next()``
    mapped over it, or its tensors as a dataset. Anything else is returned as it came.

    Args:
        input_fn: the user's input_fn.
        kwargs: a fresh set of its keyword arguments for each call.
        mode: the ModeKeys value of this call (TRAIN repeats a one-batch input).
    """
    _install()
    try:
        result = _call(input_fn, kwargs, "find")
    except _Made as made:
        return _rest_mapped(input_fn, kwargs, made.dataset)
    if isinstance(result, tf.data.Dataset) or not _tensors(result):
        return result
    _log.info("input_fn %s returned tensors, not a dataset: they are its only batch",
              getattr(input_fn, "__qualname__", input_fn))
    dataset = tf.data.Dataset.from_tensors(result)
    return dataset.repeat() if mode == "train" else dataset


def _rest_mapped(input_fn: Callable, kwargs: Callable[[], dict],
                 dataset: tf.data.Dataset) -> tf.data.Dataset:
    unpacked = isinstance(dataset.element_spec, tuple)

    def rest(*args):
        element = args if unpacked else args[0]
        result = _call(input_fn, kwargs, "replay", element)
        if isinstance(result, list):  # a list of tensors: tf.data would stack it
            result = tuple(result)
        return result

    return dataset.map(rest)


def _tensors(result) -> bool:
    """A ``(features, labels)`` pair or features made of tensors and arrays only."""
    leaves = tf.nest.flatten(result)
    return bool(leaves) and all(isinstance(x, (tf.Tensor, np.ndarray)) for x in leaves) and \
        (isinstance(result, (tuple, dict)) or len(leaves) == 1)
