"""Progress reports of long work: the ingest, transform, evaluate steps print rows done and
the rate while they run (plain lines when the output is a pipe), counted by the work itself:
in-process, in other processes, and as Beam metrics counters. No timing is asserted: only
that the reports appear and that their counts are the rows the steps handled."""

from __future__ import annotations

import io
import multiprocessing
import re
import time
from pathlib import Path

import apache_beam as beam
import pyarrow as pa
import pytest
import tensorflow as tf
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.runners.portability.fn_api_runner import FnApiRunner

import estflow.dsl as ef
from estflow.components._runtime import entry
from estflow.components._runtime import progress
from estflow.components.evaluate import step as evaluate
from estflow.components.ingest import __main__ as ingest
from estflow.components.transform import __main__ as transform
from estflow.components.transform import step as transform_step
from tests.components import _eval_fixtures as fx

ROWS = 3000
_LINE = re.compile(r"^\[(\w+)\s+[\d.]+s\] ([\d,]+)( of ~?([\d,]+) rows \(\d+%\)| rows)"
                   r"( \[[^]]*\])?, ([\d,]+ rows/s|starting)", re.M)
_DONE = re.compile(r"^\[(\w+)\s+[\d.]+s\] done: ([\d,]+) rows in \S+, ([\d,]+) rows/s"
                   r"( \[([^]]*)\])?", re.M)


@pytest.fixture(autouse=True)
def _often():
    progress.set_interval(0.02)  # a report every 20 ms: several during even a short job
    yield
    progress.set_interval(5.0)


def _number(text: str) -> int:
    return int(text.replace(",", ""))


def _pipeline(csv: str) -> ef.Pipeline:
    return ef.Pipeline(
        name="progress", source=ef.CsvSource(csv),
        features=(ef.Numeric("x", normalize="z_score"), ef.CategoricalVocab("s")),
        label=ef.Label("label"),
        model=ef.DNNClassifier(hidden_units=(4,), feature_columns=("x",)),
        train=ef.TrainSpec(max_steps=1))


def test_line_shows_rows_share_rate_and_eta():
    assert progress.line(500, 2000, 100.0) == "500 of 2,000 rows (25%), 100 rows/s, ETA 15s"
    assert progress.line(1_500_000, None, 52_000.4) == "1,500,000 rows, 52,000 rows/s"
    assert progress.line(0, 10, None, estimated=True) == "0 of ~10 rows (0%), starting"
    assert "ETA 1h23m" in progress.line(0, 5000 * 3, 3.0, estimated=True)
    assert "[analyze 3, transform 4]" in progress.line(
        7, 20, 1.0, parts={"analyze": 3, "transform": 4})


def test_reporter_draws_a_bar_at_a_terminal():
    class Terminal(io.StringIO):
        def isatty(self):
            return True

    out = Terminal()
    with progress.Reporter(entry.Progress("step"), 100, stream=out) as reporter:
        reporter.tally.add("rows", 40)
        for _ in range(1000):  # the bar is redrawn every 20 ms
            if "[########------------] 40 of 100 rows (40%)" in out.getvalue():
                break
            time.sleep(0.01)
        reporter.tally.add("rows", 60)
    text = out.getvalue()
    assert "\r\033[K[step" in text and "[########------------] 40 of 100 rows (40%)" in text
    assert re.search(r"\r\033\[K\[step +[\d.]+s\] \[#{20}\] done: 100 rows in \S+, [\d,]+ "
                     r"rows/s\n$", text), repr(text)


def _count_in_child(tally: progress.Tally) -> None:
    tally.add("read", 1234)
    tally.flush()


def test_counts_from_another_process_reach_the_reporter():
    reporter = progress.Reporter(entry.Progress("step"), None, stream=io.StringIO())
    child = multiprocessing.get_context("fork").Process(target=_count_in_child,
                                                        args=(reporter.tally,))
    child.start()
    child.join()
    reporter.tally.add("read", 6)
    assert reporter.counts() == {"read": 1240}


def test_count_rows_is_a_beam_metrics_counter_too():
    """A remote runner's progress is read from the job's metrics: the counter is there."""
    tally = progress.Tally("beam-test", None, -1)  # as on a remote worker: metrics only
    batches = [pa.RecordBatch.from_pydict({"a": list(range(n))}) for n in (5, 7, 11)]
    pipeline = beam.Pipeline(runner=FnApiRunner())
    _ = (pipeline | beam.Create(batches, reshuffle=False)
         | progress.CountRows(tally, "read") | beam.Map(lambda b: b.num_rows))
    result = pipeline.run()
    result.wait_until_finish()
    counters = result.metrics().query(MetricsFilter().with_namespace(progress.NAMESPACE))
    assert [(c.key.metric.name, c.committed) for c in counters["counters"]] == [("read", 23)]


@pytest.fixture(scope="module")
def csv(tmp_path_factory):
    path = tmp_path_factory.mktemp("progress") / "data.csv"
    lines = ["x,s,label"] + [f"{i * 0.5},c{i % 7},{i % 2}" for i in range(ROWS - 1)]
    lines.append("oops,c1,0")  # rejected: still a row done
    path.write_text("\n".join(lines) + "\n")
    return path


def test_ingest_and_transform_report_rows_and_rate(csv, tmp_path, capsys):
    spec = _pipeline(str(csv)).to_json()
    examples, transformed = str(tmp_path / "examples"), str(tmp_path / "transformed")
    assert ingest.main(["--spec", spec, "--examples", examples]) == 0
    out = capsys.readouterr().out
    lines = [m for m in _LINE.finditer(out) if m.group(1) == "ingest"]
    assert lines, out
    # The total is estimated from the file's size (here: its lines, less the header).
    assert all(_number(m.group(4)) == ROWS for m in lines if m.group(4)), out
    done = [m for m in _DONE.finditer(out) if m.group(1) == "ingest"]
    assert len(done) == 1 and _number(done[0].group(2)) == ROWS, out

    assert transform.main(["--spec", spec, "--examples", examples,
                           "--transformed", transformed]) == 0
    out = capsys.readouterr().out
    splits = progress.split_rows(examples)
    total = splits["train"] + splits["eval"]  # small shards: every split read once
    lines = [m for m in _LINE.finditer(out) if m.group(1) == "transform"]
    assert lines and all(_number(m.group(4)) == total for m in lines), out
    done = [m for m in _DONE.finditer(out) if m.group(1) == "transform"]
    assert len(done) == 1 and _number(done[0].group(2)) == total and not done[0].group(5), out

    # Read twice (what large train splits get): the analysis counted apart, the same outputs.
    twice = tmp_path / "twice"
    transform_step.run(_pipeline(str(csv)), examples, str(twice), reread=True)
    out = capsys.readouterr().out
    done = [m for m in _DONE.finditer(out) if m.group(1) == "transform"]
    assert len(done) == 1 and _number(done[0].group(2)) == total + splits["train"], out
    assert done[0].group(5) == f"analyze {splits['train']:,}, transform {total:,}"
    for split in ("train", "eval"):
        assert _records(twice / split) == _records(Path(transformed) / split)
    assert (twice / "transform_fn" / "transform_fn" / "assets" / "s").read_bytes() == (
        Path(transformed) / "transform_fn" / "transform_fn" / "assets" / "s").read_bytes()


def _records(folder: Path) -> list[bytes]:
    return sorted(bytes(r) for f in sorted(folder.glob("*"))
                  for r in tf.data.TFRecordDataset(str(f), compression_type="GZIP")
                  .as_numpy_iterator())


def test_evaluate_reports_rows_scored(tmp_path, capsys):
    rows = fx.make_rows(700, seed=1)
    fx.write_examples(tmp_path / "examples", rows)
    fx.good_model(tmp_path / "model" / "export")
    pipeline = fx.pipeline(tmp_path / "serving")
    evaluate.run(pipeline, str(tmp_path / "examples"), str(tmp_path / "model"),
                 str(tmp_path / "evaluation"))
    out = capsys.readouterr().out
    done = [m for m in _DONE.finditer(out) if m.group(1) == "evaluate"]
    assert len(done) == 1 and _number(done[0].group(2)) == len(rows), out


def test_batch_predict_reports_rows_scored(tmp_path, capsys):
    from estflow.components.predict import step as predict  # noqa: PLC0415
    from tests.components import _serving_fixtures as serving  # noqa: PLC0415

    serving.write_versions(tmp_path / "models" / "taxi", (1,))
    rows = 2000
    source = tmp_path / "score.csv"
    source.write_text("trip_id,fare,trip_seconds,payment_type,company\n" + "".join(
        f"t{i},{i % 50 + 0.5},{i % 900},{'Cash' if i % 3 else 'Credit Card'},C{i % 5}\n"
        for i in range(rows)))
    pipeline = ef.Pipeline(name="scoring", predict=ef.BatchPredict(
        model=str(tmp_path / "models" / "taxi"), source=ef.CsvSource(str(source))))
    summary = predict.run(pipeline, str(tmp_path / "out"))
    out = capsys.readouterr().out
    lines = [m for m in _LINE.finditer(out) if m.group(1) == "batch_predict"]
    assert lines and all(_number(m.group(4)) == rows for m in lines), out
    done = [m for m in _DONE.finditer(out) if m.group(1) == "batch_predict"]
    assert len(done) == 1 and _number(done[0].group(2)) == rows, out
    assert summary["scored"] == rows
