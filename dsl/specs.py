"""Step declarations: data source, split, derive hook, train/eval specs, run config, push target."""

from __future__ import annotations

import dataclasses
from typing import Any

from estflow.dsl import _checks
from estflow.dsl.errors import DslError
from estflow.dsl.features import Column
from estflow.dsl.refs import as_ref
from estflow.dsl.serialization import serializable

__all__ = ["CsvSource", "Split", "Derive", "TrainSpec", "Threshold", "EvalSpec", "RunConfig",
           "PushTarget"]


@serializable
@dataclasses.dataclass(frozen=True)
class CsvSource:
    """CSV file(s) with a header row.

    Args:
        path: a file path or a glob (``data/*.csv``); relative paths are resolved against the
            directory of the pipeline file that declares them.
        delimiter: one character.
        max_rejected_fraction: the ingest step fails when more than this fraction of rows is
            rejected (each rejected row is written with its reason to ``rejected.jsonl``).
    """

    path: str
    delimiter: str = ","
    max_rejected_fraction: float = 0.01

    def __post_init__(self) -> None:
        if not isinstance(self.path, str) or not self.path:
            raise DslError("path", "a non-empty file path or glob", self.path)
        if not isinstance(self.delimiter, str) or len(self.delimiter) != 1:
            raise DslError("delimiter", "a single character", self.delimiter)
        _checks.number(self.max_rejected_fraction, "max_rejected_fraction", low=0, high=1)


@serializable
@dataclasses.dataclass(frozen=True)
class Split:
    """Deterministic train/eval split by a hash of ``key`` (a raw column) or of the whole row.
    The same row lands in the same split on every run and every runner."""

    eval_fraction: float = 0.2
    key: str | None = None

    def __post_init__(self) -> None:
        _checks.number(self.eval_fraction, "eval_fraction", low=0, high=0.9, low_open=True)
        if self.key is not None:
            _checks.name(self.key, "key")


@serializable
@dataclasses.dataclass(frozen=True)
class Derive:
    """A tf.Transform-compatible function that computes new columns from raw columns.

    ``fn(columns: dict[str, Tensor]) -> dict[str, Tensor]`` receives every raw column as a dense
    batch (missing values already filled with their declared defaults) and returns the new
    columns declared in ``outputs``; features and the label may read them as sources. It runs
    inside the transform graph, so serving computes derived features identically. Import
    TensorFlow inside the function body, so declaring the pipeline stays light.
    """

    fn: Any
    outputs: tuple[Column, ...] = ()

    def __post_init__(self) -> None:
        _checks.freeze(self, "fn", as_ref(self.fn, "fn"))
        outputs = _checks.tuple_of(self.outputs, "outputs", Column, min_len=1,
                                   what="Column declarations")
        for i, column in enumerate(outputs):
            if column.default is not None:
                raise DslError(f"outputs[{i}].default", "None (a derived column is computed, "
                               "never missing)", column.default)
        _checks.freeze(self, "outputs", outputs)


@serializable
@dataclasses.dataclass(frozen=True)
class TrainSpec:
    """How long and on what batches to train (tf.estimator.TrainSpec + input options)."""

    max_steps: int
    batch_size: int = 256
    shuffle_buffer: int = 10_000

    def __post_init__(self) -> None:
        _checks.positive_int(self.max_steps, "max_steps")
        _checks.positive_int(self.batch_size, "batch_size")
        _checks.positive_int(self.shuffle_buffer, "shuffle_buffer")


@serializable
@dataclasses.dataclass(frozen=True)
class Threshold:
    """A condition a model must meet to be blessed (and pushed).

    Args:
        metric: an eval metric name, e.g. ``"auc"``, ``"accuracy"``, ``"loss"``.
        lower_bound: the metric must be >= this.
        upper_bound: the metric must be <= this.
        max_regression: compared with the baseline (the model currently served at the push
            target): the metric may get worse by at most this much (in the direction given by
            ``higher_is_better``). No baseline (first push) passes this check.
        higher_is_better: direction of the metric (False for losses and errors).

    Example:
        >>> Threshold("auc", lower_bound=0.85, max_regression=0.01)
        Threshold(metric='auc', lower_bound=0.85, upper_bound=None, max_regression=0.01, higher_is_better=True)
    """

    metric: str
    lower_bound: float | None = None
    upper_bound: float | None = None
    max_regression: float | None = None
    higher_is_better: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.metric, str) or not self.metric:
            raise DslError("metric", "a metric name such as 'auc'", self.metric)
        _checks.number(self.lower_bound, "lower_bound", allow_none=True)
        _checks.number(self.upper_bound, "upper_bound", allow_none=True)
        _checks.number(self.max_regression, "max_regression", allow_none=True, low=0)
        if not isinstance(self.higher_is_better, bool):
            raise DslError("higher_is_better", "True or False", self.higher_is_better)
        if (self.lower_bound, self.upper_bound, self.max_regression) == (None, None, None):
            raise DslError("lower_bound", "at least one of lower_bound, upper_bound or "
                           "max_regression", None)


@serializable
@dataclasses.dataclass(frozen=True)
class EvalSpec:
    """Evaluation (tf.estimator.EvalSpec): ``steps`` batches, or the whole eval split if None.

    Args:
        thresholds: conditions for the blessing; a model that fails one is not pushed.
        slices: raw column names; metrics are also computed per value of each.
    """

    steps: int | None = None
    name: str = "eval"
    batch_size: int = 512
    start_delay_secs: int = 120
    throttle_secs: int = 600
    thresholds: tuple[Threshold, ...] = ()
    slices: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        _checks.freeze(self, "thresholds", _checks.tuple_of(
            self.thresholds, "thresholds", Threshold, what="Threshold declarations"))
        slices = _checks.tuple_of(self.slices, "slices", str, what="raw column names")
        for i, name in enumerate(slices):
            _checks.name(name, f"slices[{i}]")
        _checks.freeze(self, "slices", slices)
        _checks.positive_int(self.steps, "steps", allow_none=True)
        _checks.name(self.name)
        _checks.positive_int(self.batch_size, "batch_size")
        _checks.positive_int(self.start_delay_secs, "start_delay_secs", minimum=0)
        _checks.positive_int(self.throttle_secs, "throttle_secs", minimum=0)


@serializable
@dataclasses.dataclass(frozen=True)
class RunConfig:
    """Training run settings (tf.estimator.RunConfig). Cluster membership is not declared here:
    the train step reads TF_CONFIG once, at its entry point.

    Args:
        tf_random_seed: seed for initialisers and shuffling (None: nondeterministic).
        save_checkpoints_steps: checkpoint every N steps (and always at the end).
        keep_checkpoint_max: how many recent checkpoints to keep.
        save_summary_steps: write TensorBoard scalars every N steps.
        log_step_count_steps: log loss and examples/s every N steps.
        steps_per_loop: training steps run inside one tf.function call (speed; hooks and
            checkpoints happen at loop boundaries).
    """

    tf_random_seed: int | None = 42
    save_checkpoints_steps: int = 1000
    keep_checkpoint_max: int = 5
    save_summary_steps: int = 100
    log_step_count_steps: int = 100
    steps_per_loop: int = 50

    def __post_init__(self) -> None:
        _checks.positive_int(self.tf_random_seed, "tf_random_seed", allow_none=True, minimum=0)
        for field in ("save_checkpoints_steps", "keep_checkpoint_max", "save_summary_steps",
                      "log_step_count_steps", "steps_per_loop"):
            _checks.positive_int(getattr(self, field), field)


@serializable
@dataclasses.dataclass(frozen=True)
class PushTarget:
    """Where blessed models go, in TF Serving's layout ``<base_path>/<model_name>/<version>/``.

    Args:
        base_path: the model base path (local directory; relative paths are resolved against
            the run's working directory).
        model_name: the served model name.
        keep_versions: keep only the newest N versions (None keeps all).
    """

    base_path: str
    model_name: str
    keep_versions: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.base_path, str) or not self.base_path:
            raise DslError("base_path", "a non-empty directory path", self.base_path)
        _checks.name(self.model_name, "model_name")
        _checks.positive_int(self.keep_versions, "keep_versions", allow_none=True)
