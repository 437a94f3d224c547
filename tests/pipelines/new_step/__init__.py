"""A step that is not estflow's: its contract row (:data:`ROW`) and its entry point (``main``),
all of it in this folder; test_new_step.py plans, compiles and runs it with no other change.

``python -m tests.pipelines.new_step --spec SPEC [--<input> DIR ...] --<output> DIR ...
[--threshold X]``: it lists each input directory, and writes its summary
(:data:`SUMMARY`: the spec's pipeline name, the threshold, the inputs' file counts) into each
output directory. No TensorFlow, no Beam.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from estflow.dsl.contracts import Option
from estflow.dsl.contracts import Step
from estflow.dsl.contracts import add_options

SUMMARY = "score.json"

ROW = Step(
    "score", "tests.pipelines.new_step", ("model",), ("scores",),
    "score the trained model's files (a step of this test's own)",
    options=(Option("threshold", "a number the step records", type="float", default=0.5),),
    caching=False, requests=("3", "5Gi"), summary=SUMMARY)
"""The new step's row: it reads the train step's ``model``, writes ``scores``, is never cached
on KFP, asks 3 CPUs and 5Gi by default, and its summary is :data:`SUMMARY`."""


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.pipelines.new_step")
    parser.add_argument("--spec", required=True)
    for artifact in (*ROW.inputs, *ROW.outputs):
        parser.add_argument(f"--{artifact}", required=True)
    add_options(parser, ROW.options)
    args = parser.parse_args(argv)
    spec = Path(args.spec)
    name = json.loads(spec.read_text() if spec.is_file() else args.spec)["name"]
    summary = {"pipeline": name, "threshold": args.threshold,
               **{f"{a}_files": len(os.listdir(getattr(args, a))) for a in ROW.inputs}}
    for artifact in ROW.outputs:
        out = Path(getattr(args, artifact))
        out.mkdir(parents=True, exist_ok=True)
        (out / SUMMARY).write_text(json.dumps(summary))
    print(f"[{ROW.name}] scored: {summary}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
