"""``estflow run`` as a user runs it: from a fresh directory, with the default ESTFLOW_HOME
(the relative ``estflow_runs``; these tests take the ESTFLOW_HOME the conftest sets out of the
command's environment). The documented run layout
``estflow_runs/<pipeline>/<run id>/<step>/<artifact>/...`` must be there, every link in it must
resolve, and every path the run prints must exist as printed.

The quick test runs fake steps (:mod:`tests.pipelines.fake_runs`) behind the real fingerprint
step, runner and cache; the slow one runs the real steps on a sample of the taxi rows and then
``estflow predict`` on the run's directory."""

from __future__ import annotations

import itertools
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from estflow.dsl.contracts import Files
from estflow.pipelines.examples import taxi
from tests.pipelines import fake_disk_step
from tests.pipelines import fake_runs

REPO = Path(__file__).resolve().parents[2]
DATA = Path(taxi.__file__).parent / "data" / "chicago_taxi" / "data.csv"
ESTFLOW = Path(sys.executable).with_name("estflow")  # the installed command


def default_env() -> dict[str, str]:
    """The environment of a user's shell: no ESTFLOW_HOME; the tests importable (fake steps)."""
    env = {k: v for k, v in os.environ.items()
           if k != "ESTFLOW_HOME" and not k.startswith("PYTEST")}
    env["PYTHONPATH"] = str(REPO)
    return env


def write_pipeline(folder: Path, rows: int) -> Path:
    """``p.py``: the taxi example on its first ``rows`` rows (``sample.csv``), small training,
    pushing to ``serving`` (both relative: resolved where ``estflow run`` starts)."""
    with open(DATA) as src, open(folder / "sample.csv", "w") as dst:
        dst.writelines(itertools.islice(src, rows + 1))
    path = folder / "p.py"
    path.write_text(
        "import dataclasses\nimport estflow.dsl as ef\n"
        "from estflow.pipelines.examples import taxi\n"
        "pipeline = dataclasses.replace(\n"
        "    taxi.pipeline, source=ef.CsvSource('sample.csv'),\n"
        "    train=ef.TrainSpec(max_steps=200, batch_size=64),\n"
        "    run_config=ef.RunConfig(save_checkpoints_steps=100, log_step_count_steps=100),\n"
        "    push=ef.PushTarget('serving', 'taxi'))\n")
    return path


def links_under(folder: Path) -> list[Path]:
    return [Path(parent, name) for parent, dirs, files in os.walk(folder)
            for name in dirs + files if os.path.islink(os.path.join(parent, name))]


def dangling(folder: Path) -> list[str]:
    """The links under ``folder`` that do not resolve, with what they point to."""
    return [f"{link} -> {os.readlink(link)}" for link in links_under(folder)
            if not link.exists()]


_PATH = re.compile(r"(?:(?<=\s)|^)((?:/|estflow_runs/)[^\s'\",;()]+)")


def printed_paths(text: str) -> list[str]:
    """The file system paths in ``text``: absolute ones, and those under ``estflow_runs/``."""
    return [m.group(1).rstrip(".:") for line in text.splitlines()
            for m in _PATH.finditer(line)]


def missing_paths(text: str, cwd: Path) -> list[str]:
    """The paths printed in ``text`` that do not exist from ``cwd`` (a checkpoint prefix
    ``.../ckpt-200`` exists when its files do)."""
    return [p for p in printed_paths(text)
            if not (cwd / p).exists() and not list((cwd / p).parent.glob(Path(p).name + ".*"))]


def the_run(cwd: Path) -> Path:
    (run,) = (cwd / "estflow_runs" / "chicago-taxi").iterdir()
    return run


def run_fake_steps(cwd: Path) -> subprocess.CompletedProcess:
    """``estflow run p.py`` in ``cwd``, in the default environment, with fake steps that print
    where they wrote (:mod:`tests.pipelines.fake_disk_step`)."""
    target = write_pipeline(cwd, rows=50)
    version = cwd / "serving" / "taxi" / "7"  # where the fake push says it pushed to
    version.mkdir(parents=True)
    steps = {"train": {"emit": {Files.TRAIN_RESULT: {"global_step": 200},
                                **fake_runs.CHECKPOINT}},
             "evaluate": {"emit": {Files.REPORT: "<html></html>"}},
             "push": {"emit": {Files.PUSH_RESULT: {**fake_runs.PUSHED, "path": str(version)}}}}
    env = default_env()
    assert "ESTFLOW_HOME" not in env
    done = subprocess.run([*fake_disk_step.command(steps), "run", target.name], cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def test_every_path_a_run_prints_exists_after_it(tmp_path):
    done = run_fake_steps(tmp_path)

    wrote = [line for line in done.stdout.splitlines() if "] wrote " in line]
    assert len(wrote) == 5, done.stdout  # each step's line saying where it wrote
    assert missing_paths(done.stdout + done.stderr, tmp_path) == []
    assert ".partial" not in done.stdout


def test_fake_steps_run_in_the_default_home_leave_links_that_resolve(tmp_path):
    done = run_fake_steps(tmp_path)

    home = tmp_path / "estflow_runs"
    run = the_run(tmp_path)
    # a link per cached artifact (push is never cached: its output is in the run)
    assert len(links_under(run)) == 4
    assert dangling(home) == []
    assert (run / "train" / "model" / Files.TRAIN_RESULT).is_file()
    assert (run / "train" / "model" / Files.CHECKPOINTS / "ckpt-200.index").is_file()
    assert (run / "evaluate" / "evaluation" / Files.METRICS).is_file()
    # every path the record keeps, and every path printed, exists from where the run started
    record = json.loads((run / Files.RUN_RECORD).read_text())
    for name, step in record["steps"].items():
        for artifact, where in {**step["inputs"], **step["outputs"]}.items():
            assert (tmp_path / where["path"]).is_dir(), (name, artifact, where["path"])
    assert missing_paths(done.stdout + done.stderr, tmp_path) == []
    assert f"Run {run.name}: " in done.stdout
    # the links are relative: a copy of the whole folder resolves into the copy
    shutil.copytree(home, tmp_path / "copied", symlinks=True)
    shutil.rmtree(home)
    copied = tmp_path / "copied" / "chicago-taxi" / run.name
    assert dangling(tmp_path / "copied") == []
    assert (copied / "train" / "model" / Files.TRAIN_RESULT).is_file()


@pytest.mark.slow
def test_a_real_run_in_the_default_home_has_its_layout_and_predict_finds_its_model(tmp_path):
    target = write_pipeline(tmp_path, rows=2000)
    env = default_env()
    done = subprocess.run([str(ESTFLOW), "run", target.name], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr

    run = the_run(tmp_path)
    assert dangling(tmp_path / "estflow_runs") == []
    relative = run.relative_to(tmp_path)  # estflow_runs/chicago-taxi/<run id>
    checkpoints = relative / "train" / "model" / Files.CHECKPOINTS
    assert list((tmp_path / checkpoints).glob("*.ckpt-*.index"))  # tensorboard --logdir reads
    assert (tmp_path / relative / "evaluate" / "evaluation" / Files.METRICS).is_file()
    assert missing_paths(done.stdout + done.stderr, tmp_path) == []
    assert ".partial" not in done.stdout

    scored = subprocess.run([str(ESTFLOW), "predict", str(relative), "--input", "sample.csv",
                             "--output", "scores"], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=600)
    assert scored.returncode == 0, scored.stdout + scored.stderr
    summary = json.loads((tmp_path / "scores" / Files.PREDICT_RESULT).read_text())
    assert summary["scored"] == 2000
