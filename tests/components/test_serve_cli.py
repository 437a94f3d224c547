"""``estflow serve`` and ``python -m estflow.components.serve`` as a user runs them: every option
in ``--help``, a busy port refused at once (before TensorFlow is imported), no TensorFlow/CUDA
start-up noise in the server's output."""

import contextlib
import io
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from estflow.components.serve import __main__ as serve
from estflow.dsl.contracts import SERVE_OPTIONS
from estflow.pipelines import cli
from tests.components import _serving_fixtures as fx

ROOT = Path(__file__).resolve().parents[2]
FLAGS = ["--port", "--model-config-file", "--model-base-path", "--model-name", "--host",
         "--poll-seconds", "--max-body-bytes", "--threads", "--request-timeout-seconds",
         "--rest-api-timeout-in-ms", "--idle-timeout-seconds", "--max-connections",
         "--grpc-port", "--monitoring-config-file", "--enable-batching",
         "--batching-parameters-file"]


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    root = tmp_path_factory.mktemp("base")
    fx.write_versions(root / "taxi", (1,))
    return root


def _help(main, argv) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 0
    return out.getvalue()


def test_estflow_serve_help_lists_every_option():
    text = _help(cli.main, ["serve", "--help"])
    assert [f"--{o.flag}" for o in SERVE_OPTIONS] == FLAGS
    for option in SERVE_OPTIONS:
        assert f"--{option.flag}" in text
        assert " ".join(option.help.split()[:3]) in " ".join(text.split())
    assert "BASE_PATH" in text


def test_an_option_out_of_range_is_a_short_usage_error(base, capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["serve", str(base), "--port", "70000"])
    assert exit_info.value.code == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert error == ("estflow serve: error: argument --port/--rest_api_port: expected 0..65535, "
                     "got 70000")


def test_the_component_parser_is_built_from_the_same_options():
    text = _help(serve.main, ["--help"])
    aliases = {f"--{a}" for o in SERVE_OPTIONS for a in o.aliases}  # tensorflow_model_server's
    assert set(re.findall(r"--[a-z_-]+", text)) == {*FLAGS, *aliases, "--help"}


def _env():
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTEST", "TF_CPP"))}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    return env


_MAIN_ON_BUSY_PORT = """
import sys
from estflow.components.serve import __main__ as serve
code = serve.main(sys.argv[1:])
print("exit", code, "tensorflow imported:", "tensorflow" in sys.modules)
"""


def test_a_busy_port_fails_at_once_naming_it_before_tensorflow_is_imported(base):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = subprocess.run([sys.executable, "-c", _MAIN_ON_BUSY_PORT, str(base),
                               "--port", str(port)], capture_output=True, text=True,
                              env=_env(), timeout=120)
        assert proc.stdout.strip() == "exit 2 tensorflow imported: False", proc.stderr
        assert proc.stderr.strip() == (f"estflow serve: cannot listen on 127.0.0.1:{port}: "
                                       f"port {port} is already in use (choose another with "
                                       "--port)")
        start = time.monotonic()
        proc = subprocess.run([sys.executable, "-m", "estflow.pipelines.cli", "serve",
                               str(base), "--port", str(port)], capture_output=True, text=True,
                              env=_env(), timeout=120)
        assert time.monotonic() - start < 15
        assert proc.returncode == 2 and f"port {port} is already in use" in proc.stderr


@pytest.mark.slow
def test_the_server_output_has_no_tensorflow_start_up_noise(base):
    process = subprocess.Popen(
        [sys.executable, "-m", "estflow.pipelines.cli", "serve", str(base), "--port", "0",
         "--poll-seconds", "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=_env())
    try:
        line = process.stdout.readline()
        assert re.fullmatch(r"estflow serve: listening on http://127\.0\.0\.1:\d+ "
                            r"\(models: taxi@1\)\n", line), line
    finally:
        process.terminate()
        _, stderr = process.communicate(timeout=30)
    assert process.returncode == 0
    lines = stderr.splitlines()
    assert lines and all(line.startswith("[serve] ") for line in lines), stderr
    assert any("serving model taxi version 1" in line for line in lines)
