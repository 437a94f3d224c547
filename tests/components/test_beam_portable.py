"""The Beam steps (ingest, then transform) on runners other than the in-memory one.

Where a remote runner's workers read and write (the artifacts' remote URIs, never the task's
local paths) and what they run (estflow's image) is checked on its own; then the steps run,
for real:

* multi-process DirectRunner (``--direct_running_mode=multi_processing
  --direct_num_workers=2``): SDK workers in subprocesses;
* PortableRunner against Beam's own Python job service with an external worker pool, both
  started here (the Job API, artifact staging and Fn API client path that Flink, Spark and
  portable Dataflow take; their job servers are downloaded at run time, which cannot happen
  here). The worker pool and the SDK workers it starts run from estflow's **wheel**, installed
  into a fresh venv (:mod:`tests.wheel_venv`), not from this checkout, as a remote worker
  that was given the wheel runs: the test checks where the workers import estflow from.

Each run's outputs (the decoded raw and transformed examples of every split, the step
summaries, and the transform_fn applied to the same raw examples) must equal the in-memory
run's. The steps run as the runners run them: ``python -m estflow.components.<step>``.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CSV = REPO / "pipelines" / "examples" / "data" / "chicago_taxi" / "data.csv"
ROWS = 300
VENV_BIN = str(Path(sys.executable).parent)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for(port: int, process: subprocess.Popen, seconds: float = 90) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{process.args} exited with {process.returncode}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
            return
        time.sleep(0.5)
    raise TimeoutError(f"nothing listens on port {port} after {seconds}s: {process.args}")


def _env(bin_dir: str = VENV_BIN) -> dict[str, str]:
    # The venv's bin first: the worker pool starts SDK workers by name ("python"), and those
    # must have apache_beam, tf.Transform and estflow (else the job hangs).
    return {**os.environ, "PATH": bin_dir + os.pathsep + os.environ.get("PATH", ""),
            "TF_CPP_MIN_LOG_LEVEL": "2"}


# The pool and each SDK worker it starts write where they import estflow from, once (a
# sitecustomize module of the wheel's venv, run as each interpreter starts).
_WHERE = """\
import os
if os.environ.get("ESTFLOW_TEST_WHERE"):
    import estflow.components, estflow.dsl
    with open(os.path.join(os.environ["ESTFLOW_TEST_WHERE"], str(os.getpid())), "w") as f:
        f.write(estflow.components.__file__ + "\\n" + estflow.dsl.__file__ + "\\n")
"""


@pytest.fixture(scope="module")
def wheel_venv(tmp_path_factory) -> Path:
    """A fresh venv with estflow from its wheel only (the workers' Python)."""
    from tests.wheel_venv import build_wheel
    from tests.wheel_venv import venv_with

    tmp = tmp_path_factory.mktemp("wheel")
    venv = venv_with(tmp, build_wheel(tmp / "build"))
    purelib = next((venv / "lib").glob("python3*/site-packages"))
    (purelib / "sitecustomize.py").write_text(_WHERE)
    return venv


@contextlib.contextmanager
def _portable_services(logs: Path, workers: Path | None = None):
    """Beam's Python job service (this checkout's) and an external worker pool run by the
    ``workers`` venv (default: this checkout's), stopped (with the workers the pool started:
    each in its own process group) however the test ends."""
    job_port, pool_port = _free_port(), _free_port()
    workers = workers or Path(VENV_BIN).parent
    python = str(workers / "bin" / "python")
    commands = [
        [sys.executable, "-m", "apache_beam.runners.portability.local_job_service_main",
         "--port", str(job_port)],
        [python, "-m", "apache_beam.runners.worker.worker_pool_main",
         f"--service_port={pool_port}"]]
    where = logs / "where"
    where.mkdir()
    started: list[subprocess.Popen] = []
    try:
        for i, command in enumerate(commands):
            env = _env() if i == 0 else {**_env(str(workers / "bin")),
                                         "ESTFLOW_TEST_WHERE": str(where)}
            with open(logs / f"service-{i}.log", "wb") as log:
                started.append(subprocess.Popen(command, env=env, stdout=log,
                                                stderr=subprocess.STDOUT, cwd=logs,
                                                start_new_session=True))
        _wait_for(job_port, started[0])
        _wait_for(pool_port, started[1])
        yield ["--runner=PortableRunner", f"--job_endpoint=localhost:{job_port}",
               "--environment_type=EXTERNAL", f"--environment_config=localhost:{pool_port}"]
    finally:
        for process in started:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
        for process in started:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


def _run_steps(root: Path, spec: Path, beam_options: list[str]) -> tuple[Path, float]:
    """Ingest then transform into ``root``; returns it and the seconds both took."""
    start = time.monotonic()
    examples, transformed = root / "examples", root / "transformed"
    for step, artifacts in (("ingest", ["--examples", str(examples)]),
                            ("transform", ["--examples", str(examples),
                                           "--transformed", str(transformed)])):
        done = subprocess.run(
            [sys.executable, "-m", f"estflow.components.{step}", "--spec", str(spec),
             *artifacts, *beam_options], env=_env(), capture_output=True, text=True,
            timeout=600, cwd=root.parent)
        assert done.returncode == 0, f"{step} {beam_options} failed:\n{done.stderr[-4000:]}"
    return root, time.monotonic() - start


@pytest.fixture(scope="module")
def spec(tmp_path_factory) -> Path:
    import dataclasses

    import estflow.dsl as ef
    from estflow.pipelines.examples import taxi

    where = tmp_path_factory.mktemp("beam-runners")
    data = where / "data.csv"
    with CSV.open() as source:
        data.write_text("".join(next(source) for _ in range(ROWS + 1)))
    path = where / "pipeline.json"
    path.write_text(dataclasses.replace(taxi.pipeline, source=ef.CsvSource(str(data))).to_json())
    return path


@pytest.fixture(scope="module")
def in_memory(spec) -> Path:
    root, seconds = _run_steps(spec.parent / "in-memory", spec, [])
    print(f"in-memory FnApiRunner: ingest + transform {seconds:.1f}s")
    return root


def _round(value):
    if isinstance(value, float):
        return float(f"{value:.6g}") if math.isfinite(value) else repr(value)
    if isinstance(value, dict):
        return {k: _round(v) for k, v in value.items() if k != "elapsed_s"}
    if isinstance(value, list):
        return [_round(v) for v in value]
    return value


def _examples(directory: Path) -> list[str]:
    """Every tf.Example under ``directory`` as canonical JSON (floats to 6 digits), sorted:
    shards and the order of records in them are the runner's business."""
    import tensorflow as tf

    files = sorted(str(p) for p in directory.glob("*.gz"))
    assert files, f"no shards in {directory}"
    rows = []
    for record in tf.data.TFRecordDataset(files, compression_type="GZIP").as_numpy_iterator():
        example = tf.train.Example.FromString(record)
        row = {}
        for name, feature in example.features.feature.items():
            kind = feature.WhichOneof("kind")
            values = list(getattr(feature, kind).value)
            row[name] = [v.decode() if isinstance(v, bytes) else v for v in values]
        rows.append(json.dumps(_round(row), sort_keys=True))
    return sorted(rows)


def _transform_fn_results(spec: Path, transformed: Path, raw_examples: Path) -> dict:
    """The transform_fn of ``transformed`` applied to the same raw (eval) examples."""
    import tensorflow as tf
    import tensorflow_transform as tft

    from estflow.components._io.raw_features import raw_feature_spec
    from estflow.dsl.pipeline import Pipeline

    output = tft.TFTransformOutput(str(transformed / "transform_fn"))
    files = sorted(str(p) for p in raw_examples.glob("*.gz"))
    serialized = sorted(tf.data.TFRecordDataset(files, compression_type="GZIP")
                        .as_numpy_iterator())
    raw_spec = raw_feature_spec(Pipeline.from_json(spec.read_text()))
    result = output.transform_raw_features(tf.io.parse_example(serialized, raw_spec),
                                           drop_unused_features=True)
    dense = {name: tf.sparse.to_dense(t) if isinstance(t, tf.SparseTensor) else t
             for name, t in result.items()}
    return {name: _round(tensor.numpy().tolist()) for name, tensor in sorted(dense.items())}


# -- where the workers read and write, what they run ---------------------------------------------
def _args(**values):
    import argparse

    return argparse.Namespace(**values)


def test_kfp_local_artifact_paths_stand_for_their_remote_uris():
    from estflow.components._runtime.beam import remote_uri

    assert remote_uri("/gcs/bucket/run/examples") == "gs://bucket/run/examples"
    assert remote_uri("/s3/bucket/x") == "s3://bucket/x"
    assert remote_uri("/minio/mlpipeline/x") == "s3://mlpipeline/x"  # Beam speaks S3 to MinIO
    assert remote_uri("/tmp/x", "minio://mlpipeline/y") == "s3://mlpipeline/y"
    assert remote_uri("/tmp/x") is None


def test_a_local_run_uses_the_task_paths_and_options_as_given():
    from estflow.components._runtime import beam

    io = beam.resolve_io(_args(examples="/gcs/b/e", examples_uri=None, sdk_image=None),
                         ["--direct_num_workers=2"], ("examples",), ("examples",),
                         {beam.IMAGE_ENV: "img:1"})
    assert io.locations == {"examples": "/gcs/b/e"} and io.options == ("--direct_num_workers=2",)


def test_dataflow_writes_to_the_artifact_uri_on_workers_running_estflows_image(tmp_path):
    from estflow.components._runtime import beam

    local = tmp_path / "gcs" / "b" / "transformed"
    options = ["--runner=DataflowRunner", "--project=p", "--region=r"]
    args = _args(examples="/gcs/b/examples", examples_uri=None, transformed=str(local),
                 transformed_uri="gs://b/transformed", sdk_image=None)
    io = beam.resolve_io(args, options, ("examples", "transformed"), ("transformed",),
                         {beam.IMAGE_ENV: "ghcr.io/estflow/estflow:0.1.0"})
    assert io.locations == {"examples": "gs://b/examples", "transformed": "gs://b/transformed"}
    assert io.options[-1] == "--sdk_container_image=ghcr.io/estflow/estflow:0.1.0"
    assert local.is_dir()  # empty: KFP's launcher uploads it, which adds nothing
    with pytest.raises(beam.BeamLocationError, match="Dataflow's workers cannot see"):
        beam.resolve_io(_args(examples=str(tmp_path), examples_uri=None, sdk_image=None),
                        options, ("examples",), ("examples",), {})


def test_portable_runners_get_estflows_image_unless_their_environment_is_chosen():
    from estflow.components._runtime.beam import worker_options

    flink = ["--runner=FlinkRunner", "--flink_master=h:8081"]
    assert worker_options(flink, "img:1") == [
        *flink, "--environment_type=DOCKER", "--environment_config=img:1"]
    external = ["--runner=PortableRunner", "--job_endpoint=h:1", "--environment_type=EXTERNAL",
                "--environment_config=localhost:5"]
    assert worker_options(external, "img:1") == external
    dataflow = ["--runner=DataflowRunner", "--sdk_container_image=mine:2"]
    assert worker_options(dataflow, "img:1") == dataflow
    assert worker_options(["--runner=DataflowRunner"], None) == ["--runner=DataflowRunner"]


def test_the_ingest_step_refuses_a_local_output_for_dataflow(spec, tmp_path, capsys):
    from estflow.components.ingest import __main__ as ingest

    code = ingest.main(["--spec", str(spec), "--examples", str(tmp_path / "examples"),
                        "--runner=DataflowRunner", "--project=p", "--region=r",
                        "--temp_location=gs://b/tmp"])
    assert code == 1 and "Dataflow's workers cannot see" in capsys.readouterr().err


# -- the runners, for real -------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("runner", ["multi_process_direct", "portable"])
def test_beam_steps_on_another_runner_match_the_in_memory_run(runner, spec, in_memory,
                                                              tmp_path, request):
    root = spec.parent / runner
    if runner == "portable":
        workers = request.getfixturevalue("wheel_venv")
        with _portable_services(tmp_path, workers) as options:
            root, seconds = _run_steps(root, spec, options)
        # the SDK workers ran estflow from the wheel's venv, never from this checkout
        found = [Path(line) for f in (tmp_path / "where").iterdir()
                 for line in f.read_text().split()]
        assert len(list((tmp_path / "where").iterdir())) >= 2, "no SDK worker was started"
        for path in found:
            assert path.resolve().is_relative_to(workers.resolve()), path
            assert not path.resolve().is_relative_to(REPO), path
    else:
        root, seconds = _run_steps(root, spec, [
            "--runner=DirectRunner", "--direct_running_mode=multi_processing",
            "--direct_num_workers=2"])
    print(f"{runner}: ingest + transform {seconds:.1f}s")
    for artifact, summary in (("examples", "ingest.json"), ("transformed", "transform.json")):
        for split in ("train", "eval"):
            assert _examples(root / artifact / split) == _examples(in_memory / artifact / split)
        got, expected = (json.loads((r / artifact / summary).read_text())
                         for r in (root, in_memory))
        got.pop("source_files", None), expected.pop("source_files", None)
        assert _round(got) == _round(expected)
    assert json.loads((root / "examples" / "ingest.json").read_text())["read"] == ROWS
    raw = in_memory / "examples" / "eval"
    assert (_transform_fn_results(spec, root / "transformed", raw)
            == _transform_fn_results(spec, in_memory / "transformed", raw))
