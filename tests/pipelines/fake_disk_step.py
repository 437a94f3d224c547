"""A fake step (:mod:`tests.pipelines.fake_step`, same arguments) that also says where it wrote
each output, as the real steps do (``[NAME one process] wrote DIR/NAME.json``), and that can
wait, or fill the disk, after its work.

``--wait-for PATH``: once the step's outputs are written, it waits until PATH exists (a run
paused at that step, for as long as a test needs).

``--fill PATH`` (when ``--fill-if MARKER`` names a file that exists, or without ``--fill-if``):
once the step's outputs are written, PATH is written until the file system holding it is full
(ENOSPC), and the step still succeeds: the disk another program filled while the step ran, as
the runner's next write of its own files meets it.

:func:`command` is the ``estflow`` command (to run in a subprocess) whose ``run`` plans the
five steps as these steps (:func:`tests.pipelines.fake_runs.fake_plan`'s, each with its
options), behind the real fingerprint step.
"""

from __future__ import annotations

import errno
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from tests.pipelines import fake_step

_ESTFLOW = """
import dataclasses, json, sys
from estflow.pipelines import cli
from estflow.pipelines.local import runner as local_runner
from tests.pipelines import fake_runs

def build_plan(pipeline, source_root, **_):
    plan = fake_runs.fake_plan(pipeline, json.loads(sys.argv[1]), source_root=source_root)
    return dataclasses.replace(plan, steps=tuple(
        dataclasses.replace(s, module="tests.pipelines.fake_disk_step") for s in plan.steps))

local_runner.build_plan = build_plan
sys.exit(cli.main(sys.argv[2:]))
"""


def command(steps: dict) -> list[str]:
    """``estflow`` with these steps (``steps``: step name -> further options, as
    :func:`tests.pipelines.fake_runs.fake_plan` takes them); the arguments follow."""
    return [sys.executable, "-c", _ESTFLOW, json.dumps(steps)]


def fill(path: Path) -> int:
    """Write ``path`` until its file system is full; returns the bytes written."""
    written = 0
    with open(path, "wb", buffering=0) as out:
        for chunk in (1 << 16, 1 << 12, 1):  # then smaller writes, for the last free bytes
            while True:
                try:
                    written += out.write(b"\0" * chunk)
                except OSError as err:
                    if err.errno != errno.ENOSPC:
                        raise
                    break
    return written


def main(argv: Sequence[str]) -> int:
    status = fake_step.main(argv)
    pairs = [part for arg in argv for part in (
        arg.split("=", 1) if arg.startswith("--") and "=" in arg else [arg])]
    args = dict(zip(pairs[::2], pairs[1::2], strict=True))
    if status != 0:
        return status
    name = args["--name"]
    for artifact in filter(None, args.get("--writes", "").split(",")):
        print(f"[{name} one process] wrote {args[f'--{artifact}']}/{name}.json", flush=True)
    while "--wait-for" in args and not Path(args["--wait-for"]).exists():
        time.sleep(0.05)
    if "--fill" in args and ("--fill-if" not in args or Path(args["--fill-if"]).exists()):
        print(f"[{name} one process] filled the disk: {fill(Path(args['--fill']))} bytes",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
