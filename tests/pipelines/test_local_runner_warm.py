"""Warm processes (``ESTFLOW_WARM``, :func:`estflow.pipelines.local.warm.spawn_warm`,
``prestart.py --listen``): a run leaves processes whose imports are done; the next run with
the same Python, code and import environment takes them, each for one step, with that run's
arguments, output, environment and directory; any other run starts its own; one not taken
leaves by itself; Ctrl-C reaches a step running in one. Real processes and Unix sockets."""

from __future__ import annotations

import io
import json
import signal
import time
from pathlib import Path

import pytest

from estflow.pipelines.examples import taxi
from estflow.pipelines.local import processes as _processes
from estflow.pipelines.local import runner as local_runner
from estflow.pipelines.local import stopping as _stopping
from estflow.pipelines.local import warm as warm_module
from estflow.pipelines.plan import Plan
from tests.pipelines.test_local_runner_prestart import FAKE
from tests.pipelines.test_local_runner_prestart import _env
from tests.pipelines.test_local_runner_prestart import _fake
from tests.pipelines.test_local_runner_prestart import _none_left
from tests.pipelines.test_local_runner_prestart import _started


@pytest.fixture(autouse=True)
def _no_warm_left(tmp_path):
    yield
    warm_module.stop_warm()
    assert _none_left(tmp_path, timeout=20), "a warm process was left running"


def _steps(**make_options: str):
    return (_fake("make", outputs=["examples"], **make_options),
            _fake("use", inputs=[("examples", "make")], outputs=["model"]))


def _run(tmp_path: Path, name: str, steps, **env: str):
    lines: list[str] = []
    result = local_runner.run_plan(Plan(taxi.pipeline, steps), tmp_path / name,
                                   echo=lines.append, env=_env(tmp_path, **env))
    return result, lines


def _socket(tmp_path: Path, **env: str) -> Path:
    return warm_module.warm_socket(FAKE, _processes.full_env(_env(tmp_path, **env)))


def _wait_for(predicate, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def _warm(started: dict) -> bool:
    return "--listen" in started["cmdline"]


def test_the_next_run_takes_the_warm_process_a_run_left(tmp_path):
    first, _ = _run(tmp_path, "one", _steps(), ESTFLOW_WARM="60")
    assert not _warm(_started(tmp_path, "make"))
    _wait_for(_socket(tmp_path, ESTFLOW_WARM="60").exists)  # one process for the module

    second, lines = _run(tmp_path, "two", _steps(), ESTFLOW_WARM="60")
    make, use = _started(tmp_path, "make"), _started(tmp_path, "use")
    assert _warm(make) and not _warm(use)  # the first step took it; it served one step
    assert make["main"] == "__main__"
    log = (tmp_path / "two" / "make" / "log.txt").read_text()
    assert log.startswith(f"[estflow] warm process {make['pid']}: imports done")
    assert "chatter that only the log keeps" in log
    assert "    [make one process] started" in lines  # its progress, echoed as any step's
    used = second.read("model", "use.json")
    assert used["args"]["--examples"] == str(tmp_path / "two" / "make" / "examples")
    assert used["read"] == first.read("model", "use.json")["read"]


def test_another_import_environment_or_code_starts_its_own(tmp_path, monkeypatch):
    _run(tmp_path, "one", _steps(), ESTFLOW_WARM="60")
    _wait_for(_socket(tmp_path, ESTFLOW_WARM="60").exists)

    _run(tmp_path, "two", _steps(), ESTFLOW_WARM="60", TF_ENABLE_ONEDNN_OPTS="0")
    assert not _warm(_started(tmp_path, "make"))
    with monkeypatch.context() as patched:
        patched.setattr(warm_module, "_code_digest", lambda: "an edited estflow")
        _run(tmp_path, "three", _steps(), ESTFLOW_WARM="60")
    assert not _warm(_started(tmp_path, "make"))
    assert _socket(tmp_path, ESTFLOW_WARM="60").exists()  # still waiting for its own


def test_a_failing_step_in_a_warm_process_fails_alike(tmp_path):
    _run(tmp_path, "one", _steps(), ESTFLOW_WARM="60")
    _wait_for(_socket(tmp_path, ESTFLOW_WARM="60").exists)
    with pytest.raises(local_runner.StepFailed) as info:
        _run(tmp_path, "two", _steps(fail="disk full"), ESTFLOW_WARM="60")
    assert info.value.returncode == 3
    assert "something broke: disk full" in str(info.value)
    assert _warm(_started(tmp_path, "make"))


def test_a_warm_process_not_taken_leaves_by_itself(tmp_path):
    _run(tmp_path, "one", _steps(), ESTFLOW_WARM="1")
    path = _socket(tmp_path, ESTFLOW_WARM="1")
    _wait_for(path.exists)
    _wait_for(lambda: not path.exists(), timeout=30)
    assert _none_left(tmp_path, timeout=20)


def test_ctrl_c_reaches_a_step_in_a_warm_process(tmp_path, monkeypatch):
    """Its process is in a session of its own (no terminal Ctrl-C): stopping the step sends
    it one at once, and the step's KeyboardInterrupt ends it."""
    _run(tmp_path, "one", _steps(), ESTFLOW_WARM="60")
    env = _processes.full_env(_env(tmp_path, ESTFLOW_WARM="60"))
    _wait_for(_socket(tmp_path, ESTFLOW_WARM="60").exists)
    proc = warm_module.claim_warm(FAKE, env)
    assert proc is not None and warm_module.claim_warm(FAKE, env) is None  # one step each
    spec = tmp_path / "spec.json"
    spec.write_text(taxi.pipeline.to_json())
    proc.stdin.write(json.dumps(["--spec", str(spec), "--name", "slow", "--sleep", "60"]) +
                     "\n")
    assert "[slow one process] started" in proc.stdout.readline() + proc.stdout.readline()
    assert "chatter that only the log keeps" in proc.stdout.readline()  # now it sleeps
    log = io.StringIO()
    # the first phase must send it (a plain step's first phase only waits): were it not, the
    # step would get SIGINT after 120 s with no grace, then SIGKILL (-9)
    monkeypatch.setattr(_stopping, "STOP_GRACE_S", (120.0, 0.0, 0.0))
    with proc:
        _stopping.stop_process(proc, log)
    # KeyboardInterrupt, not a kill: killed by SIGINT, as `python -m` leaves after one
    assert proc.returncode == -signal.SIGINT, log.getvalue()
    assert "interrupted (Ctrl-C)" in log.getvalue()


def test_a_bad_warm_value_is_refused_by_name(tmp_path):
    with pytest.raises(ValueError, match="ESTFLOW_WARM: expected a number of seconds.*'soon'"):
        _run(tmp_path, "one", _steps(), ESTFLOW_WARM="soon")


def test_unset_warm_means_none_unless_the_run_is_at_a_terminal(monkeypatch):
    monkeypatch.delenv("ESTFLOW_WARM", raising=False)
    assert warm_module.warm_seconds({}) == 0  # pytest's streams: no terminal
    for stream in ("stdin", "stdout"):
        monkeypatch.setattr(getattr(warm_module.sys, stream), "isatty", lambda: True)
    assert warm_module.warm_seconds({}) == warm_module.WARM_AT_A_TERMINAL
    assert warm_module.warm_seconds({"ESTFLOW_WARM": "0"}) == 0


def test_a_run_says_which_warm_processes_it_leaves(tmp_path):
    _, lines = _run(tmp_path, "one", _steps(), ESTFLOW_WARM="60")
    assert "Warm processes for the next run: make (their imports done; they wait up to 60s; " \
           "ESTFLOW_WARM=0 leaves none)" in lines
