"""The tune step with its real trials: the train step and the evaluate step, by their entry
points, on the train fixture's tiny transform output (tests/components/_train_fixtures.py) and
its eval rows written raw, as ingest writes them.

* A search whose one trial is clearly worse (a linear model that barely moves from zero, AUC
  0.5) prunes it at its first evaluation (MedianStop), and every completed trial's value is
  the evaluate step's metric for its model (one answer everywhere).
* The step's process killed with SIGKILL while a trial trains: no training is left behind,
  and a rerun keeps the finished trial and trains the killed one's values again.

Each trial starts TensorFlow twice (train, evaluate): slow on 2 cores.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import estflow.dsl as ef
from estflow.components.tune import space as tune_space
from estflow.components.tune.step import TuneError
from estflow.components.tune.step import run
from estflow.dsl.contracts import TUNE_STUDY_ENV
from tests.components import _train_fixtures as fx

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[3]
BAD_RATE = 1e-9  # Ftrl from zero weights: the model stays at P=0.5 everywhere, AUC 0.5


def _feature(value):
    import tensorflow as tf

    if isinstance(value, str):
        return tf.train.Feature(bytes_list=tf.train.BytesList(value=[value.encode()]))
    if isinstance(value, int):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=[value]))
    return tf.train.Feature(float_list=tf.train.FloatList(value=[value]))


def write_raw_eval(examples: Path) -> Path:
    """The fixture's eval rows (every 5th), raw, as ingest writes them under ``eval/``."""
    import tensorflow as tf

    rows = [r for i, r in enumerate(fx.make_rows()) if i % fx.EVAL_EVERY == 0]
    (examples / "eval").mkdir(parents=True)
    options = tf.io.TFRecordOptions(compression_type="GZIP")
    with tf.io.TFRecordWriter(str(examples / "eval" / "part-00000-of-00001.gz"), options) as w:
        for row in rows:
            w.write(tf.train.Example(features=tf.train.Features(
                feature={k: _feature(v) for k, v in row.items()})).SerializeToString())
    return examples


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    transformed = fx.transformed(tmp_path_factory)
    return write_raw_eval(tmp_path_factory.mktemp("examples")), transformed


def _linear_pipeline(**tune) -> ef.Pipeline:
    return fx.pipeline(model=ef.LinearClassifier(feature_columns=("x", "z", "color")),
                       tune=ef.Tune(**tune))


# --- pruning, and one answer ---------------------------------------------------------------

@pytest.fixture(scope="module")
def pruned_search(inputs, tmp_path_factory):
    examples, transformed = inputs
    space = {"model.learning_rate": ef.Choice((0.5, 0.3, BAD_RATE))}
    seed = next(s for s in range(100) if list(tune_space.grid_order(
        ef.Tune(space, "auc", algorithm="grid", trials=3, seed=s)))[-1]
        == {"model.learning_rate": BAD_RATE})  # the bad one last: after the warm-up trials
    pipeline = _linear_pipeline(space=space, objective="auc", trials=3, algorithm="grid",
                                seed=seed, early_stopping=ef.MedianStop(every_steps=20,
                                                                        warmup_trials=2))
    out = tmp_path_factory.mktemp("search") / "hyperparameters"
    lines: list[str] = []
    best = run(pipeline, examples, transformed, out, lines.append, keep_models=True, cpus=2)
    return pipeline, out, best, lines


def test_a_clearly_worse_trial_is_pruned_at_its_first_evaluation(pruned_search):
    _, out, best, lines = pruned_search
    rows = json.loads((out / "trials.json").read_text())["trials"]
    assert [r["state"] for r in rows] == ["COMPLETE", "COMPLETE", "PRUNED"], lines
    bad = rows[2]
    assert bad["assignment"] == {"model.learning_rate": BAD_RATE}
    assert [p["step"] for p in bad["intermediate"]] == [20]
    assert bad["value"] == pytest.approx(0.5, abs=0.02)
    for good in rows[:2]:  # evaluated every 20 steps while training, to step 60
        assert [p["step"] for p in good["intermediate"]] == [20, 40, 60]
        assert good["intermediate"][0]["value"] > 0.7
    assert best["trial"] in (0, 1) and best["value"] > 0.8
    assert any(line.startswith("trial 2 pruned at step 20: auc=0.5") for line in lines)
    assert any(line.startswith(f"best trial {best['trial']}: auc=") for line in lines)


def test_a_trials_value_is_the_evaluate_steps_metric_for_its_model(pruned_search, inputs,
                                                                   tmp_path):
    """One answer everywhere: the evaluate step, run again on a trial's model and the same
    rows, gives the trial's value; the train step's own final evaluation (its TensorBoard
    scalars, the trial's last intermediate value) agrees to float32."""
    from estflow.components.evaluate.step import run as evaluate

    pipeline, out, _, _ = pruned_search
    examples, _ = inputs
    rows = json.loads((out / "trials.json").read_text())["trials"]
    for row in rows[:2]:
        trained = pipeline.tune.apply(pipeline, row["assignment"])
        metrics = evaluate(trained, str(examples), row["model_dir"],
                           str(tmp_path / f"evaluation{row['number']}"), lambda _: None)
        assert metrics["metrics"]["auc"] == row["value"]
        assert metrics["metrics"] == row["metrics"]
        train_json = json.loads((Path(row["model_dir"]) / "train.json").read_text())
        final = train_json["evaluations"][-1]
        assert final["step"] == 60
        assert final["metrics"]["auc"] == pytest.approx(row["intermediate"][-1]["value"],
                                                        abs=1e-6)
        assert row["value"] == pytest.approx(final["metrics"]["auc"], abs=1e-4)


# --- SIGKILL -------------------------------------------------------------------------------

def _processes_under(folder: Path) -> list[int]:
    """Processes whose command line names ``folder`` (a trial's spec, model)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if str(folder) in cmdline:
            found.append(int(proc.name))
    return found


def _descendants(pid: int) -> set[int]:
    """The living processes below ``pid`` (children, their children...): the trials' fork
    server and the trial processes it forked, whose command lines name no trial."""
    parents = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            stat = (proc / "stat").read_text()
        except (OSError, ValueError):
            continue
        parents[int(proc.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    found, todo = set(), [pid]
    while todo:
        top = todo.pop()
        below = {p for p, parent in parents.items() if parent == top} - found
        found |= below
        todo += below
    return found


def _alive(pids: set[int]) -> set[int]:
    """Those of ``pids`` still running (a zombie is not)."""
    alive = set()
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            alive.add(pid)
    return alive


def test_a_step_killed_mid_trial_keeps_its_finished_trials(inputs, tmp_path):
    examples, transformed = inputs
    pipeline = _linear_pipeline(space={"model.learning_rate": ef.FloatRange(0.1, 0.5)},
                                objective="auc", trials=2, algorithm="random")
    spec = tmp_path / "spec.json"
    spec.write_text(pipeline.to_json())
    out = tmp_path / "hyperparameters"
    command = [sys.executable, "-m", "estflow.components.tune", "--spec", str(spec),
               "--examples", str(examples), "--transformed", str(transformed),
               "--hyperparameters", str(out)]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    env.pop(TUNE_STUDY_ENV, None)  # the study in the output's study/
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
    lines = []
    for line in process.stdout:  # until trial 1 trains
        lines.append(line)
        if "trial 1 started" in line:
            break
    assert any("trial 0 finished" in line for line in lines), "".join(lines)
    trial_logs = list(out.glob("study/*/trials/1/train.log"))
    deadline = time.monotonic() + 300
    while not trial_logs or "training from global step" not in trial_logs[0].read_text():
        assert process.poll() is None and time.monotonic() < deadline
        time.sleep(0.2)
        trial_logs = list(out.glob("study/*/trials/1/train.log"))
    below = _descendants(process.pid)  # the trials' fork server, the trial training
    assert below, "the search started no process"
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    process.stdout.close()
    trial_folder = trial_logs[0].parent.resolve()
    deadline = time.monotonic() + 10
    while _processes_under(trial_folder) or _alive(below):  # its training died with it
        assert time.monotonic() < deadline, (_processes_under(trial_folder), _alive(below))
        time.sleep(0.2)
    # killed, not left to finish: an orphaned training would have exported its model by now
    assert not list(trial_folder.glob("model/export/*")), "the killed trial went on training"
    before = json.loads((out / "trials.json").read_text())["trials"]
    assert [(r["number"], r["state"]) for r in before] == [(0, "COMPLETE")]

    again = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True,
                           timeout=600)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "trial 1 was interrupted (its search stopped while it ran): trial 2 trains its " \
           "values again" in again.stdout
    assert "trial 0 started" not in again.stdout  # kept, not trained again
    rows = json.loads((out / "trials.json").read_text())["trials"]
    assert [(r["number"], r["state"]) for r in rows] == [
        (0, "COMPLETE"), (1, "FAIL"), (2, "COMPLETE")]
    assert rows[0] == before[0]
    assert rows[1]["interrupted"] and rows[2]["retry_of"] == 1
    assert rows[2]["assignment"] == rows[1]["assignment"]
    best = json.loads((out / "best.json").read_text())
    assert best["trial"] in (0, 2)


def test_early_stopping_on_a_metric_the_train_step_does_not_report_stops_the_search(
        inputs, tmp_path):
    """auc_exact is the evaluate step's own metric: the train step's evaluations, which early
    stopping reads while a trial trains, do not have it. The search stops at the first
    evaluation, saying what the train step reports; the trial is left to be trained again."""
    examples, transformed = inputs
    pipeline = _linear_pipeline(space={"model.learning_rate": ef.FloatRange(0.1, 0.5)},
                                objective="auc_exact", trials=3,
                                early_stopping=ef.MedianStop(every_steps=20))
    with pytest.raises(TuneError) as caught:
        run(pipeline, examples, transformed, tmp_path / "out", lambda _: None)
    message = str(caught.value)
    assert "early stopping compares the trials' auc_exact while they train" in message
    assert "'auc'" in message and "'average_loss'" in message
    rows = json.loads((tmp_path / "out" / "trials.json").read_text())["trials"]
    assert [(r["state"], r["interrupted"]) for r in rows] == [("FAIL", True)]
