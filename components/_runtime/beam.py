"""Beam pipelines for the preprocessing steps: the step's Beam options in, a pipeline out.

Without ``--runner`` (or with ``FnApiRunner`` / ``DirectRunner``) the pipeline runs on an
explicit in-memory FnApiRunner: deterministic, offline (Beam's default DirectRunner would
first try to download the Prism runner), and on few cores faster than multi-process running.
Any other runner (``DataflowRunner``, ``FlinkRunner``, ``SparkRunner``, ``PortableRunner``) is
Beam's, configured by the same options; ``estflow preprocess`` checks them before starting.
"""

from __future__ import annotations

import gc
import os
import shlex
import sys
import traceback
from collections.abc import Callable
from collections.abc import Sequence

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.options.pipeline_options import StandardOptions
from apache_beam.runners.portability.fn_api_runner import FnApiRunner

__all__ = ["LOCAL_RUNNERS", "new_pipeline", "split_options", "freeze_imports",
           "main_and_exit"]

LOCAL_RUNNERS = (None, "FnApiRunner", "DirectRunner")


def split_options(extra: Sequence[str], packed: str | None) -> list[str]:
    """The Beam options of a step: its extra arguments plus ``--beam-options "..."``."""
    return [*extra, *(shlex.split(packed) if packed else [])]


def new_pipeline(beam_options: Sequence[str]) -> beam.Pipeline:
    """A Beam pipeline for ``beam_options`` (in-memory FnApiRunner unless a runner is named)."""
    options = PipelineOptions(list(beam_options))
    if options.view_as(StandardOptions).runner in LOCAL_RUNNERS:
        return beam.Pipeline(runner=FnApiRunner(), options=options)
    return beam.Pipeline(options=options)


def freeze_imports() -> None:
    """Exempt everything imported so far from Python's cyclic garbage collector.

    A step process holds millions of objects from TensorFlow, Beam and tf.Transform; every
    full collection during the job rescans them all (pauses of ~0.3 s, about 7% of a
    million-row run). ``gc.freeze`` moves them to a permanent generation. Called once by each
    step's entry point, the edge of the process; never by library code.
    """
    gc.freeze()


def main_and_exit(main: Callable[[], int]) -> None:
    """Run ``main``, then leave with ``os._exit``.

    Beam + tf.Transform can segfault in interpreter teardown after all work is done
    (DESIGN.md). Every output is written and closed before ``main`` returns, so skipping the
    teardown loses nothing and keeps a healthy run from exiting with a crash code.
    """
    try:
        code = main()
    except SystemExit as exit_:  # argparse errors and --help
        code = exit_.code if isinstance(exit_.code, int) else 1
    except BaseException:  # noqa: BLE001 - report, then exit without teardown
        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
