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


# Record-sharded input up to this size on disk is cached in memory: GZIP TFRecords of
# tf.Examples grow ~5-15x unpacked, and each of n pipelines keeps 1/n of them.
_CACHE_BYTES = 64 * 2**20


def _without_autotune() -> tf.data.Options:
    """tf.data's autotuning model off. ``AUTOTUNE`` still means tf.data's defaults (the
    parsing map on every core, the prefetch buffer grown while the loop waits), but no tuning
    thread times every element: on 2 cores the taxi model trained its 2,500 steps in 3.6-3.8 s
    without it and 3.9-4.1 s with it (fixed values, 1 or 2 parsers and 1 or 2 batches ahead,
    took 4.0-4.4 s). That thread, joined when the training iterator was deleted, also held the
    train step for ~1.8 s in most runs on that machine."""
    options = tf.data.Options()
    options.autotune.enabled = False
    return options


def make_input_fn(pattern: str, feature_spec: dict, label: str, batch_size: int, *,
                  shuffle_buffer: int | None = None, seed: int | None = None,
                  repeat: bool = True) -> Callable[..., tf.data.Dataset]:
    """An input_fn over GZIP TFRecords of transformed examples: shuffle (seeded), repeat,
    batch (``drop_remainder`` when repeating), parse, pop the label, prefetch; without
    tf.data's autotuning model (:func:`_without_autotune` says why).

    ``batch_size`` is the global batch. Given an ``input_context`` of several input pipelines
    (the engine's, one per worker under a MultiWorkerMirroredStrategy across processes), the
    input_fn reads only its pipeline's records, before anything else (whole files when the
    files split evenly over the pipelines, else every ``num_input_pipelines``-th record from
    ``input_pipeline_id``: each record of an epoch goes to exactly one pipeline), and
    batches ``batch_size / num_input_pipelines`` of them (the pipeline's share of the global
    batch; ``ctx.get_per_replica_batch_size`` with one replica a worker). Sharding by record,
    every pipeline still reads and decompresses all the files to keep its share; when they
    are small (``_CACHE_BYTES`` on disk in all) the share is cached in memory after its first
    pass, so later epochs read nothing (the same records in the same order: the batches are
    unchanged)."""

    def input_fn(input_context: tf.distribute.InputContext | None = None) -> tf.data.Dataset:
        files = sorted(tf.io.gfile.glob(pattern))
        if not files:
            raise TrainStepError(f"no transformed examples match {pattern}")
        pipelines, index = (input_context.num_input_pipelines,
                            input_context.input_pipeline_id) if input_context else (1, 0)
        if batch_size % pipelines:
            raise ValueError(f"the global batch size {batch_size} does not split evenly over "
                             f"{pipelines} input pipelines (workers)")
        by_file = pipelines > 1 and len(files) % pipelines == 0
        if by_file:
            files = files[index::pipelines]
        dataset = tf.data.TFRecordDataset(files, compression_type="GZIP")
        if pipelines > 1 and not by_file:
            dataset = dataset.shard(pipelines, index)
            if repeat and sum(tf.io.gfile.stat(f).length for f in files) <= _CACHE_BYTES:
                dataset = dataset.cache()
        if shuffle_buffer:
            dataset = dataset.shuffle(shuffle_buffer, seed=seed)
        if repeat:
            dataset = dataset.repeat()
        dataset = dataset.batch(batch_size // pipelines, drop_remainder=repeat)

        def parse(serialized):
            features = tf.io.parse_example(serialized, feature_spec)
            return features, features.pop(label)

        dataset = dataset.map(parse, num_parallel_calls=tf.data.AUTOTUNE)
        return dataset.prefetch(tf.data.AUTOTUNE).with_options(_without_autotune())

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
