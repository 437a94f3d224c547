"""The evaluate step: metrics on the eval split, measured through the exported serving model,
and the blessing that decides whether the push step may publish it.

Raw eval examples go through the SavedModel's ``serving_default`` signature (the exact path
serving takes), and labels come from its ``transform_features`` signature (the same tf.Transform
graph that made the training labels), so what is measured is what users will get. A metric
named as one of tf.estimator's is tf.estimator's (the number the train step's evaluations
show), weighted by the model's ``weight_column`` when it declares one, as tf.estimator's heads
weigh their metrics (:mod:`estflow.components.evaluate.metrics`). In the same
pass over the examples it scores the *baseline*, the model served at the push target (its
highest complete version), and reads the raw value of each ``EvalSpec.slices`` column. A
baseline pushed by estflow carries its own outputs on the rows it was evaluated on; when this
evaluation reads the same rows, those are used instead of loading and scoring it again
(:mod:`estflow.components.evaluate.outputs`).

Outputs, in the evaluation directory:

* ``metrics.json``: ``{"head", "name", "model", "metrics": {...}, "slices": {column: {value:
  metrics}}}``, and for a weighted model ``"weight": {"column", "sum", "zero"}`` (the total
  weight, the rows weighing 0); each slice's metrics include its ``examples`` count of rows
  (small slices are noisy); an absent raw value is the slice ``"<missing>"``; undefined
  metrics (AUC of a single class, a mean over a total weight of 0) are ``null``.
* ``blessing.json``: see :mod:`estflow.components.evaluate.blessing`.
* ``report.html``: a self-contained report with inline SVG plots.
* ``kfp_metrics.json`` and ``kfp_classification.json``, which :func:`log_to_kfp` logs to KFP
  ``Metrics`` / ``ClassificationMetrics`` artifacts.
* ``eval_outputs.npz``: the model's output on each eval row and what identifies the rows;
  the push step publishes it with the model.
* ``warmup_examples.tfrecord``: the first few eval rows (serialized tf.Examples, the serving
  features only), which the push step turns into the version's TF Serving warm-up requests.

``python -m estflow.components.evaluate --spec S --examples DIR --model DIR --evaluation DIR``
"""

from __future__ import annotations

import os

from estflow.components._runtime import entry as _runtime
from estflow.components._runtime import progress as _progress
from estflow.components.evaluate.files import log_to_kfp
from estflow.components.evaluate.step import run
from estflow.dsl.contracts import step_named

__all__ = ["main", "run", "log_to_kfp"]


def main(argv: list[str] | None = None) -> int:
    """Run the step with command-line arguments; returns the exit status."""
    args = _runtime.step_parser(step_named("evaluate"), __doc__).parse_args(argv)
    _progress.configure(os.environ)
    run(_runtime.load_pipeline(args.spec), args.examples, args.model, args.evaluation)
    return 0


if __name__ == "__main__":
    _runtime.exit_after(main)
