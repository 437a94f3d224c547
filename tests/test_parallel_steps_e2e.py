"""Steps that do not wait for each other run at once (``estflow run``, default environment,
from the pipeline's directory), and a failing branch leaves the others to finish.

No timing is asserted: two steps prove they ran at once by a rendezvous (each writes its
marker, then waits for the other's; run one after another, the first would wait in vain and
fail). A step killed by SIGKILL mid-branch (what the out-of-memory killer does) fails its branch
only: the independent branch finishes, the step reading the killed one's output is not started
and is named, and ``--resume`` runs only what failed or never ran. Ctrl-C (SIGINT to the runner alone, as
``kill -INT`` sends it) with two steps in flight stops both, records them interrupted, and
``--resume`` runs them again.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.user_runs import ESTFLOW
from tests.user_runs import estflow_run
from tests.user_runs import run_record
from tests.user_runs import statuses
from tests.user_runs import tiny_csv

pytestmark = pytest.mark.slow


PIPELINE = '''
import os
import signal
import time
from pathlib import Path

import estflow.dsl as ef


def _meet(me: str, other: str) -> float:
    Path(me).write_text("here")
    deadline = time.monotonic() + 120
    while not Path(other).exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{other} never came: the steps did not run at once")
        time.sleep(0.05)
    while Path("hold").exists() and time.monotonic() < deadline:  # held: Ctrl-C comes
        time.sleep(0.05)
    return 1.0


@ef.step
def left(examples: ef.Input[ef.Examples], out: ef.Output[ef.Dataset]) -> dict:
    met = _meet("left.marker", "right.marker")
    (out / "rows.txt").write_text("left")
    return {"met": met}


@ef.step
def right(examples: ef.Input[ef.Examples]) -> dict:
    return {"met": _meet("right.marker", "left.marker"), "v": 1}


@ef.step
def fragile(out: ef.Input[ef.Dataset], copy: ef.Output[ef.Dataset]) -> dict:
    if Path("oom").exists():
        os.kill(os.getpid(), signal.SIGKILL)
    (copy / "rows.txt").write_text((out / "rows.txt").read_text())
    return {"copied": 1}


@ef.step
def after_fragile(copy: ef.Input[ef.Dataset]) -> dict:
    return {"read": len((copy / "rows.txt").read_text())}


@ef.step
def steady(examples: ef.Input[ef.Examples]) -> dict:
    return {"files": len(list(examples.iterdir()))}


pipeline = ef.Pipeline(
    name="branches", source=ef.CsvSource("data.csv"),
    features=(ef.Numeric("x"), ef.Numeric("z")), label=ef.Label("y"),
    model=ef.LinearClassifier(feature_columns=("x", "z")), train=ef.TrainSpec(max_steps=10),
    steps=(left, right, fragile, after_fragile, steady))
'''


def _run(folder: Path, *args: str) -> subprocess.CompletedProcess:
    return estflow_run(folder, "branches.py", *args)


def _record(folder: Path) -> dict:
    return run_record(folder, "branches")


_statuses = statuses


@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("branches")
    tiny_csv(folder)
    (folder / "branches.py").write_text(PIPELINE)
    return folder


def test_independent_steps_run_at_once_each_line_named(workspace):
    done = _run(workspace)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    record = _record(workspace)
    assert set(_statuses(record).values()) == {"ran"}
    assert record["steps"]["left"]["metrics"] == {"met": 1.0}
    assert record["steps"]["right"]["metrics"] == {"met": 1.0, "v": 1}
    lines = done.stdout.splitlines()
    assert any(line.startswith("left ") and "| ==> step" in line for line in lines)
    assert any(line.startswith("right ") and "result: met=1.0" in line for line in lines)
    # The closing summary lists the steps in plan order ("step K/N"), not in the order they
    # happened to finish (left and right finish together, either first)
    planned = {m.group(2): int(m.group(1)) for line in lines
               if (m := re.search(r"==> step (\d+)/\d+: (\w+)", line))}
    summary = next(line for line in lines if line.startswith("Pipeline finished in"))
    listed = re.findall(r"(\w+) (?:[\d.]+s|reused|skipped)", summary.split("(", 1)[1])
    assert listed == sorted(planned, key=planned.get), summary


def test_a_killed_branch_fails_alone_and_resume_runs_only_it(workspace):
    for marker in ("left.marker", "right.marker"):
        (workspace / marker).unlink(missing_ok=True)
    (workspace / "oom").write_text("")
    # a new version of fragile (a new key: no earlier output of it to reuse)
    pipeline = workspace / "branches.py"
    # and of steady, a branch of its own: it runs (and finishes) while fragile fails
    pipeline.write_text(pipeline.read_text().replace('{"copied": 1}', '{"copied": 2}').replace(
        '{"files": len(list(examples.iterdir()))}',
        '{"files": len(list(examples.iterdir())), "v": 2}'))
    failed = _run(workspace)
    assert failed.returncode == 1, failed.stdout[-3000:]
    record = _record(workspace)
    statuses = _statuses(record)
    assert statuses["fragile"] == "failed"
    assert statuses["after_fragile"] == "skipped"
    assert record["steps"]["after_fragile"]["reason"] == (
        "it waits for step 'fragile', which failed")
    assert statuses["steady"] == "ran"
    assert record["steps"]["steady"]["metrics"]["v"] == 2
    assert {n: s for n, s in statuses.items()
            if n not in ("fragile", "after_fragile", "steady")} == {
        n: "reused" for n in ("ingest", "left", "right", "transform", "train", "evaluate")}
    assert "SIGKILL" in failed.stdout + failed.stderr
    (workspace / "oom").unlink()
    resumed = _run(workspace, "--resume")
    assert resumed.returncode == 0, resumed.stdout[-3000:]
    statuses = _statuses(_record(workspace))
    assert sorted(n for n, s in statuses.items() if s == "ran") == ["after_fragile", "fragile"]
    assert _record(workspace)["steps"]["fragile"]["metrics"] == {"copied": 2}


def test_ctrl_c_with_two_steps_in_flight_stops_both_and_resume_continues(workspace):
    for marker in ("left.marker", "right.marker"):
        (workspace / marker).unlink(missing_ok=True)
    pipeline = workspace / "branches.py"
    pipeline.write_text(pipeline.read_text().replace('"v": 1}', '"v": 3}').replace(
        'return {"met": met}', 'return {"met": met, "v": 3}'))  # left and right: new keys
    (workspace / "hold").write_text("")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ESTFLOW_", "PYTEST"))}
    # SIGINT as at a terminal: a background job of a non-interactive shell (CI) inherits it
    # ignored, and a process ignoring SIGINT gets no Ctrl-C
    runner = subprocess.Popen([ESTFLOW, "run", "branches.py"], cwd=workspace, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + 300
        while not ((workspace / "left.marker").exists() and
                   (workspace / "right.marker").exists()):
            assert runner.poll() is None and time.monotonic() < deadline
            time.sleep(0.1)
        runner.send_signal(signal.SIGINT)
        out, _ = runner.communicate(timeout=120)
    finally:
        runner.kill()
    assert runner.returncode == 130, out[-3000:]
    record = _record(workspace)
    assert record["status"] == "interrupted"
    statuses = _statuses(record)
    assert statuses["left"] == statuses["right"] == "interrupted", statuses
    assert "interrupted" in out
    (workspace / "hold").unlink()
    resumed = _run(workspace, "--resume")
    assert resumed.returncode == 0, resumed.stdout[-3000:]
    record = _record(workspace)
    assert _statuses(record)["left"] == _statuses(record)["right"] == "ran"
    assert record["steps"]["right"]["metrics"] == {"met": 1.0, "v": 3}
