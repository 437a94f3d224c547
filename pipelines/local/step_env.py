"""How a step's process starts, whoever starts it: the environment it gets (:func:`full_env`)
and the module a process started ahead runs (:data:`PRESTART_MODULE`).

A plain start (:mod:`estflow.pipelines.local.processes`), a prestarted process
(:mod:`estflow.pipelines.local.prestart`) and a warm one left by the previous run
(:mod:`estflow.pipelines.local.warm`) all start it so: a step gets the same environment however its
process was started, and a prestarted or warm process is handed to a step only when that
environment matches.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

__all__ = ["full_env", "PRESTART_MODULE", "FORK_ENV"]

# Added to the runner's environment: unbuffered output, so progress streams as it happens, and
# TensorFlow's C++ logging kept to errors.
_QUIET_ENV = {"PYTHONUNBUFFERED": "1", "TF_CPP_MIN_LOG_LEVEL": "2"}

PRESTART_MODULE = "estflow.components._runtime.prestart"
"""The module a step's process started ahead runs (it imports the step's, then waits for its
arguments)."""


FORK_ENV = "ESTFLOW_FORK"
"""``0``: no fork server (:mod:`estflow.pipelines.local.forks`); each step's process imports its
libraries itself."""


def full_env(env: Mapping[str, str]) -> dict[str, str]:
    """The environment of a step's process: the runner's, quieted, plus the step's."""
    return {**os.environ, **_QUIET_ENV, **env}
