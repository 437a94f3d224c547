"""Prestarted step processes (:class:`estflow.pipelines.local.prestart.Prestarter`,
:mod:`estflow.components._runtime.prestart`): a step runs in a process started ahead of its
turn exactly as ``python -m <module> ARGS`` runs, falls back to a plain start when that process
cannot be used, and a prestarted process never used is killed (no orphans: after a success, a
failure, a step reused from the cache, Ctrl-C, or the runner dying). The fork server is off in
these runs (``ESTFLOW_FORK=0``: test_local_runner_forks.py has it), except where a whole run
is checked for processes left behind: there it is on, as by default."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from estflow.components._runtime import prestart
from estflow.pipelines.examples import taxi
from estflow.pipelines.local import runner as local_runner
from estflow.pipelines.local.forks import FORK_SERVER_MODULE
from estflow.pipelines.local.prestart import Prestarter
from estflow.pipelines.local.processes import PRESTART_MODULE
from estflow.pipelines.local.processes import ProcessExecutor
from estflow.pipelines.local.processes import StepRun
from estflow.pipelines.local.step_env import FORK_ENV
from estflow.pipelines.plan import Plan
from estflow.pipelines.plan import PlannedStep
from tests.pipelines import fake_runs
from tests.pipelines.test_cli_run import ctrl_c_works

REPO = Path(__file__).resolve().parents[2]
FAKE = "tests.pipelines.fake_prestart_step"


def _fake(name: str, inputs=(), outputs=(), module: str = FAKE, **options: str) -> PlannedStep:
    opts = {"name": name, "reads": ",".join(a for a, _ in inputs),
            "writes": ",".join(outputs), **options}
    return PlannedStep(name=name, module=module, inputs=tuple(inputs), outputs=tuple(outputs),
                       options=tuple((k.replace("_", "-"), v) for k, v in opts.items()),
                       description=f"fake {name}")


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    cmdlines = tmp_path / "cmdlines"
    cmdlines.mkdir(exist_ok=True)
    return {"PYTHONPATH": str(REPO), "FAKE_CMDLINE_DIR": str(cmdlines),
            "PRESTART_TEST_MARKER": str(tmp_path), FORK_ENV: "0", **extra}


def _started(tmp_path: Path, name: str) -> dict:
    return json.loads((tmp_path / "cmdlines" / f"{name}.json").read_text())


def _prestarted_left(marker: Path) -> list[int]:
    """Processes of the prestart module or the fork server (and the steps it forked) whose
    environment carries ``marker``."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().split(b"\0")
            environ = (proc / "environ").read_bytes().split(b"\0")
            state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if ({PRESTART_MODULE.encode(), FORK_SERVER_MODULE.encode()} & set(cmdline)
                and state != "Z"
                and f"PRESTART_TEST_MARKER={marker}".encode() in environ):
            found.append(int(proc.name))
    return found


def _none_left(marker: Path, timeout: float = 10) -> bool:
    deadline = time.monotonic() + timeout
    while _prestarted_left(marker):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _run(tmp_path: Path, *steps: PlannedStep, **env: str):
    lines: list[str] = []
    result = local_runner.run_plan(Plan(taxi.pipeline, steps), tmp_path / "run",
                                   echo=lines.append, env=_env(tmp_path, **env))
    return result, lines


def test_each_step_runs_in_its_prestarted_process_as_python_m_would(tmp_path):
    result, lines = _run(tmp_path, _fake("make", outputs=["examples"], sleep="0.5"),
                         _fake("use", inputs=[("examples", "make")], outputs=["model"]))

    run = tmp_path / "run"
    for name in ("make", "use"):
        started = _started(tmp_path, name)
        assert started["cmdline"][1:3] == ["-m", PRESTART_MODULE], started
        assert started["cmdline"][-2] == FAKE
        assert started["main"] == "__main__"  # the step's module ran as __main__
        assert started["argv"][0].endswith("fake_prestart_step.py")
    used = result.read("model", "use.json")
    assert used["args"]["--examples"] == str(run / "make" / "examples")
    assert used["read"] == {"examples": ["make.json"]}  # make had finished before use ran
    assert "    [make one process] started" in lines and "    [use one process] started" in lines
    assert "chatter that only the log keeps" in (run / "use" / "log.txt").read_text()
    assert _none_left(tmp_path)


def test_with_prestart_off_every_step_starts_plainly(tmp_path):
    _run(tmp_path, _fake("make", outputs=["examples"]),
         _fake("use", inputs=[("examples", "make")], outputs=["model"]),
         ESTFLOW_PRESTART="0")

    for name in ("make", "use"):
        assert _started(tmp_path, name)["cmdline"][1:3] == ["-m", FAKE]


def test_a_failing_prestarted_step_fails_alike_and_the_next_one_is_killed(tmp_path):
    with pytest.raises(local_runner.StepFailed) as info:
        _run(tmp_path, _fake("make", outputs=["examples"], fail="disk full"),
             _fake("use", inputs=[("examples", "make")], outputs=["model"]),
             _fake("last", inputs=[("model", "use")], outputs=["pushed"]))

    assert info.value.returncode == 3
    assert "something broke: disk full" in str(info.value)
    assert _started(tmp_path, "make")["cmdline"][1:3] == ["-m", PRESTART_MODULE]
    assert not (tmp_path / "cmdlines" / "use.json").exists()  # prestarted, never run
    assert _none_left(tmp_path), "a prestarted process was left running"


def test_a_step_whose_imports_fail_starts_plainly_and_its_log_says_why(tmp_path):
    broken = tmp_path / "broken_step.py"
    broken.write_text("import no_such_module_for_estflow\n")
    with pytest.raises(local_runner.StepFailed) as info:
        local_runner.run_plan(
            Plan(taxi.pipeline, (_fake("make", module="broken_step", outputs=["examples"]),)),
            tmp_path / "run", echo=lambda _: None,
            env={**_env(tmp_path), "PYTHONPATH": f"{REPO}{os.pathsep}{tmp_path}"})

    assert info.value.returncode == 1
    log = (tmp_path / "run" / "make" / "log.txt").read_text()
    assert "ModuleNotFoundError: No module named 'no_such_module_for_estflow'" in log
    assert _none_left(tmp_path)


def _prestarter(tmp_path: Path, *names: str) -> Prestarter:
    return Prestarter([(name, FAKE) for name in names], _env(tmp_path))


def _wait_started(prestarter: Prestarter, count: int, timeout: float = 30) -> list:
    deadline = time.monotonic() + timeout
    while True:
        procs = [i.proc for i in prestarter._items if i.proc is not None]
        if len(procs) >= count:
            return procs
        assert time.monotonic() < deadline, "the prestarted processes never started"
        time.sleep(0.05)


def test_a_prestarted_process_is_not_used_for_another_environment(tmp_path):
    spec = tmp_path / "spec.json"
    spec.write_text(taxi.pipeline.to_json())
    with _prestarter(tmp_path, "solo") as prestarter:
        (proc,) = _wait_started(prestarter, 1)
        command = (sys.executable, "-m", FAKE, "--spec", str(spec), "--name", "solo")
        env = {**_env(tmp_path), "TF_CONFIG": "{}"}

        ProcessExecutor(prestarter).execute(StepRun("solo", command, tmp_path, print, env))

        assert proc.poll() is not None  # killed, not used
        assert _started(tmp_path, "solo")["cmdline"][1:3] == ["-m", FAKE]  # a plain start


def test_a_step_with_its_own_share_of_the_cores_gets_a_process_started_with_it(tmp_path):
    """A step that runs beside others is prestarted with its thread settings and takes that
    process; a step without them would not fit it."""
    spec = tmp_path / "spec.json"
    spec.write_text(taxi.pipeline.to_json())
    threads = {"TF_NUM_INTRAOP_THREADS": "1", "TF_NUM_INTEROP_THREADS": "1"}
    with Prestarter([("shared", FAKE)], _env(tmp_path),
                    step_env={"shared": threads}) as prestarter:
        (proc,) = _wait_started(prestarter, 1)
        command = (sys.executable, "-m", FAKE, "--spec", str(spec), "--name", "shared")

        ProcessExecutor(prestarter).execute(
            StepRun("shared", command, tmp_path, print, {**_env(tmp_path), **threads}))

        assert proc.returncode == 0  # this process ran the step
        assert _started(tmp_path, "shared")["cmdline"][1:3] == ["-m", PRESTART_MODULE]


def test_a_prestarted_process_never_used_is_killed_on_close(tmp_path):
    prestarter = _prestarter(tmp_path, "a", "b")
    procs = _wait_started(prestarter, 2)
    assert all(p.poll() is None for p in procs)

    prestarter.close()

    assert all(p.poll() is not None for p in procs)
    assert _none_left(tmp_path)


def test_a_prestarted_process_exits_running_nothing_when_its_runner_goes(tmp_path):
    proc = subprocess.Popen([sys.executable, "-m", PRESTART_MODULE, FAKE],
                            stdin=subprocess.PIPE, env={**os.environ, **_env(tmp_path)})
    proc.stdin.close()  # what the runner's death does to the pipe

    assert proc.wait(timeout=60) == 0
    assert not list((tmp_path / "cmdlines").iterdir())


def test_a_prestarted_process_whose_imports_failed_runs_the_step_as_a_plain_start(tmp_path):
    proc = subprocess.Popen([sys.executable, "-m", PRESTART_MODULE, "no_such_module_x"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    out, _ = proc.communicate(json.dumps(["--flag"]) + "\n", timeout=60)

    plain = subprocess.run([sys.executable, "-m", "no_such_module_x", "--flag"],
                           capture_output=True, text=True)
    assert proc.returncode == plain.returncode == 1
    assert out == plain.stderr == f"{sys.executable}: No module named no_such_module_x\n"


def test_preimport_runs_only_the_top_level_imports(tmp_path, monkeypatch):
    (tmp_path / "pre_mod.py").write_text(
        "from __future__ import annotations\nimport json\nimport pre_dep\n"
        "raise SystemExit('the module itself must not run')\n")
    (tmp_path / "pre_dep.py").write_text("LOADED = True\n")
    monkeypatch.syspath_prepend(str(tmp_path))

    prestart.preimport("pre_mod")

    assert sys.modules["pre_dep"].LOADED and "pre_mod" not in sys.modules


def test_steps_reused_from_the_cache_leave_no_prestarted_process(tmp_path, monkeypatch,
                                                                 capsys):
    monkeypatch.setenv("ESTFLOW_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    monkeypatch.setenv("PRESTART_TEST_MARKER", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    from estflow.pipelines import cli

    fake_runs.use_fake_steps(monkeypatch, {})
    target = tmp_path / "p.py"
    data = Path(taxi.__file__).parent / "data" / "chicago_taxi" / "data.csv"
    target.write_text("import dataclasses\nimport estflow.dsl as ef\n"
                      "from estflow.pipelines.examples import taxi\n"
                      "pipeline = dataclasses.replace(taxi.pipeline, "
                      f"source=ef.CsvSource({str(data)!r}))\n")
    assert cli.main(["run", str(target)]) == 0
    assert cli.main(["run", str(target)]) == 0  # every step but push reused
    out = capsys.readouterr().out
    assert "<== train reused" in out
    assert _none_left(tmp_path)


def test_ctrl_c_leaves_no_prestarted_process(tmp_path):
    pid_file, workdir = tmp_path / "train.pid", tmp_path / "run"
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("PYTEST")},
           "PYTHONPATH": str(REPO), "PRESTART_TEST_MARKER": str(tmp_path),
           "ESTFLOW_HOME": str(tmp_path / "home")}
    steps = {"train": {"sleep": "60", "pid_file": str(pid_file)}}
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.pipelines.fake_runs", json.dumps(steps), "run",
         "estflow.pipelines.examples.taxi", "--workdir", str(workdir)],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True, preexec_fn=ctrl_c_works)
    try:
        deadline = time.monotonic() + 60
        while not (pid_file.is_file() and pid_file.read_text()):
            assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
            time.sleep(0.05)
        os.killpg(proc.pid, signal.SIGINT)  # a terminal's Ctrl-C: the whole group
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    assert "interrupted during step 'train'" in err
    assert _none_left(tmp_path), "a prestarted process was left running"


def _later_step(tmp_path: Path, later_body: str) -> subprocess.Popen:
    """A prestarted process of a step module naming ``later_mod`` (its body ``later_body``) in
    PRESTART_LATER, given its arguments a second after it started. The step prints whether
    later_mod was whole (its last line run): ``peek``, when it started; ``wait``, within 30 s
    without importing it itself; ``use``, once it imported it."""
    (tmp_path / "later_mod.py").write_text(later_body)
    (tmp_path / "later_step.py").write_text(
        "import json, sys, time\n"
        "PRESTART_LATER = ('later_mod',)\n"
        "if __name__ == '__main__':\n"
        "    def whole(): return getattr(sys.modules.get('later_mod'), 'DONE', False)\n"
        "    seen, deadline = whole(), time.monotonic() + 30\n"
        "    while sys.argv[1] == 'wait' and not seen and time.monotonic() < deadline:\n"
        "        time.sleep(0.05)\n"
        "        seen = whole()\n"
        "    if sys.argv[1] == 'use':\n"
        "        import later_mod\n"
        "        seen = later_mod.DONE\n"
        "    print(json.dumps({'seen': seen}))\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO)])}
    proc = subprocess.Popen([sys.executable, "-m", PRESTART_MODULE, "later_step"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
    time.sleep(1.0)  # the runner hands the arguments over later (while a step before runs)
    return proc


def test_a_prestarted_process_imports_its_later_modules_while_it_waits(tmp_path):
    assert prestart.later_imports("estflow.components.push") == (
        "estflow.components.push.warmup",)
    proc = _later_step(tmp_path, "DONE = True\n")
    out, _ = proc.communicate(json.dumps(["wait"]) + "\n", timeout=60)

    assert proc.returncode == 0
    assert json.loads(out)["seen"] is True  # imported in the background: the step did not


def test_a_step_does_not_wait_for_later_imports_it_does_not_use_and_waits_for_one_it_does(
        tmp_path):
    slow = "import time\ntime.sleep(4)\nDONE = True\n"
    proc = _later_step(tmp_path, slow)
    out, _ = proc.communicate(json.dumps(["peek"]) + "\n", timeout=60)
    unused = json.loads(out)
    assert (unused["seen"], proc.returncode) == (False, 0)  # still importing: not waited for

    proc = _later_step(tmp_path, slow)
    out, _ = proc.communicate(json.dumps(["use"]) + "\n", timeout=60)
    used = json.loads(out)
    assert used["seen"] is True and proc.returncode == 0  # it waited for the whole module


def test_an_unreadable_later_declaration_imports_nothing_ahead(tmp_path, monkeypatch):
    (tmp_path / "bad_later.py").write_text("PRESTART_LATER = tuple(['computed'])\n")
    monkeypatch.syspath_prepend(str(tmp_path))

    assert prestart.import_later("bad_later") is None  # not a literal: no error, no thread
