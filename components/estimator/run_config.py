"""``RunConfig``: tf.estimator's run configuration, engine-side (with live objects such as a
``tf.distribute.Strategy``), plus estflow's ``steps_per_loop``.

Pipelines declare :class:`estflow.dsl.RunConfig` (serialisable, no TensorFlow); the
Estimator accepts either and works with this one (:func:`as_run_config`). Cluster membership
is never read from the environment here: the step's entry point parses ``TF_CONFIG`` once
(:func:`estflow.estimator.distribute.parse_tf_config`) and passes the result as
``cluster``; without it the run is a single local task (the chief).
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
from typing import Any

from estflow.dsl import specs as dsl_specs

__all__ = ["RunConfig", "as_run_config"]

_DEFAULT_SECS = 600
_USE_DEFAULT = "__default__"  # tf.estimator's sentinel: "checkpoint every 600 s unless steps"


def _positive(name: str, value, allow_none: bool = True, integer: bool = True) -> None:
    if value is None and allow_none:
        return
    kinds = (int,) if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds) or value <= 0:
        what = "integer" if integer else "number"
        raise ValueError(f"Received an invalid value for `{name}`, expected a positive {what}"
                         f"{' or None' if allow_none else ''}. Received: {name}={value!r}")


@dataclasses.dataclass(frozen=True)
class RunConfig:
    """How the Estimator runs (tf.estimator.RunConfig's fields).

    Args:
        model_dir: checkpoints and events (the Estimator's ``model_dir`` argument wins when
            only it is given; both given and different is an error).
        tf_random_seed: seeds Python, NumPy, TensorFlow and Keras before the model's
            variables are first created.
        save_summary_steps: TensorBoard scalars every N steps (None: none).
        save_checkpoints_steps: checkpoint every N steps. Mutually exclusive with
            ``save_checkpoints_secs``; with neither given, every 600 seconds; with both
            explicitly None, only at the end of each ``train`` call.
        save_checkpoints_secs: checkpoint at the first loop boundary N seconds after the last.
        session_config: accepted for porting, ignored (TF 2 has no sessions).
        keep_checkpoint_max: recent checkpoints kept (None or 0: all).
        keep_checkpoint_every_n_hours: also keep one checkpoint per N hours.
        log_step_count_steps: a progress line (loss, examples/s) every N steps (None: none).
        train_distribute: a ``tf.distribute.Strategy`` or a strategy name (``"mirrored"``,
            ``"multi_worker_mirrored"``, ``"parameter_server"``, ``"tpu"``; see distribute.py).
        eval_distribute: the strategy ``evaluate`` runs under, in this process: ``"mirrored"``
            or a ``MirroredStrategy``/``OneDeviceStrategy`` instance; with ``train_distribute``
            set, that same strategy (see ``distribute.eval_strategy_for``). None: one device.
        steps_per_loop: estflow: training steps per ``tf.function`` call; hooks, checkpoints,
            summaries and logs happen at loop boundaries.
        cluster: this process's cluster (``distribute.ClusterSpec`` from TF_CONFIG); None is
            a single local task.
        optimize_input: estflow: read an input_fn's dataset batch-first where that gives
            the same batches in the same order: an in-memory
            ``from_tensor_slices(...).batch(...)`` pipeline without slicing rows, and a
            per-record parse (``map(parse_single_example-like fn)`` before ``shuffle``,
            ``repeat``, ``batch``) moved after ``batch`` as one vectorised parse per batch
            (see ``_engine/input_fusion.py``). False keeps every dataset exactly as the
            input_fn built it.

    Example:
        >>> RunConfig(save_checkpoints_steps=100).save_checkpoints_secs is None
        True
        >>> RunConfig().save_checkpoints_secs
        600
        >>> RunConfig().is_chief, RunConfig().num_worker_replicas
        (True, 1)
    """

    model_dir: str | None = None
    tf_random_seed: int | None = None
    save_summary_steps: int | None = 100
    save_checkpoints_steps: int | None = None
    save_checkpoints_secs: Any = _USE_DEFAULT
    session_config: Any = None
    keep_checkpoint_max: int | None = 5
    keep_checkpoint_every_n_hours: float = 10000
    log_step_count_steps: int | None = 100
    train_distribute: Any = None
    eval_distribute: Any = None
    steps_per_loop: int = 50
    cluster: Any = None
    optimize_input: bool = True

    def __post_init__(self) -> None:
        steps, secs = self.save_checkpoints_steps, self.save_checkpoints_secs
        if secs == _USE_DEFAULT:
            secs = None if steps is not None else _DEFAULT_SECS
            object.__setattr__(self, "save_checkpoints_secs", secs)
        if steps is not None and secs is not None:
            raise ValueError("save_checkpoints_steps and save_checkpoints_secs are mutually "
                             "exclusive, expected at most one of them. Received: "
                             f"save_checkpoints_steps={steps}, save_checkpoints_secs={secs}")
        for name in ("save_summary_steps", "save_checkpoints_steps", "log_step_count_steps"):
            _positive(name, getattr(self, name))
        _positive("save_checkpoints_secs", secs, integer=False)
        _positive("steps_per_loop", self.steps_per_loop, allow_none=False)
        _positive("keep_checkpoint_every_n_hours", self.keep_checkpoint_every_n_hours,
                  allow_none=False, integer=False)
        if self.keep_checkpoint_max is not None and (
                not isinstance(self.keep_checkpoint_max, int) or self.keep_checkpoint_max < 0):
            raise ValueError("Received an invalid value for `keep_checkpoint_max`, expected an "
                             "integer >= 0 or None. Received: "
                             f"keep_checkpoint_max={self.keep_checkpoint_max!r}")
        if not isinstance(self.optimize_input, bool):
            raise ValueError("Received an invalid value for `optimize_input`, expected True or "
                             f"False. Received: optimize_input={self.optimize_input!r}")
        seed = self.tf_random_seed
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
            raise ValueError("Received an invalid value for `tf_random_seed`, expected an "
                             f"integer >= 0 or None. Received: tf_random_seed={seed!r}")

    def replace(self, **changes) -> RunConfig:
        """A copy with ``changes``; setting one checkpoint cadence clears the other."""
        if "save_checkpoints_steps" in changes and "save_checkpoints_secs" not in changes:
            changes["save_checkpoints_secs"] = None
        if "save_checkpoints_secs" in changes and "save_checkpoints_steps" not in changes:
            changes["save_checkpoints_steps"] = None
        return dataclasses.replace(self, **changes)

    @classmethod
    def from_dsl(cls, config: dsl_specs.RunConfig, **changes) -> RunConfig:
        """The engine config of a pipeline's :class:`estflow.dsl.RunConfig` declaration.

        The declaration's ``cluster`` (the processes a run asks for) is not this process's
        cluster membership: pass that as ``cluster=`` (parsed from TF_CONFIG by the entry
        point)."""
        ours = {f.name for f in dataclasses.fields(cls)} - {"cluster"}
        fields = {f.name: getattr(config, f.name) for f in dataclasses.fields(config)
                  if f.name in ours}
        fields.update(changes)
        if "save_checkpoints_secs" not in fields:
            fields["save_checkpoints_secs"] = None
        return cls(**fields)

    # -- cluster views (tf.estimator.RunConfig properties) ----------------------------------
    @property
    def is_chief(self) -> bool:
        return self.cluster is None or bool(self.cluster.is_chief)

    @property
    def task_type(self) -> str:
        return "worker" if self.cluster is None else self.cluster.task.type

    @property
    def task_id(self) -> int:
        return 0 if self.cluster is None else self.cluster.task.index

    @property
    def num_worker_replicas(self) -> int:
        return 1 if self.cluster is None else max(1, self.cluster.num_training_workers)

    @property
    def num_ps_replicas(self) -> int:
        return 0 if self.cluster is None else len(self.cluster.jobs.get("ps", ()))


def as_run_config(config: Any, model_dir: str | os.PathLike | None = None) -> RunConfig:
    """The engine :class:`RunConfig` for an Estimator: from None, a :class:`RunConfig` or a
    :class:`estflow.dsl.RunConfig`, with ``model_dir`` resolved (a temporary directory when
    neither names one).

    Raises:
        TypeError: ``config`` is none of those.
        ValueError: ``model_dir`` and ``config.model_dir`` are both set and differ.
    """
    if config is None:
        config = RunConfig()
    elif isinstance(config, dsl_specs.RunConfig):
        config = RunConfig.from_dsl(config)
    elif not isinstance(config, RunConfig):
        raise TypeError("Expected config to be an estflow RunConfig (estimator or dsl); "
                        f"received {type(config).__name__}")
    given = str(model_dir) if model_dir else None
    if given and config.model_dir and os.path.abspath(given) != os.path.abspath(
            config.model_dir):
        raise ValueError("model_dir is set both in the Estimator and in its RunConfig, but with "
                         f"different values: model_dir={given!r}, "
                         f"config.model_dir={config.model_dir!r}")
    resolved = given or config.model_dir or tempfile.mkdtemp(prefix="estflow_")
    return dataclasses.replace(config, model_dir=resolved)
