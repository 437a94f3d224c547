"""The train step's internals (its entry point is ``components/train.py``): inputs,
evaluation while training, warm start, the serving export.

Importing this package keeps the user's Keras in the train step: a user's model_fn sees the
Keras it sees in its own process (Keras 3 on TF 2.21), but importing tensorflow_transform (the
export's transform layer) would set TF_USE_LEGACY_KERAS=1 first and make tf.keras Keras 2 in
the step only, so a model_fn's tf.keras layers, optimizers and their checkpoints would differ
between the user's process and the step. tf.Transform's own layer uses the tf_keras package
either way. An explicit setting in the environment is kept. (Here, not in ``train.py``: a
prestarted step process runs only its module's imports before it is handed its arguments.)
"""

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "0")
