"""components/_runtime/quiet.py: TensorFlow's C++ start-up lines left out of a command's stderr
(``estflow predict``), with its exit status and signals kept; tf.Transform's Keras 2 warning
dropped from the train step's log, and nothing else (issue 32, item 9)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from estflow.components._runtime import quiet

ROOT = Path(__file__).resolve().parents[2]
NOISE = (
    "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR",
    "I0000 00:00:1796172069.100175   24970 cudart_stub.cc:31] Could not find cuda drivers on "
    "your machine, GPU will not be used.",
    "E0000 00:00:1796172086.066004   24970 cuda_platform.cc:52] failed call to cuInit: "
    "INTERNAL: CUDA error: Failed call to cuInit: UNKNOWN ERROR (303)",
)


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    return env


def test_the_start_up_lines_are_noise_and_errors_are_not():
    assert all(quiet.is_noise(line) for line in NOISE)
    assert not quiet.is_noise("E0000 00:00:1.2   7 saved_model.cc:1] could not load the model")
    assert not quiet.is_noise("[batch_predict] error: no model at 'models/none'")
    assert not quiet.is_noise("Traceback (most recent call last):")


_CHILD = """
import os, sys
for line in {noise!r}:
    os.write(2, (line + "\\n").encode())
print("[batch_predict] scored 3 rows", flush=True)
print("[batch_predict] error: the step's own line", file=sys.stderr, flush=True)
sys.exit(3)
"""


def test_the_relay_keeps_stdout_the_step_s_lines_and_its_exit_status():
    script = (f"import sys\nfrom estflow.components._runtime import quiet\n"
              f"sys.exit(quiet.relay([sys.executable, '-c', {_CHILD.format(noise=NOISE)!r}]))")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env=_env(), timeout=60)
    assert done.returncode == 3
    assert done.stdout == "[batch_predict] scored 3 rows\n"
    assert done.stderr == "[batch_predict] error: the step's own line\n"


_STOPPABLE = """
import signal, sys, time
def stop(signum, frame):
    print("stopping on", signal.Signals(signum).name, file=sys.stderr, flush=True)
    sys.exit(128 + signum)
signal.signal(signal.SIGTERM, stop)
print("ready", flush=True)
time.sleep(60)
"""


def test_sigterm_reaches_the_step_and_the_command_waits_for_its_last_lines(tmp_path):
    (tmp_path / "stoppable.py").write_text(_STOPPABLE)
    env = _env()
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), env["PYTHONPATH"]])
    proc = subprocess.Popen([sys.executable, "-m", "estflow.components._runtime.quiet",
                             "stoppable"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env)
    try:
        assert proc.stdout.readline() == "ready\n"
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 128 + signal.SIGTERM
    assert err == "stopping on SIGTERM\n"


_TFT_WARNING = ("TF_USE_LEGACY_KERAS is set to %s, which will not use Keras 2. Tensorflow"
                " Transform is only compatible with Keras 2. Please set"
                " TF_USE_LEGACY_KERAS=1.")


def test_the_train_step_drops_tft_s_keras_2_warning_and_keeps_the_others():
    script = textwrap.dedent(f"""
        import estflow.components.train
        from absl import logging
        logging.warning({_TFT_WARNING!r}, "0")
        logging.warning("TF_USE_LEGACY_KERAS: any other warning is kept")
    """)
    env = {k: v for k, v in _env().items() if k != "TF_USE_LEGACY_KERAS"}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "only compatible with Keras 2" not in done.stderr
    assert "any other warning is kept" in done.stderr


@pytest.mark.slow
def test_importing_tft_in_the_train_step_says_nothing_of_keras_2():
    script = "import estflow.components.train\nimport tensorflow_transform\n"
    env = {k: v for k, v in _env().items() if k != "TF_USE_LEGACY_KERAS"}
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "only compatible with Keras 2" not in done.stderr, time.monotonic() - start
