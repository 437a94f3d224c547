"""What transform reports once its job has run: ``transform.json`` and the lines shown at the
end of the step. ``"cardinalities"`` is a contract: the train step sizes its categorical
columns from it."""

from __future__ import annotations

import tensorflow_transform as tft
from apache_beam.io.filesystems import FileSystems

from estflow.dsl import features as f
from estflow.dsl.contracts import Files
from estflow.dsl.pipeline import Pipeline

__all__ = ["TransformError", "summarize", "summary_lines"]


class TransformError(RuntimeError):
    """The transform step cannot run on its inputs (e.g. no examples from ingest)."""


def summarize(pipeline: Pipeline, out: str, statistics: dict, elapsed: float) -> dict:
    """The ``transform.json`` content: rows, cardinalities, vocabulary sizes, statistics."""
    output = tft.TFTransformOutput(FileSystems.join(out, Files.TRANSFORM_FN))
    vocab_sizes = {feat.name: int(output.vocabulary_size_by_name(feat.name))
                   for feat in pipeline.features if isinstance(feat, f.CategoricalVocab)}
    cardinalities = {}
    for feat in pipeline.features:
        if isinstance(feat, f.CategoricalVocab):
            cardinalities[feat.name] = vocab_sizes[feat.name] + feat.num_oov_buckets
        elif isinstance(feat, f.CATEGORICAL_KINDS):
            cardinalities[feat.name] = int(feat.cardinality)
    spec = output.transformed_feature_spec()
    rows = statistics.pop("rows")
    return {
        "rows": {name: int(rows.get(name, 0)) for name, _ in pipeline.split.fractions()},
        "cardinalities": cardinalities,
        "vocabulary_sizes": vocab_sizes,
        "outputs": {name: spec[name].dtype.name for name in sorted(spec)},
        "label": pipeline.label.name,
        "weight_column": getattr(pipeline.model, "weight_column", None),
        "statistics": statistics,
        "elapsed_s": round(elapsed, 3),
    }


def summary_lines(summary: dict) -> list[str]:
    """The statistics shown at the end of the step."""
    rows = summary["rows"]
    lines = [f"wrote {rows['train']} train and {rows['eval']} eval transformed examples"
             + "".join(f", {n} {name}" for name, n in rows.items()
                       if name not in ("train", "eval"))]
    if summary["vocabulary_sizes"]:
        lines.append("vocabulary sizes: " + ", ".join(
            f"{k} {v}" for k, v in summary["vocabulary_sizes"].items()))
    # The raw columns' statistics are shown by ingest; here the label the model will see.
    for name, entry in summary["statistics"]["label"].items():
        if entry["count"]:
            lines.append(f"train label {name}: count {entry['count']}, min {entry['min']:.6g}, "
                         f"max {entry['max']:.6g}, mean {entry['mean']:.6g}")
    return lines
