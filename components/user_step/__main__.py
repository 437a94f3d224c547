"""``python -m estflow.components.user_step --spec S --step NAME --<artifact> DIR ...``: run the
user step ``NAME`` of the spec (:mod:`estflow.components.user_step.step`).

Exit status: 0 when the function returned; 1 when it raised (its traceback on stderr) or
returned what is not a result; 2 for arguments that do not fit the step.
"""

from __future__ import annotations

import argparse
import sys
import traceback

from estflow.components._runtime import entry
from estflow.components.user_step.step import StepResultError
from estflow.components.user_step.step import find_step
from estflow.components.user_step.step import run
from estflow.dsl.steps import contract_row

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """Run the step with command-line arguments; returns the exit status."""
    first = argparse.ArgumentParser(add_help=False)
    first.add_argument("--spec", required=True)
    first.add_argument("--step", required=True)
    known, _ = first.parse_known_args(argv)
    pipeline = entry.load_pipeline(known.spec)
    declared = find_step(pipeline, known.step)
    row = contract_row(declared)
    args = entry.step_parser(row, __doc__).parse_args(argv)
    artifacts = {a: getattr(args, a) for a in (*row.inputs, *row.outputs)}
    progress = entry.Progress(declared.name)
    try:
        run(declared, artifacts, say=progress)
    except StepResultError as err:
        print(f"[{declared.name}] error: {err}", file=sys.stderr, flush=True)
        return 1
    except Exception as err:  # the user's function raised: its traceback, then one line
        traceback.print_exc()
        print(f"[{declared.name}] error: {declared.fn} raised {type(err).__name__}: {err}",
              file=sys.stderr, flush=True)
        return 1
    progress("done")
    return 0


if __name__ == "__main__":
    entry.exit_after(main)
