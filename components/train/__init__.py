"""The train step: train the model on the transformed splits and export it for serving.

``python -m estflow.components.train`` runs :mod:`.__main__` (the command line), which calls
:func:`.task.run_task` (this process's task in the cluster): :func:`.step.run` (train, export,
``train.json``) or :func:`.evaluator.evaluate_checkpoints` (a cluster's evaluator). Their
modules: :mod:`.inputs`, :mod:`.evaluation` (while training), :mod:`.warm_start`,
:mod:`.export` (the serving export).

Importing this package keeps the user's Keras in the train step: a user's model_fn sees the
Keras it sees in its own process (Keras 3 on TF 2.21), but importing tensorflow_transform (the
export's transform layer) would set TF_USE_LEGACY_KERAS=1 first and make tf.keras Keras 2 in
the step only, so a model_fn's tf.keras layers, optimizers and their checkpoints would differ
between the user's process and the step. tf.Transform's own layer uses the tf_keras package
either way. An explicit setting in the environment is kept. (Here, not in ``__main__.py``: a
prestarted step process runs only its entry module's imports before it is handed its
arguments, and each of them imports this package first.) tf.Transform then warns, on import,
that it "is only compatible with Keras 2": its layer is, whatever the setting, so that one
warning is dropped from the step's log (:func:`~estflow.components._runtime.quiet.
drop_tft_keras_warning`).

The package imports nothing heavy (no TensorFlow): a KFP task imports it and calls
:func:`main`, which imports the entry point only then.
"""

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "0")
if os.environ["TF_USE_LEGACY_KERAS"] not in ("true", "True", "1"):
    from estflow.components._runtime.quiet import drop_tft_keras_warning

    drop_tft_keras_warning()


def main(argv: list[str] | None = None) -> int:
    """Run the step with command-line arguments (``__main__.main``); returns the exit status."""
    from estflow.components.train.__main__ import main as entry_main

    return entry_main(argv)
