"""The validate step on statistics files as ingest writes them: the first run infers a schema
and writes it for the user to commit; later runs are checked against the committed schema; a
blocking anomaly makes the entry point exit 4 with validation.json and the data report naming
it (column, kind, observed vs allowed); warn_only lets the run go on with the warning kept.
Every check is computed over the whole span (all splits together, ``All Examples``):
``min_examples`` counts the span's rows, and an anomaly of every split is reported once."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import estflow.dsl as ef
from estflow.components import validate
from estflow.components._statistics.statistics import write_statistics
from estflow.components.validate import step
from estflow.dsl.contracts import Files
from estflow.pipelines.examples import taxi
from tests.components import _validate_data as vd


def _night(tmp_path: Path, name: str, **faults) -> Path:
    """A night's statistics as ingest writes them: train 1000 rows, eval 300, the span."""
    folder = tmp_path / name
    folder.mkdir()
    write_statistics(vd.span({"train": vd.night(1, 1000, **faults),
                              "eval": vd.night(2, 300, **faults)}), str(folder))
    return folder


def _pipeline(**declared) -> ef.Pipeline:
    return dataclasses.replace(taxi.pipeline, push=None, checks=ef.DataChecks(**declared))


def _validate(pipeline, examples: Path, out: Path, root: Path) -> tuple[int, dict]:
    status = validate.main(["--spec", pipeline.to_json(), "--examples", str(examples),
                            "--validation", str(out), "--source-root", str(root)])
    return status, json.loads((out / Files.VALIDATION).read_text())


def test_the_first_run_infers_the_schema_then_a_dropped_column_stops_the_next(tmp_path):
    status, first = _validate(_pipeline(), _night(tmp_path, "n1"), tmp_path / "v1", tmp_path)
    assert status == 0 and first["passed"] and "inferred from this run" in first["schema"]
    committed = (tmp_path / "v1" / Files.INFERRED_SCHEMA).read_text()
    assert 'name: "color"' in committed and "presence" in committed  # Schema text format
    (tmp_path / "schema.pbtxt").write_text(committed)

    status, second = _validate(_pipeline(schema="schema.pbtxt"),
                               _night(tmp_path, "n2", drop="color"), tmp_path / "v2", tmp_path)
    assert status == step.EXIT_BLOCKED == 4
    found = {(a["column"], a["kind"], a["split"]): a for a in second["anomalies"]}
    assert len(found) == len(second["anomalies"])  # each once, not once per split
    low = found[("color", "FEATURE_TYPE_LOW_FRACTION_PRESENT", "All Examples")]
    assert (low["observed"], low["allowed"]) == (0.0, 1.0)
    assert {column for column, _, _ in found} == {"color"}  # the clean columns are not flagged
    report = (tmp_path / "v2" / Files.DATA_REPORT).read_text()
    assert "FEATURE_TYPE_LOW_FRACTION_PRESENT" in report and "STOPPED before training" in report


def test_warn_only_keeps_the_anomaly_as_a_warning_and_lets_the_run_go_on(tmp_path):
    _validate(_pipeline(), _night(tmp_path, "n1"), tmp_path / "v1", tmp_path)
    (tmp_path / "schema.pbtxt").write_text((tmp_path / "v1" / Files.INFERRED_SCHEMA).read_text())
    status, summary = _validate(_pipeline(schema="schema.pbtxt", warn_only=("missing",)),
                                _night(tmp_path, "n2", drop="color"), tmp_path / "v2", tmp_path)
    assert status == 0 and summary["passed"] and summary["anomalies"] == []
    assert {w["kind"] for w in summary["warnings"]} >= {"FEATURE_TYPE_LOW_FRACTION_PRESENT"}


def test_too_few_examples_is_an_anomaly_of_the_examples_family(tmp_path):
    status, summary = _validate(_pipeline(min_examples=5000), _night(tmp_path, "n1"),
                                tmp_path / "v1", tmp_path)
    assert status == 4
    assert [(a["kind"], a["family"], a["split"], a["observed"], a["allowed"])
            for a in summary["anomalies"]] == [
        ("DATASET_LOW_NUM_EXAMPLES", "examples", "All Examples", 1300, 5000)]


def test_min_examples_counts_the_whole_span_not_each_split(tmp_path):
    # 1000 train + 300 eval rows: a clean span of 1300 rows passes min_examples=1200, though
    # its eval split alone has fewer
    status, summary = _validate(_pipeline(min_examples=1200), _night(tmp_path, "n1"),
                                tmp_path / "v1", tmp_path)
    assert status == 0 and summary["passed"], summary["anomalies"]
    assert summary["examples"] == {"train": 1000, "eval": 300, "All Examples": 1300}
    assert summary["checked_over"] == "All Examples"
    assert ("checked over: the whole span, All Examples: 1300 rows, every split together "
            "(train 1000, eval 300)") in (tmp_path / "v1" / Files.DATA_REPORT).read_text()
    # the inferred schema records it as TFDV's dataset_constraints
    assert "min_examples_count: 1200" in (tmp_path / "v1" / Files.INFERRED_SCHEMA).read_text()
