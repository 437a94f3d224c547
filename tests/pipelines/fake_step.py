"""A stand-in step entry point for the local runner's tests (no TensorFlow, no Beam).

``python -m tests.pipelines.fake_step --spec SPEC --name NAME [--reads A,B] [--writes C]
[--<artifact> DIR ...] [--fail MESSAGE] [--fail-file PATH] [--fail-task TYPE-INDEX]
[--emit JSON] [--sleep SECONDS] [--pid-file PATH] [--ignore-sigint 1]``

It prints a progress line (``[NAME ...``, which the runner echoes) and a line only the log
gets, then writes ``<NAME>.json`` (``<NAME>-<type>-<index>.json`` under a TF_CONFIG) into each
artifact directory of ``--writes``, recording the spec's pipeline name, its arguments, the
listing of each artifact directory of ``--reads``, and its TF_CONFIG task. ``--fail`` (or
``--fail-task`` naming this process's TF_CONFIG task, or ``--fail-file`` naming a file that
exists) makes it exit with status 3 instead.

``--emit`` is a JSON object ``{relative file: content}`` also written into each artifact
directory of ``--writes`` (a string as it is, anything else as JSON), before ``--sleep``
seconds of sleep (``--pid-file`` gets the process id right before the sleep, when its outputs
are written: a test that signals the step once the file appears finds them; ``--ignore-sigint``
makes it deaf to Ctrl-C). Arguments are ``--flag value`` pairs, or ``--flag=value``.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path

FAILED = 3


def main(argv: Sequence[str]) -> int:
    argv = [part for arg in argv for part in (
        arg.split("=", 1) if arg.startswith("--") and "=" in arg else [arg])]
    args = dict(zip(argv[::2], argv[1::2], strict=True))  # "--flag" -> value
    if "--ignore-sigint" in args:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    name = args["--name"]
    config = json.loads(os.environ.get("TF_CONFIG", "null"))
    task = f"{config['task']['type']}-{config['task']['index']}" if config else None
    print(f"[{name} {task or 'one process'}] started", flush=True)
    print("chatter that only the log keeps", flush=True)
    failing = "--fail-file" in args and Path(args["--fail-file"]).exists()
    if "--fail" in args or failing or (task is not None and args.get("--fail-task") == task):
        print(f"something broke: {args.get('--fail', task)}", flush=True)
        return FAILED
    record = {
        "spec_name": json.loads(Path(args["--spec"]).read_text())["name"],
        "args": args,
        "read": {a: sorted(os.listdir(args[f"--{a}"]))
                 for a in filter(None, args.get("--reads", "").split(","))},
        "tf_config": config,
    }
    for artifact in filter(None, args.get("--writes", "").split(",")):
        out = Path(args[f"--{artifact}"]) / (f"{name}-{task}.json" if task else f"{name}.json")
        out.write_text(json.dumps(record))
        for file, content in json.loads(args.get("--emit", "{}")).items():
            (out.parent / file).parent.mkdir(parents=True, exist_ok=True)
            (out.parent / file).write_text(content if isinstance(content, str)
                                           else json.dumps(content))
    if "--pid-file" in args:  # the step is ready for a signal: its outputs are written
        Path(args["--pid-file"]).write_text(str(os.getpid()))
    time.sleep(float(args.get("--sleep", 0)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
