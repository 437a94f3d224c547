"""Offline stand-ins for the TF 1-era data loaders some corpus programs call (used by
``harness.py``; see ``data/README.md``).

- ``mnist_read_data_sets``: ``tensorflow.examples.tutorials.mnist.input_data.read_data_sets``
  (removed from TensorFlow 2) over ``data/mnist_small.npz``;
- ``mnist_idx_gz``: the gzipped idx files of MNIST's download URLs, made from the same file;
- ``imdb_load_data`` / ``imdb_word_index``: ``keras.datasets.imdb``, a small synthetic review set
  generated here (``numpy.random.RandomState(0)``) with Keras's encoding (start 1, OOV 2,
  word ranks offset by ``index_from``, ``num_words`` cut).
"""

from __future__ import annotations

import os
import struct
import types

IMDB_WORDS = 9000  # ranks 1..IMDB_WORDS
IMDB_REAL = ["the", "and", "a", "of", "to", "is", "br", "in", "it", "i", "this", "that", "was",
             "as", "for", "with", "movie", "but", "film", "on", "not", "you", "are", "his",
             "have", "really", "liked", "every", "second", "hated", "good", "bad"]
IMDB_POSITIVE = range(60, 160)   # ranks that lean positive
IMDB_NEGATIVE = range(160, 260)  # ranks that lean negative


def _mnist(data_dir: str, np):
    with np.load(os.path.join(data_dir, "mnist_small.npz")) as f:
        return {k: f[k] for k in f.files}


def mnist_read_data_sets(data_dir, np, train_dir=None, fake_data=False, one_hot=False,
                         dtype=None, reshape=True, validation_size=5000, seed=None,
                         source_url=None):
    """``input_data.read_data_sets``: train (640), validation (the test rows), test (160)."""
    data = _mnist(data_dir, np)

    class DataSet:
        def __init__(self, images, labels):
            images = images.astype(np.float32) / 255.0
            self.images = images.reshape(len(images), 784) if reshape else images[..., None]
            self.labels = np.eye(10, dtype=np.float32)[labels] if one_hot else labels
            self.num_examples = len(images)
            self._at = 0

        def next_batch(self, batch_size, fake_data=False, shuffle=True):
            if self._at + batch_size > self.num_examples:
                self._at = 0
            start, self._at = self._at, self._at + batch_size
            return self.images[start:self._at], self.labels[start:self._at]

    test = DataSet(data["x_test"], data["y_test"])
    return types.SimpleNamespace(train=DataSet(data["x_train"], data["y_train"]),
                                 validation=test, test=test)


def mnist_idx_gz(data_dir: str, np, gzip, url: str) -> bytes | None:
    """The gzipped idx file an MNIST download URL names, or None for other URLs."""
    name = url.rsplit("/", 1)[-1]
    files = {"train-images-idx3-ubyte.gz": ("x_train", 2051),
             "train-labels-idx1-ubyte.gz": ("y_train", 2049),
             "t10k-images-idx3-ubyte.gz": ("x_test", 2051),
             "t10k-labels-idx1-ubyte.gz": ("y_test", 2049)}
    if name not in files:
        return None
    key, magic = files[name]
    array = _mnist(data_dir, np)[key].astype(np.uint8)
    header = struct.pack(">II", magic, len(array))
    if magic == 2051:
        header += struct.pack(">II", 28, 28)
    return gzip.compress(header + array.tobytes())


def imdb_word_index() -> dict:
    """``imdb.get_word_index()``: word -> frequency rank (1 is the most frequent)."""
    words = IMDB_REAL + [f"w{i}" for i in range(len(IMDB_REAL) + 1, IMDB_WORDS + 1)]
    return {w: i + 1 for i, w in enumerate(words)}


def _imdb_reviews(np, n: int, r):
    labels = r.randint(0, 2, n).astype(np.int64)
    reviews = []
    for label in labels:
        length = r.randint(15, 120)
        ranks = np.minimum(r.zipf(1.3, length), IMDB_WORDS)  # frequent words, Zipf-like
        lean = r.rand(length) < 0.15
        pool = IMDB_POSITIVE if label else IMDB_NEGATIVE
        ranks[lean] = r.randint(pool.start, pool.stop, lean.sum())
        reviews.append([int(v) for v in ranks])
    return reviews, labels


def imdb_load_data(data_dir, np, path="imdb.npz", num_words=None, skip_top=0, maxlen=None,
                   seed=113, start_char=1, oov_char=2, index_from=3, **kwargs):
    """``imdb.load_data``: 1000 train and 400 test reviews, Keras's encoding."""
    r = np.random.RandomState(0)
    splits = []
    for n in (1000, 400):
        reviews, labels = _imdb_reviews(np, n, r)
        xs = []
        for ranks in reviews:
            x = [start_char] + [w + index_from for w in ranks]
            if num_words is not None:
                x = [v if v < num_words and v >= skip_top else oov_char for v in x]
                x[0] = start_char
            xs.append(x[:maxlen] if maxlen else x)
        out = np.empty(len(xs), dtype=object)
        out[:] = xs
        splits.append((out, labels))
    return splits[0], splits[1]
