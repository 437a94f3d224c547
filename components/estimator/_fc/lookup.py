"""Vocabulary lookups as plain ops (no lookup-table resource), for feature columns and heads.

Why not ``tf.lookup.StaticHashTable``: a table is a resource. Created inside a model_fn it is
either re-created on every step (inside the training loop's trace) or lifted out of the trace,
and then nothing the engine exports tracks it (the variable store holds variables only), so
``tf.saved_model.save`` fails on the untracked capture. A lookup built from constants has no
resource at all: it works eagerly, in any ``tf.function``, in the training loop, under
distribution strategies and in every exported signature, with nothing to track.

How: each vocabulary entry is fingerprinted (``tf.strings.to_hash_bucket_fast``, i.e.
Fingerprint64, stable across platforms and releases; integer keys are used as they are), the
fingerprints are sorted once, and a lookup is a ``tf.searchsorted`` plus an equality check.
Out-of-vocabulary values get ``default_value``, or with ``num_oov_buckets`` the bucket
``vocabulary_size + to_hash_bucket_fast(str(value), num_oov_buckets)``: the ids
``tf.lookup.StaticVocabularyTable`` (and so ``tf.feature_column``) gives, so checkpoints trained
with tf.feature_column keep their meaning.

Example:
    >>> import tensorflow as tf
    >>> lookup = VocabularyLookup(("a", "b", "c"), num_oov_buckets=2)
    >>> ids = lookup(tf.constant(["c", "a", "zzz"])).numpy()
    >>> ids[:2].tolist(), bool(3 <= ids[2] < 5)
    ([2, 0], True)
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import tensorflow as tf

__all__ = ["VocabularyLookup", "vocabulary_dtype"]

_FINGERPRINT_BUCKETS = 2**63 - 1  # the whole non-negative int64 range


def vocabulary_dtype(vocabulary: Sequence, field: str = "vocabulary_list") -> tf.DType:
    """``tf.string`` for a vocabulary of strings, ``tf.int64`` for one of integers."""
    if vocabulary and all(isinstance(v, str) for v in vocabulary):
        return tf.string
    if vocabulary and all(isinstance(v, (int, np.integer)) and not isinstance(v, bool)
                          for v in vocabulary):
        return tf.int64
    raise ValueError(f"Received an invalid value for `{field}`, expected a non-empty sequence "
                     f"of strings or of integers. Received: {field}={vocabulary!r}")


def _keys(values: tf.Tensor) -> tf.Tensor:
    """int64 search keys: integers as they are, strings by fingerprint."""
    if values.dtype == tf.string:
        return tf.strings.to_hash_bucket_fast(values, _FINGERPRINT_BUCKETS)
    return tf.cast(values, tf.int64)


class VocabularyLookup:
    """Maps values (strings or integers) to ids: the index in ``vocabulary``, else an OOV
    bucket or ``default_value``.

    Args:
        vocabulary: distinct strings, or distinct integers.
        num_oov_buckets: hash out-of-vocabulary values into this many extra ids.
        default_value: the id of out-of-vocabulary values when ``num_oov_buckets`` is 0.

    Raises:
        ValueError: an empty or mixed vocabulary, duplicate entries, or a negative
            ``num_oov_buckets``.
    """

    def __init__(self, vocabulary: Sequence, num_oov_buckets: int = 0,
                 default_value: int = -1, field: str = "vocabulary_list") -> None:
        self.dtype = vocabulary_dtype(vocabulary, field)
        self.vocabulary = tuple(vocabulary)
        duplicates = sorted({v for v in self.vocabulary if self.vocabulary.count(v) > 1},
                            key=str)
        if duplicates:
            raise ValueError(f"Received an invalid value for `{field}`, expected distinct "
                             f"entries. Received duplicates: {duplicates}")
        if not isinstance(num_oov_buckets, int) or num_oov_buckets < 0:
            raise ValueError("Received an invalid value for `num_oov_buckets`, expected an "
                             f"integer >= 0. Received: num_oov_buckets={num_oov_buckets!r}")
        self.num_oov_buckets = num_oov_buckets
        self.default_value = int(default_value)
        self._sorted: tuple[np.ndarray, np.ndarray] | None = None

    @property
    def size(self) -> int:
        """Number of ids: the vocabulary plus the OOV buckets."""
        return len(self.vocabulary) + self.num_oov_buckets

    def _tables(self) -> tuple[np.ndarray, np.ndarray]:
        """(sorted keys, their ids) as numpy arrays, computed once, eagerly."""
        if self._sorted is None:
            with tf.init_scope():  # eager even when first asked inside a trace
                keys = _keys(tf.constant(list(self.vocabulary), self.dtype)).numpy()
            order = np.argsort(keys, kind="stable")
            keys = keys[order]
            if len(np.unique(keys)) != len(keys):  # a Fingerprint64 collision: never seen
                raise ValueError("two vocabulary entries share a fingerprint; rename one")
            self._sorted = keys, order.astype(np.int64)
        return self._sorted

    def __call__(self, values: tf.Tensor) -> tf.Tensor:
        """int64 ids of ``values`` (same shape)."""
        values = tf.convert_to_tensor(values)
        if (values.dtype == tf.string) != (self.dtype == tf.string) or not (
                values.dtype == tf.string or values.dtype.is_integer):
            raise TypeError(f"a vocabulary of {self.dtype.name} values cannot look up "
                            f"{values.dtype.name} values")
        keys, ids = self._tables()
        flat = _keys(tf.reshape(values, [-1]))
        sorted_keys = tf.constant(keys)
        at = tf.minimum(tf.searchsorted(sorted_keys, flat), len(keys) - 1)
        found = tf.equal(tf.gather(sorted_keys, at), flat)
        if self.num_oov_buckets:
            text = (tf.reshape(values, [-1]) if values.dtype == tf.string
                    else tf.strings.as_string(flat))
            missing = (tf.strings.to_hash_bucket_fast(text, self.num_oov_buckets)
                       + len(self.vocabulary))
        else:
            missing = tf.fill(tf.shape(flat), tf.constant(self.default_value, tf.int64))
        out = tf.where(found, tf.gather(tf.constant(ids), at), missing)
        return tf.reshape(out, tf.shape(values))
