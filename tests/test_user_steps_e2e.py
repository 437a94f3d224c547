"""User steps run as a user runs them: a pipeline file with its own steps, run with ``estflow
run tiny.py`` from its directory (default environment: no ``ESTFLOW_*``), real steps on a small
CSV. One workspace for the module: the first run trains, the later ones reuse what did not
change, as a user's reruns do.

Checked: the steps' order, results, artifacts and run record; a SQLite database written by a
step; an identical rerun reuses every cacheable step; editing one step's function reruns it and
the steps after it that read its outputs, nothing else; a condition that does not hold skips its
step and the steps reading its outputs; a step failing from outside (its webhook is down) fails
the run, and ``--resume`` runs only what failed or never ran.
"""

from __future__ import annotations

import json
import random
import sqlite3
import subprocess
from pathlib import Path

import pytest

from tests.user_runs import estflow_run
from tests.user_runs import run_record
from tests.user_runs import statuses

pytestmark = pytest.mark.slow


PIPELINE = '''
import json
import sqlite3
from pathlib import Path
from typing import NamedTuple

import estflow.dsl as ef


class Gate(NamedTuple):
    auc: float
    ok: bool


@ef.step
def business_check(evaluation: ef.Input[ef.Evaluation], report: ef.Output[ef.Markdown],
                   floor: float = 0.5) -> Gate:
    metrics = json.loads((evaluation / "metrics.json").read_text())["metrics"]
    (report / "report.md").write_text(f"auc {metrics['auc']:.4f}\\n")
    return Gate(auc=metrics["auc"], ok=metrics["auc"] >= floor)


@ef.step(when=ef.result("business_check")["ok"] == True)
def record(report: ef.Input[ef.Markdown], table: ef.Output[ef.Dataset],
           db: str = "scores.db") -> dict:
    con = sqlite3.connect(table / db)
    con.execute("create table report (line text)")
    con.execute("insert into report values (?)", ((report / "report.md").read_text(),))
    con.commit()
    con.close()
    return {"rows": 1}


@ef.step
def summarize(table: ef.Input[ef.Dataset]) -> dict:
    con = sqlite3.connect(table / "scores.db")
    (rows,) = con.execute("select count(*) from report").fetchone()
    return {"rows": rows, "version": VERSION}


@ef.step(cache=False, after=("push",))
def notify(pushed: ef.Input[ef.Pushed], flag: str = "hook_down") -> dict:
    if Path(flag).exists():
        raise ConnectionError(f"the webhook is down ({flag} exists)")
    return {"pushed": json.loads((pushed / "push.json").read_text())["pushed"]}


VERSION = 1

pipeline = ef.Pipeline(
    name="tiny", source=ef.CsvSource("data.csv"), features=(ef.Numeric("x"), ef.Numeric("z")),
    label=ef.Label("y"), model=ef.LinearClassifier(feature_columns=("x", "z")),
    train=ef.TrainSpec(max_steps=20), push=ef.PushTarget("serving_models", "tiny"),
    steps=(business_check(floor=FLOOR), record, summarize, notify))
'''


def _write(folder: Path, floor: float, version: int = 1) -> None:
    text = PIPELINE.replace("FLOOR", repr(floor)).replace("VERSION = 1", f"VERSION = {version}")
    (folder / "tiny.py").write_text(text)


def _run(folder: Path, *args: str) -> subprocess.CompletedProcess:
    return estflow_run(folder, "tiny.py", *args)


def _record(folder: Path, out: str) -> dict:
    return run_record(folder, "tiny", out)


_statuses = statuses


@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("own_steps")
    rng = random.Random(7)
    rows = ["x,z,y"]
    for _ in range(200):
        x, z = rng.random(), rng.random()
        rows.append(f"{x:.4f},{z:.4f},{int(x + 0.3 * z > 0.6)}")
    (folder / "data.csv").write_text("\n".join(rows) + "\n")
    _write(folder, floor=0.5)
    first = _run(folder)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    (folder / "first.out").write_text(first.stdout)
    return folder


def test_user_steps_run_in_the_dag_and_record_their_results(workspace):
    out = (workspace / "first.out").read_text()
    record = _record(workspace, out)
    # (record's order is the order the steps started: push may start beside the user steps)
    assert sorted(record["steps"]) == sorted(["ingest", "transform", "train", "evaluate",
                                              "business_check", "record", "summarize", "push",
                                              "notify"])
    steps = record["steps"]
    for before, after in (("evaluate", "business_check"), ("business_check", "record"),
                          ("record", "summarize"), ("push", "notify")):
        assert steps[before]["finished"] <= steps[after]["started"], (before, after)
    assert set(_statuses(record).values()) == {"ran"}
    gate = record["steps"]["business_check"]["metrics"]
    auc = json.loads((workspace / "estflow_runs" / "tiny" / record["run"] / "evaluate" /
                      "evaluation" / "metrics.json").read_text())["metrics"]["auc"]
    assert gate == {"auc": auc, "ok": auc >= 0.5}
    assert record["steps"]["summarize"]["metrics"] == {"rows": 1, "version": 1}
    assert record["steps"]["notify"]["metrics"] == {"pushed": True}
    db = Path(record["steps"]["record"]["outputs"]["table"]["path"]) / "scores.db"
    rows = sqlite3.connect(db).execute("select line from report").fetchall()
    assert rows == [(f"auc {auc:.4f}\n",)]
    assert "| ==> step 5/9: business_check" in out and "result: auc=" in out


def test_an_identical_rerun_reuses_every_cacheable_step(workspace):
    again = _run(workspace)
    assert again.returncode == 0, again.stdout[-3000:]
    statuses = _statuses(_record(workspace, again.stdout))
    assert statuses == {"ingest": "reused", "transform": "reused", "train": "reused",
                        "evaluate": "reused", "business_check": "reused", "record": "reused",
                        "summarize": "reused", "push": "ran", "notify": "ran"}


def test_editing_one_function_reruns_it_and_its_dependents_only(workspace):
    tiny = workspace / "tiny.py"
    tiny.write_text(tiny.read_text().replace('create table report (line text)',
                                             'create table report (line text not null)'))
    edited = _run(workspace)
    assert edited.returncode == 0, edited.stdout[-3000:]
    statuses = _statuses(_record(workspace, edited.stdout))
    assert sorted(n for n, s in statuses.items() if s == "ran") == [
        "notify", "push", "record", "summarize"]
    # a constant a function uses is part of it: summarize alone reruns
    _write(workspace, floor=0.5, version=2)
    tiny.write_text(tiny.read_text().replace('create table report (line text)',
                                             'create table report (line text not null)'))
    bumped = _run(workspace)
    record = _record(workspace, bumped.stdout)
    assert sorted(n for n, s in _statuses(record).items() if s == "ran") == [
        "notify", "push", "summarize"]
    assert record["steps"]["summarize"]["metrics"]["version"] == 2


def test_a_condition_that_does_not_hold_skips_the_step_and_its_readers(workspace):
    _write(workspace, floor=2.0, version=2)
    tiny = workspace / "tiny.py"
    tiny.write_text(tiny.read_text().replace('create table report (line text)',
                                             'create table report (line text not null)'))
    gated = _run(workspace)
    assert gated.returncode == 0, gated.stdout[-3000:]
    record = _record(workspace, gated.stdout)
    statuses = _statuses(record)
    assert statuses["business_check"] == "ran" and statuses["push"] == "ran"
    assert statuses["record"] == statuses["summarize"] == "skipped"
    assert "does not hold (business_check.ok = False)" in record["steps"]["record"]["reason"]
    assert "step 'record' was skipped" in record["steps"]["summarize"]["reason"]
    assert "record skipped: its condition business_check.ok == True does not hold" in \
        gated.stdout


def test_a_step_failing_from_outside_is_resumed_alone(workspace):
    _write(workspace, floor=0.5, version=3)
    (workspace / "hook_down").write_text("")
    failed = _run(workspace)
    assert failed.returncode == 1
    assert "ConnectionError: the webhook is down" in failed.stdout + failed.stderr
    run_id = sorted(p.name for p in (workspace / "estflow_runs" / "tiny").iterdir()
                    if p.is_dir() and (p / "run.json").exists())[-1]
    record = json.loads((workspace / "estflow_runs" / "tiny" / run_id / "run.json").read_text())
    assert _statuses(record)["notify"] == "failed" and _statuses(record)["summarize"] == "ran"
    (workspace / "hook_down").unlink()
    resumed = _run(workspace, "--resume", run_id)
    assert resumed.returncode == 0, resumed.stdout[-3000:]
    record = json.loads((workspace / "estflow_runs" / "tiny" / run_id / "run.json").read_text())
    statuses = _statuses(record)
    assert statuses["notify"] == "ran"
    assert sorted(n for n, s in statuses.items() if s == "ran") == ["notify", "push"]
