"""Progress lines and TensorBoard scalars, at training-loop boundaries.

Both are cadenced by the global step (``log_step_count_steps``, ``save_summary_steps``) and
happen when a loop crosses a multiple of it: with ``steps_per_loop`` dividing the cadence they
land exactly on it. Rates are measured over the interval since the previous report.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from collections.abc import Iterable

import numpy as np
import tensorflow as tf
from tensorflow.core.framework import summary_pb2
from tensorflow.core.util import event_pb2

__all__ = ["Reporter", "crosses", "print_progress", "read_scalars", "scalar", "write_scalars"]


def print_progress(message: str) -> None:
    print(message, flush=True)


def crosses(before: int, after: int, every: int | None) -> bool:
    """True when ``(before, after]`` contains a multiple of ``every`` (never when ``every`` is
    None or 0: that cadence is off)."""
    return bool(every) and after // every > before // every


# TensorBoard's scalar plugin metadata (``ScalarPluginData(version=0)`` serializes to b"").
_SCALAR_METADATA = summary_pb2.SummaryMetadata(
    plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="scalars", content=b""))


def scalar(tag: str, value: float) -> None:
    """What ``tf.summary.scalar(tag, value)`` writes (eagerly, to the default writer at its
    step), without its first call importing TensorBoard's summary modules: about a second of
    the first ``train`` call, in the middle of its first loops."""
    tf.summary.write(tag, tf.cast(value, tf.float32), metadata=_SCALAR_METADATA)


class _Rate:
    def __init__(self, step: int) -> None:
        self.step = step
        self.examples = 0
        self.time = time.perf_counter()

    def take(self, step: int, examples: int) -> tuple[float, float]:
        """(steps/s, examples/s) since the last take, then restart the interval."""
        now = time.perf_counter()
        seconds = max(now - self.time, 1e-9)
        rates = ((step - self.step) / seconds, (self.examples + examples) / seconds)
        self.step, self.examples, self.time = step, 0, now
        return rates

    def add(self, examples: int) -> None:
        self.examples += examples


class Reporter:
    """Reports one ``train`` call.

    Args:
        writer: the TensorBoard writer of model_dir (flushed by :meth:`close`, not closed: the
            training loop writes the model_fn's summaries to it too).
        summary_steps: write scalars when the global step crosses a multiple of this (None:
            never).
        log_steps: print a progress line when the global step crosses a multiple of this
            (None: never).
        progress: receives each progress line.
        start_step: the global step training starts from.
    """

    def __init__(self, writer, summary_steps: int | None, log_steps: int | None,
                 progress: Callable[[str], None], start_step: int) -> None:
        self._writer = writer
        self._summary_steps = summary_steps
        self._log_steps = log_steps
        self._progress = progress
        self._log_rate = _Rate(start_step)
        self._summary_rate = _Rate(start_step)
        self._start = time.perf_counter()
        self.examples = 0

    def loop_done(self, before: int, after: int, loss: float, examples: int) -> None:
        self.examples += examples
        if crosses(before, after, self._log_steps):
            _, ex_rate = self._log_rate.take(after, examples)
            self._progress(f"step {after}, loss {loss:.6g}, {ex_rate:.0f} examples/s")
        else:
            self._log_rate.add(examples)
        if crosses(before, after, self._summary_steps):
            step_rate, ex_rate = self._summary_rate.take(after, examples)
            with self._writer.as_default(step=after):
                scalar("loss", loss)
                scalar("global_step/sec", step_rate)
                scalar("examples/sec", ex_rate)
        else:
            self._summary_rate.add(examples)

    @property
    def elapsed(self) -> float:
        return time.perf_counter() - self._start

    def close(self) -> None:
        self._writer.flush()


def write_scalars(log_dir: str, step: int, values: dict[str, float]) -> None:
    """Write ``values`` as scalars at ``step`` (evaluation results) and flush."""
    writer = tf.summary.create_file_writer(log_dir)
    with writer.as_default(step=step):
        for name, value in values.items():
            scalar(name, value)
    writer.flush()
    writer.close()


def read_scalars(paths: Iterable[str]) -> dict[int, dict[str, float]]:
    """Scalars in TensorBoard event files, ``{step: {tag: value}}`` sorted by step (what
    :func:`write_scalars` wrote, TF 1 ``simple_value`` summaries too). A truncated file (a
    writer killed mid-record) is read up to the damage."""
    by_step: dict[int, dict[str, float]] = {}
    for path in sorted(paths):
        try:
            for record in tf.data.TFRecordDataset(path):
                event = event_pb2.Event.FromString(record.numpy())
                for value in event.summary.value:
                    scalar = _scalar(value)
                    if scalar is not None:
                        by_step.setdefault(int(event.step), {})[value.tag] = scalar
        except tf.errors.DataLossError:
            logging.getLogger("estflow.estimator").warning(
                "skipping the rest of %s: it is truncated or corrupt", path)
    return dict(sorted(by_step.items()))


def _scalar(value) -> float | None:
    if value.HasField("simple_value"):
        return float(value.simple_value)
    if value.HasField("tensor"):
        array = tf.make_ndarray(value.tensor)
        if array.ndim == 0 and np.issubdtype(array.dtype, np.number):
            return float(array)
    return None
