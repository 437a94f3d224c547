"""How ``estflow runs list|show|diff`` word a run a data check stopped, and a run that added
the data checks (issue 32, item 9)."""

from __future__ import annotations

import json
from pathlib import Path

from estflow.pipelines import cli
from estflow.pipelines.cli import run_diff
from estflow.pipelines.local import runs


def _write(home: Path, run: str, status: str, steps: dict, **extra) -> runs.RunRecord:
    data = {"run": run, "pipeline": "taxi", "status": status, "started": f"2026-12-01T{run}",
            "finished": "x", "seconds": 1.0, "estflow": "0.1.0", "attempts": [],
            "steps": steps, "metrics": {}, "push": None, **extra}
    path = home / "taxi" / run / "run.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(data))
    return runs.RunRecord(path, data)


def _step(status: str, exit_code: int | None, key: str = "k") -> dict:
    return {"status": status, "exit_code": exit_code, "key": key, "log": "log.txt"}


def test_a_run_a_data_check_stopped_is_not_listed_as_failed(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ESTFLOW_HOME", str(tmp_path))
    _write(tmp_path, "01", "failed", {"ingest": _step("ran", 0),
                                      "validate": _step("failed", 4)})
    _write(tmp_path, "02", "failed", {"ingest": _step("failed", 4)})
    _write(tmp_path, "03", "failed", {"ingest": _step("ran", 0), "train": _step("failed", 1)})
    assert cli.main(["runs", "list"]) == 0
    rows = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()[1:]}
    assert "stopped: data anomaly" in rows["01"] and "failed" not in rows["01"]
    assert "stopped: data anomaly" in rows["02"]
    assert "  failed  " in rows["03"]

    assert cli.main(["runs", "show", "01"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("run 01 of pipeline 'taxi': stopped: data anomaly,")
    assert "validate stopped the run: data anomaly (exit code 4)" in out

    assert cli.main(["runs", "list", "--json"]) == 0
    listed = {r["run"]: r for r in json.loads(capsys.readouterr().out)}
    assert listed["01"]["status"] == "failed" and listed["01"]["stopped"] == "data anomaly"
    assert "stopped" not in listed["03"]


def test_adding_checks_says_the_validate_step_was_added_not_that_code_changed(tmp_path):
    code = {"ingest": "i", "train": "t"}
    a = _write(tmp_path, "01", "succeeded",
               {"ingest": _step("ran", 0, "i1"), "train": _step("ran", 0, "t1")},
               estflow_code={"code": code})
    b = _write(tmp_path, "02", "succeeded",
               {"ingest": _step("reused", 0, "i1"), "validate": _step("ran", 0, "v1"),
                "train": _step("reused", 0, "t1")},
               estflow_code={"code": {**code, "validate": "v"}})
    assert run_diff.estflow_code_line(a, b) == "estflow code: same"
    spec = runs.spec_changes({"checks": None}, {"checks": {"min_examples": 10}})
    lines = run_diff.step_lines(a, b, {}, {}, spec)
    assert "  validate: step added: the spec declares checks; - -> ran" in lines
    assert run_diff.step_lines(b, a, {}, {}, runs.spec_changes(
        {"checks": {"min_examples": 10}}, {"checks": None}))[1] == \
        "  validate: step removed: the spec no longer declares checks; ran -> -"


def test_a_step_the_other_run_never_reached_is_said_so(tmp_path):
    a = _write(tmp_path, "01", "failed", {"ingest": _step("ran", 0, "i1"),
                                         "validate": _step("failed", 4, "v1")})
    b = _write(tmp_path, "02", "succeeded", {"ingest": _step("reused", 0, "i1"),
                                            "validate": _step("ran", 0, "v1"),
                                            "train": _step("ran", 0, "t1")})
    lines = run_diff.step_lines(a, b, {}, {}, [])
    assert lines[-1] == "  train: not run in 01; - -> ran"


def test_a_changed_step_s_estflow_code_is_still_named(tmp_path):
    a = _write(tmp_path, "01", "succeeded", {}, estflow_code={"code": {"train": "t1"}})
    b = _write(tmp_path, "02", "succeeded", {}, estflow_code={"code": {"train": "t2"}},
               estflow="0.2.0")
    assert run_diff.estflow_code_line(a, b) == \
        "estflow code: changed for train (version 0.1.0 -> 0.2.0)"
