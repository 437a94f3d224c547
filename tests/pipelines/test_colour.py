"""The verdicts in colour at a terminal, never in a pipe, a file or a log (issue 32, item 9):
BLESSED green, NOT BLESSED and ANOMALY red, only when stdout is a terminal and NO_COLOR is
unset."""

from __future__ import annotations

import io
import os
import sys
from pathlib import Path

import pytest

from estflow.pipelines import cli
from estflow.pipelines.cli import colour as _colour
from tests.pipelines import fake_runs

REPO = Path(__file__).resolve().parents[2]
ESC = "\033["


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture(autouse=True)
def _colour_allowed(monkeypatch):
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")


def test_each_verdict_has_its_colour():
    assert _colour.paint("    [evaluate] BLESSED: every check passed") == \
        "    [evaluate] \033[1;32mBLESSED\033[0m: every check passed"
    assert _colour.paint("[evaluate] NOT BLESSED: 1 of 2 check(s) failed") == \
        "[evaluate] \033[1;31mNOT BLESSED\033[0m: 1 of 2 check(s) failed"
    assert _colour.paint("[validate] ANOMALY: x: KIND") == "[validate] \033[1;31mANOMALY\033[0m: x: KIND"
    assert _colour.paint("UNBLESSED and ANOMALYX stay") == "UNBLESSED and ANOMALYX stay"


def test_colour_only_at_a_terminal_without_no_color(monkeypatch):
    assert _colour.enabled(_Terminal())
    assert not _colour.enabled(io.StringIO())
    monkeypatch.setenv("NO_COLOR", "1")
    assert not _colour.enabled(_Terminal())
    monkeypatch.setenv("NO_COLOR", "")
    assert _colour.enabled(_Terminal())
    monkeypatch.setenv("TERM", "dumb")
    assert not _colour.enabled(_Terminal())


def test_the_terminal_echo_paints_a_terminal_and_not_a_pipe():
    terminal, pipe = _Terminal(), io.StringIO()
    _colour.terminal_echo(terminal)("[evaluate] BLESSED: ok")
    _colour.terminal_echo(pipe)("[evaluate] BLESSED: ok")
    assert terminal.getvalue() == "[evaluate] \033[1;32mBLESSED\033[0m: ok\n"
    assert pipe.getvalue() == "[evaluate] BLESSED: ok\n"


@pytest.fixture
def _steps_import_the_tests(monkeypatch):
    path = os.environ.get("PYTHONPATH")
    monkeypatch.setenv("PYTHONPATH", str(REPO) + (os.pathsep + path if path else ""))


@pytest.mark.usefixtures("_steps_import_the_tests")
@pytest.mark.parametrize("terminal", [True, False])
def test_estflow_run_colours_its_verdicts_at_a_terminal_only(tmp_path, monkeypatch, terminal):
    fake_runs.use_fake_steps(monkeypatch, {"push": {"emit": {"push.json": fake_runs.NOT_PUSHED}}})
    out = _Terminal() if terminal else io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    status = cli.main(["run", "estflow.pipelines.examples.taxi", "--workdir",
                       str(tmp_path / "run")])
    assert status == cli.EXIT_NOT_PUSHED
    said = out.getvalue()
    if terminal:
        assert "Model \033[1;31mNOT pushed\033[0m (not blessed)" in said
    else:
        assert "Model NOT pushed (not blessed)" in said and ESC not in said
    logs = "".join(p.read_text() for p in (tmp_path / "run").rglob("log.txt"))
    assert logs and ESC not in logs
