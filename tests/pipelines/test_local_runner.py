"""The local runner on its own: tiny plans whose steps are the fake entry point
:mod:`tests.pipelines.fake_step` (a few milliseconds each, no TensorFlow or Beam), run through
the real executors; and the choice of executor per step."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import pytest

import estflow.dsl as ef
from estflow.dsl.contracts import Files
from estflow.pipelines.examples import taxi
from estflow.pipelines.local import runner as local_runner
from estflow.pipelines.local.cluster import ClusterExecutor
from estflow.pipelines.local.processes import ProcessExecutor
from estflow.pipelines.local.processes import StepRun
from estflow.pipelines.plan import Plan
from estflow.pipelines.plan import PlannedStep
from estflow.pipelines.plan import build_plan

REPO = Path(__file__).resolve().parents[2]
FAKE = "tests.pipelines.fake_step"
ENV = {"PYTHONPATH": str(REPO)}  # the steps' interpreters import tests.pipelines.fake_step


def _fake(name: str, inputs=(), outputs=(), **options: str) -> PlannedStep:
    opts = {"name": name, "reads": ",".join(a for a, _ in inputs),
            "writes": ",".join(outputs), **options}
    return PlannedStep(name=name, module=FAKE, inputs=tuple(inputs), outputs=tuple(outputs),
                       options=tuple((k.replace("_", "-"), v) for k, v in opts.items()),
                       description=f"fake {name}")


def _run(tmp_path: Path, *steps: PlannedStep, **kwargs) -> tuple[local_runner.RunResult, list]:
    lines: list[str] = []
    result = local_runner.run_plan(Plan(taxi.pipeline, steps), tmp_path / "run",
                                   echo=lines.append, env=ENV, **kwargs)
    return result, lines


def test_steps_run_in_order_each_reading_the_artifacts_before_it(tmp_path):
    result, lines = _run(tmp_path, _fake("make", outputs=["examples"]),
                         _fake("use", inputs=[("examples", "make")], outputs=["model"]))

    run = tmp_path / "run"
    assert result.workdir == run
    assert result.artifacts == {"examples": run / "make" / "examples",
                                "model": run / "use" / "model"}
    assert list(result.seconds) == ["make", "use"]
    assert json.loads((run / Files.SPEC).read_text())["name"] == taxi.pipeline.name
    used = result.read("model", "use.json")
    assert used["spec_name"] == taxi.pipeline.name
    assert used["args"]["--examples"] == str(run / "make" / "examples")
    assert used["args"]["--model"] == str(run / "use" / "model")
    assert used["read"] == {"examples": ["make.json"]}  # make had finished before use started
    assert used["tf_config"] is None
    assert lines[0] == "==> step 1/2: make (fake make)"
    assert "    [make one process] started" in lines
    assert lines[-1].startswith("<== use done in ")
    assert not any("chatter" in line for line in lines)  # only the step's progress is echoed
    assert "chatter that only the log keeps" in (run / "use" / "log.txt").read_text()


def test_a_failing_step_raises_step_failed_naming_it_and_stops_the_run(tmp_path):
    with pytest.raises(local_runner.StepFailed) as info:
        _run(tmp_path, _fake("make", outputs=["examples"], fail="disk full"),
             _fake("use", inputs=[("examples", "make")], outputs=["model"]))

    message = str(info.value)
    log = tmp_path / "run" / "make" / "log.txt"
    assert message.startswith("step 'make' failed (exit code 3)")
    assert "something broke: disk full" in message and f"full log: {log}" in message
    assert "something broke: disk full" in log.read_text()
    assert not (tmp_path / "run" / "use").exists()


def test_the_cluster_executor_runs_one_process_per_task_with_its_tf_config(tmp_path):
    result, lines = _run(tmp_path, _fake("train", outputs=["model"]),
                         topology=local_runner.Topology(workers=2))

    model, train = result.artifacts["model"], tmp_path / "run" / "train"
    configs = {p.name: json.loads(p.read_text())["tf_config"] for p in model.iterdir()}
    assert sorted(configs) == ["train-worker-0.json", "train-worker-1.json"]
    assert [c["task"] for c in configs.values()] == [{"type": "worker", "index": 0},
                                                     {"type": "worker", "index": 1}]
    assert configs["train-worker-0.json"]["cluster"] == configs["train-worker-1.json"]["cluster"]
    assert {p.name for p in train.glob("log*.txt")} == {"log.txt", "log-worker-1.txt"}
    assert "    train: 2 processes on localhost (worker 0, worker 1); chief = worker 0" in lines
    assert "    [train worker-0] started" in lines  # the chief is streamed, not worker 1
    assert "    [train worker-1] started" not in lines


def test_a_failing_worker_fails_the_step_naming_the_task(tmp_path):
    with pytest.raises(local_runner.StepFailed) as info:
        _run(tmp_path, _fake("train", outputs=["model"], fail_task="worker-1"),
             topology=local_runner.Topology(workers=2))

    log = tmp_path / "run" / "train" / "log-worker-1.txt"
    assert str(info.value) == (f"step 'train' failed: task worker 1 exited with code 3; "
                               f"its log: {log}")


def test_an_executor_runs_a_step_run_on_its_own(tmp_path):
    out = tmp_path / "examples"
    out.mkdir()
    spec = tmp_path / "spec.json"
    spec.write_text(taxi.pipeline.to_json())
    lines: list[str] = []
    command = (sys.executable, "-m", FAKE, "--spec", str(spec), "--name", "solo", "--writes",
               "examples", "--examples", str(out))

    ProcessExecutor().execute(StepRun("solo", command, tmp_path, lines.append, ENV))

    assert lines == ["    [solo one process] started"]
    assert json.loads((out / "solo.json").read_text())["args"]["--name"] == "solo"


def _multi_worker(workers: int) -> ef.Pipeline:
    return dataclasses.replace(taxi.pipeline,
                               run_config=ef.RunConfig(cluster=ef.Cluster(workers=workers)))


def test_train_with_a_declared_multi_worker_cluster_runs_as_a_cluster():
    pipeline = _multi_worker(2)
    plan = build_plan(pipeline, source_root=".")
    topology = local_runner.topology_for(pipeline)

    train = local_runner.executor_for(plan.step("train"), topology)
    assert isinstance(train, ClusterExecutor) and train.topology == local_runner.Topology(2, 0)
    for other in ("ingest", "transform", "evaluate", "push"):
        assert isinstance(local_runner.executor_for(plan.step(other), topology),
                          ProcessExecutor), other


@pytest.mark.parametrize("pipeline, workers", [
    (taxi.pipeline, None),       # no cluster declared
    (_multi_worker(1), None),    # a cluster of one process
    (_multi_worker(3), 1),       # --workers 1 overrides the declared 3
])
def test_train_in_one_process_runs_as_one_process(pipeline, workers):
    plan = build_plan(pipeline, source_root=".")
    topology = local_runner.topology_for(pipeline, workers)

    assert isinstance(local_runner.executor_for(plan.step("train"), topology), ProcessExecutor)


def test_a_parameter_server_topology_is_a_cluster_even_with_one_worker():
    step = build_plan(taxi.pipeline, source_root=".").step("train")
    chosen = local_runner.executor_for(step, local_runner.Topology(1, parameter_servers=1))
    assert isinstance(chosen, ClusterExecutor)
