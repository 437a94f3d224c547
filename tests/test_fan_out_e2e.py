"""Fan-out run as a user runs it: a pipeline file whose step is mapped over three thresholds
(``score.map(threshold=[...])``), run with ``estflow run tiny.py`` from its directory (default
environment: no ``ESTFLOW_*``) on a small CSV. One workspace for the module, as a user's reruns.

Checked: the three items run (as steps ``score_0`` .. ``score_2``) and the step reading their
output sees the collected directory (``0/``, ``1/``, ``2/`` and ``items.json``) and the
collected result; an identical rerun reuses every item; adding a fourth item runs only it, the
collection and the reader; a failing item fails the run and its reader is not started.
"""

from __future__ import annotations

import json
import random
import subprocess
from pathlib import Path

import pytest

from tests.user_runs import estflow_run
from tests.user_runs import run_record
from tests.user_runs import statuses

pytestmark = pytest.mark.slow


PIPELINE = '''
import json

import estflow.dsl as ef


@ef.step
def score(evaluation: ef.Input[ef.Evaluation], scores: ef.Output[ef.Dataset],
          threshold: float = 0.5, label: str = "t") -> dict:
    if threshold < 0:
        raise ValueError(f"threshold {threshold} is negative")
    auc = json.loads((evaluation / "metrics.json").read_text())["metrics"]["auc"]
    (scores / "score.json").write_text(json.dumps({"threshold": threshold, "label": label}))
    print(f"scoring at {threshold}")
    return {"threshold": threshold, "above": auc >= threshold}


@ef.step
def summarize(scores: ef.Input[ef.Dataset], score_result: ef.Input[ef.Metrics]) -> dict:
    items = json.loads((scores / "items.json").read_text())
    seen = [json.loads((scores / str(i) / "score.json").read_text())["threshold"]
            for i in range(len(items))]
    results = json.loads((score_result / "result.json").read_text())["items"]
    folders = sorted(p.name for p in scores.iterdir() if p.is_dir())
    return {"items": len(items), "thresholds": ",".join(map(str, seen)),
            "folders": ",".join(folders), "results": len(results),
            "labels": ",".join(sorted({i["label"] for i in items}))}


pipeline = ef.Pipeline(
    name="tiny", source=ef.CsvSource("data.csv"), features=(ef.Numeric("x"), ef.Numeric("z")),
    label=ef.Label("y"), model=ef.LinearClassifier(feature_columns=("x", "z")),
    train=ef.TrainSpec(max_steps=20),
    steps=(score.map(threshold=THRESHOLDS, label="daily"), summarize))
'''


def _write(folder: Path, thresholds: list[float]) -> None:
    (folder / "tiny.py").write_text(PIPELINE.replace("THRESHOLDS", repr(thresholds)))


def _run(folder: Path, *args: str) -> subprocess.CompletedProcess:
    return estflow_run(folder, "tiny.py", *args)


def _record(folder: Path, out: str) -> dict:
    return run_record(folder, "tiny", out)


_statuses = statuses


@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("fan_out")
    rng = random.Random(7)
    rows = ["x,z,y"]
    for _ in range(200):
        x, z = rng.random(), rng.random()
        rows.append(f"{x:.4f},{z:.4f},{int(x + 0.3 * z > 0.6)}")
    (folder / "data.csv").write_text("\n".join(rows) + "\n")
    _write(folder, [0.3, 0.5, 0.7])
    first = _run(folder)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    (folder / "first.out").write_text(first.stdout)
    return folder


def test_three_items_run_and_the_reader_sees_them_collected(workspace):
    out = (workspace / "first.out").read_text()
    record = _record(workspace, out)
    steps = list(record["steps"])  # the items in the order they started (at once)
    assert steps[:4] == ["ingest", "transform", "train", "evaluate"]
    assert sorted(steps[4:7]) == ["score_0", "score_1", "score_2"]
    assert steps[7:] == ["score", "summarize"]
    assert set(_statuses(record).values()) == {"ran"}
    assert [record["steps"][f"score_{i}"]["metrics"]["threshold"] for i in range(3)] == [
        0.3, 0.5, 0.7]
    assert record["steps"]["summarize"]["metrics"] == {
        "items": 3, "thresholds": "0.3,0.5,0.7", "folders": "0,1,2", "results": 3,
        "labels": "daily"}
    collected = Path(record["steps"]["score"]["outputs"]["scores"]["path"])
    assert json.loads((collected / "items.json").read_text())[2] == {
        "label": "daily", "threshold": 0.7}
    result = json.loads((Path(record["steps"]["score"]["outputs"]["score_result"]["path"])
                         / "result.json").read_text())
    assert [r["threshold"] for r in result["items"]] == [0.3, 0.5, 0.7]
    assert "scoring at 0.5" in out


def test_an_identical_rerun_reuses_every_item(workspace):
    again = _run(workspace)
    assert again.returncode == 0, again.stdout[-3000:]
    assert set(_statuses(_record(workspace, again.stdout)).values()) == {"reused"}


def test_a_fourth_item_runs_alone_with_the_collection_and_the_reader(workspace):
    _write(workspace, [0.3, 0.5, 0.7, 0.9])
    grown = _run(workspace)
    assert grown.returncode == 0, grown.stdout[-3000:]
    record = _record(workspace, grown.stdout)
    assert [n for n, s in _statuses(record).items() if s == "ran"] == [
        "score_3", "score", "summarize"]
    assert {_statuses(record)[f"score_{i}"] for i in range(3)} == {"reused"}
    assert record["steps"]["summarize"]["metrics"]["thresholds"] == "0.3,0.5,0.7,0.9"


def test_a_failing_item_fails_the_run_and_its_reader_is_not_started(workspace):
    _write(workspace, [0.3, 0.5, -1.0])
    failed = _run(workspace)
    assert failed.returncode == 1
    assert "threshold -1.0 is negative" in failed.stdout + failed.stderr
    run_id = sorted(p.name for p in (workspace / "estflow_runs" / "tiny").iterdir()
                    if p.is_dir() and (p / "run.json").exists())[-1]
    record = json.loads((workspace / "estflow_runs" / "tiny" / run_id / "run.json").read_text())
    statuses = _statuses(record)
    assert statuses["score_0"] == statuses["score_1"] == "reused"
    assert statuses["score_2"] == "failed"
    assert statuses["score"] == statuses["summarize"] == "skipped"
