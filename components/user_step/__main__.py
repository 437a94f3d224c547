"""``python -m estflow.components.user_step --spec S --step NAME --<artifact> DIR ...``: run the
user step ``NAME`` of the spec (:mod:`estflow.components.user_step.step`).

A mapped step (``ef.step.map``): ``--item I`` runs its item ``I`` (its artifacts as the plan's
row ``NAME_I`` names them: ``--out_I``, ``--NAME_I_result``); without ``--item`` the step
collects its items' artifacts (``--out_0 ... --NAME_0_result ...``) into its own (``--out``,
``--NAME_result``). An item's outputs may also be given by the step's own names (``--out``,
``--NAME_result``), as its Kubeflow task (one for every item) gives them.

Exit status: 0 when the function returned; 1 when it raised (its traceback on stderr) or
returned what is not a result; 2 for arguments that do not fit the step.
"""

from __future__ import annotations

import argparse
import sys
import traceback

from estflow.components._runtime import entry
from estflow.components.user_step.step import StepResultError
from estflow.components.user_step.step import collect
from estflow.components.user_step.step import find_step
from estflow.components.user_step.step import run
from estflow.components.user_step.step import run_item
from estflow.dsl.steps import contract_row
from estflow.dsl.steps import item_name
from estflow.dsl.steps import item_row
from estflow.dsl.steps import result_artifact

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """Run the step with command-line arguments; returns the exit status."""
    first = argparse.ArgumentParser(add_help=False)
    first.add_argument("--spec", required=True)
    first.add_argument("--step", required=True)
    first.add_argument("--item", type=int)
    known, _ = first.parse_known_args(argv)
    pipeline = entry.load_pipeline(known.spec)
    declared = find_step(pipeline, known.step)
    if known.item is not None:
        if not 0 <= known.item < len(declared.items):
            print(f"[{declared.name}] error: received --item {known.item}, expected an item of "
                  f"mapped step {declared.name!r}, 0 to {len(declared.items) - 1}",
                  file=sys.stderr, flush=True)
            return 2
        row = item_row(declared, known.item)
        argv = _item_flags(declared, known.item, sys.argv[1:] if argv is None else argv)
    else:
        row = contract_row(declared)
    args = entry.step_parser(row, __doc__).parse_args(argv)
    artifacts = {a: getattr(args, a) for a in (*row.inputs, *row.outputs)}
    progress = entry.Progress(row.name)
    try:
        if known.item is not None:
            run_item(declared, known.item, artifacts, say=progress)
        elif declared.mapped:
            collect(declared, artifacts, say=progress)
        else:
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


def _item_flags(declared, index: int, argv: list[str]) -> list[str]:
    """``argv`` with an item's outputs given by the step's own names (``--out``,
    ``--NAME_result``: a Kubeflow task, one for every item) renamed to the item's (``--out_I``,
    ``--NAME_I_result``)."""
    names = {f"--{p.name}": f"--{item_name(p.name, index)}" for p in declared.outputs}
    names[f"--{declared.result_artifact}"] = f"--{result_artifact(item_name(declared.name, index))}"
    return [names.get(a, a) for a in argv]


if __name__ == "__main__":
    entry.exit_after(main)
