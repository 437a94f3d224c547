"""The evaluate step: metrics on the eval split, measured through the exported serving model.

Raw eval examples go through the SavedModel's ``serving_default`` signature (the exact path
serving takes), and labels come from its ``transform_features`` signature (the same tf.Transform
graph that made the training labels), so what is measured is what users will get.

``python -m estflow.components.evaluate --spec S --examples DIR --model DIR --evaluation DIR``
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from estflow.components import _runtime
from estflow.components import metrics as metrics_lib
from estflow.dsl.contracts import Files
from estflow.dsl.models import head_of
from estflow.dsl.pipeline import Pipeline

__all__ = ["run", "main", "evaluate_saved_model"]


def evaluate_saved_model(export_dir: str, eval_files: list[str], *, label: str, head: str,
                         batch_size: int = 512, max_batches: int | None = None) -> dict:
    """Score serialized raw tf.Examples from ``eval_files`` (GZIP TFRecords) with a SavedModel.

    Returns:
        The head's metrics (see :mod:`estflow.components.metrics`).
    """
    _runtime.quiet_tensorflow()
    import tensorflow as tf

    loaded = tf.saved_model.load(export_dir)
    serve = loaded.signatures["serving_default"]
    transform = loaded.signatures["transform_features"]
    data = tf.data.TFRecordDataset(eval_files, compression_type="GZIP").batch(batch_size)
    if max_batches is not None:
        data = data.take(max_batches)
    labels, outputs = [], []
    for batch in data:
        labels.append(transform(examples=batch)[label].numpy())
        outputs.append(_score(serve(examples=batch), head))
    if not labels:
        raise ValueError(f"the eval split is empty: no examples in {eval_files}")
    y, out = np.concatenate(labels), np.concatenate(outputs)
    if head == "binary":
        return metrics_lib.binary_metrics(y, out)
    if head == "multi_class":
        return metrics_lib.multi_class_metrics(y, out)
    return metrics_lib.regression_metrics(y, out)


def _score(predictions: dict, head: str) -> np.ndarray:
    if head == "binary":
        return predictions["logistic"].numpy().reshape(-1)
    if head == "multi_class":
        return predictions["probabilities"].numpy()
    return predictions["predictions"].numpy().reshape(-1)


def run(pipeline: Pipeline, examples_dir: str, model_dir: str, evaluation_dir: str,
        progress: _runtime.Progress | None = None) -> dict:
    """Evaluate the exported model on the eval split and write ``metrics.json``."""
    progress = progress or _runtime.Progress("evaluate")
    eval_files = sorted(str(p) for p in (Path(examples_dir) / Files.EVAL_EXAMPLES).glob("*"))
    export_dir = str(Path(model_dir) / Files.EXPORT)
    head = head_of(pipeline.model)
    progress(f"scoring {len(eval_files)} eval file(s) through {export_dir} ({head} head)")
    metrics = evaluate_saved_model(export_dir, eval_files, label=pipeline.label.name, head=head,
                                   batch_size=pipeline.eval.batch_size,
                                   max_batches=pipeline.eval.steps)
    result = {"head": head, "metrics": metrics, "model": export_dir, "name": pipeline.eval.name}
    _runtime.write_json(Path(evaluation_dir) / Files.METRICS, result)
    shown = ", ".join(f"{k}={v:.4f}" for k, v in metrics.items() if isinstance(v, float))
    progress(f"{metrics['examples']} examples: {shown}")
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="estflow.components.evaluate", description=__doc__)
    parser.add_argument("--spec", required=True, help="pipeline spec: JSON file or JSON text")
    parser.add_argument("--examples", required=True, help="ingest output (raw eval split)")
    parser.add_argument("--model", required=True, help="train output (export/)")
    parser.add_argument("--evaluation", required=True, help="output directory")
    args = parser.parse_args(argv)
    run(_runtime.load_pipeline(args.spec), args.examples, args.model, args.evaluation)
    return 0


if __name__ == "__main__":
    sys.exit(main())
