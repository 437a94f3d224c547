"""Spans on the command line: ``estflow run PIPELINE --span X`` and ``estflow backfill PIPELINE
--from X --to Y``, and the exit status of a run whose data checks stopped it.

A source declaring ``spans=ef.Spans()`` has a ``{span:FORMAT}`` placeholder in its path. A run
reads one span: the one ``--span`` names, else the latest present on this machine. A span with
no file is an anomaly (``SPAN_MISSING``) that stops the run before any step, exit status
:data:`EXIT_DATA_CHECKS` (4), as a run whose ``validate`` step found a blocking anomaly does,
and one whose ``ingest`` step rejected more than the source allows (exit status 4 too: no
``--resume`` hint, since a resume reads the same data).
``estflow backfill`` runs each span from X to Y in order (every day between them for a daily
format, else the spans present), reusing cached steps, and stops at the first run that does
not exit 0, printing the command that continues from there.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import glob
import os
import shlex
import sys
from collections.abc import Callable
from collections.abc import Sequence
from datetime import datetime
from datetime import timedelta

from estflow.dsl.checks import SPAN_PLACEHOLDER
from estflow.dsl.checks import Spans
from estflow.dsl.checks import select_span
from estflow.dsl.checks import select_window
from estflow.dsl.checks import source_patterns
from estflow.dsl.checks import span_of
from estflow.dsl.contracts import INGEST
from estflow.dsl.contracts import VALIDATE
from estflow.dsl.errors import DslError
from estflow.pipelines import data_check
from estflow.pipelines.cli.usage import PIPELINE_HELP
from estflow.pipelines.cli.usage import UsageError
from estflow.pipelines.cli.usage import load_target

__all__ = ["add_commands", "add_span_option", "select", "EXIT_DATA_CHECKS", "SpanMissing",
           "checks_stopped"]

EXIT_DATA_CHECKS = 4
"""``estflow run``: the run's data broke a blocking check (the validate step's anomalies, the
ingest step's rejected rows past the source's limits, or a missing span): it stopped before
training and pushed nothing."""

_VALIDATE, _INGEST = VALIDATE.name, INGEST.name


class SpanMissing(Exception):
    """The span a run is to read has no file: an anomaly, never a smaller training set."""


def add_span_option(cmd: argparse.ArgumentParser) -> None:
    """``--span X`` of ``estflow run``."""
    cmd.add_argument("--span", default=None, metavar="SPAN",
                     help="the span of the source to read (its path's {span:FORMAT}, e.g. "
                     "2024-01-03); default: the latest present")


def present_spans(loaded) -> list[str]:
    """The spans of the source with at least one file on this machine, in order."""
    source = loaded.pipeline.source
    pattern = os.path.join(loaded.local_source_root, source.path)
    files = glob.glob(SPAN_PLACEHOLDER.sub("*", pattern), recursive=True)
    return sorted({s for f in files if os.path.isfile(f) and (s := span_of(pattern, f))})


def select(loaded, span: str | None):
    """``loaded`` reading one span (unchanged for a source without spans).

    Raises:
        UsageError: ``--span`` for a source without spans, or in the wrong format.
        SpanMissing: the span has no file.
    """
    source = getattr(loaded.pipeline, "source", None)
    if getattr(source, "spans", None) is None:
        if span is not None:
            raise UsageError(f"--span {span}: the source of {loaded.file} declares no spans "
                             "(declare spans=ef.Spans() and a {span:FORMAT} in its path)")
        return loaded
    present = present_spans(loaded) if "://" not in source.path else []
    if span is None:
        if not present:
            raise SpanMissing(f"SPAN_MISSING: no span of source.path={source.path!r} has a "
                              f"file under {loaded.local_source_root}")
        span = present[-1]
    try:
        select_span(source, span)  # the value's format
        window = window_of(loaded, span, source.spans.last, present)
        chosen = select_window(source, window)
    except DslError as err:
        raise UsageError(str(err)) from None
    missing = [s for s in window if s not in present] if "://" not in source.path else []
    if missing:
        patterns = source_patterns(select_window(source, missing))
        raise SpanMissing(f"SPAN_MISSING (span {', '.join(missing)}): no file matches "
                          f"{', '.join(map(repr, patterns))}; observed 0 files, allowed >= 1 "
                          "(spans present: "
                          f"{', '.join(present[-5:]) or 'none'})")
    empty = _empty_spans(loaded, source, window)
    if empty:
        raise SpanMissing(f"SPAN_EMPTY (span {', '.join(empty)}): its files hold no data row; "
                          "observed 0 rows, allowed >= 1")
    what = f"span {span}" if len(window) == 1 else \
        f"spans {window[0]} to {window[-1]} ({len(window)}, the last {source.spans.last})"
    print(f"estflow run: {what} ({', '.join(source_patterns(chosen))})", flush=True)
    pipeline = dataclasses.replace(loaded.pipeline, source=chosen)
    moved = type(loaded)(pipeline, loaded.module, loaded.file, loaded.importable)
    return moved


def _empty_spans(loaded, source, window: list[str]) -> list[str]:
    """The spans of ``window`` whose local CSV files hold only their header (an empty span is
    an anomaly, as a missing one; other sources: ingest finds it)."""
    if source.header_delimiter() is None or "://" in source.path:
        return []
    empty = []
    for value in window:
        one = dataclasses.replace(loaded.pipeline, source=select_window(source, [value]))
        files = data_check.local_csv_files(one, loaded.local_source_root)
        if files and not any(_has_data_row(f) for f in files):
            empty.append(value)
    return empty


def _has_data_row(path) -> bool:
    """Whether a CSV file has a non-blank line after its header (compressed ones too)."""
    opener = data_check.OPENERS.get(path.suffix.lower(), open)
    try:
        with opener(path, "rt", encoding="utf-8-sig", errors="replace") as lines:
            next(lines, None)
            return any(line.strip() for line in lines)
    except OSError:
        return True  # unreadable here: ingest reports it


def window_of(loaded, end: str, last: int, present: list[str]) -> list[str]:
    """The ``last`` spans ending at ``end``, oldest first: every day (hour) before it for a
    format whose finest field is the day (hour), so a missing one is named; else the spans
    present up to ``end`` (fewer than ``last``: SPAN_MISSING)."""
    if last == 1:
        return [end]
    fmt = Spans.format_of(loaded.pipeline.source.path)
    step = _step_of(fmt)
    if step is None:
        if "://" in loaded.pipeline.source.path:
            raise UsageError(f"spans=ef.Spans(last={last}) over a bucket needs a daily or "
                             f"hourly span format to list the window (got {fmt!r})")
        before = sorted({*(s for s in present if s <= end), end})[-last:]
        if len(before) < last:
            raise SpanMissing(f"SPAN_MISSING (the {last - len(before)} span(s) before "
                              f"{before[0]}): the window of the last {last} spans ending at "
                              f"{end}; observed {len(before)} spans, allowed {last}")
        return before
    at = datetime.strptime(end, fmt)
    return [(at - step * back).strftime(fmt) for back in range(last - 1, -1, -1)]


def _step_of(fmt: str) -> timedelta | None:
    """The span's length for a format whose finest field is the hour or the day."""
    step = timedelta(hours=1) if "%H" in fmt else timedelta(days=1) if "%d" in fmt else None
    return None if step is None or any(f"%{c}" in fmt for c in "MSjy") else step


def checks_stopped(err: Exception) -> int | None:
    """The exit status of a run that a data check stopped (None: another failure)."""
    if isinstance(err, SpanMissing):
        print(f"estflow run: the data checks stopped the run before any step: {err}",
              file=sys.stderr)
        return EXIT_DATA_CHECKS
    if getattr(err, "returncode", None) == EXIT_DATA_CHECKS and \
            f"step {_VALIDATE!r}" in str(err):
        print(f"estflow run: exit status {EXIT_DATA_CHECKS}: the data broke a blocking check "
              "(the anomalies above, each with its column, kind, observed and allowed value; "
              "the report is validate/validation/data_report.html in the run's directory); "
              "nothing was trained or pushed", file=sys.stderr)
        return EXIT_DATA_CHECKS
    if getattr(err, "returncode", None) == EXIT_DATA_CHECKS and \
            f"step {_INGEST!r}" in str(err):
        print(f"estflow run: exit status {EXIT_DATA_CHECKS}: the data broke a check its source "
              "declares (max_rejected_fraction or schema_check: the ingest lines above name "
              "each column with cells of another type, UNEXPECTED_DATA_TYPE, and the rejected "
              "rows are in ingest/examples/rejected.jsonl in the run's directory); nothing was "
              "trained or pushed, and a resume would read the same data", file=sys.stderr)
        return EXIT_DATA_CHECKS
    return None


def add_commands(commands: argparse._SubParsersAction,
                 estflow: Callable[[Sequence[str]], int]) -> None:
    """Register ``backfill``, which runs ``estflow(["run", PIPELINE, "--span", S])`` per span
    (the ``estflow`` command's ``main``, passed in by :mod:`estflow.pipelines.cli`, which
    imports this module)."""
    cmd = commands.add_parser(
        "backfill", help="run a pipeline once per span, in order",
        description="Run the pipeline once per span from --from to --to (inclusive), in "
        "order, each as estflow run PIPELINE --span S (cached steps are reused). Stops at the "
        "first run that does not exit 0 and prints the command that continues; its exit "
        "status is that run's.")
    cmd.add_argument("pipeline", metavar="PIPELINE", help=PIPELINE_HELP)
    cmd.add_argument("--from", dest="first", required=True, metavar="SPAN")
    cmd.add_argument("--to", dest="last", required=True, metavar="SPAN")
    cmd.set_defaults(handler=functools.partial(_backfill, estflow=estflow))


def spans_between(loaded, first: str, last: str) -> list[str]:
    """The spans from ``first`` to ``last``: each day (or hour) between them for a format
    whose finest field is the day (hour), so a missing one is run (and stops); else those
    present."""
    fmt = Spans.format_of(loaded.pipeline.source.path)
    step = _step_of(fmt)
    if step is None:
        return [s for s in present_spans(loaded) if first <= s <= last]
    try:
        at, end = datetime.strptime(first, fmt), datetime.strptime(last, fmt)
    except ValueError as err:
        raise UsageError(f"--from {first} --to {last}: expected spans written as {fmt!r}: "
                         f"{err}") from None
    out = []
    while at <= end:
        out.append(at.strftime(fmt))
        at += step
    return out


def _backfill(args: argparse.Namespace, estflow: Callable[[Sequence[str]], int]) -> int:
    loaded = load_target(args.pipeline)
    if getattr(loaded.pipeline.source, "spans", None) is None:
        raise UsageError(f"the source of {args.pipeline} declares no spans to backfill")
    spans = spans_between(loaded, args.first, args.last)
    if not spans:
        raise UsageError(f"no span from {args.first} to {args.last}")
    for span in spans:
        print(f"estflow backfill: span {span} ({spans.index(span) + 1} of {len(spans)})",
              flush=True)
        status = estflow(["run", args.pipeline, "--span", span])
        if status != 0:
            again = ["estflow", "backfill", args.pipeline, "--from", span, "--to", args.last]
            print(f"estflow backfill: span {span} stopped with exit status {status}; after "
                  f"fixing the cause, continue with: {shlex.join(again)}", file=sys.stderr)
            return status
    print(f"estflow backfill: {len(spans)} spans done")
    return 0
