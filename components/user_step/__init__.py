"""The user step: the one entry point every user step runs (:mod:`estflow.dsl.steps`).

``python -m estflow.components.user_step`` runs :mod:`.__main__`; :mod:`.step` imports the step's
function from the spec and calls it with its artifacts' directories and its parameters, then
writes its result. The package imports nothing heavy: the user's function brings its own
imports.
"""

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """Run the step with command-line arguments (``__main__.main``; a Kubeflow task calls it
    this way); returns the exit status."""
    from estflow.components.user_step.__main__ import main as entry_main

    return entry_main(argv)
