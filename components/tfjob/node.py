"""The entry point of a TrainJob pod: set TF_CONFIG from the pod's JobSet identity, then run
the train step in its place.

``python -m estflow.components.tfjob.node TRAIN_ARGS...`` (estflow's
ClusterTrainingRuntime and the TrainJobs estflow submits run it in the container ``node``)::

    TF_CONFIG=<computed by tf_config.py> python -m estflow.components.train TRAIN_ARGS...

The environment is read here, once (:func:`tf_config.identity_from_env`); the process is
replaced by the train step (``exec``), so Kubernetes sees the train step's exit code.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from collections.abc import Mapping

from estflow.components.tfjob import tf_config as tfc

__all__ = ["TRAIN_MODULE", "command_for", "main"]

TRAIN_MODULE = "estflow.components.train"


def command_for(env: Mapping[str, str], train_args: list[str],
                python: str = sys.executable) -> tuple[list[str], dict[str, str]]:
    """The train step's argv and environment for the pod whose environment is ``env``.

    Raises:
        tf_config.TFConfigError: the environment does not identify a TrainJob pod.
    """
    identity = tfc.identity_from_env(env)
    laid_out = tfc.parse_roles(env.get(tfc.ROLES_ENV, ""))
    port = int(env.get("ESTFLOW_TF_PORT") or tfc.PORT)
    config = tfc.tf_config(identity, laid_out, port)
    return ([python, "-m", TRAIN_MODULE, *train_args],
            {**env, "TF_CONFIG": json.dumps(config, sort_keys=True)})


def main(argv: list[str] | None = None,
         execute: Callable[[str, list[str], dict[str, str]], object] = os.execve) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        command, env = command_for(os.environ, args)
    except tfc.TFConfigError as err:
        print(f"[train node] error: {err}", file=sys.stderr, flush=True)
        return 1
    task = json.loads(env["TF_CONFIG"])["task"]
    print(f"[train node] {task['type']} {task['index']}: TF_CONFIG {env['TF_CONFIG']}",
          flush=True)
    execute(command[0], command, env)
    return 0  # only reached when `execute` returns (tests)


if __name__ == "__main__":
    sys.exit(main())
