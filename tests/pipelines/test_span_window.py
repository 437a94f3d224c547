"""A rolling window of spans (``ef.Spans(last=N)``): which spans ``estflow run`` reads, and a
missing one in the window is SPAN_MISSING naming it, before any step."""

from __future__ import annotations

from pathlib import Path

import pytest

from estflow.components._sources.read import source_files
from estflow.pipelines import loader
from estflow.pipelines.cli import backfill

PIPELINE = '''
import estflow.dsl as ef

pipeline = ef.Pipeline(
    name="window", source=ef.CsvSource("data/{{span:{fmt}}}/*.csv", spans=ef.Spans(last=3)),
    features=(ef.Numeric("x", default=0.0),), label=ef.Label("y"),
    model=ef.LinearClassifier(feature_columns=("x",)), train=ef.TrainSpec(max_steps=5))
'''


def _project(tmp_path: Path, spans: list[str], fmt: str = "%Y-%m-%d") -> loader.LoadedPipeline:
    (tmp_path / "pipeline.py").write_text(PIPELINE.format(fmt=fmt))
    for span in spans:
        folder = tmp_path / "data" / span
        folder.mkdir(parents=True)
        (folder / "part.csv").write_text("x,y\n1.0,0\n2.0,1\n")
    return loader.load(str(tmp_path / "pipeline.py"))


def test_the_window_is_the_last_n_days_ending_at_the_span(tmp_path):
    loaded = _project(tmp_path, ["2024-01-01", "2024-01-02", "2024-01-03", "2024-01-04"])
    latest = backfill.select(loaded, None).pipeline.source
    assert latest.spans.selected == ("2024-01-02", "2024-01-03", "2024-01-04")
    named = backfill.select(loaded, "2024-01-03").pipeline.source
    assert named.spans.selected == ("2024-01-01", "2024-01-02", "2024-01-03")
    files = source_files(named, str(tmp_path))
    assert [Path(f).parent.name for f in files] == ["2024-01-01", "2024-01-02", "2024-01-03"]


def test_a_missing_day_inside_the_window_is_named(tmp_path):
    loaded = _project(tmp_path, ["2024-01-01", "2024-01-03"])
    with pytest.raises(backfill.SpanMissing, match=r"SPAN_MISSING \(span 2024-01-02\)"):
        backfill.select(loaded, "2024-01-03")


def test_a_format_without_a_day_takes_the_last_n_present(tmp_path):
    loaded = _project(tmp_path, ["2023-11", "2024-01", "2024-02", "2024-04"], fmt="%Y-%m")
    assert backfill.select(loaded, "2024-02").pipeline.source.spans.selected == \
        ("2023-11", "2024-01", "2024-02")
    with pytest.raises(backfill.SpanMissing, match="the 1 span"):
        backfill.select(loaded, "2024-01")


def test_backfill_runs_each_day_in_order_and_stops_at_the_first_failure(tmp_path, capsys):
    """The loop around ``estflow run --span`` (each run itself is the five-night test's):
    every day from --from to --to, a missing one included, stopping at the first non-zero
    status with the command that continues."""
    _project(tmp_path, ["2024-01-01", "2024-01-02", "2024-01-04"])
    ran = []

    def run(argv):
        ran.append(argv[-1])
        return 4 if argv[-1] == "2024-01-03" else 0

    pipeline = str(tmp_path / "pipeline.py")
    status = backfill._backfill(type("Args", (), {"pipeline": pipeline, "first": "2024-01-01",
                                                  "last": "2024-01-04"})(), run)
    assert status == 4 and ran == ["2024-01-01", "2024-01-02", "2024-01-03"]
    assert f"continue with: estflow backfill {pipeline} --from 2024-01-03 --to 2024-01-04" in \
        capsys.readouterr().err


def test_an_empty_span_is_an_anomaly_before_any_step(tmp_path):
    loaded = _project(tmp_path, ["2024-01-01", "2024-01-02", "2024-01-03"])
    (tmp_path / "data" / "2024-01-02" / "part.csv").write_text("x,y\n\n")  # the header alone
    with pytest.raises(backfill.SpanMissing, match=r"SPAN_EMPTY \(span 2024-01-02\)"):
        backfill.select(loaded, "2024-01-03")
