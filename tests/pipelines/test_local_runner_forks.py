"""The run's fork server (:mod:`estflow.pipelines.local.forks`,
:mod:`estflow.components._runtime.fork_server`): the steps after the first run in processes
forked from one that imported their modules once, each as ``python -m <module> ARGS`` runs
(its own arguments, environment, directory, log and exit status, a crash included), and no
process is left behind. The steps here are fakes (no TensorFlow): what is checked is the
process, not the libraries; the taxi runs of the e2e tests fork TensorFlow's steps for real."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from estflow.pipelines.examples import taxi
from estflow.pipelines.local import runner as local_runner
from estflow.pipelines.local.forks import FORK_SERVER_MODULE
from estflow.pipelines.local.prestart import Prestarter
from estflow.pipelines.local.processes import PRESTART_MODULE
from estflow.pipelines.local.processes import ProcessExecutor
from estflow.pipelines.local.processes import StepRun
from estflow.pipelines.local.step_env import FORK_ENV
from tests.pipelines.test_local_runner_prestart import FAKE
from tests.pipelines.test_local_runner_prestart import _fake
from tests.pipelines.test_local_runner_prestart import _none_left
from tests.pipelines.test_local_runner_prestart import _run as _prestart_run
from tests.pipelines.test_local_runner_prestart import _started

REPO = Path(__file__).resolve().parents[2]


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    cmdlines = tmp_path / "cmdlines"
    cmdlines.mkdir(exist_ok=True)
    return {"PYTHONPATH": os.pathsep.join([str(REPO), str(tmp_path)]),
            "FAKE_CMDLINE_DIR": str(cmdlines), "PRESTART_TEST_MARKER": str(tmp_path),
            FORK_ENV: "1", **extra}


def _run(tmp_path: Path, *steps, **env: str):
    """The prestart tests' run, with the fork server on and ``tmp_path`` importable."""
    return _prestart_run(tmp_path, *steps, **{**_env(tmp_path), **env})


def test_steps_after_the_first_are_forked_from_one_server_and_run_as_python_m_would(tmp_path):
    result, lines = _run(tmp_path, _fake("make", outputs=["examples"], sleep="0.5"),
                         _fake("use", inputs=[("examples", "make")], outputs=["model"]),
                         _fake("last", inputs=[("model", "use")], outputs=["pushed"]))

    first = _started(tmp_path, "make")
    assert first["cmdline"][1:3] == ["-m", PRESTART_MODULE]  # prestarted: nothing to fork yet
    forked = [_started(tmp_path, name) for name in ("use", "last")]
    for started in forked:
        assert started["cmdline"][1:3] == ["-m", FORK_SERVER_MODULE], started
        assert started["main"] == "__main__"  # the step's module ran as __main__
        assert started["argv"][0].endswith("fake_prestart_step.py")
        assert started["ppid"] != os.getpid()  # a child of the server, not of the runner
    assert forked[0]["ppid"] == forked[1]["ppid"]  # one server for the run
    assert forked[0]["pid"] != forked[1]["pid"]
    used = result.read("model", "use.json")
    assert used["args"]["--examples"] == str(tmp_path / "run" / "make" / "examples")
    assert used["read"] == {"examples": ["make.json"]}  # make had finished before use ran
    assert "    [use one process] started" in lines and "    [last one process] started" in lines
    log = (tmp_path / "run" / "use" / "log.txt").read_text()
    assert log.startswith(f"[estflow] step process {forked[0]['pid']} forked from the run's "
                          f"fork server {forked[0]['ppid']}")
    assert "chatter that only the log keeps" in log
    assert _none_left(tmp_path)


# What a step's process may do at its end, each as a module of its own (each registers an
# atexit handler first: a plain `python -m` runs it on a return, sys.exit, an exception and
# Ctrl-C, as a step's temporary downloads rely on; not on os._exit, abort or SIGKILL).
_AT_EXIT = "import atexit\natexit.register(lambda: print('atexit ran', flush=True))\n"
_ENDINGS = {
    "returns": "pass\n",
    "exits_3": "import sys\nsys.exit(3)\n",
    "exits_now_5": "import os, sys\nprint('left at once', flush=True)\nos._exit(5)\n",
    "raises": "raise RuntimeError('the step broke')\n",
    "aborts": "import os\nos.abort()\n",
    "killed": "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n",
    "interrupted": "raise KeyboardInterrupt\n",
}


def _ending_status(tmp_path: Path, ending: str, fork: str,
                   prestart: str | None = None) -> tuple[int, str]:
    tmp_path.mkdir()
    (tmp_path / f"ending_{ending}.py").write_text(_AT_EXIT + _ENDINGS[ending])
    try:
        _run(tmp_path, _fake("make", outputs=["examples"]),
             _fake("end", module=f"ending_{ending}", inputs=[("examples", "make")]),
             **{FORK_ENV: fork}, **({} if prestart is None else {"ESTFLOW_PRESTART": prestart}))
    except local_runner.StepFailed as failed:
        status = failed.returncode
    else:
        status = 0
    log = (tmp_path / "run" / "end" / "log.txt").read_text()
    return status, log


@pytest.mark.parametrize("ending", sorted(_ENDINGS))
def test_a_forked_step_ends_with_the_status_a_plain_start_has(tmp_path, ending):
    """Differential: the same step module run plainly (``python -m``: ESTFLOW_FORK=0,
    ESTFLOW_PRESTART=0), in a prestarted process (ESTFLOW_FORK=0) and forked."""
    plain, plain_log = _ending_status(tmp_path / "plain", ending, fork="0", prestart="0")
    prestarted, prestarted_log = _ending_status(tmp_path / "prestarted", ending, fork="0")
    forked, forked_log = _ending_status(tmp_path / "forked", ending, fork="1")

    assert forked_log.startswith("[estflow] step process")  # it did run forked
    assert not plain_log.startswith("[estflow] step process")
    assert forked == prestarted == plain, (ending, plain_log, prestarted_log, forked_log)
    for line in ("left at once", "RuntimeError: the step broke", "atexit ran"):
        assert (line in plain_log) == (line in prestarted_log) == (line in forked_log), (
            line, plain_log, prestarted_log, forked_log)
    assert ("atexit ran" in plain_log) == (ending not in ("exits_now_5", "aborts", "killed"))
    assert _none_left(tmp_path / "forked") and _none_left(tmp_path / "prestarted")


_RECORDER = """\
import json, os, sys
import numpy
out = sys.argv[sys.argv.index("--out") + 1]
with open(out, "w") as f:
    json.dump({"env": {k: os.environ.get(k) for k in ("TF_NUM_INTRAOP_THREADS", "STEP_MARK")},
               "cwd": os.getcwd(), "argv": sys.argv, "ppid": os.getppid(),
               "random": numpy.random.random(), "stdin": sys.stdin.read()}, f)
"""


def test_a_forked_step_gets_its_own_environment_directory_and_random_state(tmp_path,
                                                                           monkeypatch):
    (tmp_path / "recorder_step.py").write_text(_RECORDER)
    monkeypatch.chdir(tmp_path)
    env = _env(tmp_path)
    threads = {"TF_NUM_INTRAOP_THREADS": "1", "TF_NUM_INTEROP_THREADS": "1"}
    steps = [("first", "recorder_step"), ("second", "recorder_step"), ("third", "recorder_step")]
    seen = {}
    with Prestarter(steps, env, step_env={"third": threads}, fork=True) as prestarter:
        for name, module in steps:
            out = tmp_path / f"{name}.json"
            step_env = {**env, "STEP_MARK": "ignored"} if name == "first" else env
            step_env = {**step_env, **threads} if name == "third" else step_env
            command = (sys.executable, "-m", module, "--out", str(out))
            (tmp_path / name).mkdir()
            ProcessExecutor(prestarter).execute(
                StepRun(name, command, tmp_path / name, print, step_env))
            seen[name] = json.loads(out.read_text())
            seen[name]["log"] = (tmp_path / name / "log.txt").read_text()

    assert seen["first"]["env"]["STEP_MARK"] == "ignored"  # not fitting: a plain start
    assert not seen["first"]["log"].startswith("[estflow] step process")
    for name in ("second", "third"):
        assert seen[name]["log"].startswith("[estflow] step process"), seen[name]["log"]
        assert seen[name]["cwd"] == str(tmp_path)
        assert seen[name]["argv"][1:] == ["--out", str(tmp_path / f"{name}.json")]
        assert seen[name]["stdin"] == ""  # nothing of the server's input
    assert seen["second"]["env"]["TF_NUM_INTRAOP_THREADS"] is None
    assert seen["third"]["env"]["TF_NUM_INTRAOP_THREADS"] == "1"  # its share of the cores
    assert seen["second"]["ppid"] == seen["third"]["ppid"]
    assert seen["second"]["random"] != seen["third"]["random"]  # NumPy reseeded per fork
    assert _none_left(tmp_path)


def test_a_step_whose_environment_differs_beyond_its_threads_starts_plainly(tmp_path):
    spec = tmp_path / "spec.json"
    spec.write_text(taxi.pipeline.to_json())
    env = _env(tmp_path)
    with Prestarter([("first", FAKE), ("other", FAKE)], env, fork=True) as prestarter:
        command = (sys.executable, "-m", FAKE, "--spec", str(spec), "--name", "other")
        ProcessExecutor(prestarter).execute(
            StepRun("other", command, tmp_path, print, {**env, "TF_CONFIG": "{}"}))

    assert _started(tmp_path, "other")["cmdline"][1:3] == ["-m", FAKE]
    assert _none_left(tmp_path)


def test_a_server_whose_imports_started_a_thread_forks_nothing(tmp_path):
    (tmp_path / "threaded_dep.py").write_text(
        "import threading, time\n"
        "threading.Thread(target=time.sleep, args=(60,), daemon=True).start()\n")
    (tmp_path / "threaded_step.py").write_text(
        "import threaded_dep\nimport runpy, sys\n"
        "runpy.run_module('tests.pipelines.fake_prestart_step', run_name='__main__')\n")
    _run(tmp_path, _fake("make", outputs=["examples"]),
         _fake("use", module="threaded_step", inputs=[("examples", "make")]))

    started = _started(tmp_path, "use")
    assert FORK_SERVER_MODULE not in started["cmdline"]
    assert not (tmp_path / "run" / "use" / "log.txt").read_text().startswith(
        "[estflow] step process")
    assert _none_left(tmp_path)


def test_the_server_and_its_waiting_children_leave_when_the_runner_goes(tmp_path):
    """The runner's death closes the server's stdin and the children's connections (here the
    test closes them, as the kernel would)."""
    import socket

    path = tmp_path / "forks.sock"
    read, write = os.pipe()
    server = subprocess.Popen(
        [sys.executable, "-m", FORK_SERVER_MODULE, "--ready-fd", str(write), str(path), FAKE],
        stdin=subprocess.PIPE, env={**os.environ, **_env(tmp_path)}, pass_fds=(write,))
    os.close(write)
    assert os.read(read, 1) == b"" and path.exists()  # ready: it listens
    os.close(read)
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(str(path))
    conn.sendall(json.dumps({"module": FAKE}).encode() + b"\n")
    child = json.loads(conn.makefile().readline())["pid"]
    assert Path(f"/proc/{child}").exists()

    server.stdin.close()
    conn.close()

    assert server.wait(timeout=30) == 0
    deadline = time.monotonic() + 30
    while Path(f"/proc/{child}").exists() and _state(child) != "Z":
        assert time.monotonic() < deadline, "the forked child was left waiting"
        time.sleep(0.05)
    assert not path.exists()
    assert not list((tmp_path / "cmdlines").iterdir())  # it ran nothing


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"


def test_sigkill_of_the_runner_ends_the_server(tmp_path):
    """The runner killed mid-step (SIGKILL: no cleanup of its own): the server leaves, and so
    do the children it forked for steps not started; the step that was running stays what a
    plain start would be (an orphan until it ends; stopped here by the test)."""
    pid_file, script = tmp_path / "use.pid", tmp_path / "runner.py"
    script.write_text(
        "import sys\n"
        "from estflow.pipelines.examples import taxi\n"
        "from estflow.pipelines.local import runner\n"
        "from estflow.pipelines.plan import Plan\n"
        "from tests.pipelines.test_local_runner_prestart import _fake\n"
        "steps = (_fake('make', outputs=['examples']),\n"
        f"         _fake('use', inputs=[('examples', 'make')], outputs=['model'], sleep='60',"
        f" pid_file={str(pid_file)!r}),\n"
        "         _fake('last', inputs=[('model', 'use')], outputs=['pushed']))\n"
        f"runner.run_plan(Plan(taxi.pipeline, steps), __import__('pathlib').Path({str(tmp_path / 'run')!r}),"
        " echo=print)\n")
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("PYTEST")},
           **_env(tmp_path)}
    runner_proc = subprocess.Popen([sys.executable, str(script)], cwd=REPO, env=env,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not (pid_file.is_file() and pid_file.read_text()):
            assert time.monotonic() < deadline and runner_proc.poll() is None
            time.sleep(0.05)
        step = int(pid_file.read_text())
        assert FORK_SERVER_MODULE in Path(f"/proc/{step}/cmdline").read_text()  # forked

        runner_proc.kill()
        runner_proc.wait()

        deadline = time.monotonic() + 30
        while set(_none_left_pids(tmp_path)) - {step}:
            assert time.monotonic() < deadline, "the fork server outlived its runner"
            time.sleep(0.05)
    finally:
        runner_proc.kill()
        for pid in _none_left_pids(tmp_path):
            os.kill(pid, signal.SIGKILL)


def _none_left_pids(marker: Path) -> list[int]:
    from tests.pipelines.test_local_runner_prestart import _prestarted_left
    return _prestarted_left(marker)
