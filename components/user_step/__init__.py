"""The user step: the one entry point every user step runs (:mod:`estflow.dsl.steps`).

``python -m estflow.components.user_step`` runs :mod:`.__main__`; :mod:`.step` imports the step's
function from the spec and calls it with its artifacts' directories and its parameters, then
writes its result. The package imports nothing heavy: the user's function brings its own
imports.
"""
