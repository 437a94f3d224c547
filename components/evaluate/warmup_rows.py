"""The eval rows kept for the pushed version's warm-up requests
(:mod:`estflow.components._io.warmup_rows`): the first rows of the eval split as a serving
client sends them, i.e. with only the features the exported ``serving_default`` parses (those
the export lists in ``assets.extra/estflow_raw_features.json``; without that file, every feature
but the label)."""

from __future__ import annotations

from pathlib import Path

from estflow.components._io import raw_features
from estflow.components._io import warmup_rows

__all__ = ["keep"]


def keep(export_dir: str, eval_files: list[str], folder: str | Path, *,
         label_column: str) -> Path | None:
    """Write the first :data:`~estflow.components._io.warmup_rows.MAX_ROWS` eval rows, stripped
    to the serving features, into ``folder``; their path (None: no rows)."""
    import tensorflow as tf  # noqa: PLC0415 - the evaluate step runs TensorFlow

    served = raw_features.read_types(Path(export_dir))
    data = tf.data.TFRecordDataset(eval_files, compression_type="GZIP")
    rows = []
    for record in data.take(warmup_rows.MAX_ROWS).as_numpy_iterator():
        example = tf.train.Example.FromString(record)
        features = example.features.feature
        for name in list(features):
            if (name not in served) if served is not None else (name == label_column):
                del features[name]
        rows.append(example.SerializeToString())
    return warmup_rows.write_rows(folder, rows)
