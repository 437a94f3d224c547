"""Push publishes whole versions only, never overwrites, keeps the newest N."""

import os
import signal
import subprocess
import sys
import time

import pytest

from estflow.components import push


def _export(tmp_path, payload=b"model"):
    export = tmp_path / "export"
    (export / "variables").mkdir(parents=True)
    (export / "saved_model.pb").write_bytes(payload)
    (export / "variables" / "variables.data-00000-of-00001").write_bytes(b"x" * 1000)
    return export


def test_push_creates_increasing_integer_versions(tmp_path):
    export = _export(tmp_path)
    base = tmp_path / "serving" / "taxi"
    first = push.push_directory(export, base)
    second = push.push_directory(export, base)
    assert int(second.name) > int(first.name)
    assert push.list_versions(base) == [int(first.name), int(second.name)]
    assert (second / "saved_model.pb").read_bytes() == b"model"
    assert not [p for p in base.iterdir() if p.name.startswith(".")]  # no staging left behind


def test_push_never_overwrites_a_version(tmp_path):
    export = _export(tmp_path)
    base = tmp_path / "serving" / "taxi"
    push.push_directory(export, base, version=7)
    with pytest.raises(FileExistsError, match="version 7 already exists"):
        push.push_directory(_export(tmp_path / "other", b"new"), base, version=7)
    assert (base / "7" / "saved_model.pb").read_bytes() == b"model"


def test_keep_versions_prunes_oldest(tmp_path):
    export = _export(tmp_path)
    base = tmp_path / "m"
    for v in (1, 2, 3, 4):
        push.push_directory(export, base, version=v, keep_versions=2)
    assert push.list_versions(base) == [3, 4]


def test_missing_saved_model_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="saved_model.pb is missing"):
        push.push_directory(tmp_path, tmp_path / "m")


# The files are copied, and the process is stuck in its first fsync when it gets SIGKILL:
# the staging directory exists on disk, the rename has not happened.
_SLOW_COPY = """
import os, sys, time
from pathlib import Path
from estflow.components import push
def slow_fsync(fd):
    print("copied", flush=True)
    time.sleep(30)
os.fsync = slow_fsync
push.push_directory(Path(sys.argv[1]), Path(sys.argv[2]), version=2)
"""


def test_push_killed_midway_leaves_no_visible_version(tmp_path):
    export = _export(tmp_path)
    base = tmp_path / "m"
    push.push_directory(export, base, version=1)
    proc = subprocess.Popen([sys.executable, "-c", _SLOW_COPY, str(export), str(base)],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().startswith("copied")  # part of the files are written
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    time.sleep(0.1)
    assert any(p.name.startswith(".tmp-") for p in base.iterdir())  # it did write files
    assert push.list_versions(base) == [1]  # the half-written version is invisible
