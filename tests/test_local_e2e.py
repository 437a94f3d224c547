"""The whole local pipeline on a sample of the taxi rows: every step for real (Beam FnApiRunner,
tf.Transform, TensorFlow training, SavedModel export, evaluation, push)."""

import dataclasses
import itertools
import json

import pytest

import estflow.dsl as ef
from estflow.components import push
from estflow.pipelines.examples import taxi
from estflow.pipelines.local import runner as local_runner
from estflow.pipelines.plan import build_plan

DATA = taxi.__file__.replace("taxi.py", "data/chicago_taxi/data.csv")


@pytest.mark.slow
def test_taxi_sample_end_to_end_pushes_a_version(tmp_path):
    with open(DATA) as src, open(tmp_path / "sample.csv", "w") as dst:
        dst.writelines(itertools.islice(src, 3001))  # header + 3000 rows
    serving = tmp_path / "serving"
    pipeline = dataclasses.replace(
        taxi.pipeline,
        source=ef.CsvSource("sample.csv"),
        train=ef.TrainSpec(max_steps=300, batch_size=64),
        run_config=ef.RunConfig(save_checkpoints_steps=100, log_step_count_steps=100),
        push=ef.PushTarget(str(serving), "taxi"),
    )
    lines = []
    result = local_runner.run_plan(build_plan(pipeline, source_root=str(tmp_path)),
                                   tmp_path / "run", echo=lines.append)

    ingest = result.read("examples", "ingest.json")
    assert ingest["read"] == 3000
    metrics = result.read("evaluation", "metrics.json")["metrics"]
    assert metrics["examples"] > 300
    assert metrics["auc"] > 0.85  # payment type alone gives ~0.93 on this data
    versions = push.list_versions(serving / "taxi")
    assert len(versions) == 1
    assert (serving / "taxi" / str(versions[0]) / "saved_model.pb").is_file()
    pushed = json.loads((result.artifacts["pushed"] / "push.json").read_text())
    assert pushed["version"] == versions[0]
    assert any(line.startswith("==> step 3/5: train") for line in lines)  # progress per step
    _assert_warms_up(serving / "taxi" / str(versions[0]), versions[0])


def _assert_warms_up(version_dir, version):
    """The pushed version carries TF Serving's warm-up requests, built from eval rows as a
    client sends them, and estflow serve replays them when it loads the version."""
    import tensorflow as tf
    from tensorflow_serving.apis import prediction_log_pb2

    from estflow.components._io import raw_features
    from estflow.components.serve import warmup
    from estflow.components.serve.models import load_model
    from estflow.dsl.contracts import Files

    logs = [prediction_log_pb2.PredictionLog.FromString(record) for record in
            tf.data.TFRecordDataset(str(version_dir / Files.SERVED_WARMUP)).as_numpy_iterator()]
    assert [log.WhichOneof("log_type") for log in logs] == ["predict_log", "classify_log"]
    rows = tf.make_ndarray(logs[0].predict_log.request.inputs["examples"]).tolist()
    served = set(raw_features.read_types(version_dir))
    assert len(rows) == 5 and "big_tipper" not in served
    for row in rows:
        features = set(tf.train.Example.FromString(row).features.feature)
        assert features and features <= served
    assert warmup.replay(load_model("taxi", version, version_dir)) == 2
