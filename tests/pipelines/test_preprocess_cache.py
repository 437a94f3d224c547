"""``estflow preprocess`` goes through the step cache: its outputs are the ingest and
transform steps' entries, which a later ``estflow run`` reuses, and a second preprocess reuses
them too. Other options (another runner, GZIP level, shards) run uncached, as before."""

from __future__ import annotations

import itertools
import json
import os
from pathlib import Path

import pytest

from estflow.dsl.contracts import Files
from estflow.pipelines import cli
from estflow.pipelines.examples import taxi
from estflow.pipelines.local import runs


def _small_pipeline(tmp_path: Path, rows: int = 300) -> Path:
    data = taxi.__file__.replace("taxi.py", "data/chicago_taxi/data.csv")
    with open(data) as src, open(tmp_path / "sample.csv", "w") as dst:
        dst.writelines(itertools.islice(src, rows + 1))
    target = tmp_path / "small_pipeline.py"
    target.write_text(
        "import dataclasses\nimport estflow.dsl as ef\n"
        "from estflow.pipelines.examples import taxi\n"
        "pipeline = dataclasses.replace(taxi.pipeline, source=ef.CsvSource('sample.csv'), "
        "push=None, train=ef.TrainSpec(max_steps=20, batch_size=32))\n")
    return target


def _entries(step: str) -> list[Path]:
    return sorted(p for p in (runs.cache_root() / step).glob("*") if p.is_dir()
                  and not p.name.endswith(".partial"))


@pytest.mark.slow
def test_preprocess_fills_the_step_cache_and_run_reuses_it(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    target = _small_pipeline(tmp_path)
    assert cli.main(["preprocess", str(target), "--output", str(tmp_path / "p1")]) == 0
    out = capsys.readouterr().out
    assert "preprocess done in" in out and "reused" not in out
    (ingest,), (transform,) = _entries("ingest"), _entries("transform")
    for entry, artifact in ((ingest, "examples"), (transform, "transformed")):
        info = json.loads((entry / "entry.json").read_text())
        assert info["run"].startswith("estflow preprocess") and info["files"]
        assert (tmp_path / "p1" / "preprocess" / artifact).resolve() == entry / artifact
    assert json.loads((transform / "transformed" / Files.TRANSFORM_STATS).read_text())[
        "rows"]["train"] > 0

    # A second preprocess reuses both entries: nothing runs.
    assert cli.main(["preprocess", str(target), "--output", str(tmp_path / "p2")]) == 0
    out = capsys.readouterr().out
    assert "preprocess reused" in out and "preprocess done in" not in out, out
    assert (tmp_path / "p2" / "preprocess" / "transformed").resolve() == \
        transform / "transformed"

    # estflow run reuses what preprocess made: ingest and transform are not run again.
    assert cli.main(["run", str(target)]) == 0
    out = capsys.readouterr().out
    assert "<== ingest reused" in out and "<== transform reused" in out
    record = json.loads(max(runs.home().glob("*/*/run.json"),
                            key=os.path.getmtime).read_text())
    assert {n: s["status"] for n, s in record["steps"].items()} == {
        "ingest": "reused", "transform": "reused", "train": "ran", "evaluate": "ran"}
    assert record["steps"]["transform"]["outputs"]["transformed"]["path"] == str(
        transform / "transformed")
    assert (_entries("ingest"), _entries("transform")) == ([ingest], [transform])


def test_other_options_run_uncached(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    target = _small_pipeline(tmp_path, rows=100)
    assert cli.main(["preprocess", str(target), "--output", str(tmp_path / "p"),
                     "--gzip-level", "9"]) == 0
    assert "not cached" in capsys.readouterr().out
    assert not _entries("ingest") and not _entries("transform")
    assert (tmp_path / "p" / "preprocess" / "transformed" / Files.TRANSFORM_STATS).is_file()
