"""What the ``estflow`` commands share: the usage error and loading a PIPELINE target."""

from __future__ import annotations

from estflow.dsl.errors import DslError
from estflow.dsl.errors import DslErrors
from estflow.pipelines import loader

__all__ = ["EXIT_USAGE", "PIPELINE_HELP", "UsageError", "load_target"]

EXIT_USAGE = 2

PIPELINE_HELP = "path/to/file.py[:attr] or package.module[:attr]"


class UsageError(Exception):
    """A mistake in the command's input; reported as one message, exit status 2."""


def load_target(target: str) -> loader.LoadedPipeline:
    """Load ``target``, turning the user's mistakes into a :class:`UsageError`."""
    try:
        return loader.load(target)
    except (DslError, DslErrors) as err:
        raise UsageError(f"the pipeline in {target} is invalid: {err}") from None
    except FileNotFoundError as err:
        raise UsageError(f"{err}") from None
    except ModuleNotFoundError as err:
        raise UsageError(f"cannot load {target!r}: {err}; give a path/to/file.py or an "
                         "importable package.module") from None
    except ValueError as err:  # the loader's "no Pipeline / several Pipelines / not a Pipeline"
        raise UsageError(str(err)) from None
