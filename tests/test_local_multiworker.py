"""``estflow run --workers 2``: the taxi sample end to end, its train step as two worker
processes on localhost ports (TF_CONFIG as a TFJob sets it, MultiWorkerMirroredStrategy, worker
0 the chief that writes the model); every other step unchanged."""

import dataclasses
import itertools
import json

import pytest

import estflow.dsl as ef
from estflow.pipelines import cli
from estflow.pipelines.examples import taxi
from estflow.pipelines.local import runner as local_runner
from estflow.pipelines.plan import build_plan

DATA = taxi.__file__.replace("taxi.py", "data/chicago_taxi/data.csv")


def _sample(tmp_path, rows=3000):
    with open(DATA) as src, open(tmp_path / "sample.csv", "w") as dst:
        dst.writelines(itertools.islice(src, rows + 1))
    return dataclasses.replace(
        taxi.pipeline, source=ef.CsvSource("sample.csv"), push=None,
        train=ef.TrainSpec(max_steps=200, batch_size=64),
        run_config=ef.RunConfig(save_checkpoints_steps=100, log_step_count_steps=100))


@pytest.mark.slow
def test_taxi_sample_trains_with_two_workers(tmp_path):
    pipeline = _sample(tmp_path)
    lines = []
    result = local_runner.run_plan(build_plan(pipeline, source_root=str(tmp_path)),
                                   tmp_path / "run", echo=lines.append,
                                   topology=local_runner.Topology(workers=2))

    trained = result.read("model", "train.json")
    assert trained["global_step"] == 200
    assert trained["checkpoint"].endswith("model.ckpt-200")
    model = result.artifacts["model"]
    assert (model / "export" / "saved_model.pb").is_file()
    train_dir = tmp_path / "run" / "train"
    assert {p.name for p in train_dir.glob("log*.txt")} == {"log.txt", "log-worker-1.txt"}
    worker_log = (train_dir / "log-worker-1.txt").read_text()
    assert "[train worker 1" in worker_log and "non-chief worker" in worker_log
    assert any("2 processes on localhost (worker 0, worker 1)" in line for line in lines)
    metrics = result.read("evaluation", "metrics.json")["metrics"]
    assert metrics["auc"] > 0.8  # evaluated through the exported model, as in one process


def test_workers_must_fit_the_declared_strategy(tmp_path, capsys):
    path = tmp_path / "p.py"
    path.write_text("import dataclasses\nimport estflow.dsl as ef\n"
                    "from estflow.pipelines.examples import taxi\n"
                    "pipeline = dataclasses.replace(taxi.pipeline, "
                    "run_config=ef.RunConfig(train_distribute='mirrored'))\n")
    assert cli.main(["run", str(path), "--workers", "2", "--workdir", str(tmp_path)]) == 2
    assert "train_distribute='mirrored'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.main(["run", str(path), "--workers", "0"])


def test_topology_tf_configs_match_a_tfjob():
    configs = [json.loads(c) for c in local_runner.Topology(workers=2).tf_configs()]
    assert [c["task"] for c in configs] == [{"type": "worker", "index": 0},
                                            {"type": "worker", "index": 1}]
    assert list(configs[0]["cluster"]) == ["worker"] and configs[0]["cluster"] == \
        configs[1]["cluster"]
    ps = local_runner.Topology(workers=2, parameter_servers=1)
    assert ps.tasks() == [("chief", 0), ("worker", 0), ("worker", 1), ("ps", 0)]
    declared = dataclasses.replace(taxi.pipeline, run_config=ef.RunConfig(
        cluster=ef.Cluster(workers=3, evaluator=True)))
    assert local_runner.topology_for(declared) == local_runner.Topology(3, 0)
    assert local_runner.topology_for(declared, workers=2) == local_runner.Topology(2, 0)
    assert local_runner.topology_for(taxi.pipeline) == local_runner.Topology(1, 0)
