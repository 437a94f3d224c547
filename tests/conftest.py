"""Shared fixtures: every test gets its own ESTFLOW_HOME (where `estflow run` keeps its runs
and its step cache), so no test reuses, or leaves, another's cached steps.

``make test`` runs the suite on two processes (pytest-xdist, ``--dist loadfile``): each test
module stays on one process (its module-scoped fixtures, a trained workspace, are made once, and
its tests run in order). The modules that build the Docker images take a lock around the build
(``tests/pipelines/images_fixture.py``), so no two builds of one image run at once.
"""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _own_estflow_home(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("ESTFLOW_HOME", str(tmp_path_factory.mktemp("estflow_home")))
