"""Ingest: read CSV, validate every row, split train/eval deterministically, write tf.Examples.

``python -m estflow.components.ingest --spec S --examples OUT_DIR --source-root ROOT``

Output layout (names from :class:`estflow.dsl.contracts.Files`)::

    OUT_DIR/train/part-00000-of-00001.tfrecord.gz   GZIP TFRecords of raw tf.train.Example
    OUT_DIR/eval/part-00000-of-00001.tfrecord.gz
    OUT_DIR/rejected.jsonl                           {"file", "line", "row", "reason"} per bad row
    OUT_DIR/ingest.json                              counts; written last, only on success

A cell left empty in a column with a declared default is written *absent* from the Example: the
transform graph fills the default, so training and serving (which receives raw Examples that may
omit the feature) see exactly the same value. No row is ever dropped silently: every row is
either written to a split or listed in ``rejected.jsonl`` with its reason.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import csv
import glob
import hashlib
import json
import math
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

from estflow.components import _runtime
from estflow.dsl.contracts import Files
from estflow.dsl.pipeline import Pipeline

# TensorFlow is only needed for its TFRecord writer and Example proto; quiet it before import.
_runtime.quiet_tensorflow()
import tensorflow as tf  # noqa: E402

__all__ = ["IngestError", "Reject", "RowParser", "SHARD_NAME", "run", "main"]

SHARD_NAME = "part-00000-of-00001.tfrecord.gz"
"""The one shard each split is written to (readers should glob the split directory)."""

_PROGRESS_EVERY = 50_000


class IngestError(RuntimeError):
    """The data cannot be ingested as declared (missing column, too many bad rows, ...)."""


def run(pipeline: Pipeline, examples_dir: str | Path, *,
        source_root: str | Path | None = None) -> dict:
    """Read the pipeline's CSV source, validate and split it, and write raw tf.Examples.

    Args:
        pipeline: the validated pipeline (its ``source``, ``split`` and raw columns are used).
        examples_dir: the output artifact directory (created; previous outputs are replaced).
        source_root: directory against which a relative ``source.path`` resolves (default:
            the current directory).

    Returns:
        The summary also written to ``ingest.json``.

    Raises:
        IngestError: no file matches the source, a file lacks a needed column, there are no
            data rows, or more than ``source.max_rejected_fraction`` of the rows are rejected.
    """
    progress = _runtime.Progress("ingest")
    out = Path(examples_dir)
    files = _source_files(pipeline, Path(source_root) if source_root else Path.cwd())
    _clear_outputs(out)
    stats = _Stats(files)
    progress(f"reading {len(files)} file(s): {', '.join(map(str, files))}")
    with _Writers(out) as writers:
        for path in files:
            _ingest_file(pipeline, path, writers, stats, progress)
    summary = stats.summary(pipeline, progress.elapsed)
    progress(f"read {stats.read} rows: {stats.counts['train']} train, {stats.counts['eval']} "
             f"eval, {stats.rejected} rejected, {stats.blank_lines} blank lines skipped")
    _check_rejected(pipeline, stats, out / Files.REJECTED)
    _runtime.write_json(out / Files.INGEST_STATS, summary)
    return summary


def _source_files(pipeline: Pipeline, root: Path) -> list[Path]:
    pattern = Path(pipeline.source.path)
    if not pattern.is_absolute():
        pattern = root / pattern
    if glob.has_magic(str(pattern)):
        files = sorted(Path(p) for p in glob.glob(str(pattern)) if Path(p).is_file())
    else:
        files = [pattern] if pattern.is_file() else []
    if not files:
        raise IngestError(f"no CSV file matches source.path={pipeline.source.path!r} "
                          f"(resolved to {str(pattern)!r} against source root {str(root)!r})")
    return files


def _clear_outputs(out: Path) -> None:
    # Replace only what this step writes, so a rerun never mixes old shards with new ones.
    for name in (Files.TRAIN_EXAMPLES, Files.EVAL_EXAMPLES):
        shutil.rmtree(out / name, ignore_errors=True)
        (out / name).mkdir(parents=True)
    for name in (Files.REJECTED, Files.INGEST_STATS):
        (out / name).unlink(missing_ok=True)


class _Writers(contextlib.ExitStack):
    """The two split writers plus the rejected-rows file, closed together."""

    def __init__(self, out: Path) -> None:
        super().__init__()
        self.splits = {split: self.enter_context(tf.io.TFRecordWriter(
            str(out / name / SHARD_NAME), "GZIP")) for split, name in
            (("train", Files.TRAIN_EXAMPLES), ("eval", Files.EVAL_EXAMPLES))}
        self.rejected = self.enter_context(open(out / Files.REJECTED, "w", encoding="utf-8"))


class _Stats:
    """Counts for ingest.json and the progress lines."""

    def __init__(self, files: list[Path]) -> None:
        self.files = files
        self.counts = collections.Counter({"train": 0, "eval": 0})
        self.reasons: collections.Counter = collections.Counter()
        self.missing: collections.Counter = collections.Counter()
        self.blank_lines = 0

    @property
    def rejected(self) -> int:
        return sum(self.reasons.values())

    @property
    def read(self) -> int:
        return self.counts["train"] + self.counts["eval"] + self.rejected

    def summary(self, pipeline: Pipeline, elapsed: float) -> dict:
        return {
            "source_files": [str(f) for f in self.files],
            "read": self.read,
            "train": self.counts["train"],
            "eval": self.counts["eval"],
            "rejected": self.rejected,
            "rejected_by_reason": dict(sorted(self.reasons.items())),
            "missing_by_column": {c.name: self.missing[c.name] for c in pipeline.raw_columns()},
            "blank_lines": self.blank_lines,
            "columns": {c.name: c.dtype for c in pipeline.raw_columns()},
            "split": {"eval_fraction": pipeline.split.eval_fraction, "key": pipeline.split.key},
            "elapsed_s": round(elapsed, 3),
        }


class Reject(Exception):
    """One row cannot be used: ``kind`` groups it in ingest.json, ``message`` explains it."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


def _to_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # nan/inf would poison every analyzer downstream
        raise ValueError(text)
    return value


def _to_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        # Accept integral floats ("3.0", "1e3"): CSV exporters write ints of a column with
        # gaps that way. A fractional value ("3.5") still raises.
        number = float(text)
        if not (math.isfinite(number) and number.is_integer()):
            raise ValueError(text) from None
        value = int(number)
    if not -(2**63) <= value < 2**63:
        raise ValueError(text)
    return value


# dtype -> (parser, what an error message says was expected, the Example's value list)
_DTYPES = {
    "float": (_to_float, "a finite float", "float_list"),
    "int": (_to_int, "an integer", "int64_list"),
    "string": (str.encode, "a string", "bytes_list"),
}


class RowParser:
    """Turns the fields of one CSV row into a serialized raw ``tf.train.Example``.

    Args:
        pipeline: supplies the raw columns (dtype, default), the split key and the label.
        header: the file's header fields.
        path: the file, for error messages.

    Raises:
        IngestError: a needed column is missing from (or repeated in) the header.
    """

    def __init__(self, pipeline: Pipeline, header: list[str], path: Path) -> None:
        positions = _positions(header, [c.name for c in pipeline.raw_columns()], path)
        self.width = len(header)
        self.columns = [(c.name, positions[c.name], c.dtype == "string", c.default is None,
                         *_DTYPES[c.dtype]) for c in pipeline.raw_columns()]
        self.key_index = positions[pipeline.split.key] if pipeline.split.key else None
        label = pipeline.label
        self.label_check = None
        if label.dtype == "string" and label.column in positions:
            # Rejected here, where the row can be named; in the graph it could only become -1.
            self.label_check = (positions[label.column], label.column, label.vocabulary)

    def parse(self, fields: list[str], raw: str) -> tuple[bytes, bytes, list[str]]:
        """Return (serialized Example, split-hash key, names of columns left absent).

        Raises:
            Reject: the row has the wrong width, lacks a required value, or holds a value
                that does not parse as its column's dtype.
        """
        if len(fields) != self.width:
            raise Reject("wrong_field_count", f"expected {self.width} fields (as in the "
                         f"header), got {len(fields)}")
        example = tf.train.Example()
        features = example.features.feature
        missing = []
        for name, index, is_string, required, convert, what, kind in self.columns:
            text = fields[index] if is_string else fields[index].strip()
            if text == "":
                if required:
                    raise Reject(f"missing_required:{name}", f"missing required column "
                                 f"{name!r} (it declares no default)")
                missing.append(name)  # absent: the transform graph fills the default
                continue
            try:
                value = convert(text)
            except ValueError:
                raise Reject(f"bad_value:{name}", f"column {name!r}: expected {what}, got "
                             f"{text!r}") from None
            getattr(features[name], kind).value.append(value)
        self._check_label(fields)
        key = fields[self.key_index] if self.key_index is not None else raw
        # deterministic: sorted map keys, so the same rows give byte-identical files every run
        return example.SerializeToString(deterministic=True), key.encode("utf-8"), missing

    def _check_label(self, fields: list[str]) -> None:
        if self.label_check is None:
            return
        index, name, vocabulary = self.label_check
        if fields[index] not in vocabulary:
            raise Reject("label_not_in_vocabulary", f"label column {name!r}: "
                         f"{fields[index]!r} is not one of the declared classes {vocabulary}")


def _positions(header: list[str], needed: list[str], path: Path) -> dict[str, int]:
    positions: dict[str, int] = {}
    for name in needed:
        count = header.count(name)
        if count != 1:
            problem = "is not in" if count == 0 else f"appears {count} times in"
            raise IngestError(f"column {name!r} (needed by the pipeline) {problem} the header "
                              f"of {path}; header columns: {header}")
        positions[name] = header.index(name)
    return positions


def _ingest_file(pipeline: Pipeline, path: Path, writers: _Writers, stats: _Stats,
                 progress: _runtime.Progress) -> None:
    with open(path, "rb") as handle:
        lines = _LineReader(handle)
        reader = csv.reader(lines, delimiter=pipeline.source.delimiter)
        parser = RowParser(pipeline, _header(reader, lines, path), path)
        for start, raw, fields, bad_line in _records(reader, lines):
            try:
                if bad_line is not None:
                    raise Reject("invalid_utf8", f"line {bad_line} is not valid UTF-8")
                if fields is None:
                    raise Reject("malformed_csv", "the CSV parser could not read this row")
                example, split_key, missing = parser.parse(fields, raw)
            except Reject as reject:
                _write_rejected(writers, stats, path, start, raw, reject)
                continue
            split = "eval" if _is_eval(split_key, pipeline.split.eval_fraction) else "train"
            writers.splits[split].write(example)
            stats.counts[split] += 1
            stats.missing.update(missing)
            if stats.read % _PROGRESS_EVERY == 0:
                progress(f"{stats.read} rows read ({stats.rejected} rejected)")
        stats.blank_lines += lines.blank_lines


def _header(reader, lines: _LineReader, path: Path) -> list[str]:
    try:
        header = next(reader)
    except StopIteration:
        raise IngestError(f"{path} is empty: expected a header row") from None
    if lines.bad_line is not None:
        raise IngestError(f"the header (line 1) of {path} is not valid UTF-8")
    lines.take()
    return header


def _records(reader, lines: _LineReader) -> Iterator[tuple[int, str, list[str] | None,
                                                          int | None]]:
    """Yield ``(first line number, raw text, fields, first non-UTF-8 line or None)`` per CSV
    record; fields is None when the csv module cannot parse the record.

    Records may span lines (quoted newlines); the raw text is what the reader consumed.
    """
    while True:
        start = lines.number + 1
        try:
            fields = next(reader)
        except StopIteration:
            return
        except csv.Error:
            fields = None
        bad_line = lines.bad_line
        raw = lines.take()
        if fields == []:  # csv yields [] for an empty line: not a row, only counted
            lines.blank_lines += 1
            continue
        yield start, raw, fields, bad_line


class _LineReader:
    """Feeds csv.reader one decoded line at a time, remembering the raw text of the current
    record and whether any of its lines was not UTF-8, so a bad line rejects one row instead
    of failing the whole file (a text-mode file would raise on the first bad byte)."""

    def __init__(self, handle) -> None:
        self._lines = iter(handle)
        self.number = 0
        self.blank_lines = 0
        self._pending: list[str] = []
        self.bad_line: int | None = None

    def __iter__(self) -> _LineReader:
        return self

    def __next__(self) -> str:
        line = next(self._lines)
        self.number += 1
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError:
            # backslashreplace keeps the offending bytes visible in rejected.jsonl.
            text = line.decode("utf-8", errors="backslashreplace")
            if self.bad_line is None:
                self.bad_line = self.number
        if self.number == 1:
            text = text.removeprefix("\ufeff")  # the BOM spreadsheet exports put first
        self._pending.append(text)
        return text

    def take(self) -> str:
        """The raw text of the record just read (without its final newline); resets state."""
        raw = "".join(self._pending).rstrip("\r\n")
        self._pending = []
        self.bad_line = None
        return raw


def _write_rejected(writers: _Writers, stats: _Stats, path: Path, line: int, raw: str,
                    reject: Reject) -> None:
    record = {"file": str(path), "line": line, "row": raw, "reason": reject.message}
    writers.rejected.write(json.dumps(record, ensure_ascii=False) + "\n")
    stats.reasons[reject.kind] += 1


def _is_eval(key: bytes, eval_fraction: float) -> bool:
    # A content hash (not Python's salted hash()) so a row lands in the same split on every
    # run, machine and runner.
    digest = hashlib.md5(key, usedforsecurity=False).digest()
    return int.from_bytes(digest[:8], "big") / 2.0**64 < eval_fraction


def _check_rejected(pipeline: Pipeline, stats: _Stats, rejected_path: Path) -> None:
    if stats.read == 0:
        raise IngestError(f"no data rows in {', '.join(map(str, stats.files))}")
    fraction = stats.rejected / stats.read
    limit = pipeline.source.max_rejected_fraction
    if fraction > limit:
        top = ", ".join(f"{kind}: {n}" for kind, n in stats.reasons.most_common(5))
        raise IngestError(
            f"{stats.rejected} of {stats.read} rows rejected ({fraction:.2%}), more than "
            f"source.max_rejected_fraction={limit} allows; most common reasons: {top}; every "
            f"rejected row with its reason is in {rejected_path}")


def main(argv: list[str] | None = None) -> int:
    """Entry point: ``python -m estflow.components.ingest --spec S --examples DIR``."""
    parser = argparse.ArgumentParser(prog="estflow.components.ingest", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--spec", required=True, help="pipeline spec: JSON file path or text")
    parser.add_argument("--examples", required=True, help="output examples directory")
    parser.add_argument("--source-root", default=None,
                        help="directory (or module:pkg.mod) relative source paths resolve to")
    args = parser.parse_args(argv)
    pipeline = _runtime.load_pipeline(args.spec)
    root = _runtime.resolve_source_root(args.source_root)
    try:
        run(pipeline, args.examples, source_root=root)
    except IngestError as err:
        print(f"[ingest] error: {err}", file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
