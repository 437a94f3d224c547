"""The select step: of several candidate models (``Candidates``), the best blessed one by the
declared metric becomes the pipeline's model and evaluation (what push and later steps read).

``python -m estflow.components.select`` runs :mod:`.__main__`; :mod:`.step` is the step.
Pure Python on the candidates' evaluation files (no TensorFlow).
"""
