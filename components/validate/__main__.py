"""The validate step's entry point: ``python -m estflow.components.validate --spec S
--examples DIR --validation DIR [--source-root ROOT]``; the checks are :mod:`.step`. Exits
with :data:`~estflow.components.validate.step.EXIT_BLOCKED` when a blocking anomaly stops
the run before training."""

from __future__ import annotations

from estflow.components._runtime import entry as _runtime
from estflow.components.validate.step import EXIT_BLOCKED
from estflow.components.validate.step import run
from estflow.dsl.contracts import step_named


def main(argv: list[str] | None = None) -> int:
    """Run the step with command-line arguments; returns the exit status."""
    args = _runtime.step_parser(step_named("validate"), __doc__).parse_args(argv)
    progress = _runtime.Progress("validate")
    summary = run(_runtime.load_pipeline(args.spec), args.examples, args.validation,
                  source_root=_runtime.resolve_source_root(args.source_root),
                  progress=progress)
    if summary["passed"]:
        return 0
    progress(f"{len(summary['anomalies'])} blocking anomalies: the run stops before training "
             f"(exit status {EXIT_BLOCKED})")
    return EXIT_BLOCKED


if __name__ == "__main__":
    _runtime.exit_after(main)
