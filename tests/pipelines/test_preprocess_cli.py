"""``estflow preprocess``: Beam options built and checked before anything runs (every missing
option named), and a real local run writing the ingest and transform layouts."""

from __future__ import annotations

import dataclasses
import itertools
import json
from pathlib import Path

import pytest

import estflow.dsl as ef
from estflow.dsl.contracts import Files
from estflow.pipelines import beam_options
from estflow.pipelines import cli
from estflow.pipelines.examples import taxi
from estflow.pipelines.kubeflow import compiler as kfp_compiler

DATAFLOW = ["--project=my-project", "--region=europe-west4", "--temp_location=gs://b/tmp"]


def test_local_is_the_default_and_needs_no_option():
    for runner in (None, "local", "DirectRunner", "FnApiRunner"):
        assert beam_options.build_options(runner, []) == []
    assert beam_options.build_options(None, ["--direct_num_workers", "2"]) == [
        "--direct_num_workers=2"]


@pytest.mark.parametrize("runner, args, expected", [
    ("dataflow", DATAFLOW, ["--runner=DataflowRunner", *DATAFLOW]),
    ("DataflowRunner", ["--project", "my-project", "--region", "us-central1",
                        "--temp_location", "gs://b/t", "--max_num_workers=8"],
     ["--runner=DataflowRunner", "--project=my-project", "--region=us-central1",
      "--temp_location=gs://b/t", "--max_num_workers=8"]),
    ("flink", ["--flink_master=flink-jm:8081", "--parallelism=4"],
     ["--runner=FlinkRunner", "--flink_master=flink-jm:8081", "--parallelism=4"]),
    ("spark", ["--spark_master_url=spark://master:7077"],
     ["--runner=SparkRunner", "--spark_master_url=spark://master:7077"]),
    ("portable", ["--job_endpoint=localhost:8099", "--environment_type=LOOPBACK"],
     ["--runner=PortableRunner", "--job_endpoint=localhost:8099", "--environment_type=LOOPBACK"]),
    (None, ["--runner=SparkRunner", "--spark_master_url=spark://m:7077"],
     ["--runner=SparkRunner", "--spark_master_url=spark://m:7077"]),
])
def test_runner_options_pass_through_normalised(runner, args, expected):
    assert beam_options.build_options(runner, args) == expected


@pytest.mark.parametrize("runner, args, words", [
    ("dataflow", [], ["missing --project, --region, --temp_location"]),
    ("dataflow", ["--project=my-project"], ["missing --region, --temp_location"]),
    ("dataflow", [*DATAFLOW[:2], "--temp_location=/tmp/x"], ["gs:// path"]),
    ("dataflow", ["--project=1234", *DATAFLOW[1:]], ["not a Google Cloud project id"]),
    ("flink", [], ["missing --flink_master"]),
    ("flink", ["--flink_master=[auto]"], ["HOST:PORT"]),
    ("spark", [], ["missing --spark_master_url"]),
    ("portable", [], ["missing --job_endpoint"]),
    ("samza", [], ["unknown runner 'samza'", "DataflowRunner"]),
    ("dataflow", ["--runner=DataflowRunner"], ["given twice"]),
    (None, ["project=x"], ["expected Beam options like --name=value"]),
    (None, ["--a=1", "--a=2"], ["--a is given twice"]),
])
def test_option_problems_are_named(runner, args, words):
    with pytest.raises(beam_options.BeamOptionsError) as info:
        beam_options.build_options(runner, args)
    for word in words:
        assert word in str(info.value)


def _sample_pipeline(tmp_path: Path, rows: int) -> Path:
    data = taxi.__file__.replace("taxi.py", "data/chicago_taxi/data.csv")
    with open(data) as src, open(tmp_path / "sample.csv", "w") as dst:
        dst.writelines(itertools.islice(src, rows + 1))
    target = tmp_path / "sample_pipeline.py"
    target.write_text("import dataclasses\nimport estflow.dsl as ef\n"
                      "from estflow.pipelines.examples import taxi\n"
                      "pipeline = dataclasses.replace(taxi.pipeline, "
                      "source=ef.CsvSource('sample.csv'))\n")
    return target


def test_missing_runner_options_fail_before_any_step(tmp_path, capsys):
    target = _sample_pipeline(tmp_path, 10)
    code = cli.main(["preprocess", str(target), "--output", str(tmp_path / "out"),
                     "--runner", "dataflow", "--project", "my-project"])
    assert code == cli.EXIT_USAGE
    err = capsys.readouterr().err
    assert "DataflowRunner" in err and "missing --region, --temp_location" in err
    assert not (tmp_path / "out").exists()


def test_preprocess_runs_locally_and_writes_both_layouts(tmp_path, capsys):
    target = _sample_pipeline(tmp_path, 300)
    # Options may follow PIPELINE; --gzip-level is estflow's, the rest would go to Beam.
    assert cli.main(["preprocess", str(target), "--output", str(tmp_path / "out"),
                     "--gzip-level", "1"]) == 0
    out = capsys.readouterr().out
    root = tmp_path / "out" / "preprocess"
    ingested = json.loads((root / "examples" / Files.INGEST_STATS).read_text())
    assert ingested["read"] == 300 and ingested["train"] + ingested["eval"] == 300
    transformed = json.loads((root / "transformed" / Files.TRANSFORM_STATS).read_text())
    assert transformed["rows"] == {"train": ingested["train"], "eval": ingested["eval"]}
    assert (root / "transformed" / Files.TRANSFORM_FN / "transform_fn").is_dir()
    assert any((root / "examples" / Files.TRAIN_EXAMPLES).glob("*.tfrecord.gz"))
    assert "read 300 rows" in out and "vocabulary sizes" in out  # the statistics, shown


@pytest.mark.slow
def test_too_many_rejected_rows_fail_the_run_and_leave_no_transform(tmp_path, capsys):
    target = _sample_pipeline(tmp_path, 100)
    with open(tmp_path / "sample.csv", "a") as out:
        out.write("1,2\n" * 5)  # 5% of the rows have 2 fields: more than the 1% allowed
    assert cli.main(["preprocess", str(target), "--output", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    assert "5 of 105 rows rejected" in err and Files.REJECTED in err
    root = tmp_path / "out" / "preprocess"
    assert len((root / "examples" / Files.REJECTED).read_text().splitlines()) == 5
    assert not (root / "transformed" / Files.TRANSFORM_FN).exists()


def test_a_bigquery_source_compiles_for_kfp_unchanged(tmp_path):
    source = ef.BigQuerySource(query="SELECT * FROM `proj.trips.raw` WHERE fare > 0",
                               project="billing-proj")
    pipeline = dataclasses.replace(taxi.pipeline, source=source)
    compiled = kfp_compiler.compile_pipeline(pipeline, tmp_path / "bq.yaml", source_root="/data",
                                             push_base_path="gs://estflow-examples/models")
    text = Path(compiled.path).read_text()  # the spec JSON travels as a pipeline parameter
    assert "BigQuerySource" in text and "WHERE fare > 0" in text and "billing-proj" in text
