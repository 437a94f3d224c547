"""Shared fixtures: every test gets its own ESTFLOW_HOME (where `estflow run` keeps its runs
and its step cache), so no test reuses, or leaves, another's cached steps."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _own_estflow_home(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("ESTFLOW_HOME", str(tmp_path_factory.mktemp("estflow_home")))
