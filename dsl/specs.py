"""Step declarations: split, derive hook, train/eval specs and thresholds, run config and cluster,
push target. (Data sources are in :mod:`estflow.dsl.sources`.)"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Any
from typing import ClassVar

from estflow.dsl import _checks
from estflow.dsl.errors import DslError
from estflow.dsl.features import Column
from estflow.dsl.refs import as_ref
from estflow.dsl.resources import Resources
from estflow.dsl.serialization import serializable

__all__ = ["Split", "Derive", "WarmStart", "TrainSpec", "Threshold", "EvalSpec", "RunConfig",
           "Cluster",
           "DISTRIBUTE_STRATEGIES", "PushTarget", "DEFAULT_TF_SERVING_VERSION",
           "TRAINING_TENSORFLOW"]


@serializable
@dataclasses.dataclass(frozen=True)
class Split:
    """Deterministic split by a hash of ``key`` (a raw column) or of the whole row: the same row
    lands in the same split on every run and every runner.

    Without a key, the hash is that of the row as read: a CSV row's text (its line's bytes,
    without the line ending, so a CRLF copy of a file splits alike), a TFRecord row's
    serialized Example. Declaring or dropping a column, or changing a dtype or default, then
    moves no row between splits. Parquet and BigQuery rows have no such text: their hash is
    that of the declared columns' values, so declare a key to keep their split fixed while the
    declarations evolve.

    Args:
        eval_fraction: the share of rows in ``eval`` (the rest is ``train``).
        key: hash this raw column's value instead of the row, so rows sharing a key (a user, a
            trip) stay in one split.
        ratios: instead of ``eval_fraction``, relative sizes of named splits, e.g.
            ``{"train": 8, "eval": 1, "test": 1}``; ``train`` and ``eval`` are required, other
            splits are written and transformed alongside them. ``eval_fraction`` then reads as
            the eval share.

    Example:
        >>> import estflow.dsl as ef
        >>> split = ef.Split(ratios={"train": 8, "eval": 1, "test": 1})
        >>> split.eval_fraction
        0.1
        >>> ef.Split(eval_fraction=0.25, key="taxi_id").fractions()
        (('train', 0.75), ('eval', 0.25))
    """

    eval_fraction: float = 0.2
    key: str | None = None
    ratios: Mapping[str, float] | None = None

    def __post_init__(self) -> None:
        _checks.number(self.eval_fraction, "eval_fraction", low=0, high=0.9, low_open=True)
        if self.key is not None:
            _checks.name(self.key, "key")
        if self.ratios is not None:
            ratios = _check_ratios(self.ratios)
            share = ratios["eval"] / sum(ratios.values())
            if self.eval_fraction not in (0.2, share):
                raise DslError("eval_fraction", "left at its default when `ratios` is given "
                               f"(the ratios make it {share})", self.eval_fraction)
            if share > 0.9:
                raise DslError("ratios", "an eval share of at most 0.9 of all rows", ratios)
            _checks.freeze(self, "ratios", ratios)
            _checks.freeze(self, "eval_fraction", share)

    def fractions(self) -> tuple[tuple[str, float], ...]:
        """``(split name, share of rows)`` in a fixed order: train, eval, then the rest by name."""
        if self.ratios is None:
            return (("train", 1.0 - self.eval_fraction), ("eval", self.eval_fraction))
        total = sum(self.ratios.values())
        names = ["train", "eval"] + sorted(set(self.ratios) - {"train", "eval"})
        return tuple((name, self.ratios[name] / total) for name in names)

    def names(self) -> tuple[str, ...]:
        """The split names in their fixed order (train, eval, then the others by name): the
        directories of the examples and transformed artifacts."""
        return tuple(name for name, _ in self.fractions())


_RESERVED_SPLITS = ("transform_fn",)  # directory names the artifact layout already uses


def _check_ratios(ratios) -> dict[str, float]:
    if not isinstance(ratios, Mapping) or not {"train", "eval"} <= set(ratios):
        raise DslError("ratios", "a mapping of split name to relative size with at least "
                       "'train' and 'eval'", ratios)
    for name, size in ratios.items():
        _checks.name(name, f"ratios[{name!r}]")
        if name in _RESERVED_SPLITS:
            raise DslError(f"ratios[{name!r}]", "a split name other than "
                           f"{list(_RESERVED_SPLITS)}", name)
        _checks.number(size, f"ratios[{name!r}]", low=0, low_open=True)
    return dict(ratios)


@serializable
@dataclasses.dataclass(frozen=True)
class Derive:
    """A tf.Transform-compatible function that computes new columns from raw columns.

    ``fn(columns: dict[str, Tensor]) -> dict[str, Tensor]`` receives every raw column as a dense
    batch (missing values already filled with their declared defaults) and returns the new
    columns declared in ``outputs``; features and the label may read them as sources. It runs
    inside the transform graph, so serving computes derived features identically. Import
    TensorFlow inside the function body, so declaring the pipeline stays light.

    Args:
        fn: the function: a module-level function or a ``"package.module:function"`` string
            (stored as a :class:`CallableRef`).
        outputs: one :class:`Column` (name and dtype, no default) per column ``fn`` returns.

    Example:
        >>> import estflow.dsl as ef
        >>> derive = ef.Derive("my_pipeline.columns:big_tipper",
        ...                    outputs=(ef.Column("big_tipper", "int"),))
        >>> str(derive.fn), [c.name for c in derive.outputs]
        ('my_pipeline.columns:big_tipper', ['big_tipper'])
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
class WarmStart:
    """Start training from the served model (tf.estimator's ``WarmStartSettings``, with the
    checkpoint of the version served at the pipeline's push target as
    ``ckpt_to_initialize_from``).

    Every pushed version carries the training checkpoint of its model
    (``<version>/assets.extra/estflow_checkpoint/``; TF Serving ignores ``assets.extra``), so
    a retraining run initialises its model_dir from exactly what is served, with the
    Estimator's variable names. Warm starting happens once, when the model_dir has no
    checkpoint of its own; the global step starts at 0 (``TrainSpec.max_steps`` more steps).
    No served version yet (the first run), or one pushed without a checkpoint: training starts
    from scratch, and the train step says so. The evaluate step still compares the new model
    with the served version on the same eval rows (the blessing's baseline).

    Args:
        source: where to start from: ``"served"``, the version served at ``Pipeline.push``
            (the highest complete version; the run's cache key covers which one).
        vars_to_warm_start: as ``WarmStartSettings``: a regex (matched from the start of the
            checkpoint name, e.g. ``"store/model/.*"``) selecting *trainable* variables
            (default ``".*"``: all of them); a tuple of regexes selecting any model variable
            (non-trainable ones too); None: none.
        var_name_to_prev_var_name: ``{variable name: its name in the served checkpoint}`` for
            variables that were renamed (names as ``Estimator.get_variable_names()`` lists).
        optimizer_state: also carry the optimizer state (Adagrad accumulators, Adam moments,
            iteration counts) over, so the step sizes continue where the served model's
            training left them; needs the same model and optimizer as the served model's.

    Example:
        >>> import estflow.dsl as ef
        >>> warm = ef.WarmStart(vars_to_warm_start="store/model/.*", optimizer_state=True)
        >>> train = ef.TrainSpec(max_steps=500, warm_start=warm)
        >>> warm.source, warm.settings_vars()
        ('served', ('store/model/.*', 'optimizers/'))
    """

    source: str = "served"
    vars_to_warm_start: str | tuple[str, ...] | None = ".*"
    var_name_to_prev_var_name: Mapping[str, str] | None = None
    optimizer_state: bool = False

    SOURCES: ClassVar[tuple[str, ...]] = ("served",)

    def __post_init__(self) -> None:
        _checks.one_of(self.source, self.SOURCES, "source")
        wanted = self.vars_to_warm_start
        if isinstance(wanted, list):
            wanted = tuple(wanted)
        if isinstance(wanted, str):
            _check_regex(wanted, "vars_to_warm_start")
        elif isinstance(wanted, tuple):
            for i, regex in enumerate(wanted):
                if not isinstance(regex, str):
                    raise DslError(f"vars_to_warm_start[{i}]", "a regex string", regex)
                _check_regex(regex, f"vars_to_warm_start[{i}]")
        elif wanted is not None:
            raise DslError("vars_to_warm_start", "a regex, a tuple of regexes or None", wanted)
        _checks.freeze(self, "vars_to_warm_start", wanted)
        renames = self.var_name_to_prev_var_name
        if renames is not None:
            if not isinstance(renames, Mapping) or not all(
                    isinstance(k, str) and k and isinstance(v, str) and v
                    for k, v in renames.items()):
                raise DslError("var_name_to_prev_var_name", "a mapping of variable name to "
                               "its name in the served checkpoint (non-empty strings), or None",
                               renames)
            _checks.freeze(self, "var_name_to_prev_var_name", dict(sorted(renames.items())))
        if not isinstance(self.optimizer_state, bool):
            raise DslError("optimizer_state", "True or False", self.optimizer_state)
        if self.optimizer_state and wanted is None:
            raise DslError("optimizer_state", "False when vars_to_warm_start is None (nothing "
                           "is warm-started)", self.optimizer_state)

    def settings_vars(self) -> str | tuple[str, ...] | None:
        """``WarmStartSettings.vars_to_warm_start``: the declared selection, plus
        ``"optimizers/"`` (the engine's optimizer state) with ``optimizer_state``."""
        wanted = self.vars_to_warm_start
        if not self.optimizer_state:
            return wanted
        return (*((wanted,) if isinstance(wanted, str) else wanted), "optimizers/")


def _check_regex(value: str, field: str) -> None:
    try:
        re.compile(value)
    except re.error as err:
        raise DslError(field, f"a valid regex ({err})", value) from None


@serializable
@dataclasses.dataclass(frozen=True)
class TrainSpec:
    """How long and on what batches to train (tf.estimator.TrainSpec + input options).

    Args:
        max_steps: train until the global step reaches this.
        batch_size: examples per training step; under a distribution strategy the global batch,
            split over the replicas.
        shuffle_buffer: examples held in the shuffle buffer of the training input.
        warm_start: start the model from the served version's checkpoint
            (:class:`WarmStart`; needs ``Pipeline.push``); None: from scratch.

    Example:
        >>> import estflow.dsl as ef
        >>> ef.TrainSpec(max_steps=2000, batch_size=512)
        TrainSpec(max_steps=2000, batch_size=512, shuffle_buffer=10000, warm_start=None)
    """

    max_steps: int
    batch_size: int = 256
    shuffle_buffer: int = 10_000
    warm_start: WarmStart | None = None

    def __post_init__(self) -> None:
        _checks.positive_int(self.max_steps, "max_steps")
        _checks.positive_int(self.batch_size, "batch_size")
        _checks.positive_int(self.shuffle_buffer, "shuffle_buffer")
        if self.warm_start is not None and not isinstance(self.warm_start, WarmStart):
            raise DslError("warm_start", "a WarmStart declaration or None", self.warm_start)


@serializable
@dataclasses.dataclass(frozen=True)
class Threshold:
    """A condition a model must meet to be blessed (and pushed).

    Args:
        metric: an eval metric name of the model's head: binary ``average_loss``,
            ``accuracy``, ``auc`` and ``auc_precision_recall`` (tf.estimator's 200-threshold
            approximations), ``auc_exact`` and ``auc_pr`` (the exact areas), ``precision``,
            ``recall``, ``label/mean``, ``prediction/mean``; multi-class ``average_loss``, ``accuracy``; regression
            ``average_loss``, ``rmse``, ``mae``, ``label/mean``, ``prediction/mean``.
            ``average_loss`` is the mean over the eval examples of each one's loss (not
            tf.estimator's eval ``loss``, the mean of batch losses: ``loss`` is refused).
        lower_bound: the metric must be >= this.
        upper_bound: the metric must be <= this.
        max_regression: compared with the baseline (the model currently served at the push
            target): the metric may get worse by at most this much (in the direction given by
            ``higher_is_better``). No baseline (first push) passes this check.
        higher_is_better: direction of the metric (False for losses and errors).

    Example:
        >>> import estflow.dsl as ef
        >>> ef.Threshold("auc", lower_bound=0.85, max_regression=0.01)
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
        steps: eval batches per evaluation (None: the whole eval split).
        name: the evaluation's name, recorded with its metrics. The train step evaluates
            while it trains (tf.estimator's ``train_and_evaluate``) and writes the scalars
            for TensorBoard beside training's, to ``checkpoints/eval`` (another name:
            ``checkpoints/eval_<name>``), so TensorBoard on ``checkpoints/`` shows train and
            eval curves.
        batch_size: examples per eval batch.
        start_delay_secs: the train step evaluates the model on the eval split after a
            checkpoint is saved (``RunConfig.save_checkpoints_steps``) once this many seconds
            of training have passed (the final checkpoint is always evaluated, so a short run
            evaluates only at its end); each evaluation is a progress line and a row of
            ``train.json``'s ``evaluations``. The evaluator task of a distributed run
            (``Cluster(evaluator=True)``) waits this long before its first evaluation.
        throttle_secs: at most one evaluation during training per this many seconds (the
            final one excepted); the evaluator task evaluates a new checkpoint at most this
            often. ``start_delay_secs=0, throttle_secs=0`` evaluates every checkpoint.
        thresholds: conditions for the blessing; a model that fails one is not pushed.
        slices: raw column names; metrics are also computed per value of each.

    Example:
        >>> import estflow.dsl as ef
        >>> spec = ef.EvalSpec(thresholds=(ef.Threshold("auc", lower_bound=0.7),),
        ...                    slices=("payment_type",))
        >>> spec.steps is None, spec.thresholds[0].metric
        (True, 'auc')
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


# tf.distribute strategies by name (estflow.estimator.distribute builds them).
DISTRIBUTE_STRATEGIES = ("mirrored", "multi_worker_mirrored", "parameter_server", "tpu")
_SHARED_DIR = re.compile(r"^(/[^\0]*|[a-z][a-z0-9+.-]*://\S+)$")


@serializable
@dataclasses.dataclass(frozen=True)
class Cluster:
    """The processes a distributed train step runs as: on Kubeflow a training job that the
    train task submits (a Trainer v2 ``TrainJob`` or a Training Operator ``TFJob``), with
    ``estflow run`` worker processes on localhost (each sets TF_CONFIG for its processes).

    Args:
        workers: training processes. Under ``multi_worker_mirrored`` all of them train in
            sync and worker 0 is the chief (TFJob: ``Worker`` replicas). Under
            ``parameter_server`` they compute gradients while a chief coordinates (TFJob: one
            ``Chief`` plus ``Worker`` replicas).
        parameter_servers: ps tasks holding the variables (``parameter_server`` only).
        evaluator: add a task that evaluates every new checkpoint on the eval split (TFJob
            ``Evaluator`` replica), beside training.
        shared_dir: storage the job's pods and the pipeline's train task all read and write
            (``gs://bucket/path``, or a directory on a PVC that ``resources["train"].pvcs``
            mounts, e.g. ``/mnt/shared/estflow``): the replicas read the transformed data from
            it and write the model to it. Required to compile a pipeline that submits a
            training job; local runs do not need it.
        ps_resources: each ps pod's resources (None: the cluster's defaults; ``tfjob`` only).
        evaluator_resources: the evaluator pod's (None: the train step's resources; ``tfjob``
            only).
        job_kind: what the train task submits on Kubeflow, one of :attr:`JOB_KINDS`:
            ``"trainjob"`` (default), a Kubeflow Trainer v2 ``trainer.kubeflow.org`` TrainJob
            on estflow's ClusterTrainingRuntime (Kubeflow 1.11 and later install Trainer v2,
            not the Training Operator); its pods all have the train step's resources, so
            ``ps_resources`` and ``evaluator_resources`` need ``"tfjob"``: a
            ``kubeflow.org/v1`` TFJob, for clusters that run the Training Operator (v1.9).

    Example:
        >>> import estflow.dsl as ef
        >>> cluster = ef.Cluster(workers=2, shared_dir="gs://bucket/estflow")
        >>> cluster.replicas(), cluster.distributed
        ({'Worker': 2}, True)
    """

    workers: int = 1
    parameter_servers: int = 0
    evaluator: bool = False
    shared_dir: str | None = None
    ps_resources: Resources | None = None
    evaluator_resources: Resources | None = None
    job_kind: str = "trainjob"

    JOB_KINDS: ClassVar[tuple[str, ...]] = ("trainjob", "tfjob")

    def __post_init__(self) -> None:
        _checks.positive_int(self.workers, "workers")
        _checks.positive_int(self.parameter_servers, "parameter_servers", minimum=0)
        if not isinstance(self.evaluator, bool):
            raise DslError("evaluator", "True or False", self.evaluator)
        if self.shared_dir is not None and (not isinstance(self.shared_dir, str)
                                            or not _SHARED_DIR.match(self.shared_dir)):
            raise DslError("shared_dir", "an absolute directory path (on a mounted PVC) or a "
                           "URL such as 'gs://bucket/path', or None", self.shared_dir)
        for field in ("ps_resources", "evaluator_resources"):
            value = getattr(self, field)
            if value is not None and not isinstance(value, Resources):
                raise DslError(field, "a Resources declaration or None", value)
        if self.ps_resources is not None and not self.parameter_servers:
            raise DslError("ps_resources", "None without parameter servers", self.ps_resources)
        if self.evaluator_resources is not None and not self.evaluator:
            raise DslError("evaluator_resources", "None unless evaluator=True",
                           self.evaluator_resources)
        if self.job_kind not in self.JOB_KINDS:
            raise DslError("job_kind", f"one of {self.JOB_KINDS}", self.job_kind)
        for field in ("ps_resources", "evaluator_resources"):
            if getattr(self, field) is not None and self.job_kind != "tfjob":
                raise DslError(field, "None with job_kind='trainjob' (a TrainJob's pods all "
                               "have the train step's resources); declare job_kind='tfjob' "
                               "for pods of their own", getattr(self, field))

    @property
    def distributed(self) -> bool:
        """Whether training runs as more than one process."""
        return self.workers > 1 or self.parameter_servers > 0 or self.evaluator

    def replicas(self) -> dict[str, int]:
        """TFJob replica type -> count (``Chief`` only with parameter servers)."""
        if self.parameter_servers:
            counts = {"Chief": 1, "Worker": self.workers, "PS": self.parameter_servers}
        else:
            counts = {"Worker": self.workers}
        return {**counts, **({"Evaluator": 1} if self.evaluator else {})}


@serializable
@dataclasses.dataclass(frozen=True)
class RunConfig:
    """Training run settings (tf.estimator.RunConfig). The processes a run asks for are
    declared in ``cluster``; which one a process is (TF_CONFIG) is read once, at the train
    step's entry point, never here.

    Args:
        tf_random_seed: seed for initialisers and shuffling (None: nondeterministic).
        save_checkpoints_steps: checkpoint every N steps (and always at the end).
        keep_checkpoint_max: how many recent checkpoints to keep.
        save_summary_steps: write TensorBoard scalars every N steps.
        log_step_count_steps: log loss and examples/s every N steps.
        steps_per_loop: training steps run inside one tf.function call (speed; hooks and
            checkpoints happen at loop boundaries).
        train_distribute: the tf.distribute strategy training runs under, one of
            :data:`DISTRIBUTE_STRATEGIES`: ``"mirrored"`` (this machine's GPUs, or its CPUs),
            ``"multi_worker_mirrored"`` (synchronous, the cluster's workers),
            ``"parameter_server"`` (asynchronous, needs ``cluster.parameter_servers``),
            ``"tpu"``. None: none for one process, ``multi_worker_mirrored`` when TF_CONFIG
            lists several workers (``estflow run --workers N``), ``parameter_server`` when it
            lists ps tasks. ``TrainSpec.batch_size`` is then the global batch, split over the
            replicas.
        eval_distribute: the strategy evaluations during training run under: ``"mirrored"``
            (this process's GPUs, or its CPUs; with ``train_distribute="mirrored"`` the same
            strategy) or None (one device). Evaluation reads the model's variables, which
            belong to the training strategy: with another ``train_distribute`` it must be None.
        cluster: the processes to train with (None: one process).

    Example:
        >>> import estflow.dsl as ef
        >>> config = ef.RunConfig(train_distribute="multi_worker_mirrored",
        ...                       cluster=ef.Cluster(workers=4, evaluator=True))
        >>> config.cluster.replicas()
        {'Worker': 4, 'Evaluator': 1}
    """

    tf_random_seed: int | None = 42
    save_checkpoints_steps: int = 1000
    keep_checkpoint_max: int = 5
    save_summary_steps: int = 100
    log_step_count_steps: int = 100
    steps_per_loop: int = 50
    train_distribute: str | None = None
    eval_distribute: str | None = None
    cluster: Cluster | None = None

    def __post_init__(self) -> None:
        _checks.positive_int(self.tf_random_seed, "tf_random_seed", allow_none=True, minimum=0)
        for field in ("save_checkpoints_steps", "keep_checkpoint_max", "save_summary_steps",
                      "log_step_count_steps", "steps_per_loop"):
            _checks.positive_int(getattr(self, field), field)
        if self.train_distribute is not None:
            _checks.one_of(self.train_distribute, DISTRIBUTE_STRATEGIES, "train_distribute")
        if self.eval_distribute is not None:
            _checks.one_of(self.eval_distribute, ("mirrored",), "eval_distribute")
            if self.train_distribute not in (None, "mirrored"):
                raise DslError("eval_distribute", "None when train_distribute="
                               f"{self.train_distribute!r} (evaluation reads the model's "
                               "variables, which belong to the training strategy; 'mirrored' "
                               "only with train_distribute None or 'mirrored')",
                               self.eval_distribute)
        if self.cluster is not None and not isinstance(self.cluster, Cluster):
            raise DslError("cluster", "a Cluster declaration or None", self.cluster)
        self._check_strategy_fits_cluster()

    def _check_strategy_fits_cluster(self) -> None:
        name, cluster = self.train_distribute, self.cluster
        servers = cluster.parameter_servers if cluster else 0
        if name == "parameter_server" and not servers:
            raise DslError("cluster", "a Cluster with parameter_servers >= 1 for "
                           "train_distribute='parameter_server'", cluster)
        if servers and name not in (None, "parameter_server"):
            raise DslError("train_distribute", "'parameter_server' (or None) with "
                           f"cluster.parameter_servers={servers}", name)
        if name in ("mirrored", "tpu") and cluster is not None and cluster.workers > 1:
            raise DslError("train_distribute", "'multi_worker_mirrored' or 'parameter_server' "
                           f"for cluster.workers={cluster.workers} ({name!r} runs in one "
                           "process)", name)


@serializable
@dataclasses.dataclass(frozen=True)
class PushTarget:
    """Where blessed models go, in TF Serving's layout ``<base_path>/<model_name>/<version>/``.

    Args:
        base_path: the model base path: a local directory or a ``gs://`` / ``s3://`` URL
            (written through ``tf.io.gfile``; ``s3://`` needs the ``tensorflow-io``
            package). ``estflow run`` resolves a relative path against the directory it starts
            in (the run records the absolute path); a pipeline compiled for Kubeflow needs a
            URL or a path on a volume its push and evaluate tasks mount (``estflow compile``
            refuses anything else; ``--push-base-path`` replaces it).
        model_name: the served model name: the folder under ``base_path``, the name
            ``estflow serve`` and TF Serving (on KServe too) serve it under
            (``/v1/models/<model_name>``).
        keep_versions: keep only the newest N versions (None keeps all).
        kserve_manifest: also write a KServe ``InferenceService`` manifest
            (``serving.kserve.io/v1beta1``, ``predictor.model`` with ``modelFormat: tensorflow``,
            served by KServe's TF Serving runtime) to the push step's output,
            ``inferenceservice.yaml``. Its name is :attr:`kserve_name`; ``storageUri`` is
            ``<base_path>/<model_name>/kserve/<version>-only``, a folder holding just the
            pushed version's SavedModel as ``<version>/`` (what TF Serving's
            ``--model_base_path`` wants; no other version, eval outputs or warm-start
            checkpoint for KServe's storage initializer to download).
        kserve_namespace: the manifest's ``metadata.namespace`` (None: the kubectl default).
        kserve_runtime_version: the manifest's ``predictor.model.runtimeVersion``: the TF
            Serving image tag, at least 2.12 (KServe's own default, 2.6.2, cannot load a TF 2.21
            export: "Op type not registered 'DisableCopyOnRead'"), e.g. ``"2.20.0-gpu"`` for a
            GPU node. None: :data:`DEFAULT_TF_SERVING_VERSION`, the TF Serving release matched
            to the TensorFlow estflow trains with.
        kserve_service_account: the predictor's ``serviceAccountName``: the Kubernetes service
            account whose secrets give KServe's storage initializer read access to a
            ``gs://``/``s3://`` ``base_path`` (None: the namespace's default account).
        kserve_rollout: the push step also applies the manifest through the Kubernetes API
            (server-side apply, field manager ``estflow``) with the task's service account
            (which needs get, create and patch on ``inferenceservices.serving.kserve.io``;
            outside a cluster: the kubeconfig), then waits for the new revision to be Ready.
            A revision that fails, or is not Ready within ``kserve_rollout_timeout``, fails
            the push step with KServe's reason and message; KServe keeps serving the previous
            revision. A push of a model already served applies it again (a retried rollout).
        kserve_canary_percent: ``predictor.canaryTrafficPercent``: the share of traffic (1 to
            99) the new version gets, the previous revision keeping the rest until promoted
            (None: the new version takes all traffic once Ready).
        kserve_rollout_timeout: seconds to wait for the new revision to be Ready (None: 600).
        kserve_gpus: GPUs (``nvidia.com/gpu``) the predictor requests; the default TF Serving
            tag then gets KServe's ``-gpu`` suffix.

    Example:
        >>> import estflow.dsl as ef
        >>> target = ef.PushTarget("gs://bucket/models", "taxi", keep_versions=5,
        ...                        kserve_manifest=True, kserve_namespace="ml")
        >>> target.kserve_runtime_version is None, target.serving_runtime_version
        (True, '2.20.0')
    """

    base_path: str
    model_name: str
    keep_versions: int | None = None
    kserve_manifest: bool = False
    kserve_namespace: str | None = None
    kserve_runtime_version: str | None = None
    kserve_service_account: str | None = None
    kserve_rollout: bool = False
    kserve_canary_percent: int | None = None
    kserve_rollout_timeout: int | None = None
    kserve_gpus: int | None = None

    @property
    def serving_runtime_version(self) -> str:
        """The TF Serving image tag the manifest names: the declared one, else the default
        with KServe's ``-gpu`` suffix when the predictor requests GPUs.

        Always set, because KServe's unpinned tag is TF Serving 2.6.2 (KServe v0.15 to v0.20),
        which cannot load the export; KServe adds ``-gpu`` only to an unpinned tag, so the
        suffix is added here."""
        if self.kserve_runtime_version:
            return self.kserve_runtime_version
        return DEFAULT_TF_SERVING_VERSION + ("-gpu" if self.kserve_gpus else "")

    @property
    def kserve_name(self) -> str:
        """The InferenceService's name: :attr:`model_name` in lowercase, ``_`` -> ``-``
        (Kubernetes names take no ``_``); clients still call ``/v1/models/<model_name>``."""
        return self.model_name.lower().replace("_", "-")

    def __post_init__(self) -> None:
        if not isinstance(self.base_path, str) or not self.base_path:
            raise DslError("base_path", "a non-empty directory path or URL", self.base_path)
        _checks.name(self.model_name, "model_name")
        _checks.positive_int(self.keep_versions, "keep_versions", allow_none=True)
        if not isinstance(self.kserve_manifest, bool):
            raise DslError("kserve_manifest", "True or False", self.kserve_manifest)
        if self.kserve_namespace is not None and not _K8S_NAME.match(str(self.kserve_namespace)):
            raise DslError("kserve_namespace", "a Kubernetes namespace (lowercase letters, "
                           "digits and '-', at most 63 characters) or None",
                           self.kserve_namespace)
        version = self.kserve_runtime_version
        if version is not None and (not isinstance(version, str) or not _TAG.match(version)):
            raise DslError("kserve_runtime_version", "a TF Serving image tag such as "
                           f"{DEFAULT_TF_SERVING_VERSION!r} or '2.20.0-gpu', or None", version)
        if version is not None and _tf_serving_release(version) < MIN_TF_SERVING_VERSION:
            raise DslError("kserve_runtime_version", "TF Serving 2.12 or newer (older releases "
                           "cannot load a TF 2.21 export: \"Op type not registered "
                           f"'DisableCopyOnRead'\"), such as {DEFAULT_TF_SERVING_VERSION!r}",
                           version)
        account = self.kserve_service_account
        if account is not None and not _K8S_SUBDOMAIN.match(str(account)):
            raise DslError("kserve_service_account", "a Kubernetes service account name "
                           "(lowercase letters, digits, '-' and '.') or None", account)
        for field in ("kserve_namespace", "kserve_runtime_version", "kserve_service_account",
                      "kserve_canary_percent", "kserve_gpus"):
            if getattr(self, field) is not None and not self.kserve_manifest:
                raise DslError(field, "None unless kserve_manifest=True (it only sets a field "
                               "of the KServe manifest)", getattr(self, field))
        self._check_kserve_rollout()

    def _check_kserve_rollout(self) -> None:
        if not isinstance(self.kserve_rollout, bool):
            raise DslError("kserve_rollout", "True or False", self.kserve_rollout)
        if self.kserve_rollout and not self.kserve_manifest:
            raise DslError("kserve_rollout", "False unless kserve_manifest=True (it applies "
                           "the manifest)", self.kserve_rollout)
        if self.kserve_rollout_timeout is not None and not self.kserve_rollout:
            raise DslError("kserve_rollout_timeout", "None unless kserve_rollout=True",
                           self.kserve_rollout_timeout)
        _checks.positive_int(self.kserve_rollout_timeout, "kserve_rollout_timeout",
                             allow_none=True)
        _checks.positive_int(self.kserve_gpus, "kserve_gpus", allow_none=True)
        canary = self.kserve_canary_percent
        if canary is not None and (isinstance(canary, bool) or not isinstance(canary, int)
                                   or not 1 <= canary <= 99):
            raise DslError("kserve_canary_percent", "an int from 1 to 99 (the new version's "
                           "share of traffic) or None", canary)
        version = self.kserve_runtime_version
        if self.kserve_gpus and version and not version.endswith("-gpu"):
            raise DslError("kserve_runtime_version", f"a '-gpu' tag such as "
                           f"'{DEFAULT_TF_SERVING_VERSION}-gpu' with kserve_gpus="
                           f"{self.kserve_gpus} (the CPU image leaves the GPUs idle), or None",
                           version)
        name = self.kserve_name
        if self.kserve_manifest and not _KSERVE_NAME.match(name):
            raise DslError("model_name", "with kserve_manifest=True, a name KServe accepts "
                           "once lowercased with '_' -> '-': starting with a letter, ending "
                           f"with a letter or digit, at most 53 characters (KServe names the "
                           f"predictor '<name>-predictor', a 63-character DNS label); it would "
                           f"be {name!r}", self.model_name)


_K8S_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
# KServe's InferenceService name (IsvcNameFmt, a DNS-1035 label), short enough for
# "<name>-predictor" to stay a 63-character label.
_KSERVE_NAME = re.compile(r"^[a-z]([-a-z0-9]{0,51}[a-z0-9])?$")
_K8S_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
# A TF Serving release tag: 2.20.0, 2.20.0-gpu (the image tensorflow/serving:<tag>).
_TAG = re.compile(r"^(\d+)\.(\d+)(\.\d+)?(-[A-Za-z0-9_.]+)*$")

# The TensorFlow estflow trains with (pyproject's pin) and the TF Serving release that serves
# its exports: the newest TF Serving release (2.20.0, tag of 2026-04-23; tensorflow/serving has
# no 2.21). TF Serving loads SavedModels written by a newer TensorFlow as long as it has their
# ops; 2.12+ has those of TF 2.21 exports. A test ties TRAINING_TENSORFLOW to pyproject's pin.
TRAINING_TENSORFLOW = "2.21"
DEFAULT_TF_SERVING_VERSION = "2.20.0"
MIN_TF_SERVING_VERSION = (2, 12)


def _tf_serving_release(tag: str) -> tuple[int, int]:
    major, minor = _TAG.match(tag).groups()[:2]
    return int(major), int(minor)
