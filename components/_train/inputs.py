"""The train step's inputs: the transform output (its tf.Transform graph and cardinalities)
and input_fns over its GZIP TFRecords of transformed tf.Examples."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import tensorflow as tf
import tensorflow_transform as tft

from estflow.components._io.jsonfile import read_json
from estflow.dsl.contracts import Files
from estflow.dsl.pipeline import Pipeline

__all__ = ["TrainStepError", "make_input_fn", "read_transform", "eval_input_fn"]


class TrainStepError(RuntimeError):
    """The train step cannot run on its inputs (missing transform outputs)."""




def make_input_fn(pattern: str, feature_spec: dict, label: str, batch_size: int, *,
                  shuffle_buffer: int | None = None, seed: int | None = None,
                  repeat: bool = True) -> Callable[[], tf.data.Dataset]:
    """An input_fn over GZIP TFRecords of transformed examples: shuffle (seeded), repeat,
    batch (``drop_remainder`` when repeating), parse, pop the label, prefetch."""

    def input_fn() -> tf.data.Dataset:
        files = sorted(tf.io.gfile.glob(pattern))
        if not files:
            raise TrainStepError(f"no transformed examples match {pattern}")
        dataset = tf.data.TFRecordDataset(files, compression_type="GZIP")
        if shuffle_buffer:
            dataset = dataset.shuffle(shuffle_buffer, seed=seed)
        if repeat:
            dataset = dataset.repeat()
        dataset = dataset.batch(batch_size, drop_remainder=repeat)

        def parse(serialized):
            features = tf.io.parse_example(serialized, feature_spec)
            return features, features.pop(label)

        dataset = dataset.map(parse, num_parallel_calls=tf.data.AUTOTUNE)
        return dataset.prefetch(tf.data.AUTOTUNE)

    return input_fn


def read_transform(transformed: Path):
    stats_path = transformed / Files.TRANSFORM_STATS
    if not stats_path.exists() or not (transformed / Files.TRANSFORM_FN).is_dir():
        raise TrainStepError(f"{transformed} is not a transform output: it needs "
                             f"{Files.TRANSFORM_FN}/ and {Files.TRANSFORM_STATS}")
    cardinalities = read_json(stats_path).get("cardinalities", {})
    return tft.TFTransformOutput(str(transformed / Files.TRANSFORM_FN)), cardinalities




def eval_input_fn(pipeline: Pipeline, transformed: Path, tft_output) -> Callable:
    """One pass over the transformed eval split in ``pipeline.eval.batch_size`` batches."""
    return make_input_fn(str(transformed / Files.TRANSFORMED_EVAL / "*.tfrecord.gz"),
                         tft_output.transformed_feature_spec(), pipeline.label.name,
                         pipeline.eval.batch_size, repeat=False)
