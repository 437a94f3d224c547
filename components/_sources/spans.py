"""Which spans a run reads when the runner did not choose them: on Kubeflow, the fingerprint
task (the first of the run) resolves a source declaring ``spans=ef.Spans(...)`` before it keys
the steps, so every task gets the resolved source and the cache keys cover the spans read.

The span is, in order: the run's ``span`` parameter when set (a span value, or a time as a
recurring run's ``[[ScheduledTime]]`` macro writes it); else the run's schedule time (KFP
2.17's ``{{$.pipeline_job_schedule_time_utc}}``, which a backend without it leaves unset or
unresolved); else the latest span present at the source. A time selects the span it falls in:
the time written in the span's format (``2024-01-03T02:00:00Z`` is ``2024-01-03`` for
``%Y-%m-%d``). With ``Spans(last=N)`` the window is the N spans ending there, as
``estflow run`` takes it. A missing span is ``SPAN_MISSING``: the task fails, so nothing runs.
This module imports neither Beam nor TensorFlow (the fingerprint task runs in a small image).
"""

from __future__ import annotations

import dataclasses
import glob
import os
import re
import types
from datetime import UTC
from datetime import datetime
from datetime import timedelta

from estflow.components._io import outside_facts
from estflow.dsl.checks import SPAN_PLACEHOLDER
from estflow.dsl.checks import Spans
from estflow.dsl.checks import select_window
from estflow.dsl.checks import span_of

__all__ = ["SpanMissing", "resolve", "span_at", "window", "EXIT_BLOCKED"]

EXIT_BLOCKED = 4
"""The exit status of a run whose data broke a blocking check (a missing span here, the
validate step's anomalies; ``estflow run``'s too)."""


class SpanMissing(RuntimeError):
    """A span the run is to read has no file."""


def span_at(value: str, fmt: str) -> str | None:
    """``value`` as a span of format ``fmt``: itself when written so, the span a time falls in
    (ISO 8601, converted to UTC when it has a zone; ``20060102150405`` as the recurring runs'
    ``[[ScheduledTime]]`` writes it), else None."""
    value = value.strip()
    if re.fullmatch(Spans.value_regex(fmt), value):
        return value
    try:
        at = (datetime.strptime(value, "%Y%m%d%H%M%S") if re.fullmatch(r"\d{14}", value)
              else datetime.fromisoformat(value.replace("Z", "+00:00")))
    except ValueError:
        return None
    if at.tzinfo is not None:
        at = at.astimezone(UTC)
    return at.strftime(fmt)


def present(source, root: str) -> list[str]:
    """The spans of ``source`` with at least one file, in order: a local glob, or the bucket's
    object listing (metadata only, nothing downloaded; no Beam or TensorFlow imported)."""
    pattern = source.path
    if "://" not in pattern and not os.path.isabs(pattern):
        pattern = os.path.join(root, pattern)
    every = SPAN_PLACEHOLDER.sub("*", pattern)
    if "://" in every:
        listed = types.SimpleNamespace(path=every, spans=None)
        files = [o["path"] for o in outside_facts.files_fingerprint(listed, root, {})["objects"]]
    else:
        files = [f for f in glob.glob(every) if os.path.isfile(f)]
    return sorted({s for f in files if (s := span_of(pattern, f))})


def window(fmt: str, end: str, last: int, spans: list[str]) -> list[str]:
    """The ``last`` spans ending at ``end``: every day (hour) before it for a format whose
    finest field is the day (hour), else those of ``spans`` up to it."""
    if last == 1:
        return [end]
    step = timedelta(hours=1) if "%H" in fmt else timedelta(days=1) if "%d" in fmt else None
    if step is None or any(f"%{c}" in fmt for c in "MSjy"):
        return sorted({*(s for s in spans if s <= end), end})[-last:]
    at = datetime.strptime(end, fmt)
    return [(at - step * back).strftime(fmt) for back in range(last - 1, -1, -1)]


def resolve(pipeline, root: str, span: str = "", schedule_time: str = "", progress=print):
    """``pipeline`` reading the spans this run selects (unchanged: no spans declared, or
    already selected).

    Raises:
        SpanMissing: a span of the window has no file, or the source has none at all.
        ValueError: ``span`` is neither a span nor a time.
    """
    source = getattr(pipeline, "source", None)
    spans = getattr(source, "spans", None)
    if spans is None or spans.selected:
        return pipeline
    fmt = Spans.format_of(source.path)
    found = present(source, root)
    if span:
        end, why = span_at(span, fmt), f"the span parameter {span!r}"
        if end is None:
            raise ValueError(f"span={span!r}: expected a span written as {fmt!r} or a time "
                             "(2024-01-03T02:00:00Z, 20240103020000)")
    elif schedule_time and (end := span_at(schedule_time, fmt)) is not None:
        why = f"the schedule time {schedule_time}"
    elif found:
        end, why = found[-1], "the latest span present"
    else:
        raise SpanMissing(f"SPAN_MISSING: no span of source.path={source.path!r} has a file")
    chosen = window(fmt, end, spans.last, found)
    missing = [s for s in chosen if s not in found]
    if len(chosen) < spans.last or missing:
        raise SpanMissing(f"SPAN_MISSING (span {', '.join(missing) or chosen[0]}): observed "
                          f"{len(chosen) - len(missing)} of the {spans.last} span(s) ending at "
                          f"{end}, allowed {spans.last} (spans present: "
                          f"{', '.join(found[-5:]) or 'none'})")
    progress(f"spans: {', '.join(chosen)} ({why})")
    return dataclasses.replace(pipeline, source=select_window(source, chosen))
