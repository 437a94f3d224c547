"""``make`` with a wrong Python: it stops before creating ``.venv`` and says what to do, and a
``.venv`` made by a wrong Python earlier is detected (and ``make distclean`` removes it).

Each test runs the real Makefile in a scratch directory (never the repository's ``.venv``)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
HERE = f"{sys.version_info[0]}.{sys.version_info[1]}"
OTHER = "3.10" if HERE != "3.10" else "3.12"

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="needs make")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    shutil.copy(REPO / "Makefile", tmp_path)
    shutil.copy(REPO / "pyproject.toml", tmp_path)
    return tmp_path


def _make(project: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["make", "--no-print-directory", "-C", str(project), *args],
                          capture_output=True, text=True, timeout=120)


def test_the_makefile_asks_for_the_python_pyproject_requires():
    required = re.search(r'^requires-python = ">=(\d+\.\d+),<(\d+)\.(\d+)"',
                         (REPO / "pyproject.toml").read_text(), re.M)
    declared = re.search(r"^PYTHON_VERSION \?= (\S+)", (REPO / "Makefile").read_text(), re.M)
    assert required and declared
    low, major, minor = required.groups()
    assert low == declared.group(1) == f"{major}.{int(minor) - 1}"


def test_a_wrong_python_stops_before_creating_the_venv(project):
    result = _make(project, "install", f"PYTHON={sys.executable}", f"PYTHON_VERSION={OTHER}")
    assert result.returncode != 0
    assert f"estflow needs Python {OTHER}" in result.stderr
    assert f"is Python {HERE}" in result.stderr
    assert f"make PYTHON=python{OTHER}" in result.stderr
    assert not (project / ".venv").exists()


def test_a_missing_python_is_named(project):
    result = _make(project, "install", "PYTHON=no-such-python3.11")
    assert result.returncode != 0
    assert "no-such-python3.11" in result.stderr and "not found" in result.stderr
    assert not (project / ".venv").exists()


def test_a_venv_left_by_a_wrong_python_is_detected_and_distclean_removes_it(project):
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(project / ".venv")],
                   check=True, timeout=120)
    result = _make(project, "install", f"PYTHON_VERSION={OTHER}")
    assert result.returncode != 0
    assert f".venv was made with Python {HERE}; estflow needs Python {OTHER}" in result.stderr
    assert "make distclean" in result.stderr

    assert _make(project, "clean").returncode == 0
    assert (project / ".venv").exists()  # clean keeps the environment...
    assert _make(project, "distclean").returncode == 0
    assert not (project / ".venv").exists()  # ...distclean removes it
