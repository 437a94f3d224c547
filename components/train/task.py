"""This process's task in the training cluster (``TF_CONFIG``, read by the entry point): a
parameter-server strategy's ``worker`` or ``ps`` serves the chief's coordinator, an
``evaluator`` evaluates the checkpoints, and a training task (or a single process) trains."""

from __future__ import annotations

import os

from estflow.components._runtime import entry
from estflow.components.train.evaluator import evaluate_checkpoints
from estflow.components.train.step import run
from estflow.dsl.pipeline import Pipeline
from estflow.estimator import distribute

__all__ = ["run_task"]


def run_task(pipeline: Pipeline, transformed_dir: str | os.PathLike,
             model_dir: str | os.PathLike, cluster: distribute.ClusterSpec | None) -> None:
    """Do this process's part of training ``pipeline``: the task ``cluster`` says (None: one
    process, which trains).

    Raises:
        TrainStepError, NanLossError, DistributeError: as :func:`.step.run` and
            :func:`.evaluator.evaluate_checkpoints` raise them, or the strategy's set-up.
    """
    name = pipeline.run_config.train_distribute
    role = distribute.task_role(name, cluster)
    if role == "serve":  # a parameter-server strategy's worker or ps: the chief drives it
        distribute.serve(cluster)
    elif role == "evaluate":
        evaluate_checkpoints(pipeline, transformed_dir, model_dir)
    else:  # the strategy first: it must configure the TF runtime before any op runs
        strategy = distribute.strategy_for(name, cluster)
        run(pipeline, transformed_dir, model_dir,
            progress=entry.Progress(_task_label(cluster)), cluster=cluster,
            strategy=strategy)


def _task_label(cluster: distribute.ClusterSpec | None) -> str:
    """``train`` for the chief (or a single process), ``train worker N`` for the others."""
    if cluster is None or cluster.is_chief:
        return "train"
    return f"train {cluster.task.type} {cluster.task.index}"
