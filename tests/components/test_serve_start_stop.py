"""``estflow serve`` says what it does while it starts and stops (issue 32, item 9): a model's
own folder given for BASE_PATH is served as that model, with a line saying so; a line before
each model loads; a line when SIGTERM stops it, which it then does at once; TensorFlow's own
INFO and deprecation lines stay out of its output."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from estflow.components.serve.config import ModelConfig
from estflow.components.serve.server import checked_models
from estflow.components.serve.server import model_folder

ROOT = Path(__file__).resolve().parents[2]
TESTDATA = Path(__file__).parent / "tfserving_testdata"
TWO_VERSIONS = TESTDATA / "saved_model_half_plus_two_2_versions"  # 00000123, 00000124


@pytest.fixture
def models(tmp_path) -> Path:
    shutil.copytree(TWO_VERSIONS, tmp_path / "models" / "half")
    return tmp_path / "models"


def test_a_model_folder_is_served_as_the_model_named_after_it(models):
    assert sorted(model_folder(models / "half")) == [123, 124]
    assert model_folder(models) == {}
    assert checked_models(models) == models.resolve()
    assert checked_models(str(models / "half")) == [ModelConfig("half", models / "half")]


def test_a_model_folder_without_a_model_name_names_its_parent(models):
    odd = models / "half plus two"
    (models / "half").rename(odd)
    with pytest.raises(ValueError, match=re.escape(f"give its parent ({str(models)!r})")):
        checked_models(odd)


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "TF_CPP"))}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    return env


@pytest.mark.slow
def test_serving_a_model_folder_says_what_it_loads_and_when_it_stops(models):
    process = subprocess.Popen(
        [sys.executable, "-m", "estflow.pipelines.cli", "serve", str(models / "half"),
         "--port", "0", "--poll-seconds", "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, env=_env(), cwd=models)
    try:
        said = process.stdout.readline()
        assert said.startswith(f"estflow serve: {models / 'half'} is one model's folder "
                               "(version directories 123, 124), not a base path of models: "
                               "serving it as model 'half' (to serve every model pushed "
                               f"beside it, give its parent: estflow serve {models})"), said
        ready = process.stdout.readline()
        assert re.fullmatch(r"estflow serve: listening on http://127\.0\.0\.1:\d+ "
                            r"\(models: half@124\)\n", ready), ready
        stopped_at = time.monotonic()
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=60)
        took = time.monotonic() - stopped_at
    finally:
        process.kill()
    assert process.returncode == 0, err
    assert out.splitlines() == [
        "estflow serve: stopping (SIGTERM): refusing new connections, finishing the requests "
        "in progress ...", "estflow serve: stopped"]
    assert took < 3.0, f"{took:.1f}s from SIGTERM to exit"
    lines = err.splitlines()
    assert lines and all(line.startswith("[serve] ") for line in lines), err
    assert "INFO starting: loading TensorFlow, then the models of" in lines[0]
    loading = next(i for i, line in enumerate(lines) if "INFO loading model half version 124"
                   " from " in line)
    serving = next(i for i, line in enumerate(lines) if "serving model half version 124" in line)
    assert loading < serving
    assert not any("Restoring parameters" in line or "deprecated" in line for line in lines), err
