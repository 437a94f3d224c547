"""The ``images`` fixture the image tests share: ``make image``, as documented (the README's
command, from the repository root), once per state of the sources (``image_build.py``: the
first module that uses it builds, the others find the images built); it yields the CPU and
slim image references.

Needs a Docker engine (CI's ``.ci/run`` installs and starts one); skipped where none runs, except
under CI (``CI`` set), where a missing engine fails. A test module takes it with
``images = images_fixture.images`` (an assignment, not an import, so that the tests' parameter
of the same name is no redefinition of an unused import).
"""

from __future__ import annotations

import os
import subprocess

import pytest

from tests.pipelines import image_build
from tests.pipelines import kfp_local_fakes

__all__ = ["REPO", "IMAGE", "SLIM_IMAGE", "docker_engine", "images"]

REPO = image_build.REPO
IMAGE = image_build.IMAGE
SLIM_IMAGE = image_build.SLIM_IMAGE


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
    # make test runs modules on two processes: one build at a time, and none again from the
    # same sources (image_build.py)
    done = image_build.build(kfp_local_fakes.env())
    assert done is None or done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    return IMAGE, SLIM_IMAGE
