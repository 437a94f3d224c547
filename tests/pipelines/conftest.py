"""Fixtures the tests of ``estflow submit``/``schedule``/``schedules`` against a loopback KFP API
share: a fresh working directory holding a compiled package, ``tiny.yaml`` (one component, no
estflow image), with no login variable inherited from the environment, and ``estflow`` running
the command as a user runs it (``estflow.pipelines.cli.main``). A module may define its own
(``test_submit_auth.py``'s workdir also writes certificates)."""

import pytest
from kfp import compiler
from kfp import dsl

from estflow.pipelines import cli as estflow_cli

LOGIN_VARIABLES = ("ESTFLOW_KFP_TOKEN", "ESTFLOW_KFP_COOKIES", "ESTFLOW_KFP_CA_CERT",
                   "KF_PIPELINES_SA_TOKEN_PATH", "KF_PIPELINES_ENDPOINT")


@dsl.component(base_image="python:3.11")
def _echo(text: str) -> str:
    return text


@dsl.pipeline(name="tiny")
def _tiny(text: str = "hello"):
    _echo(text=text)


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    """A fresh directory holding the compiled package, as the cwd; no login variable
    inherited from the environment."""
    for name in LOGIN_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    compiler.Compiler().compile(_tiny, "tiny.yaml")
    return tmp_path


@pytest.fixture
def estflow(capsys, workdir):
    """``estflow ARGS...``: (exit status, stdout, stderr)."""
    def run(*argv):
        code = estflow_cli.main([str(a) for a in argv])
        out, err = capsys.readouterr()
        return code, out, err
    return run
