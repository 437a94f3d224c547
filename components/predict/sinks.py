"""Where predictions are written: bundle files inside a staging directory, published at once.

Inside the job, :class:`WriteBundleFiles` writes each bundle's predictions (and rejected rows) to
files of its own under the staging directory and, when the bundle finishes, names them; the
job collects those names into a manifest, so a retried bundle's abandoned file is never
published. After the job, the driver publishes (:meth:`OutputDir.publish`): the manifest's files
become ``predictions-SSSSS-of-NNNNN.<ext>`` and ``rejected.jsonl``, then ``predict.json`` (the
summary) is written, last.

A local output directory is replaced in one ``rename``: the new one is built beside it under a
hidden name (``.<name>.tmp-predict-<token>``) and swapped in, so readers see the old output or
the new one, never a mix, and a killed job leaves only the hidden directory (removed by a later
run once an hour old). Object stores (``gs://``, ``s3://``) have no directory rename: there the
files are staged in ``<output>/.tmp-predict-<token>/``, the old ``predict.json`` is deleted
first, the files are moved in, and the new ``predict.json`` is written last, so an output
without ``predict.json`` is never a finished one (the same holds locally when the directory
cannot be renamed, e.g. on a FUSE mount).
"""

from __future__ import annotations

import errno
import fnmatch
import os
import shutil
import time
import uuid
import zlib

import apache_beam as beam
import pyarrow.parquet as pq
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from apache_beam.transforms.window import GlobalWindows

from estflow.components._io.jsonfile import write_json
from estflow.components._io.tfrecords import concatenate
from estflow.dsl.contracts import Files

__all__ = ["OutputError", "OutputDir", "WriteBundleFiles", "PREDICTIONS", "REJECTED",
           "STALE_SECONDS"]

PREDICTIONS, REJECTED = "predictions", "rejected"
STALE_SECONDS = 3600.0
"""Hidden staging directories older than this are leftovers of killed jobs."""
_RAW = CompressionTypes.UNCOMPRESSED
_OURS = (f"{Files.PREDICTIONS_PREFIX}-*", Files.REJECTED, Files.PREDICT_RESULT, ".tmp-predict-*")


class OutputError(ValueError):
    """The output directory cannot be replaced (it holds files that are not predictions)."""


class WriteBundleFiles(beam.DoFn):
    """``(kind, payload, rows)`` -> one file per kind per bundle in ``temp_dir``; for each,
    when the bundle finishes, ``(kind, path, rows)``.

    Args:
        temp_dir: the job's directory of unfinished files.
        header: bytes that start every predictions file (a CSV header).
        gzip_level: compress predictions files (TFRecords) at this level; None: as they are.
        parquet_schema: write predictions as Parquet of this schema (payloads are tables).
    """

    def __init__(self, temp_dir: str, *, header: bytes = b"", gzip_level: int | None = None,
                 parquet_schema=None) -> None:
        self._temp, self._header = temp_dir, header
        self._gzip, self._schema = gzip_level, parquet_schema

    def start_bundle(self) -> None:
        self._open: dict = {}

    def process(self, item):
        kind, payload, rows = item
        entry = self._open.get(kind)
        if entry is None:
            entry = self._open[kind] = [*self._create(kind), 0]
        entry[1].write(payload)
        entry[2] += rows

    def _create(self, kind: str):
        path = FileSystems.join(self._temp, f"{kind}-{uuid.uuid4().hex}")
        raw = FileSystems.create(path, compression_type=_RAW)
        if kind == REJECTED:
            return path, _Plain(raw)
        if self._schema is not None:
            return path, _Parquet(raw, self._schema)
        if self._gzip is not None:
            return path, _Gzip(raw, self._gzip, self._header)
        return path, _Plain(raw, self._header)

    def finish_bundle(self):
        for kind, (path, handle, rows) in self._open.items():
            handle.close()
            yield GlobalWindows.windowed_value((kind, path, rows))


class _Plain:
    def __init__(self, raw, header: bytes = b"") -> None:
        self._raw = raw
        if header:
            raw.write(header)

    def write(self, data: bytes) -> None:
        self._raw.write(data)

    def close(self) -> None:
        self._raw.close()


class _Gzip(_Plain):
    """One GZIP member, mtime 0 (the same records give the same file)."""

    def __init__(self, raw, level: int, header: bytes = b"") -> None:
        self._zlib = zlib.compressobj(level, zlib.DEFLATED, 31)
        super().__init__(raw)
        if header:
            self.write(header)

    def write(self, data: bytes) -> None:
        self._raw.write(self._zlib.compress(data))

    def close(self) -> None:
        self._raw.write(self._zlib.flush())
        self._raw.close()


class _Parquet:
    def __init__(self, raw, schema) -> None:
        self._raw = raw
        self._writer = pq.ParquetWriter(raw, schema)

    def write(self, table) -> None:
        self._writer.write_table(table)

    def close(self) -> None:
        self._writer.close()
        self._raw.close()


class OutputDir:
    """An output directory replaced as a whole by :meth:`publish` (see the module docstring).

    Args:
        dest: the directory (local path or URL).
        token: names this job's staging (default: random).
    """

    def __init__(self, dest: str, token: str | None = None) -> None:
        self.remote = "://" in dest
        self.dest = dest.rstrip("/") if self.remote else os.path.abspath(dest)
        self.token = token or uuid.uuid4().hex[:12]
        if self.remote:
            self.staging = f"{self.dest}/.tmp-predict-{self.token}"
        else:
            parent, name = os.path.split(self.dest)
            self.staging = os.path.join(parent, f".{name}.tmp-predict-{self.token}")
        self.temp = FileSystems.join(self.staging, ".tmp-write")

    def prepare(self) -> list[str]:
        """Check that the output may be replaced, remove stale staging directories, create
        this job's; returns the stale directories removed.

        Raises:
            OutputError: the output exists and is not a directory of predictions.
        """
        self._check_replaceable()
        removed = _remove_stale_remote(self.dest) if self.remote else _remove_stale(self.dest)
        if not self.remote:
            os.makedirs(self.temp)
        return removed

    def _check_replaceable(self) -> None:
        if self.remote:
            found = [m.path for m in FileSystems.match([f"{self.dest}/*"])[0].metadata_list]
            names = [path[len(self.dest) + 1:].split("/")[0] for path in found]
        elif os.path.isdir(self.dest):
            names = os.listdir(self.dest)
        elif os.path.exists(self.dest):
            raise OutputError(f"the output {self.dest} is a file, not a directory")
        else:
            return
        other = sorted({n for n in names if not any(fnmatch.fnmatch(n, p) for p in _OURS)})
        if other:
            raise OutputError(f"the output directory {self.dest} holds files that are not "
                              f"predictions ({', '.join(other[:5])}); batch prediction replaces "
                              "its output as a whole, so it only writes to a new or empty "
                              "directory or over a previous prediction's output")

    def discard(self) -> None:
        """Remove this job's staging directory (after a failure)."""
        if self.remote:
            leftovers = FileSystems.match([f"{self.staging}/**"])[0].metadata_list
            if leftovers:
                FileSystems.delete([m.path for m in leftovers])
        else:
            shutil.rmtree(self.staging, ignore_errors=True)

    def publish(self, files: list[tuple[str, str, int]], extension: str,
                summary: dict | None) -> list[str]:
        """Publish the manifest's ``files`` (``(kind, path, rows)``) and ``summary`` (written
        last as ``predict.json``; None: publish the rejected rows alone, after a failure).
        Returns the published data files' paths."""
        predictions = sorted(path for kind, path, _ in files if kind == PREDICTIONS)
        rejected = sorted(path for kind, path, _ in files if kind == REJECTED)
        if summary is None:
            predictions = []
        root = self.dest if self.remote else self.staging
        names = [f"{Files.PREDICTIONS_PREFIX}-{i:05d}-of-{len(predictions):05d}{extension}"
                 for i in range(len(predictions))]
        published = [FileSystems.join(self.dest, n) for n in names + [Files.REJECTED]]
        if self.remote:
            self._clear_remote()
        if predictions:
            FileSystems.rename(predictions, [FileSystems.join(root, n) for n in names])
        concatenate(rejected, FileSystems.join(root, Files.REJECTED))  # empty if none
        if not self.remote:
            shutil.rmtree(self.temp, ignore_errors=True)
        if summary is not None:
            summary = {**summary, "output_files": published[:-1]}
            if not self.remote:
                write_json(os.path.join(self.staging, Files.PREDICT_RESULT), summary)
        if self.remote:
            if summary is not None:
                write_json(f"{self.dest}/{Files.PREDICT_RESULT}", summary)
            self.discard()
        else:
            self._swap_in()
        return published[:-1] if summary is not None else published[-1:]

    def _clear_remote(self) -> None:
        """The old output's files, predict.json first (the output is unfinished from now)."""
        marker = f"{self.dest}/{Files.PREDICT_RESULT}"
        if FileSystems.exists(marker):
            FileSystems.delete([marker])
        old = [m.path for pattern in (f"{Files.PREDICTIONS_PREFIX}-*", Files.REJECTED)
               for m in FileSystems.match([f"{self.dest}/{pattern}"])[0].metadata_list]
        if old:
            FileSystems.delete(old)

    def _swap_in(self) -> None:
        parent, name = os.path.split(self.dest)
        old = os.path.join(parent, f".{name}.old-{self.token}")
        had_old = os.path.isdir(self.dest)
        try:
            if had_old:
                os.rename(self.dest, old)
            os.rename(self.staging, self.dest)
        except OSError as err:
            if err.errno not in (errno.EXDEV, errno.EPERM, errno.EINVAL, errno.ENOTSUP,
                                 errno.EBUSY, errno.EACCES):
                raise
            if had_old and os.path.isdir(old) and not os.path.exists(self.dest):
                os.rename(old, self.dest)
            self._move_files()  # a directory that cannot be renamed (FUSE, a mount point)
            return
        shutil.rmtree(old, ignore_errors=True)

    def _move_files(self) -> None:
        os.makedirs(self.dest, exist_ok=True)
        for name in os.listdir(self.dest):
            if any(fnmatch.fnmatch(name, p) for p in _OURS[:3]):
                os.remove(os.path.join(self.dest, name))
        summary = os.path.join(self.staging, Files.PREDICT_RESULT)
        for name in sorted(os.listdir(self.staging)):
            if name != Files.PREDICT_RESULT:
                shutil.move(os.path.join(self.staging, name), os.path.join(self.dest, name))
        if os.path.exists(summary):
            shutil.move(summary, os.path.join(self.dest, Files.PREDICT_RESULT))
        shutil.rmtree(self.staging, ignore_errors=True)


def _remove_stale_remote(dest: str) -> list[str]:
    """Staging objects under ``dest`` left by killed jobs (none changed for an hour)."""
    found = FileSystems.match([f"{dest}/.tmp-predict-*/**"])[0].metadata_list
    groups: dict[str, list] = {}
    for entry in found:
        groups.setdefault(entry.path[len(dest) + 1:].split("/")[0], []).append(entry)
    removed = []
    for name, entries in sorted(groups.items()):
        if time.time() - max(e.last_updated_in_seconds for e in entries) > STALE_SECONDS:
            FileSystems.delete([e.path for e in entries])
            removed.append(f"{dest}/{name}")
    return removed


def _remove_stale(dest: str) -> list[str]:
    """Hidden staging (and swapped-out) directories beside ``dest`` left by killed jobs."""
    parent, name = os.path.split(dest)
    if not os.path.isdir(parent):
        return []
    removed = []
    for entry in os.listdir(parent):
        if entry.startswith((f".{name}.tmp-predict-", f".{name}.old-")):
            path = os.path.join(parent, entry)
            if time.time() - os.path.getmtime(path) > STALE_SECONDS:
                shutil.rmtree(path, ignore_errors=True)
                removed.append(path)
    return removed
