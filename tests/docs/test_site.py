"""The documentation site builds with ``mkdocs build --strict``: no broken link, anchor or nav
entry, no page left out of the nav, and no other warning."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_the_site_builds_strict_without_a_warning(tmp_path):
    command = [sys.executable, "-m", "mkdocs", "build", "--strict", "-f",
               str(REPO / "docs" / "mkdocs.yml"), "-d", str(tmp_path / "site")]
    # NO_MKDOCS_2_WARNING: Material 9.7+ prints a banner about MkDocs 2 on every build.
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    done = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env=env)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-5000:]
    warnings = [line for line in output.splitlines() if line.startswith(("WARNING", "ERROR"))]
    assert not warnings, "\n".join(warnings)
    assert (tmp_path / "site" / "index.html").exists()
    assert (tmp_path / "site" / "reference" / "dsl" / "index.html").exists()
