"""Real multi-process training on localhost ports, each process given TF_CONFIG as a TFJob (or
``estflow run --workers N``) gives it.

- MultiWorkerMirroredStrategy: 2 workers train one model in sync; both finish at the right
  global step, the chief's checkpoint equals the other worker's in-memory variables (and a
  single-process run on the same global batches), only the chief wrote model_dir.
- An input_fn naming ``input_context`` (the train step's ``make_input_fn``) reads only its
  worker's records, in batches of global batch / workers: every record of an epoch goes to
  exactly one worker.
- ParameterServerStrategy: chief (coordinator) + 2 workers + 1 ps (slow: 4 processes).

The worker processes run this file as a script (``python tests/components/estimator/test_multiworker.py
ROLE MODEL_DIR OUT_JSON``), reading TF_CONFIG at that edge like a step's ``main``.
"""

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from tests.components.estimator._models import logistic_model_fn as model_fn

ROOT = Path(__file__).resolve().parents[3]
MAX_STEPS = 20
STRATEGY_CLASSES = {"multi_worker_mirrored": "MultiWorkerMirroredStrategy",
                    "parameter_server": "ParameterServerStrategy"}
R = np.random.RandomState(0)
X = R.randn(256, 2).astype("float32")
Y = (X[:, :1] + 0.5 * X[:, 1:] > 0).astype("float32")


# -- what each process runs ---------------------------------------------------------------------
def whole_batch_input_fn():
    """The global batch is all 256 rows: under MWMS each of 2 workers trains on 128 of them."""
    import tensorflow as tf

    return tf.data.Dataset.from_tensor_slices(({"x": X}, Y)).batch(len(X)).repeat()


IDS = R.randint(0, 10, size=(256, 1)).astype("int64")  # repeats: duplicate sparse rows


def ids_input_fn():
    import tensorflow as tf

    return tf.data.Dataset.from_tensor_slices(({"x": X, "id": IDS}, Y)).batch(len(X)).repeat()


def embedding_model_fn(features, labels, mode, params):
    """Dense ``w``/``b`` plus a 10-row embedding (a sparse gradient, rows repeated in a batch);
    plain SGD, whose sparse and dense updates are the same."""
    import keras
    import tensorflow as tf

    from estflow.estimator import EstimatorSpec
    from estflow.estimator import ModeKeys

    w = tf.Variable(lambda: tf.zeros([2, 1]), name="w")
    b = tf.Variable(lambda: tf.zeros([1]), name="b")
    table = tf.Variable(lambda: tf.fill([10, 1], 0.1), name="table")
    logits = tf.matmul(features["x"], w) + b + tf.gather(table, features["id"][:, 0])
    if mode == ModeKeys.PREDICT:
        return EstimatorSpec(mode, predictions={"logits": logits})
    loss = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits))
    clip = {"clipnorm": 100.0} if os.environ.get("MW_CLIP") else {}  # clips nothing here
    return EstimatorSpec(mode, loss=loss, optimizer=keras.optimizers.SGD(0.5, **clip)
                         if mode == ModeKeys.TRAIN else None)


RECORDS, GLOBAL_BATCH = 64, 16
SEEN: list[list[int]] = []  # in a worker process: the ids of each batch it trained on


def _write_records(path: Path) -> None:
    """GZIP TFRecords of ``RECORDS`` examples: ``id`` 0..RECORDS-1, ``x``, label ``y``."""
    import tensorflow as tf

    def feature(values, kind):
        return tf.train.Feature(**{kind: (tf.train.Int64List if kind == "int64_list"
                                          else tf.train.FloatList)(value=values)})

    with tf.io.TFRecordWriter(str(path), options="GZIP") as writer:
        for i in range(RECORDS):
            x = R.randn(2).astype("float32")
            writer.write(tf.train.Example(features=tf.train.Features(feature={
                "id": feature([i], "int64_list"), "x": feature(x, "float_list"),
                "y": feature([float(x[0] > 0)], "float_list")})).SerializeToString())


def _records_input_fn(pattern: str):
    """The train step's input_fn (it names ``input_context``) over ``_write_records``' file."""
    import tensorflow as tf

    from estflow.components.train.inputs import make_input_fn

    spec = {"id": tf.io.FixedLenFeature([1], tf.int64), "x": tf.io.FixedLenFeature([2], tf.float32),
            "y": tf.io.FixedLenFeature([1], tf.float32)}
    return make_input_fn(pattern, spec, "y", GLOBAL_BATCH, shuffle_buffer=RECORDS, seed=3)


def recording_model_fn(features, labels, mode):
    """Logistic regression on ``x`` that appends each TRAIN batch's ids to ``SEEN``."""
    import keras
    import tensorflow as tf

    from estflow.estimator import EstimatorSpec
    from estflow.estimator import ModeKeys

    w = tf.Variable(lambda: tf.zeros([2, 1]), name="w")
    logits = tf.matmul(features["x"], w)
    if mode == ModeKeys.PREDICT:
        return EstimatorSpec(mode, predictions={"logits": logits})
    loss = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits))
    if mode == ModeKeys.TRAIN:
        seen = tf.py_function(lambda ids: SEEN.append(ids.numpy()[:, 0].tolist()) or 0,
                              [features["id"]], tf.int32)
        with tf.control_dependencies([seen]):
            loss = tf.identity(loss)
    return EstimatorSpec(mode, loss=loss, optimizer=keras.optimizers.SGD(0.5)
                         if mode == ModeKeys.TRAIN else None)


def _estimator(model_dir, fn=model_fn, steps_per_loop=5, **config):
    from estflow.estimator import Estimator
    from estflow.estimator.run_config import RunConfig

    return Estimator(fn, model_dir, RunConfig(
        save_checkpoints_steps=10, save_summary_steps=10, log_step_count_steps=10,
        steps_per_loop=steps_per_loop, **config), progress=lambda m: print(m, flush=True))


def _collectives(est) -> dict[str, int]:
    """Collective ops by type in the training loop's traced function (and its branches)."""
    counts: dict[str, int] = {}
    for function in est._trainer.loop._list_all_concrete_functions():  # noqa: SLF001
        graph = function.graph.as_graph_def()
        nodes = [n for f in graph.library.function for n in f.node_def] + list(graph.node)
        for node in nodes:
            if node.op.startswith("Collective"):
                counts[node.op] = counts.get(node.op, 0) + 1
    return counts


def _process_main(model_dir: str, out_json: str) -> None:
    import tensorflow as tf

    from estflow.estimator import distribute

    cluster = distribute.parse_tf_config(os.environ.get("TF_CONFIG"))  # the edge
    if distribute.task_role(None, cluster) == "serve":
        distribute.serve(cluster)  # until the test stops it
        return
    strategy = distribute.strategy_for(None, cluster)  # before any TF op
    embedding = os.environ.get("MW_MODEL") == "embedding"
    records = os.environ.get("MW_RECORDS")  # a _write_records file: the train step's input_fn
    fn = recording_model_fn if records else embedding_model_fn if embedding else model_fn
    est = _estimator(model_dir, fn, int(os.environ.get("MW_STEPS_PER_LOOP", "5")),
                     train_distribute=strategy, cluster=cluster)
    est.train(_records_input_fn(records) if records else
              ids_input_fn if embedding else whole_batch_input_fn, max_steps=MAX_STEPS)
    values = {name: np.asarray(v.numpy()).tolist() for name, v in est.variables().items()}
    export = None
    if isinstance(strategy, tf.distribute.ParameterServerStrategy):  # variables on the ps
        from estflow.estimator import parsing_serving_input_receiver_fn

        receiver = parsing_serving_input_receiver_fn({"x": tf.io.FixedLenFeature([2],
                                                                              tf.float32)})
        export = os.fsdecode(est.export_saved_model(Path(model_dir) / "export", receiver))
    Path(out_json).write_text(json.dumps({
        "export": export,
        "global_step": est.global_step, "chief": cluster.is_chief,
        "strategy": [name for name, cls in STRATEGY_CLASSES.items()
                     if isinstance(strategy, getattr(tf.distribute, cls))],
        "variables": values, "seen": SEEN,
        "collectives": _collectives(est) if embedding else None}))


# -- the tests ---------------------------------------------------------------------------------
def _free_ports(n: int) -> list[int]:
    sockets = [socket.socket() for _ in range(n)]
    for s in sockets:
        s.bind(("localhost", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def _start(cluster: dict, task: tuple[str, int], model_dir: Path, out: Path, tmp: Path,
           **extra: str):
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "TMPDIR": str(tmp), **extra,
           "TF_CONFIG": json.dumps({"cluster": cluster,
                                    "task": {"type": task[0], "index": task[1]}}),
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    with open(out.with_suffix(".log"), "w") as log:  # the child keeps its own descriptor
        return subprocess.Popen([sys.executable, __file__, str(model_dir), str(out)], env=env,
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def _wait(procs, timeout: float) -> list[int]:
    deadline = time.monotonic() + timeout
    codes = []
    for proc in procs:
        try:
            codes.append(proc.wait(timeout=max(1.0, deadline - time.monotonic())))
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            codes.append(proc.wait())
    return codes


def _stop(procs) -> None:
    for proc in procs:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def _logs(tmp_path: Path) -> str:
    return "\n".join(f"--- {p.name}\n{p.read_text()[-2000:]}" for p in tmp_path.glob("*.log"))


def test_two_workers_train_in_sync_and_only_the_chief_writes(tmp_path):
    import tensorflow as tf

    ports = _free_ports(2)
    cluster = {"worker": [f"localhost:{p}" for p in ports]}
    model_dir, scratch = tmp_path / "model", tmp_path / "tmp"
    scratch.mkdir()
    outs = [tmp_path / f"worker{i}.json" for i in range(2)]
    procs = [_start(cluster, ("worker", i), model_dir, outs[i], scratch) for i in range(2)]
    codes = _wait(procs, timeout=120)
    assert codes == [0, 0], _logs(tmp_path)

    results = [json.loads(o.read_text()) for o in outs]
    assert [r["chief"] for r in results] == [True, False]
    assert [r["strategy"] for r in results] == [["multi_worker_mirrored"]] * 2
    assert [r["global_step"] for r in results] == [MAX_STEPS, MAX_STEPS]
    latest = tf.train.latest_checkpoint(str(model_dir))
    assert latest.endswith(f"model.ckpt-{MAX_STEPS}")
    other = results[1]["variables"]
    for name in ("store/model/000_w", "store/model/001_b", "global_step"):
        saved = tf.train.load_variable(latest, name + "/.ATTRIBUTES/VARIABLE_VALUE")
        np.testing.assert_allclose(saved, other[name], atol=1e-6, err_msg=name)
        np.testing.assert_allclose(results[0]["variables"][name], other[name], err_msg=name)
    assert list(scratch.iterdir()) == []  # the non-chief's scratch checkpoints are gone

    single = _estimator(str(tmp_path / "single"))
    single.train(whole_batch_input_fn, max_steps=MAX_STEPS)
    for name in ("store/model/000_w", "store/model/001_b"):
        np.testing.assert_allclose(single.get_variable_value(name), np.asarray(other[name]),
                                   atol=1e-5, err_msg=name)


def test_two_workers_all_reduce_once_per_step_with_sparse_gradients(tmp_path):
    """Across workers the engine all-reduces the gradients (an embedding's sparse one as
    dense), the loss and the example count in one collective a step, none per sparse gradient;
    training equals one process on the same global batches, with 1 or 5 steps per loop."""
    runs = {}
    for label, steps_per_loop, clip in (("spl1", 1, ""), ("spl5", 5, ""), ("clip", 5, "1")):
        cluster = {"worker": [f"localhost:{p}" for p in _free_ports(2)]}
        run = tmp_path / label
        scratch = run / "tmp"
        scratch.mkdir(parents=True)
        outs = [run / f"worker{i}.json" for i in range(2)]
        procs = [_start(cluster, ("worker", i), run / "model", outs[i], scratch,
                        MW_MODEL="embedding", MW_STEPS_PER_LOOP=str(steps_per_loop),
                        MW_CLIP=clip)
                 for i in range(2)]
        assert _wait(procs, timeout=120) == [0, 0], _logs(run)
        results = [json.loads(o.read_text()) for o in outs]
        assert [r["global_step"] for r in results] == [MAX_STEPS, MAX_STEPS]
        for name, value in results[0]["variables"].items():  # the workers are in sync
            np.testing.assert_allclose(value, results[1]["variables"][name], err_msg=name)
        collectives = results[0]["collectives"]
        if clip:  # Keras clips per replica, before its all-reduce: TF's path (all-gathers)
            assert collectives.get("CollectiveGatherV2", 0) > 0, collectives
        else:
            assert collectives == {"CollectiveReduceV2": 1}, collectives
        runs[label] = results[0]["variables"]

    single = _estimator(str(tmp_path / "single"), embedding_model_fn)
    single.train(ids_input_fn, max_steps=MAX_STEPS)
    for name in ("store/model/000_w", "store/model/001_b", "store/model/002_table"):
        np.testing.assert_allclose(runs["spl1"][name], runs["spl5"][name], atol=1e-6,
                                   err_msg=name)
        for label in ("spl5", "clip"):
            np.testing.assert_allclose(single.get_variable_value(name),
                                       np.asarray(runs[label][name]), atol=1e-5,
                                       err_msg=f"{label} {name}")
    assert np.ptp(np.asarray(runs["spl5"]["store/model/002_table"])) > 0  # it trained


def test_two_workers_read_disjoint_halves_with_an_input_context(tmp_path):
    """The train step's input_fn names ``input_context``: each worker gets its own pipeline,
    reads every other record (before shuffling) and batches global batch / 2 of them; each
    epoch's records are trained on by exactly one worker, and the workers stay in sync."""
    records = tmp_path / "records.tfrecord.gz"
    _write_records(records)
    cluster = {"worker": [f"localhost:{p}" for p in _free_ports(2)]}
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    outs = [tmp_path / f"worker{i}.json" for i in range(2)]
    procs = [_start(cluster, ("worker", i), tmp_path / "model", outs[i], scratch,
                    MW_RECORDS=str(records)) for i in range(2)]
    assert _wait(procs, timeout=120) == [0, 0], _logs(tmp_path)
    results = [json.loads(o.read_text()) for o in outs]
    assert [r["global_step"] for r in results] == [MAX_STEPS, MAX_STEPS]
    seen = [r["seen"] for r in results]
    assert [len(s) for s in seen] == [MAX_STEPS, MAX_STEPS]  # one batch a step
    assert {len(batch) for s in seen for batch in s} == {GLOBAL_BATCH // 2}  # per replica
    per_epoch = RECORDS // GLOBAL_BATCH  # steps
    for epoch in range(MAX_STEPS // per_epoch):
        steps = slice(epoch * per_epoch, (epoch + 1) * per_epoch)
        halves = [sorted(i for batch in s[steps] for i in batch) for s in seen]
        for worker, half in enumerate(halves):  # its own records, each once
            assert half == list(range(worker, RECORDS, 2)), (epoch, worker)
    assert seen[0][:per_epoch] != seen[0][per_epoch:2 * per_epoch]  # reshuffled each epoch
    w = "store/model/000_w"
    np.testing.assert_allclose(results[0]["variables"][w], results[1]["variables"][w])
    assert np.abs(np.asarray(results[0]["variables"][w])).sum() > 0  # it trained


@pytest.fixture(scope="module")
def transformed_dir(tmp_path_factory):
    from tests.components import _train_fixtures as fx

    return fx.transformed(tmp_path_factory)


@pytest.mark.slow
def test_train_step_entry_point_as_two_workers(transformed_dir, tmp_path):
    """``python -m estflow.components.train`` reads TF_CONFIG at its entry point: with 2 workers
    it trains under MultiWorkerMirroredStrategy and only worker 0 writes the model artifact."""
    from tests.components import _train_fixtures as fx

    spec = tmp_path / "pipeline.json"
    spec.write_text(fx.pipeline().to_json())
    model = tmp_path / "model"
    ports = _free_ports(2)
    cluster = {"worker": [f"localhost:{p}" for p in ports]}
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    cmd = [sys.executable, "-m", "estflow.components.train", "--spec", str(spec),
           "--transformed", str(transformed_dir), "--model", str(model)]
    procs = []
    for i in range(2):
        config = json.dumps({"cluster": cluster, "task": {"type": "worker", "index": i}})
        with open(tmp_path / f"worker{i}.log", "w") as log:  # the child keeps its own
            procs.append(subprocess.Popen(cmd, env={**env, "TF_CONFIG": config}, stdout=log,
                                          stderr=subprocess.STDOUT, start_new_session=True))
    assert _wait(procs, timeout=180) == [0, 0], _logs(tmp_path)
    trained = json.loads((model / "train.json").read_text())
    assert trained["global_step"] == 60 and trained["checkpoint"].endswith("model.ckpt-60")
    assert (model / "export" / "saved_model.pb").is_file()
    assert sorted(p.name for p in model.iterdir()) == ["checkpoints", "export", "train.json"]
    other = (tmp_path / "worker1.log").read_text()
    assert "[train worker 1" in other and "non-chief worker" in other


def test_evaluator_task_evaluates_checkpoints_until_max_steps(transformed_dir, tmp_path):
    import estflow.dsl as ef
    from estflow.components.train import __main__ as train
    from tests.components import _train_fixtures as fx

    pipeline = fx.pipeline(eval=ef.EvalSpec(throttle_secs=0),
                           train=ef.TrainSpec(max_steps=30, batch_size=16, shuffle_buffer=64))
    train.run(pipeline, transformed_dir, tmp_path / "model", progress=lambda m: None)
    lines = []
    metrics = train.evaluate_checkpoints(pipeline, transformed_dir, tmp_path / "model",
                                         progress=lines.append, timeout_secs=5)
    assert metrics["global_step"] == 30 and "auc" in metrics
    assert lines and lines[-1].startswith("evaluated ") and "model.ckpt-30" in lines[-1]
    assert (tmp_path / "model" / "checkpoints" / "eval").is_dir()  # TensorBoard scalars


@pytest.mark.slow
def test_parameter_server_strategy_on_loopback(tmp_path):
    import tensorflow as tf

    ports = _free_ports(4)
    cluster = {"chief": [f"localhost:{ports[0]}"], "ps": [f"localhost:{ports[1]}"],
               "worker": [f"localhost:{p}" for p in ports[2:]]}
    model_dir, scratch = tmp_path / "model", tmp_path / "tmp"
    scratch.mkdir()
    servers = [_start(cluster, task, model_dir, tmp_path / f"{task[0]}{task[1]}.json", scratch)
               for task in (("ps", 0), ("worker", 0), ("worker", 1))]
    try:
        chief = _start(cluster, ("chief", 0), model_dir, tmp_path / "chief.json", scratch)
        assert _wait([chief], timeout=180) == [0], _logs(tmp_path)
        assert all(s.poll() is None for s in servers)  # they serve until stopped
    finally:
        _stop(servers)
    result = json.loads((tmp_path / "chief.json").read_text())
    assert result["strategy"] == ["parameter_server"]
    assert result["global_step"] == MAX_STEPS
    latest = tf.train.latest_checkpoint(str(model_dir))
    assert latest.endswith(f"model.ckpt-{MAX_STEPS}")
    w = tf.train.load_variable(latest, "store/model/000_w/.ATTRIBUTES/VARIABLE_VALUE")
    assert np.abs(w).sum() > 0  # it trained
    example = tf.train.Example(features=tf.train.Features(feature={"x": tf.train.Feature(
        float_list=tf.train.FloatList(value=[1.0, 2.0]))})).SerializeToString()
    served = tf.saved_model.load(result["export"]).signatures["serving_default"](
        examples=tf.constant([example]))["logits"].numpy()
    b = tf.train.load_variable(latest, "store/model/001_b/.ATTRIBUTES/VARIABLE_VALUE")
    np.testing.assert_allclose(served, np.array([[1.0, 2.0]]) @ w + b, rtol=1e-5)


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    _process_main(sys.argv[1], sys.argv[2])
    sys.stdout.flush()
    os._exit(0)  # a parameter-server coordinator's threads can keep the interpreter alive
