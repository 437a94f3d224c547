"""Progress of long work (a Beam job, a scoring loop): rows done, rate and ETA every few seconds.

The work counts its rows where it handles them (:class:`CountRows` in a Beam job, or
:meth:`Tally.add` in a plain loop); a :class:`Reporter` thread reads the counts and shows them:
a bar redrawn in place at a terminal, plain lines in logs (the local runner's and KFP's, which
read the step's output through a pipe)::

    [transform  41.2s] 1,310,720 of ~2,700,000 rows (49%), 52,400 rows/s, ETA 27s

The counts are the job's own counters, read the way each runner allows:

* in this process (the in-memory FnApiRunner, a scoring loop): a process-wide table the counting
  code adds to, read live (Beam's in-memory runner only reports its metrics once the job ends);
* other processes on this machine (the FnApiRunner's multi-process mode): each worker process
  writes its counts to a small file in the reporter's folder at most once a second;
* a remote runner (Dataflow, Flink, Spark, portable): Beam metrics counters (namespace
  :data:`NAMESPACE`), queried from the running job's result.

``total`` (for the percentage and the ETA) comes from what the step knows before it starts:
the rows of the earlier step's output, or an estimate from the source's size (:func:`estimate_rows`,
shown with ``~``). Without one the lines show rows and rate only.
"""

from __future__ import annotations

import collections
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Iterable

__all__ = ["NAMESPACE", "INTERVAL_ENV", "configure", "Tally", "CountRows", "Reporter", "run_with_progress", "counted", "split_rows", "estimate_rows",
           "set_interval", "line"]

NAMESPACE = "estflow.progress"
"""Beam metrics namespace of the progress counters."""

_INTERVAL = {"lines": 5.0, "bar": 0.5}
_LOCAL: dict[str, collections.Counter] = {}
_LOCK = threading.Lock()


INTERVAL_ENV = "ESTFLOW_PROGRESS_SECONDS"
"""Environment variable: seconds between progress reports (read by the steps' entry points)."""


def set_interval(seconds: float) -> None:
    """Seconds between plain progress lines (default 5; the bar is redrawn twice a second)."""
    _INTERVAL["lines"] = _INTERVAL["bar"] = max(0.01, float(seconds))


def configure(env) -> None:
    """Take the report interval from ``env[INTERVAL_ENV]`` when set (a step's entry point, the
    edge, calls this with ``os.environ``)."""
    value = env.get(INTERVAL_ENV)
    if value:
        try:
            set_interval(float(value))
        except ValueError:
            raise ValueError(f"${INTERVAL_ENV}={value!r}: expected a number of seconds") from None


class Tally:
    """Where counting code adds rows: picklable, so a Beam DoFn carries it to its workers.

    Args:
        key: the job's table (unique per reporter).
        folder: where workers in other processes of this machine write their counts (None: a
            remote runner's workers, which count through Beam metrics only).
        owner: the process of the reporter (counts made there go to the table directly).
    """

    def __init__(self, key: str, folder: str | None, owner: int) -> None:
        self.key, self.folder, self.owner = key, folder, owner
        self._pending: collections.Counter | None = None
        self._flushed = 0.0

    def __getstate__(self) -> dict:
        return {"key": self.key, "folder": self.folder, "owner": self.owner}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["key"], state["folder"], state["owner"])

    def add(self, counter: str, rows: int) -> None:
        """Add ``rows`` done to ``counter``."""
        if os.getpid() == self.owner:
            with _LOCK:
                _LOCAL.setdefault(self.key, collections.Counter())[counter] += rows
            return
        if self.folder is None:
            return
        if self._pending is None:
            self._pending = collections.Counter()
        self._pending[counter] += rows
        if time.monotonic() - self._flushed >= 1.0:
            self.flush()

    def flush(self) -> None:
        """Write this process's counts to its file in the folder (other processes only)."""
        if self._pending is None or self.folder is None or not os.path.isdir(self.folder):
            return
        path = os.path.join(self.folder, f"{os.getpid()}-{id(self)}.json")
        temp = path + ".tmp"
        with open(temp, "w") as out:
            json.dump(self._pending, out)
        os.replace(temp, path)
        self._flushed = time.monotonic()

    def counts(self) -> collections.Counter:
        """The counts so far: this process's table plus the files of other processes."""
        with _LOCK:
            total = collections.Counter(_LOCAL.get(self.key, {}))
        if self.folder and os.path.isdir(self.folder):
            for name in os.listdir(self.folder):
                if name.endswith(".json"):
                    try:
                        with open(os.path.join(self.folder, name)) as file:
                            total.update(json.load(file))
                    except (OSError, ValueError):  # being replaced: read next time
                        continue
        return total


def _rows_of(element) -> int:
    """Rows of an element: a RecordBatch, tf.Transform's ``(RecordBatch, passthrough)``, a
    chunk with ``.batch`` and ``.rejected`` (rejected rows count as done), else 1."""
    if isinstance(element, tuple) and element and hasattr(element[0], "num_rows"):
        element = element[0]
    if hasattr(element, "num_rows"):
        return int(element.num_rows)
    if hasattr(element, "batch") and hasattr(element, "rejected"):
        return int(element.batch.num_rows) + len(element.rejected)
    return 1


def _count_rows_dofn():
    import apache_beam as beam  # noqa: PLC0415 - the module is usable without Beam

    class CountRowsFn(beam.DoFn):
        """Pass every element on unchanged, counting its rows."""

        def __init__(self, tally: Tally, counter: str) -> None:
            self._tally, self._counter = tally, counter
            self._metric = None

        def setup(self) -> None:
            self._metric = beam.metrics.Metrics.counter(NAMESPACE, self._counter)

        def process(self, element):
            rows = _rows_of(element)
            self._metric.inc(rows)
            self._tally.add(self._counter, rows)
            yield element

        def finish_bundle(self) -> None:
            self._tally.flush()

    return CountRowsFn


def CountRows(tally: Tally, counter: str = "rows"):  # noqa: N802 - reads as a transform
    """A ParDo passing elements through and counting their rows under ``counter`` (a Beam
    metrics counter and ``tally``). Fused with its neighbours: no extra pass over the data."""
    import apache_beam as beam  # noqa: PLC0415

    return beam.ParDo(_count_rows_dofn()(tally, counter))


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{seconds:02d}s"
    return f"{minutes // 60}h{minutes % 60:02d}m"


def line(done: int, total: float | None, rate: float | None, *, estimated: bool = False,
         parts: dict | None = None) -> str:
    """The text of one progress report.

    Example:
        >>> line(500, 2000, 100.0)
        '500 of 2,000 rows (25%), 100 rows/s, ETA 15s'
    """
    text = f"{done:,}"
    if total:
        text += f" of {'~' if estimated else ''}{int(total):,} rows ({min(done / total, 1):.0%})"
    else:
        text += " rows"
    if parts and len(parts) > 1:
        text += " [" + ", ".join(f"{name} {count:,}" for name, count in parts.items()) + "]"
    if rate is None:
        return text + ", starting"
    text += f", {rate:,.0f} rows/s"
    if total and rate > 0 and done < total:
        text += f", ETA {_duration((total - done) / rate)}"
    return text


class Reporter:
    """Shows the progress of one piece of work while it runs (a context manager).

    Args:
        progress: the step's progress printer (its ``[step elapsed]`` prefix is used).
        total: rows expected over every counter (None: unknown).
        estimated: whether ``total`` is an estimate (shown as ``~N``).
        local: whether the work runs on this machine (else only Beam metrics are read).
        stream: where the reports go (default: standard output, as the step's other lines).
    """

    def __init__(self, progress, total: float | None = None, *, estimated: bool = False,
                 local: bool = True, stream=None) -> None:
        self._progress, self._total, self._estimated = progress, total, estimated
        self._stream = stream or sys.stdout
        self._bar = bool(getattr(self._stream, "isatty", lambda: False)())
        self._folder = tempfile.mkdtemp(prefix="estflow-progress-") if local else None
        self.tally = Tally(f"{os.getpid()}-{id(self)}", self._folder, os.getpid())
        self._result = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="estflow-progress", daemon=True)
        self._history: collections.deque = collections.deque(maxlen=64)
        self._start = time.monotonic()

    def watch(self, result) -> None:
        """Read Beam metrics from ``result`` (a running job's PipelineResult) from now on."""
        self._result = result

    def counts(self) -> collections.Counter:
        counts = self.tally.counts()
        if self._result is not None and not counts:
            counts = _beam_counts(self._result)
        return counts

    def __enter__(self) -> Reporter:
        self._start = time.monotonic()
        self._history.append((self._start, 0))
        self._thread.start()
        return self

    def __exit__(self, kind, value, traceback) -> None:
        self._stop.set()
        self._thread.join()
        if kind is None:
            self._report(final=True)
        elif self._bar:
            self._stream.write("\n")
        if self._folder:
            shutil.rmtree(self._folder, ignore_errors=True)

    def _loop(self) -> None:
        interval = _INTERVAL["bar" if self._bar else "lines"]
        while not self._stop.wait(interval):
            try:
                self._report()
            except Exception:  # noqa: BLE001 - progress never breaks the work it shows
                continue

    def _report(self, final: bool = False) -> None:
        counts = self.counts()
        done, now = sum(counts.values()), time.monotonic()
        self._history.append((now, done))
        if final:  # the whole run's rate
            rate = done / max(now - self._start, 1e-9)
            text = f"done: {done:,} rows in {_duration(now - self._start)}, {rate:,.0f} rows/s"
            if len(counts) > 1:
                text += " [" + ", ".join(f"{k} {v:,}" for k, v in counts.items()) + "]"
        else:  # the recent rate (the last ~30 s), for an ETA that follows the job's pace
            then, before = next(((t, d) for t, d in self._history if now - t <= 30),
                                self._history[0])
            rate = (done - before) / (now - then) if done and now > then else None
            text = line(done, self._total, rate, estimated=self._estimated, parts=counts)
        if self._bar:
            self._stream.write("\r\033[K" + self._bar_text(done, text) + ("\n" if final else ""))
            self._stream.flush()
        else:
            self._progress(text)

    def _bar_text(self, done: int, text: str) -> str:
        prefix = f"[{self._progress.step} {self._progress.elapsed:6.1f}s] "
        if not self._total:
            return prefix + text
        filled = int(20 * min(done / self._total, 1))
        return prefix + "[" + "#" * filled + "-" * (20 - filled) + "] " + text


def _beam_counts(result) -> collections.Counter:
    """The progress counters of a running job, from its runner's metrics (attempted values:
    committed ones may lag or be unsupported)."""
    from apache_beam.metrics.metric import MetricsFilter  # noqa: PLC0415

    counts: collections.Counter = collections.Counter()
    try:
        query = result.metrics().query(MetricsFilter().with_namespace(NAMESPACE))
    except Exception:  # noqa: BLE001 - a runner that cannot report while running
        return counts
    for counter in query.get("counters", []):
        value = counter.attempted if counter.attempted is not None else counter.committed
        counts[counter.key.metric.name] += int(value or 0)
    return counts


def counted(read, tally: Tally, counter: str = "read"):
    """``read`` (a PTransform from a pipeline's begin) with its elements' rows counted."""
    import apache_beam as beam  # noqa: PLC0415

    @beam.ptransform_fn
    def _counted(pbegin):
        return pbegin | "Source" >> read | "Progress" >> CountRows(tally, counter)

    return _counted()  # pylint: disable=no-value-for-parameter


def split_rows(examples: str) -> dict[str, int] | None:
    """Rows per split of an examples artifact, from the ingest step's summary in it (None
    when it cannot be read: the reports then show no total)."""
    from estflow.components._io.jsonfile import read_json  # noqa: PLC0415
    from estflow.dsl.contracts import Files  # noqa: PLC0415

    try:
        splits = read_json(f"{str(examples).rstrip('/')}/{Files.INGEST_STATS}").get("splits")
        return {name: int(count) for name, count in (splits or {}).items()}
    except Exception:  # noqa: BLE001 - only the reports' total is lost
        return None


def run_with_progress(beam_pipeline, reporter: Reporter):
    """Run ``beam_pipeline`` to its end while ``reporter`` shows its progress."""
    with reporter:
        result = beam_pipeline.run()
        reporter.watch(result)
        result.wait_until_finish()
    return result


def estimate_rows(kind: str, files: Iterable[str], sample_bytes: int = 1 << 20
                  ) -> int | None:
    """About how many rows ``files`` of a source ``kind`` hold, without reading them: a
    Parquet file's footer; a CSV file's lines less its header when it is under
    ``sample_bytes``, else its size times the lines per byte of its first ``sample_bytes``
    (local, uncompressed files only); None when unknown."""
    total = 0
    for path in files:
        try:
            if kind == "Parquet":
                import pyarrow.parquet as pq  # noqa: PLC0415

                total += pq.ParquetFile(path).metadata.num_rows
            elif kind == "Csv" and "://" not in path and not path.endswith((".gz", ".bz2")):
                size = os.path.getsize(path)
                with open(path, "rb") as file:
                    head = file.read(sample_bytes)
                lines = head.count(b"\n")
                if not lines:
                    continue
                # Less the header line (a file without one: off by one row, an estimate).
                total += lines - 1 if len(head) >= size else int(size * lines / len(head))
            else:
                return None
        except (OSError, ValueError):
            return None
    return total or None

