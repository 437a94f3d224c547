"""Server-side batching for ``estflow serve`` (TF Serving's ``--enable_batching``).

Concurrent requests to the same signature of the same model version are merged into one call
of the signature: their inputs are concatenated along the first (batch) dimension, the outputs
split back by rows. One call on 16 rows costs about what one call on 1 row costs, so under
concurrent small requests the model's per-call overhead is paid once per batch instead of once
per request.

Parameters are TF Serving's ``BatchingParameters`` (read from ``--batching_parameters_file``,
its text format; TF Serving's defaults otherwise):

* ``max_batch_size`` (1000): rows in one call at most; a request with more runs alone (TF
  Serving refuses it unless ``enable_large_batch_splitting``);
* ``batch_timeout_micros`` (0): how long the oldest request of a batch waits for more; with 0 a
  free batch thread takes whatever has arrived (requests batch while the threads are busy);
* ``num_batch_threads`` (the number of CPUs): batches that run at once, for all models;
* ``max_enqueued_batches`` (10): per signature; a request beyond it is refused, 503 (TF
  Serving's UNAVAILABLE, "The batch scheduling queue to which this task was submitted is
  full");
* ``allowed_batch_sizes`` (none): a batch of several requests is padded, by repeating its
  first row, to the smallest of these that holds it (a request alone runs as it is); the last
  must equal ``max_batch_size``;
* ``pad_variable_length_inputs``, ``thread_pool_name``, ``enable_large_batch_splitting``,
  ``max_execution_batch_size``: accepted and not used. Requests whose inputs differ after the
  first dimension are never padded to one length: they are batched with their own kind, so
  that every answer is the unbatched answer (TF Serving's padding changes the answers of a
  model that does not mask it).

Only requests whose inputs can be concatenated are merged: the same input names, dtypes and
shapes after the first dimension, every input with the same number of rows. Anything else
(scalars, ragged row counts, other shapes) is batched with its own kind or runs alone. If a
merged call fails, or its outputs do not all have one row per input row (a model that reduces
over the batch), each request of the batch is run alone, so one bad request fails only itself
and every answer equals the unbatched answer. (TF Serving fails the whole batch.) Like TF
Serving, batching assumes the model treats rows independently: a model that, say,
normalises over the batch answers differently when batched.

It pays when the model's calls are what the server spends its time on (a call costing about
the same for 1 row as for 64, many concurrent small requests); where the HTTP and JSON work
of each request costs more than the call, merging calls saves little (``make bench``: the
docs' Serving page has the figures).
"""

from __future__ import annotations

import collections
import dataclasses
import math
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from estflow.components.serve.errors import ServingError

__all__ = ["BatchingParameters", "Batcher", "read_parameters"]

_QUEUE_FULL = "The batch scheduling queue to which this task was submitted is full"


@dataclasses.dataclass(frozen=True)
class BatchingParameters:
    """TF Serving's ``BatchingParameters`` (the fields batching here uses; see the module
    docstring for what each means)."""

    max_batch_size: int = 1000
    batch_timeout_micros: int = 0
    max_enqueued_batches: int = 10
    num_batch_threads: int = os.cpu_count() or 1
    allowed_batch_sizes: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        for name in ("max_batch_size", "max_enqueued_batches", "num_batch_threads"):
            if getattr(self, name) < 1:
                raise ValueError(f"batching parameter {name} must be >= 1, got "
                                 f"{getattr(self, name)}")
        if self.batch_timeout_micros < 0:
            raise ValueError("batching parameter batch_timeout_micros must be >= 0, got "
                             f"{self.batch_timeout_micros}")
        sizes = self.allowed_batch_sizes
        if sizes and (list(sizes) != sorted(set(sizes)) or sizes[0] < 1):
            raise ValueError(f"allowed_batch_sizes must be positive and increasing, got "
                             f"{list(sizes)}")
        if sizes and sizes[-1] != self.max_batch_size:
            raise ValueError("Last entry in allowed_batch_sizes must match max_batch_size; "
                             f"last entry was {sizes[-1]}; expected {self.max_batch_size}")


def read_parameters(path: str | Path) -> BatchingParameters:
    """Parse a ``--batching_parameters_file`` (TF Serving's text format, e.g.
    ``max_batch_size { value: 32 }``; fields batching here does not use are accepted).

    Raises:
        ValueError: the file is not a valid BatchingParameters text proto, or a value is out
            of range (the message names the file and the field).
        OSError: the file cannot be read.
    """
    from google.protobuf import text_format

    from estflow.components.serve._batching_proto import batching_parameters_class

    text = Path(path).read_text()
    message = batching_parameters_class()()
    try:
        text_format.Parse(text, message)
    except text_format.ParseError as e:
        raise ValueError(f"{path}: not TF Serving's BatchingParameters text format: {e}") \
            from None
    fields = {name: getattr(message, name).value
              for name in ("max_batch_size", "batch_timeout_micros", "max_enqueued_batches",
                           "num_batch_threads") if message.HasField(name)}
    try:
        return BatchingParameters(**fields,
                                  allowed_batch_sizes=tuple(message.allowed_batch_sizes))
    except ValueError as e:
        raise ValueError(f"{path}: {e}") from None


class _Task:
    """One request waiting to be batched."""

    __slots__ = ("inputs", "rows", "enqueued", "done", "outputs", "error", "alone")

    def __init__(self, inputs: dict[str, Any], rows: int) -> None:
        self.inputs = inputs
        self.rows = rows
        self.enqueued = time.monotonic()
        self.done = threading.Event()
        self.outputs: dict[str, np.ndarray] | None = None
        self.error: BaseException | None = None
        self.alone = False  # its batch could not answer it: the caller runs it by itself


class _Queue:
    """The waiting requests of one kind (a function and the shape of its inputs)."""

    def __init__(self, function: Callable[..., Any]) -> None:
        self.function = function
        self.tasks: collections.deque[_Task] = collections.deque()
        self.rows = 0


class Batcher:
    """Merges concurrent calls of the functions it wraps (see the module docstring).

    ``wrap(function)`` returns a function with the same keyword interface; ``stop()`` ends the
    batch threads (requests still waiting then run alone).
    """

    def __init__(self, parameters: BatchingParameters | None = None) -> None:
        self.parameters = parameters or BatchingParameters()
        self._cond = threading.Condition()
        self._queues: dict[tuple, _Queue] = {}
        self._stopped = False
        self._threads = [threading.Thread(target=self._run_batches, daemon=True,
                                          name=f"estflow-serve-batch-{i}")
                         for i in range(self.parameters.num_batch_threads)]
        for thread in self._threads:
            thread.start()

    def wrap(self, function: Callable[..., Any]) -> Callable[..., Any]:
        """``function`` (keyword tensors or arrays -> output name -> tensor or array), batched:
        its outputs come back as numpy arrays."""

        def batched(**inputs: Any) -> Any:
            rows = _rows(inputs)
            if rows is None or rows > self.parameters.max_batch_size:
                return function(**inputs)
            task = _Task(inputs, rows)
            self._enqueue(_kind(function, inputs), function, task)
            task.done.wait()
            if task.alone:
                return function(**inputs)
            if task.error is not None:
                raise task.error
            return task.outputs

        batched.__wrapped__ = function  # type: ignore[attr-defined]
        return batched

    def waiting(self) -> int:
        """Rows waiting for a batch thread, over all queues."""
        with self._cond:
            return sum(queue.rows for queue in self._queues.values())

    def batched_model(self, model: Any) -> Any:
        """A :class:`~.models.ServedModel` whose signatures are batched (the same model
        otherwise: the inference core calls ``signature.function``, so REST and gRPC, predict,
        classify and regress all go through the batcher)."""
        signatures = {name: dataclasses.replace(signature, function=self.wrap(signature.function))
                      for name, signature in model.signatures.items()}
        return dataclasses.replace(model, signatures=signatures)

    def loader(self, load: Callable[..., Any]) -> Callable[..., Any]:
        """A model loader (``load(name, version, path) -> ServedModel``, the registry's) whose
        models are batched; they are loaded (and warmed up) unbatched."""

        def load_batched(*args: Any, **kwargs: Any) -> Any:
            return self.batched_model(load(*args, **kwargs))

        return load_batched

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
        for thread in self._threads:
            thread.join(timeout=5.0)
        with self._cond:
            for queue in self._queues.values():
                for task in queue.tasks:
                    task.alone = True
                    task.done.set()
            self._queues.clear()

    # -- the queues ---------------------------------------------------------------------

    def _enqueue(self, kind: tuple, function: Callable[..., Any], task: _Task) -> None:
        limit = self.parameters.max_batch_size
        with self._cond:
            if self._stopped:
                task.alone = True
                task.done.set()
                return
            queue = self._queues.get(kind)
            if queue is None:
                queue = self._queues[kind] = _Queue(function)
            if math.ceil((queue.rows + task.rows) / limit) > self.parameters.max_enqueued_batches:
                raise ServingError(503, _QUEUE_FULL)
            queue.tasks.append(task)
            queue.rows += task.rows
            self._cond.notify()

    def _take(self) -> tuple[_Queue, list[_Task]] | float | None:
        """A batch ready to run (under the lock), else how long until one is (None: none
        waiting)."""
        params, now = self.parameters, time.monotonic()
        timeout = params.batch_timeout_micros / 1e6
        ready, wait = None, None
        for kind, queue in self._queues.items():
            oldest = queue.tasks[0].enqueued
            if queue.rows >= params.max_batch_size or now - oldest >= timeout:
                if ready is None or oldest < ready[2]:
                    ready = (kind, queue, oldest)
            else:
                left = oldest + timeout - now
                wait = left if wait is None else min(wait, left)
        if ready is None:
            return wait
        kind, queue, _ = ready
        batch, rows = [], 0
        while queue.tasks and rows + queue.tasks[0].rows <= params.max_batch_size:
            task = queue.tasks.popleft()
            batch.append(task)
            rows += task.rows
        queue.rows -= rows
        if not queue.tasks:
            del self._queues[kind]  # no reference to an unloaded model's function stays
        return queue, batch

    def _run_batches(self) -> None:
        while True:
            with self._cond:
                while True:
                    if self._stopped:
                        return
                    taken = self._take()
                    if isinstance(taken, tuple):
                        break
                    self._cond.wait(taken)
            queue, batch = taken
            self._run(queue.function, batch)

    def _run(self, function: Callable[..., Any], batch: list[_Task]) -> None:
        try:
            if len(batch) == 1:
                batch[0].outputs = _numpy(function(**batch[0].inputs))
            else:
                merged, size = _merged(batch, self.parameters.allowed_batch_sizes)
                _answer(batch, function(**merged), size)
        except BaseException as e:  # noqa: BLE001 - the callers raise it (or run alone)
            if len(batch) == 1:
                batch[0].error = e
            else:
                for task in batch:
                    task.alone = True  # so that one bad request fails only itself
        finally:
            for task in batch:
                task.done.set()


def _rows(inputs: dict[str, Any]) -> int | None:
    """The number of rows every input has (its first dimension), or None if the inputs
    cannot be batched (no inputs, a scalar, different row counts, no rows)."""
    counts = set()
    for value in inputs.values():
        shape = getattr(value, "shape", None)
        if shape is None or len(shape) == 0 or shape[0] is None:
            return None
        counts.add(int(shape[0]))
    if len(counts) != 1:
        return None
    (rows,) = counts
    return rows or None


def _kind(function: Callable[..., Any], inputs: dict[str, Any]) -> tuple:
    """What a request must share with others to be merged with them."""
    return (id(function), *sorted((name, str(value.dtype), tuple(value.shape[1:]))
                                  for name, value in inputs.items()))


def _merged(batch: list[_Task], allowed: tuple[int, ...]) -> tuple[dict[str, Any], int]:
    """The batch's inputs concatenated, padded with copies of the first row up to the
    smallest allowed batch size that holds them; and that size."""
    rows = sum(task.rows for task in batch)
    size = next((size for size in allowed if size >= rows), rows)
    merged = {}
    for name, first in batch[0].inputs.items():
        pieces = [task.inputs[name] for task in batch] + [first[:1]] * (size - rows)
        merged[name] = _concat(pieces)
    return merged, size


def _concat(pieces: list[Any]) -> Any:
    if isinstance(pieces[0], np.ndarray):
        return np.concatenate(pieces)
    import tensorflow as tf  # a tensor's batch: TensorFlow is loaded already

    return tf.concat(pieces, axis=0)


def _numpy(outputs: Any) -> dict[str, np.ndarray]:
    return {name: np.asarray(value.numpy() if hasattr(value, "numpy") else value)
            for name, value in outputs.items()}


def _answer(batch: list[_Task], outputs: Any, size: int) -> None:
    """Give each task its rows of ``outputs``; if some output does not have one row per input
    row (``size`` rows, padding included), every task runs alone instead."""
    arrays = _numpy(outputs)
    if not arrays or any(a.ndim == 0 or a.shape[0] != size for a in arrays.values()):
        for task in batch:
            task.alone = True
        return
    start = 0
    for task in batch:
        task.outputs = {name: a[start:start + task.rows] for name, a in arrays.items()}
        start += task.rows
