"""A full disk under ESTFLOW_HOME while ``estflow run`` writes its own files (run record, cache
entry, links, spec): the run fails as a step failure does (the step named, the OS error and
its path, the command that continues it, exit status 1, no temporary file left), and once
there is space again ``--resume`` finishes it.

The disk is real: a 2 MiB tmpfs mounted on ``estflow_runs`` in a user and mount namespace of
its own (``unshare -Urm``, no root needed where the kernel allows unprivileged user
namespaces), so every write meets the kernel's own ENOSPC, for the runner and the steps alike.
A patched ``write`` would only test the patch; RLIMIT_FSIZE gives EFBIG, per file, and would
fail the steps' files first. The fake train step (:mod:`tests.pipelines.fake_disk_step`) fills
the disk once its outputs are written, as another program filling it meanwhile would: the
runner's next write of its own (the step's log, then the cache entry) is the first to fail. The tmpfs
lives only as long as the namespace, so one shell script there runs the commands and copies
what they left to the test's directory."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.pipelines import fake_disk_step
from tests.pipelines.test_run_layout_default_env import dangling
from tests.pipelines.test_run_layout_default_env import default_env
from tests.pipelines.test_run_layout_default_env import write_pipeline


def _namespaces_mount(tmp_path) -> bool:
    """Whether this machine lets a process mount a tmpfs in a namespace of its own."""
    if shutil.which("unshare") is None:
        return False
    (tmp_path / "probe").mkdir()
    done = subprocess.run(["unshare", "-Urm", "sh", "-c", "mount -t tmpfs -o size=64k tmpfs "
                           "probe"], cwd=tmp_path, capture_output=True, timeout=60)
    return done.returncode == 0


def test_a_full_disk_fails_the_step_clearly_and_resume_finishes_the_run(tmp_path):
    if not _namespaces_mount(tmp_path):
        pytest.skip("unprivileged user and mount namespaces are off here: no tmpfs to fill")
    target = write_pipeline(tmp_path, rows=50)
    (tmp_path / "estflow_runs").mkdir()
    marker = tmp_path / "fill-once"
    marker.touch()
    estflow = shlex.join(fake_disk_step.command(
        {"train": {"fill": "estflow_runs/filler", "fill_if": str(marker)}}))
    script = (
        "set -u\n"
        "mount -t tmpfs -o size=2m tmpfs estflow_runs\n"
        f"{estflow} run {target.name} >out1 2>err1; echo $? >rc1\n"
        "cp -a estflow_runs after-failure\n"
        "rm estflow_runs/filler fill-once\n"
        f"{estflow} run {target.name} --resume >out2 2>err2; echo $? >rc2\n"
        "cp -a estflow_runs after-resume\n")
    done = subprocess.run(["unshare", "-Urm", "bash", "-c", script], cwd=tmp_path,
                          env=default_env(), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    err = (tmp_path / "err1").read_text()
    assert (tmp_path / "rc1").read_text().strip() == "1", err
    (run,) = (tmp_path / "after-failure" / "chicago-taxi").iterdir()
    assert "Traceback" not in err
    failed = re.search(r"^estflow run: step 'train' failed: the runner could not write its "
                       r"files: \[Errno 28\] No space left on device: '(.*)'$", err, re.M)
    assert failed, err
    # the file it could not write: the step's log, or the next one the runner writes
    assert Path(failed.group(1)).is_relative_to(tmp_path / "estflow_runs"), failed.group(1)
    assert (f"continue it (finished steps are reused): estflow run {target.name} --resume "
            f"{run.name}") in err
    assert [p.name for p in (tmp_path / "after-failure").rglob("*.tmp")] == []
    record = json.loads((run / "run.json").read_text())  # the last one the disk took
    assert [s for s, step in record["steps"].items() if step["status"] == "ran"] == [
        "ingest", "transform"]

    out = (tmp_path / "out2").read_text()
    assert (tmp_path / "rc2").read_text().strip() == "0", out + (tmp_path / "err2").read_text()
    record = json.loads((tmp_path / "after-resume" / "chicago-taxi" / run.name / "run.json"
                         ).read_text())
    assert record["status"] == "succeeded" and len(record["attempts"]) == 2
    assert dangling(tmp_path / "after-resume") == []
