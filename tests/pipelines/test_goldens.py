"""``python -m estflow.pipelines.kubeflow.goldens --check`` compares the goldens as the tests do: with the
kfp release stamp left out (``kfp==2.17.*`` installs the newest patch release), every other
byte counting."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

from estflow.pipelines.kubeflow import goldens

GOLDENS = Path(__file__).parent / "goldens"


def _check(directory: Path) -> subprocess.CompletedProcess:
    """The documented command, as a user runs it (from a fresh directory)."""
    return subprocess.run([sys.executable, "-m", "estflow.pipelines.kubeflow.goldens", "--check",
                           "--dir", str(directory)], capture_output=True, text=True,
                          cwd=directory.parent)


def _copy(tmp_path: Path, stamp: str) -> Path:
    """The goldens, each stamped by kfp release ``stamp``."""
    copied = tmp_path / "goldens"
    copied.mkdir()
    for name in goldens.GOLDENS:
        text = (GOLDENS / name).read_text()
        stamped, found = re.subn(r"(?m)^sdkVersion: kfp-.*$", f"sdkVersion: kfp-{stamp}", text)
        assert found == 1, name
        (copied / name).write_text(stamped)
    return copied


def test_check_passes_goldens_stamped_by_another_kfp_patch_release(tmp_path):
    """A golden written by kfp 2.17.0 is up to date under kfp 2.17.3: only the stamp differs
    (was: OUT OF DATE on a fresh install, while the tests passed)."""
    done = _check(_copy(tmp_path, "2.17.99"))
    assert done.returncode == 0, done.stderr
    assert "OUT OF DATE" not in done.stderr


def test_check_still_finds_any_other_difference(tmp_path):
    copied = _copy(tmp_path, "2.17.99")
    name = sorted(goldens.GOLDENS)[0]
    text = (copied / name).read_text()
    (copied / name).write_text(text.replace("cpuRequest: 1.0", "cpuRequest: 2.0", 1))
    assert (copied / name).read_text() != text
    done = _check(copied)
    assert done.returncode == 1
    assert f"OUT OF DATE {copied / name}" in done.stderr


def test_the_tests_and_the_check_compare_with_one_function():
    """The golden tests' comparison is the command's (``goldens.same``)."""
    from tests.pipelines import kfp_ir

    a = b"x: 1\nsdkVersion: kfp-2.17.0\n"
    b = b"x: 1\nsdkVersion: kfp-2.17.3\n"
    assert goldens.same(a, b) and kfp_ir.as_golden(a) == kfp_ir.as_golden(b)
    assert not goldens.same(a, a.replace(b"x: 1", b"x: 2"))
    assert kfp_ir.as_golden is goldens.comparable


def test_a_fresh_check_of_the_repository_goldens_passes(tmp_path):
    copied = tmp_path / "goldens"
    shutil.copytree(GOLDENS, copied)
    done = _check(copied)
    assert done.returncode == 0, done.stderr
