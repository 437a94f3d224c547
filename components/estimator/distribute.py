"""Distribution for the Estimator engine: cluster membership from TF_CONFIG, the strategy a run
asks for, and the engine's view of it (:class:`Distribution`).

Read the environment once, at the edge: a step's ``main`` passes ``os.environ.get("TF_CONFIG")``
to :func:`parse_tf_config` and hands the resulting :class:`ClusterSpec` down; nothing here reads
the environment (tf.distribute's own ``TFConfigClusterResolver`` would, so it is never used).

Strategies by name (``RunConfig.train_distribute``), see :func:`strategy_for`:

- ``"mirrored"``: ``MirroredStrategy`` over this process's GPUs, else its logical CPUs;
- ``"multi_worker_mirrored"``: ``MultiWorkerMirroredStrategy`` over the TF_CONFIG workers
  (chief + workers train in sync; ``worker`` 0 is the chief when there is no ``chief`` job);
- ``"parameter_server"``: ``ParameterServerStrategy`` + ``ClusterCoordinator``: the chief
  coordinates, ``worker`` and ``ps`` tasks only serve (:func:`serve`);
- ``"tpu"``: ``TPUStrategy`` on this host's TPU (``TPUClusterResolver("local")``).

Under a strategy the engine (see :class:`Distribution`) creates every variable eagerly, inside
the strategy's scope, before any step runs (the model in its PREDICT trace, TRAIN-only variables
and optimizer slots, via ``optimizer.build``, in a trace of one distributed step made before
training; the store hands each replica's trace the same variables), distributes the dataset
(``TrainSpec.batch_size`` is the *global* batch: each replica gets ``batch / replicas``),
averages gradients (engine-applied optimizers get ``loss / replicas``; Keras sums across
replicas) and reports the mean loss. Only the chief writes ``model_dir``; every other worker
still calls save (a save may run collective ops all workers must join) into a scratch directory
deleted afterwards.

Across worker processes (a MultiWorkerMirroredStrategy with one replica per worker, the CPU
case of ``estflow run --workers N``) every collective is a network round trip that all workers
wait for (~1 ms on localhost), so the engine sends one a step: it all-reduces the gradients of
the Keras optimizers it applies, the step's loss and its example count together (one
``all_reduce`` per gradient dtype), and the optimizers apply the sums as given (see
:meth:`Distribution.packs`). TF's own path costs one collective per output and gradient pack
plus two or three all-gathers per sparse gradient (``tf.IndexedSlices``: embeddings, linear
columns): ~40 a step, 30x slower than one process for the taxi sample on 2 cores. A sparse
gradient of a variable up to 2**18 elements is all-reduced dense. Keras 3's Adagrad, FTRL,
SGD, Adam and RMSprop update a dense gradient exactly as its sparse form when no row repeats
(untouched rows stay as they were); a row that repeats in the batch (one id in several
examples) has its repeats summed before the update, as ``tf.compat.v1.train`` optimizers
(tf.estimator) did, where a Keras optimizer given the sparse gradient applies each repeat on
its own (e.g. Adagrad accumulates the sum of their squares, not the square of their sum), so
such runs differ slightly from one process. Larger ones stay sparse (all-gathered). The example
count travels as a float32 (exact up to 2**24 examples a step). Optimizers that clip or
accumulate gradients (Keras does both per replica, before its all-reduce), wrappers
(``LossScaleOptimizer``), ``tf.compat.v1`` optimizers and ``train_op`` model_fns keep TF's
path.

A model_fn that applies its own gradients (Estimator style, ``train_op``) under a strategy
averages them itself, as in any TF 2 custom loop: divide the loss by
``tf.distribute.get_replica_context().num_replicas_in_sync`` before taking gradients.

Input across worker processes (the same MultiWorkerMirroredStrategy, one replica per worker):
an input_fn that names ``input_context`` shards itself, as under tf.estimator, whose
``make_input_fn_iterator`` called it once per worker with that worker's context and used its
dataset as it was. It gets ``InputContext(num_input_pipelines=workers, input_pipeline_id=this
worker's index in the cluster, chief first)`` and returns this worker's part of the input:
records no other worker reads (``dataset.shard(ctx.num_input_pipelines,
ctx.input_pipeline_id)`` right after reading them, or whole files per worker) in batches of
``ctx.get_per_replica_batch_size(global_batch)`` (one replica a worker: the global batch over
the workers). The engine distributes it with ``strategy.distribute_datasets_from_function``:
each worker reads and parses only its share. An input_fn that does not name ``input_context``
returns the global batch on every worker, which the engine shards by element
(``AutoShardPolicy.DATA``): every worker reads and parses all of the input and keeps its part.
Everywhere else (one process, or several replicas in a worker) ``input_context`` describes one
pipeline of the global batch, which the engine splits over the replicas.

Evaluation (``RunConfig.eval_distribute``, see :func:`eval_strategy_for`) runs in this process:
``"mirrored"`` or a ``MirroredStrategy``/``OneDeviceStrategy`` instance; the other names are
refused. When ``train_distribute`` is set too, evaluation must use that same strategy (the model's
variables belong to it): ``"mirrored"`` then means the training MirroredStrategy. The input_fn's
batch is the global batch, split over the replicas (a short last batch too: replicas left
without examples see an empty batch); each replica runs the model_fn in EVAL mode. Each global
batch's loss is its replicas' losses weighted by their example counts, so a per-example mean
loss (Keras losses, the heads' ``SUM_OVER_BATCH_SIZE``) equals the single-device batch loss;
``loss`` is the mean over batches as without a strategy. Metric objects' variables (``ON_READ``
``SUM``) are summed over replicas when read. TF 1 ``(value, update_op)`` pairs are refused: an
update_op's value is its replica's metric over the examples that replica saw, and ratios
(accuracy, precision, AUC) of parts do not combine into the whole's.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import tempfile
import weakref
from collections.abc import Callable
from collections.abc import Mapping
from typing import Any

import tensorflow as tf

__all__ = ["STRATEGIES", "DistributeError", "TaskInfo", "ClusterSpec", "parse_tf_config",
           "strategy_name", "task_role", "strategy_for", "eval_strategy_for", "serve",
           "Distribution"]

STRATEGIES = ("mirrored", "multi_worker_mirrored", "parameter_server", "tpu")
_TASK_TYPES = ("chief", "worker", "ps", "evaluator")
_TRAINING_JOBS = ("chief", "worker")


class DistributeError(ValueError):
    """A distribution setting, a TF_CONFIG, or the machine does not fit the asked strategy."""


@dataclasses.dataclass(frozen=True)
class TaskInfo:
    """This process's task in the cluster: ``type`` (chief, worker, ps, evaluator), ``index``."""

    type: str
    index: int


@dataclasses.dataclass(frozen=True)
class ClusterSpec:
    """A parsed TF_CONFIG: the jobs (name -> ``host:port`` addresses) and this task.

    Attributes:
        jobs: job name -> addresses, e.g. ``{"worker": ("localhost:2222", "localhost:2223")}``.
        task: this process's task.
        rpc_layer: the protocol of the servers (``"grpc"``).
    """

    jobs: Mapping[str, tuple[str, ...]]
    task: TaskInfo
    rpc_layer: str = "grpc"

    @property
    def is_chief(self) -> bool:
        """The ``chief`` task, or ``worker`` 0 when the cluster has no ``chief`` job."""
        if "chief" in self.jobs:
            return self.task.type == "chief"
        return self.task == TaskInfo("worker", 0)

    @property
    def num_training_workers(self) -> int:
        """Tasks that run the training loop's replicas (chief + workers; not ps/evaluator)."""
        return sum(len(self.jobs.get(job, ())) for job in _TRAINING_JOBS)

    @property
    def has_ps(self) -> bool:
        return bool(self.jobs.get("ps"))

    def training_cluster(self) -> tf.train.ClusterSpec:
        """The TF cluster without the evaluator, which is not part of the training cluster."""
        return tf.train.ClusterSpec({job: list(addresses) for job, addresses in
                                     self.jobs.items() if job != "evaluator"})

    def resolver(self) -> tf.distribute.cluster_resolver.SimpleClusterResolver:
        return tf.distribute.cluster_resolver.SimpleClusterResolver(
            self.training_cluster(), task_type=self.task.type, task_id=self.task.index,
            rpc_layer=self.rpc_layer)


def parse_tf_config(text: str | None) -> ClusterSpec | None:
    """The cluster described by a ``TF_CONFIG`` value (None when unset or empty).

    Raises:
        DistributeError: the value is not a TF_CONFIG (JSON with ``cluster`` and ``task``).
    """
    if not text or not text.strip():
        return None
    try:
        config = json.loads(text)
    except json.JSONDecodeError as err:
        raise DistributeError(f"Received an invalid TF_CONFIG, expected JSON. Received: "
                              f"TF_CONFIG={text!r} ({err})") from None
    cluster, task = (config.get("cluster"), config.get("task")) if isinstance(config, dict) \
        else (None, None)
    if not cluster and not task:  # {} or only "environment": no cluster
        return None
    if not isinstance(cluster, dict) or not cluster:
        raise DistributeError("Received an invalid TF_CONFIG, expected `cluster`: a mapping of "
                              f"job name -> list of 'host:port'. Received: cluster={cluster!r}")
    jobs = {job: _addresses(job, addresses) for job, addresses in sorted(cluster.items())}
    info = _task(task, jobs)
    return ClusterSpec(jobs=jobs, task=info, rpc_layer=str(config.get("rpc_layer") or "grpc"))


def _addresses(job: Any, addresses: Any) -> tuple[str, ...]:
    if job not in _TASK_TYPES:
        raise DistributeError(f"Received an invalid TF_CONFIG job, expected one of "
                              f"{list(_TASK_TYPES)}. Received: {job!r}")
    if isinstance(addresses, dict):  # sparse form {index: address}
        addresses = [addresses[k] for k in sorted(addresses, key=int)]
    if not isinstance(addresses, list) or not all(isinstance(a, str) and ":" in a
                                                  for a in addresses):
        raise DistributeError(f"Received an invalid TF_CONFIG `cluster.{job}`, expected a list "
                              f"of 'host:port'. Received: {addresses!r}")
    return tuple(addresses)


def _task(task: Any, jobs: Mapping[str, tuple[str, ...]]) -> TaskInfo:
    if not isinstance(task, dict) or task.get("type") not in jobs:
        raise DistributeError(f"Received an invalid TF_CONFIG `task`, expected "
                              f"{{'type': one of {sorted(jobs)}, 'index': N}}. Received: "
                              f"task={task!r}")
    index = task.get("index", 0)
    if isinstance(index, bool) or not isinstance(index, int) or \
            not 0 <= index < len(jobs[task["type"]]):
        raise DistributeError(f"Received an invalid TF_CONFIG `task.index`, expected 0 <= index "
                              f"< {len(jobs[task['type']])}. Received: index={index!r}")
    return TaskInfo(task["type"], index)


def strategy_name(name: str | None, cluster: ClusterSpec | None) -> str | None:
    """The strategy name a run uses: ``name``, else the one the cluster implies
    (``parameter_server`` with ps tasks, ``multi_worker_mirrored`` with several workers)."""
    if name is not None:
        if name not in STRATEGIES:
            raise DistributeError(f"Received an invalid value for `train_distribute`, expected "
                                  f"one of {list(STRATEGIES)}, None or a tf.distribute.Strategy. "
                                  f"Received: train_distribute={name!r}")
        return name
    if cluster is None:
        return None
    if cluster.has_ps:
        return "parameter_server"
    return "multi_worker_mirrored" if cluster.num_training_workers > 1 else None


def task_role(name: str | None, cluster: ClusterSpec | None) -> str:
    """What this process does: ``"train"``, ``"serve"`` (a parameter-server strategy's worker
    or ps task: :func:`serve`) or ``"evaluate"`` (the evaluator task)."""
    if cluster is None:
        return "train"
    if cluster.task.type == "evaluator":
        return "evaluate"
    if cluster.task.type == "ps" or (
            strategy_name(name, cluster) == "parameter_server" and cluster.task.type == "worker"):
        return "serve"
    return "train"


def strategy_for(value: str | tf.distribute.Strategy | None,
                 cluster: ClusterSpec | None = None) -> tf.distribute.Strategy | None:
    """The strategy for ``RunConfig.train_distribute`` (a name, a Strategy, or None) and the
    cluster. Call it at program start: MultiWorkerMirroredStrategy and ParameterServerStrategy
    configure the TF runtime, which must happen before TensorFlow runs any op.

    Raises:
        DistributeError: an unknown name, a name the cluster contradicts, or no TPU for "tpu".

    The ``evaluator`` task gets None: it evaluates checkpoints in its own process, outside the
    training cluster (``RunConfig.eval_distribute`` still applies to its evaluations).
    """
    if isinstance(value, tf.distribute.Strategy):
        return value
    name = strategy_name(value, cluster)
    if name is None or (cluster is not None and cluster.task.type == "evaluator"):
        return None  # the evaluator task is not part of the training cluster
    if name != "parameter_server" and cluster is not None and cluster.has_ps:
        raise DistributeError(f"train_distribute={name!r} cannot use the cluster's ps tasks "
                              f"{list(cluster.jobs['ps'])}; expected 'parameter_server'")
    if name in ("mirrored", "tpu") and cluster is not None and cluster.num_training_workers > 1:
        raise DistributeError(f"train_distribute={name!r} runs in one process, but TF_CONFIG "
                              f"has {cluster.num_training_workers} training workers; expected "
                              "'multi_worker_mirrored' or 'parameter_server'")
    return _BUILDERS[name](cluster)


# Strategies evaluation runs under: one process, replicas in sync, partial batches handled by
# the distributed dataset. (MultiWorkerMirroredStrategy would need every worker to evaluate in
# lockstep, ParameterServerStrategy runs steps on remote workers, TPUStrategy needs static
# shapes: none of them is supported for evaluation.)
_EVAL_CLASSES = (tf.distribute.MirroredStrategy, tf.distribute.OneDeviceStrategy)
_EVAL_EXPECTED = ("'mirrored', None or a tf.distribute.MirroredStrategy or OneDeviceStrategy "
                  "instance (evaluation runs in this process)")


def eval_strategy_for(value: str | tf.distribute.Strategy | None,
                      train: tf.distribute.Strategy | None = None
                      ) -> tf.distribute.Strategy | None:
    """The strategy for ``RunConfig.eval_distribute`` (``"mirrored"``, a MirroredStrategy or
    OneDeviceStrategy, or None), given ``train``, the strategy training runs under (or None).

    The model's variables are created under ``train``; reading them under another strategy
    fails in TensorFlow, so with both set evaluation must use ``train`` itself (``"mirrored"``
    then names the training MirroredStrategy).

    Raises:
        DistributeError: another name or strategy, or a strategy other than ``train``.
    """
    if value is None:
        return None
    if isinstance(value, tf.distribute.Strategy):
        if not isinstance(value, _EVAL_CLASSES):
            raise DistributeError(f"Received an unsupported value for `eval_distribute`, "
                                  f"expected {_EVAL_EXPECTED}. Received: eval_distribute="
                                  f"{type(value).__name__} instance")
        strategy = value
    elif value == "mirrored":
        strategy = train if isinstance(train, tf.distribute.MirroredStrategy) \
            else _mirrored(None)
    else:
        raise DistributeError(f"Received an unsupported value for `eval_distribute`, expected "
                              f"{_EVAL_EXPECTED}. Received: eval_distribute={value!r}")
    if train is not None and strategy is not train:
        shown = repr(value) if isinstance(value, str) else f"{type(value).__name__} instance"
        raise DistributeError(f"eval_distribute={shown} is not the strategy training uses "
                              f"({type(train).__name__}): the model's variables belong to the "
                              "training strategy and cannot be read under another one. "
                              "Expected eval_distribute to be the train_distribute strategy "
                              "object, 'mirrored' when training uses a MirroredStrategy, or "
                              "None (evaluate on one device)")
    return strategy


# One MirroredStrategy per device set and process: every instance numbers its collective ops
# from the same keys, so a second instance's all-reduce meets the first one's in TF's collective
# executor ("Shape mismatch in the collective instance 100"); TF's own tests work around it by
# shifting a private key base per instance. Reusing the instance avoids it (several Estimators,
# train_and_evaluate, tests).
_MIRRORED: dict[tuple[str, ...], tf.distribute.Strategy] = {}


def _mirrored(cluster: ClusterSpec | None) -> tf.distribute.Strategy:
    devices = tf.config.list_logical_devices("GPU") or tf.config.list_logical_devices("CPU")
    names = tuple(d.name for d in devices)
    if names not in _MIRRORED:
        _MIRRORED[names] = tf.distribute.MirroredStrategy(list(names))
    return _MIRRORED[names]


def _multi_worker_mirrored(cluster: ClusterSpec | None) -> tf.distribute.Strategy:
    # An explicit resolver (empty: one local worker) so TF never reads TF_CONFIG itself.
    resolver = cluster.resolver() if cluster is not None else \
        tf.distribute.cluster_resolver.SimpleClusterResolver(tf.train.ClusterSpec({}))
    return tf.distribute.MultiWorkerMirroredStrategy(cluster_resolver=resolver)


def _parameter_server(cluster: ClusterSpec | None) -> tf.distribute.Strategy:
    if cluster is None or not cluster.has_ps or not cluster.jobs.get("worker"):
        raise DistributeError("train_distribute='parameter_server' needs a TF_CONFIG cluster "
                              "with 'worker' and 'ps' jobs (and a 'chief' to coordinate). "
                              f"Received: {dict(cluster.jobs) if cluster else None}")
    if cluster.task.type != "chief":
        raise DistributeError(f"under 'parameter_server' only the chief trains; task "
                              f"{cluster.task.type}:{cluster.task.index} should serve() instead")
    _ensure_inter_op_threads(len(cluster.jobs["worker"]) + 1)
    return tf.distribute.ParameterServerStrategy(cluster.resolver())


def _ensure_inter_op_threads(needed: int) -> None:
    """The coordinator runs one blocking remote call per worker on TF's inter-op thread pool,
    plus one to schedule them: with fewer threads than workers + 1 a closure waits for a thread
    that never frees and training hangs without an error (docs/pages/architecture.md,
    "Distribution"). The pool defaults to the number of cores, so small machines hit this. It can only be sized before
    the TF runtime starts."""
    current = tf.config.threading.get_inter_op_parallelism_threads() or (os.cpu_count() or 1)
    if current >= needed:
        return
    try:
        tf.config.threading.set_inter_op_parallelism_threads(needed)
    except RuntimeError as err:
        raise DistributeError(f"ParameterServerStrategy needs >= {needed} inter-op threads "
                              f"(workers + 1) but the TF runtime already started with "
                              f"{current}; create the strategy at program start ({err})") from None


def _tpu(cluster: ClusterSpec | None) -> tf.distribute.Strategy:
    try:
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu="local")
        tf.tpu.experimental.initialize_tpu_system(resolver)
        return tf.distribute.TPUStrategy(resolver)
    except (tf.errors.OpError, ValueError, RuntimeError) as err:
        first = str(err).strip().splitlines()[0][:200] if str(err).strip() else type(err).__name__
        raise DistributeError("train_distribute='tpu' needs a TPU attached to this host (a "
                              "Cloud TPU VM or a GKE TPU node); none was found: "
                              f"{first}") from None


_BUILDERS: dict[str, Callable[[ClusterSpec | None], tf.distribute.Strategy]] = {
    "mirrored": _mirrored, "multi_worker_mirrored": _multi_worker_mirrored,
    "parameter_server": _parameter_server, "tpu": _tpu}
_CLASSES = {"mirrored": tf.distribute.MirroredStrategy,
            "multi_worker_mirrored": tf.distribute.MultiWorkerMirroredStrategy,
            "parameter_server": tf.distribute.ParameterServerStrategy,
            "tpu": tf.distribute.TPUStrategy}


def serve(cluster: ClusterSpec) -> None:
    """Run this task's server until the process is stopped (a ``ParameterServerStrategy``
    worker or ps task: the chief's coordinator sends it work)."""
    server = tf.distribute.Server(cluster.training_cluster(), job_name=cluster.task.type,
                                  task_index=cluster.task.index, protocol=cluster.rpc_layer,
                                  start=True)
    server.join()


# Datasets an input_fn returned when given an input_context (see call_input_fn): the input_fn
# chose what each input pipeline reads. Weak: an entry goes with its dataset.
_SELF_SHARDED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def note_input_context(dataset: tf.data.Dataset,
                       input_context: tf.distribute.InputContext) -> None:
    """Record that an input_fn given ``input_context`` returned ``dataset`` (what
    :meth:`Distribution.iterator` distributes as one worker's part of the input when the
    context is a per-worker one)."""
    _SELF_SHARDED[dataset] = input_context


def _worker_index(strategy: tf.distribute.Strategy) -> tuple[int, int]:
    """(workers, this worker's index) of a MultiWorkerMirroredStrategy's cluster, numbered as
    tf.distribute does (the chief first, then the workers)."""
    resolver = strategy.cluster_resolver
    jobs = resolver.cluster_spec().as_dict()
    tasks = [(job, i) for job in _TRAINING_JOBS for i in range(len(jobs.get(job, ())))]
    return len(tasks), tasks.index((resolver.task_type, int(resolver.task_id)))


def _shard_by_data(dataset: tf.data.Dataset) -> tf.data.Dataset:
    """Workers split the input by element, unless the input_fn chose a policy: TF's default
    (AUTO) shards by file and fails at the first step when a split has fewer files than there
    are workers (a small transform output has one). Set ``AutoShardPolicy.FILE`` in the
    input_fn's options when every worker can get its own files (less reading)."""
    policy = tf.data.experimental.AutoShardPolicy
    if dataset.options().experimental_distribute.auto_shard_policy != policy.AUTO:
        return dataset
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = policy.DATA
    return dataset.with_options(options)


class Distribution:
    """The engine's view of its strategy (or of none: then every method is the plain path).

    Args:
        strategy: the strategy training runs under, or None.
    """

    def __init__(self, strategy: tf.distribute.Strategy | None = None) -> None:
        self.strategy = strategy
        self._coordinator = None
        if isinstance(strategy, tf.distribute.ParameterServerStrategy):
            self._coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
        self._scratch: str | None = None

    @classmethod
    def of(cls, config: Any) -> Distribution:
        """The distribution of a run config: its ``train_distribute`` Strategy, else the
        strategy whose ``scope()`` is active (Keras' convention), else the named one (which
        needs ``config.cluster``, a :class:`ClusterSpec`, for multi-worker names)."""
        value = getattr(config, "train_distribute", None)
        if isinstance(value, tf.distribute.Strategy):
            return cls(value)
        if tf.distribute.has_strategy():
            strategy = tf.distribute.get_strategy()
            if value is not None and not isinstance(strategy, _CLASSES.get(value, ())):
                raise DistributeError(f"config.train_distribute is {value!r} but the Estimator "
                                      f"is built under a {type(strategy).__name__} scope")
            return cls(strategy)
        cluster = getattr(config, "cluster", None)
        return cls(strategy_for(value, cluster if isinstance(cluster, ClusterSpec) else None))

    @classmethod
    def for_eval(cls, config: Any, train: Distribution) -> Distribution:
        """The distribution of evaluation: ``config.eval_distribute`` (see
        :func:`eval_strategy_for`) given the training distribution ``train``."""
        return cls(eval_strategy_for(getattr(config, "eval_distribute", None), train.strategy))

    @property
    def is_chief(self) -> bool:
        """Whether this process writes model_dir (checkpoints, summaries, exports)."""
        return self.strategy is None or bool(self.strategy.extended.should_checkpoint)

    @property
    def coordinated(self) -> bool:
        """Whether a coordinator schedules the steps on workers (ParameterServerStrategy)."""
        return self._coordinator is not None

    @property
    def num_replicas(self) -> int:
        return 1 if self.strategy is None else int(self.strategy.num_replicas_in_sync)

    @property
    def across_workers(self) -> bool:
        """Under a MultiWorkerMirroredStrategy across processes with one replica per worker
        (``estflow run --workers N`` on CPUs): an input_fn naming ``input_context`` reads its
        worker's part of the input, and the step sends one collective (:meth:`packs`)."""
        strategy = self.strategy
        return (isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy)
                and len(strategy.extended.worker_devices) == 1 and self.num_replicas > 1)

    def input_context(self) -> tf.distribute.InputContext | None:
        """What an input_fn naming ``input_context`` receives (tf.estimator passed one under a
        strategy only). Across workers (:attr:`across_workers`) this worker's pipeline:
        ``num_input_pipelines`` = workers, ``input_pipeline_id`` = this worker's index, and the
        input_fn returns this worker's records in batches of
        ``ctx.get_per_replica_batch_size(global_batch)``. Otherwise one input pipeline, this
        process's, of the global batch, which the engine splits over the replicas; so an
        input_fn sharding by it (``dataset.shard(ctx.num_input_pipelines,
        ctx.input_pipeline_id)``) keeps all of it. None without a strategy."""
        if self.strategy is None:
            return None
        if self.across_workers:
            workers, index = _worker_index(self.strategy)
            return tf.distribute.InputContext(num_input_pipelines=workers,
                                              input_pipeline_id=index,
                                              num_replicas_in_sync=self.num_replicas)
        return tf.distribute.InputContext(num_input_pipelines=1, input_pipeline_id=0,
                                          num_replicas_in_sync=self.num_replicas)

    def scope(self) -> contextlib.AbstractContextManager:
        """Variables created inside are distributed (no-op without a strategy)."""
        return self.strategy.scope() if self.strategy is not None else contextlib.nullcontext()

    def write_dir(self, model_dir: str) -> str:
        """Where this process writes what belongs in ``model_dir``: model_dir on the chief, a
        scratch directory (removed by :meth:`cleanup`) on other workers."""
        if self.is_chief:
            return model_dir
        if self._scratch is None:
            self._scratch = tempfile.mkdtemp(prefix="estflow-worker-")
        return self._scratch

    def cleanup(self) -> None:
        """Delete a non-chief worker's scratch directory (its path stays this process's
        scratch: the checkpoint manager writes there again at the next save)."""
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)

    def iterator(self, dataset: tf.data.Dataset):
        """An iterator of the training input: distributed over replicas (each gets
        ``global batch / replicas``), or created on each worker under a coordinator (then every
        worker reads all of it: leave its shuffle unseeded so workers see different orders).
        Across workers, a dataset an input_fn built for this worker's ``input_context`` is
        this worker's replica's input as it is (``distribute_datasets_from_function``); any
        other is the global batch, sharded by element."""
        if self._coordinator is not None:
            return iter(self._coordinator.create_per_worker_dataset(dataset))
        if self.strategy is None:
            return iter(dataset)
        context = _SELF_SHARDED.get(dataset)
        if context is not None and self.across_workers:
            return iter(self.strategy.distribute_datasets_from_function(
                lambda given: self._worker_dataset(dataset, context, given)))
        if isinstance(self.strategy, tf.distribute.MultiWorkerMirroredStrategy):
            dataset = _shard_by_data(dataset)
        return iter(self.strategy.experimental_distribute_dataset(dataset))

    @staticmethod
    def _worker_dataset(dataset: tf.data.Dataset, built_for: tf.distribute.InputContext,
                        given: tf.distribute.InputContext) -> tf.data.Dataset:
        """``dataset`` (built for ``built_for``) as the strategy's input pipeline ``given``."""
        if (built_for.num_input_pipelines, built_for.input_pipeline_id) != \
                (given.num_input_pipelines, given.input_pipeline_id):
            raise DistributeError(
                f"the input_fn's input_context (pipeline {built_for.input_pipeline_id} of "
                f"{built_for.num_input_pipelines}) is not this worker's input pipeline "
                f"({given.input_pipeline_id} of {given.num_input_pipelines})")
        return dataset

    def trace(self, loop: Callable, iterator) -> None:
        """Trace the training ``loop`` for ``iterator`` ahead of the first call (a coordinator
        traces on schedule instead)."""
        if self._coordinator is None:
            with self.scope():
                loop.get_concrete_function(iterator, tf.TensorSpec([], tf.int64))

    def packs(self, optimizers) -> bool:
        """Whether the training step all-reduces the gradients of ``optimizers`` (Keras) itself,
        in one collective with the step's loss and example count, and the optimizers apply them
        as they are: under a MultiWorkerMirroredStrategy across processes, with one replica per
        worker (each collective is a network round trip there, and TF's way costs one per
        output, gradient dtype, and two or three per sparse gradient: ~40 a step for the taxi
        sample, 30x slower than one process on 2 cores). Not for optimizers that clip
        gradients or accumulate them (Keras does that per replica, before its all-reduce)."""
        if not self.across_workers:
            return False
        return all(hasattr(type(opt), "_all_reduce_sum_gradients")
                   and not hasattr(opt, "inner_optimizer")  # a wrapper's inner one reduces
                   and getattr(opt, "clipnorm", None) is None
                   and getattr(opt, "clipvalue", None) is None
                   and getattr(opt, "global_clipnorm", None) is None
                   and not getattr(opt, "gradient_accumulation_steps", None)
                   for opt in optimizers)

    def run(self, replica_fn: Callable, element, *,
            reduced: Callable[[], bool] = lambda: False) -> tuple[tf.Tensor, tf.Tensor]:
        """``replica_fn(element) -> (loss, examples)`` on every replica; the mean loss and the
        total examples (in cross-replica context, inside the training function). ``reduced()``
        true after the replicas ran: replica_fn returned them already over all replicas
        (:meth:`packs`)."""
        if self.strategy is None:
            return replica_fn(element)
        loss, examples = self.strategy.run(replica_fn, args=(element,))
        if reduced():
            first = self.strategy.experimental_local_results
            return first(loss)[0], first(examples)[0]
        reduce = tf.distribute.ReduceOp
        return (self.strategy.reduce(reduce.MEAN, loss, axis=None),
                self.strategy.reduce(reduce.SUM, examples, axis=None))

    def sum_over_replicas(self, replica_fn: Callable, element) -> tuple:
        """``replica_fn(element)`` (a tuple of tensors) on every replica, each output summed
        over the replicas (evaluation: in cross-replica context, inside its function)."""
        if self.strategy is None:
            return tuple(replica_fn(element))
        outputs = self.strategy.run(replica_fn, args=(element,))
        return tuple(self.strategy.reduce(tf.distribute.ReduceOp.SUM, value, axis=None)
                     for value in outputs)

    def run_loop(self, loop: Callable, iterator, steps: int) -> tuple:
        """Call the training ``loop(iterator, n)`` for ``steps`` steps: directly, or split in
        one concurrent call per worker under a coordinator. Returns numpy (ran, last loss,
        examples, finite)."""
        if self._coordinator is None:
            with self.scope():
                return tuple(v.numpy() for v in loop(iterator, tf.constant(steps, tf.int64)))
        # No public count of a ParameterServerStrategy's workers in TF 2.21 (its
        # `cluster_resolver` property is None): the extended's, set from the cluster spec.
        workers = max(1, int(self.strategy.extended._num_workers))  # noqa: SLF001
        sizes = [steps // workers + (i < steps % workers) for i in range(workers)]
        remote = [self._coordinator.schedule(loop, args=(iterator, tf.constant(n, tf.int64)))
                  for n in sizes if n]
        self._coordinator.join()
        results = [tuple(r.fetch()) for r in remote]
        return (sum(int(r[0]) for r in results), results[-1][1],
                sum(int(r[2]) for r in results), all(bool(r[3]) for r in results))
