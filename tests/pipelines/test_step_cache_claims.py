"""``estflow runs prune`` and runs starting at the same time: a run claims the cache entries it
uses or will reuse (from its fingerprint step on, until it ends), and prune leaves a claimed
entry in place. A claim dies with its process: a killed run's claims hold nothing.

Real processes throughout: ``estflow run`` with fake steps
(:mod:`tests.pipelines.fake_disk_step`, one of them paused until the test lets it go), and the
installed ``estflow runs prune``, from a fresh directory in the default environment."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

from estflow.pipelines.local.step_cache import StepCache
from tests.pipelines import fake_disk_step
from tests.pipelines.test_run_layout_default_env import ESTFLOW
from tests.pipelines.test_run_layout_default_env import default_env
from tests.pipelines.test_run_layout_default_env import write_pipeline

PRUNE = ("runs", "prune", "--keep", "1", "--recent-hours", "0")


def _estflow(cwd: Path, steps: dict, *args: str) -> subprocess.CompletedProcess:
    done = subprocess.run([*fake_disk_step.command(steps), *args], cwd=cwd, env=default_env(),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def _prune(cwd: Path) -> str:
    done = subprocess.run([str(ESTFLOW), *PRUNE], cwd=cwd, env=default_env(),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def _record(cwd: Path, index: int = -1) -> dict:
    paths = sorted((cwd / "estflow_runs" / "chicago-taxi").glob("*/run.json"))
    return json.loads(paths[index].read_text())


def _entry(cwd: Path, record: dict, step: str) -> Path:
    return cwd / "estflow_runs" / ".cache" / step / record["steps"][step]["key"]


def _wait_for(path: Path) -> None:
    deadline = time.monotonic() + 120
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


def test_prune_leaves_the_entries_a_starting_run_will_reuse(tmp_path):
    target = write_pipeline(tmp_path, rows=50)
    started, go = tmp_path / "transform-started", tmp_path / "go"
    go.touch()
    transform = {"transform": {"pid_file": str(started), "wait_for": str(go)}}
    _estflow(tmp_path, transform, "run", target.name)
    first = _record(tmp_path)
    (_entry(tmp_path, first, "transform") / "transformed" / "transform.json").unlink()
    started.unlink()
    go.unlink()
    # the same run again: transform runs again (its entry is damaged) and waits; train and
    # evaluate, whose inputs are the same, will be reused after it
    second = subprocess.Popen([*fake_disk_step.command(transform), "run", target.name],
                              cwd=tmp_path, env=default_env(), stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
    try:
        _wait_for(started)  # not in its record yet: train and evaluate
        out = _prune(tmp_path)  # keeps the last run's entries: that run's, so far
        for step in ("train", "evaluate"):
            assert _entry(tmp_path, first, step).is_dir(), out
            assert f"kept {step} {first['steps'][step]['key'][:12]}" in out
    finally:
        go.touch()
        output, _ = second.communicate(timeout=300)
    assert second.returncode == 0, output
    steps = _record(tmp_path)["steps"]
    assert [steps[s]["status"] for s in ("transform", "train", "evaluate")] == [
        "ran", "reused", "reused"]


def _train_for(cwd: Path, steps: int) -> None:
    """``estflow run p.py`` of a model trained ``steps`` steps (the data's steps reused)."""
    target = cwd / "p.py"
    text = target.read_text()
    target.write_text(text.replace(text[text.index("max_steps="):text.index(", batch_size")],
                                   f"max_steps={steps}"))
    _estflow(cwd, {}, "run", target.name)


def test_a_claim_keeps_an_entry_until_released_or_its_process_dies(tmp_path):
    write_pipeline(tmp_path, rows=50)
    _train_for(tmp_path, 200)
    first = _record(tmp_path)
    _train_for(tmp_path, 300)  # the last run: the first one's train and evaluate are unused
    train, evaluation = _entry(tmp_path, first, "train"), _entry(tmp_path, first, "evaluate")
    cache = StepCache(tmp_path / "estflow_runs" / ".cache")

    with cache.claim([("train", train.name)]):
        out = _prune(tmp_path)
        assert train.is_dir() and not evaluation.exists(), out
    _prune(tmp_path)
    assert not train.exists()

    # a claim of a process that is gone (killed) is stale: it keeps nothing
    second = _record(tmp_path)
    _train_for(tmp_path, 400)  # the second run's train is unused now
    train = _entry(tmp_path, second, "train")
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time\n"
         "from estflow.pipelines.local.step_cache import StepCache\n"
         "claim = StepCache(sys.argv[1]).claim([('train', sys.argv[2])])\n"
         "print('claimed', flush=True)\ntime.sleep(600)\n", str(cache.root), train.name],
        env=default_env(), stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "claimed\n"
        out = _prune(tmp_path)
        assert train.is_dir(), out  # claimed while its process lives
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
        holder.stdout.close()
    _prune(tmp_path)
    assert not train.exists()
