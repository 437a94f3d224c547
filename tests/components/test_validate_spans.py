"""Spans nobody chose yet (a Kubeflow run): the fingerprint task resolves them from the run's
``span`` parameter, else its schedule time, else the latest present, before it keys the steps;
a missing span of the window fails it (exit status 4) before any step."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import estflow.dsl as ef
from estflow.components import fingerprint
from estflow.components._sources.spans import span_at
from estflow.dsl.contracts import Files
from estflow.dsl.fingerprints import StepKeyInput
from estflow.pipelines.plan import build_plan


@pytest.mark.parametrize(("value", "fmt", "span"), [
    ("2024-01-03", "%Y-%m-%d", "2024-01-03"),
    ("2024-01-03T02:00:00Z", "%Y-%m-%d", "2024-01-03"),  # KFP's RFC 3339 schedule time
    ("2024-01-03T02:00:00.123456Z", "%Y%m%d%H", "2024010302"),
    ("2024-01-03T01:00:00+05:00", "%Y-%m-%d", "2024-01-02"),  # 20:00 UTC the day before
    ("20240103020000", "%Y-%m-%d", "2024-01-03"),  # a recurring run's [[ScheduledTime]]
    ("yesterday", "%Y-%m-%d", None),
])
def test_a_span_or_a_time_names_the_span(value, fmt, span):
    assert span_at(value, fmt) == span


def _project(tmp_path: Path, days=(1, 2, 3)) -> ef.Pipeline:
    for day in days:
        folder = tmp_path / "data" / f"2024-01-0{day}"
        folder.mkdir(parents=True)
        (folder / "part.csv").write_text("x,y\n1.0,0\n2.0,1\n")
    return ef.Pipeline(
        name="window", source=ef.CsvSource("data/{span:%Y-%m-%d}/*.csv",
                                           spans=ef.Spans(last=2)),
        features=(ef.Numeric("x", default=0.0),), label=ef.Label("y"),
        model=ef.LinearClassifier(feature_columns=("x",)), train=ef.TrainSpec(max_steps=5))


def _fingerprint(pipeline, tmp_path, *extra: str) -> tuple[int, dict | None]:
    plan = build_plan(pipeline, source_root=str(tmp_path))
    out = tmp_path / "fp"
    out.mkdir(exist_ok=True)
    status = fingerprint.main([
        "--spec", pipeline.to_json(), "--fingerprints", str(out), "--source-root",
        str(tmp_path), "--plan", StepKeyInput.list_to_json([s.plan_step() for s in plan.steps]),
        *extra])
    found = out / Files.FINGERPRINTS
    return status, json.loads(found.read_text()) if found.exists() else None


def _read(found: dict) -> list:
    return ef.Pipeline.from_json(found["steps"]["ingest"]["spec"]).source.spans.selected


def test_the_schedule_time_selects_the_window_the_steps_get(tmp_path):
    status, found = _fingerprint(_project(tmp_path), tmp_path,
                                 "--schedule-time", "2024-01-03T02:00:00Z")
    assert status == 0
    assert _read(found) == ("2024-01-02", "2024-01-03")
    assert len(found["source"]["objects"]) == 2  # the key covers the window's files only


def test_the_span_parameter_wins_and_the_latest_is_the_default(tmp_path):
    pipeline = _project(tmp_path)
    _, named = _fingerprint(pipeline, tmp_path, "--span", "2024-01-02",
                            "--schedule-time", "2024-01-03T02:00:00Z")
    assert _read(named) == ("2024-01-01", "2024-01-02")
    # an unresolved placeholder or macro (a backend without them) is no value
    _, latest = _fingerprint(pipeline, tmp_path, "--span", "[[ScheduledTime]]",
                             "--schedule-time", "{{$.pipeline_job_schedule_time_utc}}")
    assert _read(latest) == ("2024-01-02", "2024-01-03")


def test_a_missing_span_in_the_window_stops_the_run_before_any_step(tmp_path, capsys):
    status, found = _fingerprint(_project(tmp_path, days=(1, 3)), tmp_path,
                                 "--schedule-time", "2024-01-03T02:00:00Z")
    assert status == 4 and found is None
    assert "SPAN_MISSING (span 2024-01-02)" in capsys.readouterr().out
