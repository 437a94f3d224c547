"""``make image`` (the README's command, from the repository root) once per state of what it
builds from, one build at a time: the ``images`` fixture's build.

``make test`` runs modules on two processes, and several modules use the images: the first
one builds them and records what they were made from (``.image-build.done``: a digest of the
sources and both image ids); the others, waiting on one lock, find the images made from the
same sources and do not build them again (a ``make image`` of built images still sends the
whole wheelhouse to Docker twice: about a minute). Sources that changed since, or images gone,
make the next caller build again.

Standard library only: ``python3 tests/pipelines/image_build.py`` builds the same way outside
pytest.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
IMAGE = "ghcr.io/estflow/estflow:0.1.0"
SLIM_IMAGE = IMAGE + "-slim"
LOCK = REPO / ".image-build.lock"
# What the last build here was made from, and the images it made.
STAMP = REPO / ".image-build.done"
# What make image reads: its build context (Makefile's tar), the Dockerfiles and locks under
# pipelines/docker/, and the variables that choose the build.
SOURCES = ("Makefile", "pyproject.toml", "README.md", "LICENSE", "dsl", "components", "pipelines")
VARIABLES = ("IMAGE_REPO", "IMAGE_BASE", "IMAGE_VARIANTS", "WHEELHOUSE", "LOCAL_BASE",
             "DEBIAN_MIRROR", "PYTHON")


def source_digest() -> str:
    """A digest of every file ``make image`` builds from (``__pycache__`` left out, as the
    Makefile's tar leaves it) and of the variables that change the build."""
    digest = hashlib.sha256()
    for top in SOURCES:
        path = REPO / top
        files = [path] if path.is_file() else sorted(
            p for p in path.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc")
        for file in files:
            digest.update(f"{file.relative_to(REPO)}\0".encode() + file.read_bytes() + b"\0")
    for name in VARIABLES:
        digest.update(f"{name}={os.environ.get(name, '')}\0".encode())
    return digest.hexdigest()


def image_ids() -> list[str] | None:
    """The CPU and slim images' ids, or None where either is missing (or no engine answers)."""
    try:
        done = subprocess.run(["docker", "image", "inspect", "-f", "{{.Id}}", IMAGE, SLIM_IMAGE],
                              capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.split() if done.returncode == 0 else None


def build(env: dict | None = None) -> subprocess.CompletedProcess | None:
    """``make image``, unless the images were made from these very sources by an earlier call
    (an earlier module, or the other pytest process): None then."""
    with open(LOCK, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        digest = source_digest()
        try:
            stamp = json.loads(STAMP.read_text())
        except (OSError, ValueError):
            stamp = None
        if stamp is not None and stamp == {"sources": digest, "images": image_ids()}:
            return None
        STAMP.unlink(missing_ok=True)
        done = subprocess.run(["make", "image"], cwd=REPO, capture_output=True, text=True,
                              timeout=1800, env=env)
        ids = image_ids()
        if done.returncode == 0 and ids:
            STAMP.write_text(json.dumps({"sources": digest, "images": ids}))
        return done


if __name__ == "__main__":
    result = build()
    if result is None:
        print("image_build: the images are built from these sources already")
        sys.exit(0)
    print(result.stdout[-4000:] + result.stderr[-4000:])
    sys.exit(result.returncode)
