"""A numeric column turning to text: ingest rejects those rows, so no statistic of the kept rows
shows it. The span's statistics record, per column, the cells rejected for their type (count,
fraction of the rows read, the smallest as an example); a run rejecting more of them than the
served model's training data did is UNEXPECTED_DATA_TYPE (TFDV's kind), a blocking anomaly:
the validate step exits 4 naming the column. Past ``max_rejected_fraction`` the ingest step
itself exits 4 (a data anomaly, not a failure), naming each such column."""

from __future__ import annotations

import dataclasses
import json
import random
from pathlib import Path

import pytest

import estflow.dsl as ef
from estflow.components import validate
from estflow.components._statistics import anomalies
from estflow.components._statistics.statistics import ALL_EXAMPLES
from estflow.components._statistics.statistics import TYPE_ERROR_EXAMPLE
from estflow.components._statistics.statistics import TYPE_ERRORS
from estflow.components._statistics.statistics import read_statistics
from estflow.components._statistics.statistics import span_dataset
from estflow.components._statistics.statistics import type_errors
from estflow.components.ingest import __main__ as ingest
from estflow.dsl.contracts import Files
from tests.components import _validate_data as vd

ROWS = 2000


def _night(path: Path, seed: int, *, text: float = 0.0) -> Path:
    """A night of trips: fare, payment_type, tipped; ``text``: the share of fares written as
    text (``$12.50``), as an upstream export that changed its format writes them."""
    rng = random.Random(seed)
    path.mkdir(parents=True, exist_ok=True)
    lines = ["fare,payment_type,tipped"]
    for _ in range(ROWS):
        fare = round(rng.uniform(3, 40), 2)
        kind = rng.choice(("Cash", "Credit Card", "Credit Card"))
        cell = f"${fare:.2f}" if rng.random() < text else f"{fare}"
        lines.append(f"{cell},{kind},{int(kind != 'Cash' and rng.random() < 0.7)}")
    (path / "trips.csv").write_text("\n".join(lines) + "\n")
    return path


def _pipeline(root: Path, *, max_rejected_fraction: float = 0.1, **checks) -> ef.Pipeline:
    return ef.Pipeline(
        name="nightly-taxi",
        source=ef.CsvSource("data/*.csv", max_rejected_fraction=max_rejected_fraction),
        features=(ef.Numeric("fare", default=0.0, normalize="z_score"),
                  ef.CategoricalVocab("payment_type", default="")),
        label=ef.Label("tipped"),
        model=ef.LinearClassifier(feature_columns=("fare", "payment_type")),
        train=ef.TrainSpec(max_steps=20, batch_size=64),
        push=ef.PushTarget(str(root / "serving"), "taxi"),
        checks=ef.DataChecks(min_examples=50, **checks))


def _ingest(pipeline: ef.Pipeline, data: Path, out: Path) -> int:
    return ingest.main(["--spec", pipeline.to_json(), "--examples", str(out),
                        "--source-root", str(data.parent)])


def _serve(root: Path, examples: Path) -> None:
    """A served version whose training data is ``examples`` (what push stores with it)."""
    version = root / "serving" / "taxi" / "1"
    (version / "assets.extra").mkdir(parents=True)
    (version / "saved_model.pb").write_bytes(b"")
    (version / Files.SERVED_STATISTICS).write_bytes((examples / Files.STATISTICS).read_bytes())


def _validate(pipeline: ef.Pipeline, examples: Path, out: Path) -> tuple[int, dict]:
    status = validate.main(["--spec", pipeline.to_json(), "--examples", str(examples),
                            "--validation", str(out), "--source-root", str(out.parent)])
    return status, json.loads((out / Files.VALIDATION).read_text())


def test_the_span_records_the_cells_rejected_for_their_type(tmp_path):
    data = _night(tmp_path / "data", 1, text=0.05)
    assert _ingest(_pipeline(tmp_path), data, tmp_path / "ex") == 0
    stats = read_statistics(str(tmp_path / "ex"))
    fare = next(f for f in span_dataset(stats).features if f.path.step == ["fare"])
    count, fraction, example = type_errors(fare)
    rejected = [json.loads(line)
                for line in (tmp_path / "ex" / Files.REJECTED).read_text().splitlines()]
    assert count == len(rejected) and 80 < count < 120  # ~5% of 2000
    assert fraction == pytest.approx(count / ROWS)
    assert example.startswith("$") and example == min(
        r["reason"].split("got ")[1].strip("'") for r in rejected)
    assert all(not f.custom_stats for d in stats.datasets for f in d.features
               if d.name != ALL_EXAMPLES or f.path.step != ["fare"])
    summary = json.loads((tmp_path / "ex" / Files.INGEST_STATS).read_text())
    assert summary["schema"]["columns"]["fare"]["type_errors"] == count
    assert summary["schema"]["columns"]["fare"]["type_error_example"] == example


def test_more_text_in_a_numeric_column_than_the_served_data_had_exits_4(tmp_path, capsys):
    pipeline = _pipeline(tmp_path)  # max_rejected_fraction=0.1: ingest lets 5% through
    assert _ingest(pipeline, _night(tmp_path / "clean" / "data", 1), tmp_path / "ex1") == 0
    _serve(tmp_path, tmp_path / "ex1")
    faulty = _night(tmp_path / "faulty" / "data", 2, text=0.05)
    assert _ingest(pipeline, faulty, tmp_path / "ex2") == 0
    status, summary = _validate(pipeline, tmp_path / "ex2", tmp_path / "v2")
    assert status == 4 and not summary["passed"]
    (found,) = summary["anomalies"]
    assert (found["column"], found["kind"], found["family"]) == (
        "fare", "UNEXPECTED_DATA_TYPE", "schema")
    assert 0.04 < found["observed"] < 0.06 and found["allowed"] == 0.0
    assert "column 'fare'" in found["description"] and "e.g. '$" in found["description"]
    assert "fare: UNEXPECTED_DATA_TYPE (All Examples)" in capsys.readouterr().out
    # a clean night after it: nothing rejected, nothing flagged
    clean = _night(tmp_path / "clean2" / "data", 3)
    assert _ingest(pipeline, clean, tmp_path / "ex3") == 0
    assert _validate(pipeline, tmp_path / "ex3", tmp_path / "v3")[0] == 0
    # warn_only: the column's anomaly is a warning
    lenient = _pipeline(tmp_path, warn_only=("UNEXPECTED_DATA_TYPE",))
    status, summary = _validate(lenient, tmp_path / "ex2", tmp_path / "v4")
    assert status == 0 and [w["kind"] for w in summary["warnings"]] == ["UNEXPECTED_DATA_TYPE"]


def test_as_much_text_as_the_served_data_had_is_no_anomaly():
    specs = (("x", "float", False), ("color", "string", True))
    night = {k: vd.night(1, 1000)[k] for k in ("x", "color")}

    def stats(errors: int, rows: int = 1000):
        return vd.span({"train": night}, specs, {
            "x": {"type_errors": errors, "checked": rows + errors,
                  "type_error_example": "abc"}})
    served = stats(30)
    assert anomalies.rejected_types(stats(31), served) == []  # within chance
    (found,) = anomalies.rejected_types(stats(80), served)
    assert (found.column, found.kind, found.split) == ("x", "UNEXPECTED_DATA_TYPE", ALL_EXAMPLES)
    assert found.observed == pytest.approx(80 / 1080, abs=1e-6)
    assert "80 of 1080 rows read" in found.description and "'abc'" in found.description
    # against a clean baseline, any such cell is one; a baseline written before the record
    # (no span dataset) records nothing, and the step does not compare against it
    assert [a.column for a in anomalies.rejected_types(stats(1), stats(0))] == ["x"]
    assert anomalies.records_rejects(served)
    assert not anomalies.records_rejects(vd.stats_list(vd.statistics(night, specs=specs)))
    span = span_dataset(stats(0))
    assert not any(c.name in (TYPE_ERRORS, TYPE_ERROR_EXAMPLE) for f in span.features
                   for c in f.custom_stats)


def test_past_max_rejected_fraction_ingest_exits_4_naming_the_column(tmp_path, capsys):
    strict = _pipeline(tmp_path, max_rejected_fraction=0.01)
    data = _night(tmp_path / "data", 4, text=0.05)
    assert _ingest(strict, data, tmp_path / "ex") == 4
    err = capsys.readouterr().err
    assert "[ingest] data anomaly:" in err and "source.max_rejected_fraction=0.01" in err
    assert "fare: UNEXPECTED_DATA_TYPE:" in err and "are not a finite float, e.g. '$" in err
    assert "resuming, reads the same data" in err
    # the same data declared as the pipeline's own check allows: written
    assert _ingest(dataclasses.replace(strict, source=dataclasses.replace(
        strict.source, max_rejected_fraction=0.1)), data, tmp_path / "ok") == 0
