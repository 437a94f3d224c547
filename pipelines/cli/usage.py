"""What the ``estflow`` commands share: exit statuses, the usage error, loading a PIPELINE
target and checking its local data."""

from __future__ import annotations

import argparse

from estflow.dsl.errors import DslError
from estflow.dsl.errors import DslErrors
from estflow.pipelines import data_check
from estflow.pipelines import loader

__all__ = ["EXIT_FAILED", "EXIT_USAGE", "EXIT_NOT_PUSHED", "EXIT_INTERRUPTED", "PIPELINE_HELP",
           "positive_int",
           "UsageError", "load_target", "check_local_data", "data_mismatch"]

EXIT_FAILED = 1
"""A step failed (its log is named)."""
EXIT_USAGE = 2
"""A mistake in what the user gave: the command line, the pipeline file, its data's header."""
EXIT_NOT_PUSHED = 3
"""``estflow run`` ran every step, but the model was not blessed, so it was not pushed."""
EXIT_INTERRUPTED = 130
"""Stopped by Ctrl-C (SIGINT), as shells report it (128 + 2)."""

PIPELINE_HELP = "path/to/file.py[:attr] or package.module[:attr]"


def positive_int(text: str) -> int:
    """An argparse type: a positive integer."""
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, received {text!r}")
    return int(text)


class UsageError(Exception):
    """A mistake in the command's input; reported as one message, exit status 2."""


def load_target(target: str) -> loader.LoadedPipeline:
    """Load ``target``, turning the user's mistakes into a :class:`UsageError`: an error the
    pipeline file raises is named by ``file:line``, without a traceback."""
    try:
        return loader.load(target)
    except loader.PipelineFileError as err:
        if isinstance(err.error, (DslError, DslErrors)):
            raise UsageError(f"the pipeline in {target} is invalid ({err.location}): "
                             f"{err.error}") from None
        raise UsageError(str(err)) from None
    except FileNotFoundError as err:
        raise UsageError(f"{err}") from None
    except ModuleNotFoundError as err:
        raise UsageError(f"cannot load {target!r}: {err}; give a path/to/file.py or an "
                         "importable package.module") from None
    except ValueError as err:  # the loader's "no Pipeline / several Pipelines / not a Pipeline"
        raise UsageError(str(err)) from None


def check_local_data(loaded: loader.LoadedPipeline, target: str) -> None:
    """Check the header of a CSV source readable on this machine against the declaration
    (see :mod:`estflow.pipelines.data_check`), every mismatch in one :class:`UsageError`."""
    try:
        data_check.check_local_source(loaded.pipeline, loaded.local_source_root)
    except DslErrors as err:
        raise data_mismatch(target, err) from None


def data_mismatch(target: str, errors: DslErrors) -> UsageError:
    """The usage error for a local data header that does not match the declaration."""
    return UsageError(f"the data of the pipeline in {target} does not match its declaration: "
                      f"{errors}")
