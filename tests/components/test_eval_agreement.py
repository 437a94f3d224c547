"""One model, one set of eval rows, one number per metric name: the train step's evaluation of
its final checkpoint (its progress line, ``train.json``, the TensorBoard eval scalars) and the
evaluate step's (``metrics.json``) agree on every metric both report under the same name.

The eval sets are generated (seeded) so that the case that once split them shows: a size that
is not a multiple of the eval batch size, and one row whose loss dominates, in the last,
partial batch. There tf.estimator's ``loss`` (the mean of the batch losses: the partial batch
weighs as much as a full one) is far from ``average_loss`` (the mean over the examples), and
only ``average_loss`` is what the evaluate step computes.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import tensorflow as tf

import estflow.dsl as ef
from estflow.components.evaluate import step as evaluate_step
from estflow.components.train import __main__ as train
from estflow.dsl.contracts import Files
from estflow.estimator._engine.reporting import read_scalars
from tests.components import _train_fixtures as fx

EVAL_BATCH = 8

HEADS = {
    "multi_class": dict(model=ef.DNNClassifier(
        hidden_units=(8,), n_classes=3, feature_columns=("x", "z", ef.Embedding("color", 3)))),
    "binary": dict(model=ef.LinearClassifier(feature_columns=("x", "z", "color"))),
    "regression": dict(model=ef.DNNRegressor((8,), ("x", "z", ef.Indicator("color"))),
                       label=ef.Label("target", dtype="float"),
                       columns=(ef.Column("label", "int"),)),
}
"""The heads, and the pipeline fields that declare a model of each on the fixture's columns."""

SHARED = {"multi_class": {"average_loss", "accuracy"},
          "binary": {"average_loss", "accuracy", "precision", "recall", "label/mean",
                     "prediction/mean"},
          "regression": {"average_loss", "label/mean", "prediction/mean"}}
"""Names each head's two evaluations must both report (so that the comparison is not empty)."""


@pytest.fixture(scope="module")
def transformed_dir(tmp_path_factory):
    return fx.transformed(tmp_path_factory)


def _raw_example(row: dict) -> bytes:
    feature = {}
    for name, value in row.items():
        if isinstance(value, str):
            feature[name] = tf.train.Feature(bytes_list=tf.train.BytesList(value=[value.encode()]))
        elif isinstance(value, int):
            feature[name] = tf.train.Feature(int64_list=tf.train.Int64List(value=[value]))
        else:
            feature[name] = tf.train.Feature(float_list=tf.train.FloatList(value=[value]))
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def eval_rows(size: int, seed: int) -> list[dict]:
    """``size`` rows drawn like the fixture's, the last one with a label far from what the
    model learns from its features (a large negative ``x`` with the positive class, a large
    positive ``target``): its loss dominates the others'. Its class is 1 and its probability
    small, which the float32 outputs resolve well (the evaluate step scores those)."""
    rows = fx.make_rows(size - 1, seed=seed)
    rows.append({"x": -9.0, "z": -1.0, "color": "black", "label": 1, "target": 30.0})
    return rows


def write_eval_split(transformed: Path, folder: Path, examples: Path, rows: list[dict]) -> Path:
    """A transform output like ``transformed`` but with ``rows`` as its eval split (transformed
    by its own tf.Transform graph, in order, in one file), and the same rows raw, as ingest
    writes them, under ``examples/eval``. Returns ``folder``."""
    import tensorflow_transform as tft

    folder.mkdir(parents=True)
    for name in (Files.TRANSFORM_FN, Files.TRANSFORMED_TRAIN, Files.TRANSFORM_STATS):
        (folder / name).symlink_to(transformed / name)
    tft_output = tft.TFTransformOutput(str(transformed / Files.TRANSFORM_FN))
    raw = [_raw_example(row) for row in rows]
    parsed = tf.io.parse_example(tf.constant(raw), tft_output.raw_feature_spec())
    values = {k: v.numpy() for k, v in tft_output.transform_raw_features(parsed).items()}
    options = tf.io.TFRecordOptions(compression_type="GZIP")
    (folder / Files.TRANSFORMED_EVAL).mkdir()
    (examples / Files.EVAL_EXAMPLES).mkdir(parents=True)
    with tf.io.TFRecordWriter(str(folder / Files.TRANSFORMED_EVAL / "part-0.tfrecord.gz"),
                              options) as transformed_out, \
            tf.io.TFRecordWriter(str(examples / Files.EVAL_EXAMPLES / "data-0.gz"),
                                 options) as raw_out:
        for i, serialized in enumerate(raw):
            transformed_out.write(_raw_example(
                {k: v[i].item() for k, v in values.items()}))
            raw_out.write(serialized)
    return folder


def _shown(line: str) -> dict[str, float]:
    """The ``name=value`` pairs of an "evaluation at step N" progress line."""
    return {k: float(v) for k, v in re.findall(r"([\w/]+)=([-\d.e+]+)", line)}


@pytest.mark.slow
@pytest.mark.parametrize("head", sorted(HEADS))
@pytest.mark.parametrize("size", [13, 29])
def test_the_train_steps_evaluation_and_the_evaluate_step_agree_on_shared_names(
        transformed_dir, tmp_path, head, size):
    assert size % EVAL_BATCH, "the case needs a partial last batch"
    rows = eval_rows(size, seed=size)
    examples = tmp_path / "examples"
    transformed = write_eval_split(transformed_dir, tmp_path / "transformed", examples, rows)
    pipeline = fx.pipeline(
        **HEADS[head],
        train=ef.TrainSpec(max_steps=30, batch_size=16, shuffle_buffer=64),
        eval=ef.EvalSpec(batch_size=EVAL_BATCH, start_delay_secs=0, throttle_secs=0),
        run_config=ef.RunConfig(save_checkpoints_steps=30, save_summary_steps=10,
                                log_step_count_steps=30, steps_per_loop=10, tf_random_seed=7))
    lines: list[str] = []
    trained = train.run(pipeline, transformed, tmp_path / "model", progress=lines.append)
    [final] = [row for row in trained["evaluations"] if row["step"] == 30]
    at_train = final["metrics"]
    evaluated = evaluate_step.run(pipeline, str(examples), str(tmp_path / "model"),
                                  str(tmp_path / "evaluation"), progress=lines.append)
    at_evaluate = evaluated["metrics"]
    assert at_evaluate["examples"] == size

    # the case that splits the two means: tf.estimator's `loss` is the mean of batch losses
    batches = [rows[i:i + EVAL_BATCH] for i in range(0, size, EVAL_BATCH)]
    assert len(batches[-1]) < EVAL_BATCH
    assert abs(at_train["loss"] - at_train["average_loss"]) > 0.05 * at_train["average_loss"], \
        "no row dominates: the eval set does not show the case"

    shared = set(at_train) & set(at_evaluate)
    assert SHARED[head] <= shared, (sorted(at_train), sorted(at_evaluate))
    for name in sorted(shared):
        assert at_evaluate[name] == pytest.approx(at_train[name], rel=1e-4, abs=1e-6), name
    # the TensorBoard eval scalars are train.json's numbers
    scalars = read_scalars(str(p) for p in (tmp_path / "model" / Files.CHECKPOINTS / "eval")
                           .glob("events.out.tfevents*"))[30]
    for name in sorted(set(scalars) & set(at_evaluate)):
        assert at_evaluate[name] == pytest.approx(scalars[name], rel=1e-4, abs=1e-6), name
    # and the progress line shows names the evaluate step reports, at 4 significant digits
    [line] = [x for x in lines if x.startswith("evaluation at step 30")]
    shown = _shown(line.split(":", 1)[1])
    assert "average_loss" in shown, line
    for name, value in shown.items():
        assert name in at_evaluate, (name, line)
        assert value == pytest.approx(at_evaluate[name], rel=1e-3), (name, line)
