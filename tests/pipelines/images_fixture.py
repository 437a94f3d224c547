"""The ``images`` fixture the image tests share: ``make image``, as documented (the README's
command, from the repository root), once per test module that uses it; it yields the CPU and
slim image references.

Needs a Docker engine (CI's ``.ci/run`` installs and starts one); skipped where none runs, except
under CI (``CI`` set), where a missing engine fails. A test module takes it with
``images = images_fixture.images`` (an assignment, not an import, so that the tests' parameter
of the same name is no redefinition of an unused import).
"""

from __future__ import annotations

import fcntl
import os
import subprocess
from pathlib import Path

import pytest

from tests.pipelines import kfp_local_fakes

__all__ = ["REPO", "IMAGE", "SLIM_IMAGE", "docker_engine", "images"]

REPO = Path(__file__).resolve().parents[2]
IMAGE = "ghcr.io/estflow/estflow:0.1.0"
SLIM_IMAGE = IMAGE + "-slim"


def docker_engine() -> bool:
    """Whether ``docker info`` reaches a running engine."""
    try:
        return subprocess.run(["docker", "info"], capture_output=True, timeout=60).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


@pytest.fixture(scope="module")
def images():
    """``make image``, as documented (the README's command, from the repository root)."""
    if not docker_engine():
        if os.environ.get("CI"):
            pytest.fail("no Docker engine runs here: .ci/run should have started one")
        pytest.skip("no Docker engine runs here")
    # make test runs modules on two processes: one build of the images at a time (the
    # second finds them built)
    with open(REPO / ".image-build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = subprocess.run(["make", "image"], cwd=REPO, capture_output=True, text=True,
                              timeout=1800, env=kfp_local_fakes.env())
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    return IMAGE, SLIM_IMAGE
