"""The select step's entry point.

``python -m estflow.components.select --spec S --model_<name> DIR --evaluation_<name> DIR
... --model DIR --evaluation DIR``: one model and evaluation per candidate of the spec's
``Candidates`` (the candidates' steps' outputs), the picked one's copies out.
"""

from __future__ import annotations

import argparse
import json
import sys

from estflow.components._runtime import entry
from estflow.components.select.step import run
from estflow.dsl.contracts import select_row
from estflow.dsl.models import Candidates

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """Run the step with command-line arguments; returns the exit status."""
    first = argparse.ArgumentParser(add_help=False)
    first.add_argument("--spec", required=True)
    known, _ = first.parse_known_args(argv)
    pipeline = entry.load_pipeline(known.spec)
    if not isinstance(pipeline.model, Candidates):
        print(f"[select] error: expected a spec whose model is Candidates, received "
              f"{type(pipeline.model).__name__}", file=sys.stderr, flush=True)
        return 2
    names = sorted(pipeline.model.models)
    args = vars(entry.step_parser(select_row(names), __doc__).parse_args(argv))
    fingerprints = json.loads(args["candidate_fingerprints"] or "{}")
    run(pipeline, {n: (args[f"model_{n}"], args[f"evaluation_{n}"]) for n in names},
        args["model"], args["evaluation"], fingerprints=fingerprints)
    return 0


if __name__ == "__main__":
    entry.exit_after(main)
