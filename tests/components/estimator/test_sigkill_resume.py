"""Reliability: a training process killed with SIGKILL after its first checkpoint restarts
from the last checkpoint, at its global step, with its optimizer state, and ends where an
uninterrupted run ends."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import tensorflow as tf

from tests.components.estimator import _hook_fixtures as fx

ROOT = Path(__file__).resolve().parents[3]
MAX_STEPS = 60


def _child(model_dir, out, sleep) -> subprocess.Popen:
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3",
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    return subprocess.Popen([sys.executable, "-m", "tests.components.estimator._sigkill_child",
                             str(model_dir), str(out), str(MAX_STEPS), str(sleep)],
                            cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)


def _kill_after_first_checkpoint(proc: subprocess.Popen, model_dir: Path) -> None:
    deadline = time.monotonic() + 120
    while tf.train.latest_checkpoint(str(model_dir)) is None:
        assert proc.poll() is None, f"child ended early: {proc.stderr.read()[-3000:]}"
        assert time.monotonic() < deadline, "no checkpoint within 120 s"
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)  # reaps it and closes its stderr pipe
    assert proc.returncode == -signal.SIGKILL


def _optimizer_checkpoint_values(checkpoint: str) -> dict[int, np.ndarray]:
    """Optimizer variables in the checkpoint by their index in ``optimizer.variables``."""
    prefix = "optimizers/optimizers/0/"
    suffix = "/.ATTRIBUTES/VARIABLE_VALUE"
    values = {}
    for name, _ in tf.train.list_variables(checkpoint):
        if name.startswith(prefix + "_variables/"):
            values[int(name[len(prefix + "_variables/"):-len(suffix)])] = \
                tf.train.load_variable(checkpoint, name)
        elif name == prefix + "_iterations" + suffix:
            values[0] = tf.train.load_variable(checkpoint, name)
    return values


def test_sigkill_then_restart_resumes_from_the_last_checkpoint(tmp_path):
    model_dir = tmp_path / "killed"
    first = _child(model_dir, tmp_path / "first.json", sleep=0.3)
    _kill_after_first_checkpoint(first, model_dir)
    checkpoint = tf.train.latest_checkpoint(str(model_dir))
    saved_step = int(checkpoint.rsplit("-", 1)[1])
    assert 10 <= saved_step < MAX_STEPS and saved_step % 10 == 0

    second = _child(model_dir, tmp_path / "second.json", sleep=0.0)
    _, errors = second.communicate(timeout=300)
    assert second.returncode == 0, errors[-3000:]
    started = json.loads((tmp_path / "second.json").read_text())
    assert started["start_step"] == saved_step
    in_checkpoint = _optimizer_checkpoint_values(checkpoint)
    assert in_checkpoint[0] == saved_step  # Adagrad's iteration count
    assert len(in_checkpoint) >= 3  # iterations + one accumulator per variable (w, b)
    for index, value in in_checkpoint.items():
        np.testing.assert_allclose(started["optimizer"][index], value, rtol=1e-6,
                                   err_msg=f"optimizer variable {index}")

    straight = fx.estimator(tmp_path / "straight")
    straight.train(fx.whole_batch_input_fn, max_steps=MAX_STEPS)
    resumed = fx.estimator(model_dir)
    assert resumed.global_step == MAX_STEPS
    for name in straight.get_variable_names():
        if name.startswith(("store/", "optimizers/")):
            np.testing.assert_allclose(resumed.get_variable_value(name),
                                       straight.get_variable_value(name), rtol=1e-5,
                                       atol=1e-6, err_msg=name)
    final_loss = resumed.evaluate(fx.eval_input_fn)["loss"]
    assert abs(final_loss - straight.evaluate(fx.eval_input_fn)["loss"]) < 1e-5
