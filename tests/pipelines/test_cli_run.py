"""``estflow run`` and ``estflow preprocess`` as CI and people use them: the exit status says
whether the model was pushed, Ctrl-C stops cleanly and says how to continue, an error in the
pipeline file is one ``file:line`` message, and Beam options pass through in every form.

The runs here are fake steps (:mod:`tests.pipelines.fake_runs`), so no TensorFlow or Beam.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from estflow.components._runtime import entry
from estflow.dsl.contracts import PREPROCESS
from estflow.pipelines import cli
from estflow.pipelines.examples import taxi
from estflow.pipelines.local import runner as local_runner
from estflow.pipelines.plan import build_preprocess_plan
from tests.pipelines import fake_runs

REPO = Path(__file__).resolve().parents[2]
TAXI = "estflow.pipelines.examples.taxi"


@pytest.fixture(autouse=True)
def _steps_import_the_tests(monkeypatch):
    path = os.environ.get("PYTHONPATH")
    monkeypatch.setenv("PYTHONPATH", str(REPO) + (os.pathsep + path if path else ""))


# --- exit status ---------------------------------------------------------------------------------

def _no_push_target(tmp_path: Path) -> Path:
    target = tmp_path / "no_push.py"
    data = Path(taxi.__file__).parent / "data" / "chicago_taxi" / "data.csv"
    target.write_text("import dataclasses\nimport estflow.dsl as ef\n"
                      "from estflow.pipelines.examples import taxi\n"
                      "pipeline = dataclasses.replace(taxi.pipeline, push=None, "
                      f"source=ef.CsvSource({str(data)!r}))\n")
    return target


@pytest.mark.parametrize("push_target, steps, status, said", [
    (True, {}, 0, "Pushed taxi version 7"),
    (True, {"push": {"emit": {"push.json": fake_runs.NOT_PUSHED}}}, 3, "Model NOT pushed"),
    (False, {}, 0, "Blessed (no push target)"),
    (False, {"evaluate": {"emit": {"blessing.json": {"blessed": False, "reasons": ["FAIL"]}}}},
     3, "NOT blessed (no push target)"),
    (True, {"train": {"fail": "out of memory"}}, 1, "step 'train' failed"),
])
def test_the_exit_status_tells_ci_whether_the_model_was_pushed(
        tmp_path, capsys, monkeypatch, push_target, steps, status, said):
    fake_runs.use_fake_steps(monkeypatch, steps)
    target = TAXI if push_target else str(_no_push_target(tmp_path))
    assert cli.main(["run", target, "--workdir", str(tmp_path / "run")]) == status
    out, err = capsys.readouterr()
    assert said in out + err
    if status == cli.EXIT_NOT_PUSHED:
        assert "exit status 3" in err


def test_the_exit_statuses_are_distinct_and_documented():
    codes = {"pushed": 0, "failed": 1, "usage": cli.EXIT_USAGE,
             "not pushed": cli.EXIT_NOT_PUSHED, "interrupted": cli.EXIT_INTERRUPTED}
    assert codes == {"pushed": 0, "failed": 1, "usage": 2, "not pushed": 3, "interrupted": 130}
    readme = (REPO / "docs" / "pages" / "getting-started.md").read_text()
    for code in codes.values():
        assert f"| `{code}` |" in readme
    assert "exit status" in cli.__doc__.lower() and "130" in cli.__doc__


# --- Ctrl-C --------------------------------------------------------------------------------------

def ctrl_c_works() -> None:
    """In the child: SIGINT as a terminal's foreground job has it, even when the test process
    inherited an ignored SIGINT (a background job of a non-interactive shell, where a plain
    ``python`` would ignore Ctrl-C too)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _start(tmp_path: Path, steps: dict, *args: str, new_session: bool = False):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    return subprocess.Popen(
        [sys.executable, "-m", "tests.pipelines.fake_runs", json.dumps(steps), *args],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=new_session, preexec_fn=ctrl_c_works)


def _wait_for(path: Path, timeout: float = 60) -> int:
    deadline = time.monotonic() + timeout
    while not (path.is_file() and path.read_text()):
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)
    return int(path.read_text())


def _gone(pid: int, timeout: float = 10) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


@pytest.mark.parametrize("to_the_group, deaf", [(True, False), (False, False), (False, True)],
                         ids=["terminal", "runner-only", "step-ignores-sigint"])
def test_ctrl_c_stops_the_step_keeps_the_checkpoint_and_says_how_to_continue(
        tmp_path, to_the_group, deaf):
    pid_file, workdir = tmp_path / "train.pid", tmp_path / "run"
    train = {"sleep": "60", "pid_file": str(pid_file), "emit": fake_runs.CHECKPOINT,
             **({"ignore_sigint": "1"} if deaf else {})}
    proc = _start(tmp_path, {"train": train}, "run", TAXI, "--workdir", str(workdir),
                  new_session=to_the_group)
    try:
        step = _wait_for(pid_file)
        if to_the_group:  # what a terminal's Ctrl-C does: the runner and its step get SIGINT
            os.killpg(proc.pid, signal.SIGINT)
        else:  # e.g. a CI job cancelled: only the runner gets it
            proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    assert _gone(step), "the step's process was left running"
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    checkpoint = workdir / "train" / "model" / "checkpoints" / "ckpt-200"
    assert "interrupted during step 'train' (steps done: ingest, transform)" in err
    assert f"kept: {workdir}" in err
    assert f"last checkpoint: {checkpoint}" in err
    command = shlex.join(["estflow", "run", TAXI, "--resume", str(workdir)])
    assert f"to continue (training resumes from the last checkpoint): {command}" in err
    assert "interrupted" in (workdir / "train" / "log.txt").read_text()


def _sigint_ignored() -> None:
    """In the child: SIGINT ignored, as a background job of a non-interactive shell has it
    (``estflow run ... &`` in a script); its step processes inherit that."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@pytest.mark.parametrize("signum, deaf", [(signal.SIGTERM, False), (signal.SIGHUP, False),
                                          (signal.SIGTERM, True)],
                         ids=["SIGTERM", "SIGHUP", "SIGTERM-to-a-background-job"])
def test_sigterm_or_sighup_to_the_runner_stops_like_ctrl_c(tmp_path, signum, deaf):
    """A scheduler's timeout (``timeout``, systemd, a CI job cancelled) sends SIGTERM to the
    runner alone, a closed terminal SIGHUP: the step is sent SIGINT at once (it got no
    signal), or SIGTERM when it ignores SIGINT; the run is recorded as interrupted, the way on
    said, and the exit status is 128 + signal."""
    pid_file, workdir = tmp_path / "train.pid", tmp_path / "run"
    train = {"sleep": "60", "pid_file": str(pid_file), "emit": fake_runs.CHECKPOINT}
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.pipelines.fake_runs", json.dumps({"train": train}),
         "run", TAXI, "--workdir", str(workdir)],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True, preexec_fn=_sigint_ignored if deaf else ctrl_c_works)
    try:
        step = _wait_for(pid_file)
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 128 + signum, err
    assert _gone(step), "the step's process was left running"
    name = signal.Signals(signum).name
    assert "Traceback" not in err
    assert f"stopped by {name} during step 'train' (steps done: ingest, transform)" in err
    command = shlex.join(["estflow", "run", TAXI, "--resume", str(workdir)])
    assert f"to continue (training resumes from the last checkpoint): {command}" in err
    sent = "SIGTERM" if deaf else "SIGINT"
    assert (f"[estflow] interrupted ({name}): the step's process was stopped (sent {sent}; "
            in (workdir / "train" / "log.txt").read_text())
    record = json.loads((workdir / "run.json").read_text())
    assert record["status"] == "interrupted"
    assert record["steps"]["train"]["status"] == "interrupted"


def test_ctrl_c_of_preprocess_says_what_reruns_it(tmp_path):
    pid_file, out_dir = tmp_path / "pid", tmp_path / "out"
    proc = _start(tmp_path, {"preprocess": {"sleep": "60", "pid_file": str(pid_file)}},
                  "preprocess", TAXI, "--output", str(out_dir), "--direct_num_workers=1")
    try:
        step = _wait_for(pid_file)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    assert _gone(step)
    assert "Traceback" not in err
    assert "interrupted during step 'preprocess'" in err and f"kept: {out_dir}" in err
    command = shlex.join(["estflow", "preprocess", TAXI, "--output", str(out_dir),
                          "--direct_num_workers=1"])
    assert f"to run it again: {command}" in err


# --- errors in the pipeline file -----------------------------------------------------------------

@pytest.mark.parametrize("body, line, error", [
    ("pipeline = ef.Pipeline(name='x',\n    sorce=1)\n", 3,
     "TypeError: Pipeline.__init__() got an unexpected keyword argument 'sorce'"),
    ("FEATURES = (ef.Numeric('x'),)\npipeline = ef.Pipline(FEATURES)\n", 4,
     "AttributeError: module 'estflow.dsl' has no attribute 'Pipline'"),
    ("x = (\n", 3, "SyntaxError: '(' was never closed"),
    ("import no_such_helper_module\n", 3, "ModuleNotFoundError: No module named "
     "'no_such_helper_module'"),
    ("n = ef.Numeric('fare', normalize='zscore')\n", 3, "Received an invalid value for "
     "`normalize`"),
])
def test_an_error_in_the_pipeline_file_is_one_message_naming_file_and_line(
        tmp_path, capsys, body, line, error):
    target = tmp_path / "broken.py"
    target.write_text("import estflow.dsl as ef\n\n" + body)
    where = f"{target}:{line}: "
    if "Received" in error:  # an invalid declaration says so
        where = f"the pipeline in {target} is invalid ({target}:{line}): "
    for command in (["compile", str(target), "-o", str(tmp_path / "x.yaml")],
                    ["run", str(target)], ["preprocess", str(target)]):
        assert cli.main(command) == cli.EXIT_USAGE
        err = capsys.readouterr().err
        assert err.startswith(f"estflow {command[0]}: error: {where}"), err
        assert error in err
        assert len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "x.yaml").exists()


def test_an_error_in_a_module_the_pipeline_imports_names_both(tmp_path, capsys):
    (tmp_path / "helpers_for_broken.py").write_text("X = 1\nY = 1 / 0\n")
    target = tmp_path / "broken2.py"
    target.write_text(f"import sys\nsys.path.insert(0, {str(tmp_path)!r})\n"
                      "import helpers_for_broken\n")
    assert cli.main(["compile", str(target), "-o", str(tmp_path / "x.yaml")]) == 2
    err = capsys.readouterr().err
    helper = tmp_path / "helpers_for_broken.py"
    assert err.startswith(f"estflow compile: error: {helper}:2: ZeroDivisionError: ")
    assert f"(imported from {target}:3)" in err


def test_the_real_command_prints_no_traceback(tmp_path):
    target = tmp_path / "broken.py"
    target.write_text("import estflow.dsl as ef\nundefined_name\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    result = subprocess.run([sys.executable, "-m", "estflow.pipelines.cli", "compile",
                             str(target), "-o", "x.yaml"], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    # the file is named as the user would name it: relative to the working directory
    assert result.stderr == ("estflow compile: error: broken.py:2: NameError: name "
                             "'undefined_name' is not defined\n")


# --- Beam options, every form the README shows ---------------------------------------------------

@pytest.mark.parametrize("given, passed", [
    (["--direct_num_workers=2"], ["--direct_num_workers=2"]),
    (["--direct_num_workers", "2"], ["--direct_num_workers=2"]),
    (["--runner", "dataflow", "--project", "my-project", "--region", "europe-west4",
      "--temp_location", "gs://b/tmp"],
     ["--runner=DataflowRunner", "--project=my-project", "--region=europe-west4",
      "--temp_location=gs://b/tmp"]),
    (["--runner=flink", "--flink_master=jm:8081"],
     ["--runner=FlinkRunner", "--flink_master=jm:8081"]),
    (["--gzip-level", "3", "--direct_running_mode=multi_processing"],
     ["--direct_running_mode=multi_processing"]),
])
def test_beam_options_reach_the_step_in_every_form(tmp_path, monkeypatch, given, passed):
    planned = []

    def run_plan(plan, workdir, **_):
        planned.append(plan)
        raise local_runner.StepFailed("stop here")

    monkeypatch.setattr(local_runner, "run_plan", run_plan)
    assert cli.main(["preprocess", TAXI, "--output", str(tmp_path / "o"), *given]) == 1
    step = planned[0].steps[0]
    argv = step.argv("spec.json", {a: f"/{a}" for a in (*dict(step.inputs), *step.outputs)})
    args, extra = entry.step_parser(PREPROCESS).parse_known_args(argv)  # what the step parses
    assert extra == []
    assert shlex.split(args.beam_options) == passed


def test_a_single_option_literal_is_passed_with_an_equals_sign():
    plan = build_preprocess_plan(taxi.pipeline, source_root=".",
                                 beam_options="--direct_num_workers=2")
    argv = plan.steps[0].argv("s", {"examples": "e", "transformed": "t"})
    assert "--beam-options=--direct_num_workers=2" in argv


def test_fake_plans_cover_the_real_steps():
    real = local_runner.build_plan(taxi.pipeline, source_root=".")
    fake = fake_runs.fake_plan(taxi.pipeline, {})
    assert [s.name for s in fake.steps] == [s.name for s in real.steps]
    assert [s.outputs for s in fake.steps] == [s.outputs for s in real.steps]
    no_push = fake_runs.fake_plan(dataclasses.replace(taxi.pipeline, push=None), {})
    assert [s.name for s in no_push.steps] == [s.name for s in real.steps][:-1]


def test_a_bad_warm_setting_is_a_usage_error_naming_it(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("ESTFLOW_WARM", "soon")
    monkeypatch.setenv("ESTFLOW_HOME", str(tmp_path / "home"))
    assert cli.main(["run", "estflow.pipelines.examples.taxi"]) == cli.EXIT_USAGE
    err = capsys.readouterr().err
    assert err == ("estflow run: error: ESTFLOW_WARM: expected a number of seconds (0 or unset: "
                   "no warm processes). Received 'soon'\n")
    assert not (tmp_path / "home").exists()  # nothing ran, nothing recorded

