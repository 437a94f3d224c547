"""Entry-point glue every step shares: the argument parser built from the step contract,
spec loading, user-function resolution, progress lines (``entry``), and the Beam pipeline of
the preprocessing steps (``beam``)."""
