"""Batch prediction on Beam's portable runner, for real: Beam's own Python job service and an
external worker pool started here (the Job API, artifact staging and Fn API path that Flink,
Spark and portable Dataflow take), as ``python -m estflow.components.predict`` runs it. The
predictions, rejected rows and counts must equal the in-memory run's."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import estflow.dsl as ef
from estflow.dsl.contracts import Files
from tests.components import _serving_fixtures as fx
from tests.components.test_beam_portable import _env
from tests.components.test_beam_portable import _portable_services

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]


def _predict(spec: str, out: Path, beam_options: list[str]) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "estflow.components.predict", "--spec", spec,
         "--predictions", str(out), *beam_options], env=_env(), capture_output=True,
        text=True, timeout=600, cwd=REPO)
    assert done.returncode == 0, f"{beam_options} failed:\n{done.stderr[-4000:]}"


def _outputs(out: Path) -> tuple[list[str], list[str], dict]:
    lines = sorted(line for f in out.glob("predictions-*.jsonl")
                   for line in f.read_text().splitlines())
    rejected = sorted((out / Files.REJECTED).read_text().splitlines())
    summary = json.loads((out / Files.PREDICT_RESULT).read_text())
    counts = {k: summary[k] for k in ("scored", "rejected", "lines", "files",
                                      "rejected_by_reason")}
    return lines, rejected, counts


def test_portable_runner_scores_as_the_in_memory_runner(tmp_path):
    fx.write_versions(tmp_path / "models" / "taxi", (1,))
    rows = [f"t{i},{i % 37}.25,{i % 900},{('Cash', 'Card', '')[i % 3]}" for i in range(3000)]
    rows[10], rows[20] = "t10,oops,1,Cash", "t20,1,2"
    csv = tmp_path / "in.csv"
    csv.write_text("trip_id,fare,trip_seconds,payment_type\n" + "\n".join(rows) + "\n")
    spec = ef.Pipeline(name="scoring", predict=ef.BatchPredict(
        model=str(tmp_path / "models" / "taxi"), source=ef.CsvSource(str(csv)),
        keys=("trip_id",), batch_size=256)).to_json()

    _predict(spec, tmp_path / "memory", [])
    with _portable_services(tmp_path) as options:
        _predict(spec, tmp_path / "portable", options)

    memory, portable = _outputs(tmp_path / "memory"), _outputs(tmp_path / "portable")
    assert len(memory[0]) == 2998 and len(memory[1]) == 2
    assert portable == memory
