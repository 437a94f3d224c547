"""One model, one set of eval rows, one number per metric name: the train step's evaluation of
its final checkpoint (its progress line, ``train.json``, the TensorBoard eval scalars) and the
evaluate step's (``metrics.json``) agree on every metric both report under the same name.

The eval sets are generated (seeded) so that the case that once split them shows: a size that
is not a multiple of the eval batch size, and one row whose loss dominates, in the last,
partial batch. There tf.estimator's ``loss`` (the mean of the batch losses: the partial batch
weighs as much as a full one) is far from ``average_loss`` (the mean over the examples), and
only ``average_loss`` is what the evaluate step computes.

With a model ``weight_column`` tf.estimator weighs every eval metric; so must the evaluate step
(its numbers bless the model). The weighted cases draw weights with zeros and one large weight
in the partial last batch: once through the engine's heads directly (every shared metric, on
enough rows that tf.estimator's 200-threshold AUCs differ from the exact ones), once through
the real train and evaluate steps.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

import estflow.dsl as ef
from estflow.components.evaluate import metrics as evaluate_metrics
from estflow.components.evaluate import step as evaluate_step
from estflow.components.evaluate.scoring import MISSING
from estflow.components.train import __main__ as train
from estflow.dsl.contracts import Files
from estflow.estimator import heads
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
          "binary": {"average_loss", "accuracy", "auc", "auc_precision_recall", "precision",
                     "recall", "label/mean", "prediction/mean"},
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


def write_eval_split(transformed: Path, folder: Path, examples: Path, rows: list[dict],
                     train_rows: list[dict] | None = None) -> Path:
    """A transform output like ``transformed`` but with ``rows`` as its eval split (transformed
    by its own tf.Transform graph, in order, in one file), and the same rows raw, as ingest
    writes them, under ``examples/eval``; ``train_rows``, when given, are its train split
    (transformed only). Returns ``folder``."""
    import tensorflow_transform as tft

    folder.mkdir(parents=True)
    for name in (Files.TRANSFORM_FN, Files.TRANSFORM_STATS) + \
            ((Files.TRANSFORMED_TRAIN,) if train_rows is None else ()):
        (folder / name).symlink_to(transformed / name)
    tft_output = tft.TFTransformOutput(str(transformed / Files.TRANSFORM_FN))
    options = tf.io.TFRecordOptions(compression_type="GZIP")

    def write(split_rows, split: str, raw_file: Path | None) -> None:
        raw = [_raw_example(row) for row in split_rows]
        parsed = tf.io.parse_example(tf.constant(raw), tft_output.raw_feature_spec())
        values = {k: v.numpy() for k, v in tft_output.transform_raw_features(parsed).items()}
        (folder / split).mkdir()
        with tf.io.TFRecordWriter(str(folder / split / "part-0.tfrecord.gz"), options) as out:
            for i in range(len(raw)):
                out.write(_raw_example({k: v[i].item() for k, v in values.items()}))
        if raw_file is not None:
            raw_file.parent.mkdir(parents=True)
            with tf.io.TFRecordWriter(str(raw_file), options) as raw_out:
                for serialized in raw:
                    raw_out.write(serialized)

    write(rows, Files.TRANSFORMED_EVAL, examples / Files.EVAL_EXAMPLES / "data-0.gz")
    if train_rows is not None:
        write(train_rows, Files.TRANSFORMED_TRAIN, None)
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


# --- weighted: a model weight_column weighs every metric in both steps -------------------------

WEIGHT = {"binary": "target", "multi_class": "target", "regression": "label"}
"""The weight column of each head's weighted pipeline: a raw column of the fixture that is not
the head's label (its transform output is the raw value, as the transform step outputs a
weight column)."""


def generated_weights(size: int, seed: int, integers: bool = False) -> np.ndarray:
    """Weights for ``size`` rows: a fifth of them 0, one of 50 in the last, partial eval batch
    (the second-to-last row; the last one's loss dominates), the others drawn from (0, 3]
    (whole numbers for an int column)."""
    r = np.random.RandomState(seed)
    w = r.randint(1, 4, size).astype(float) if integers else r.uniform(0.05, 3.0, size)
    w[r.rand(size) < 0.2] = 0.0
    w[-3] = 0.0  # a zero in the partial batch too
    w[-2] = 50.0
    return w


def _engine_head(head: str, weight_column: str | None):
    if head == "binary":
        return heads.BinaryClassHead(weight_column=weight_column)
    if head == "multi_class":
        return heads.MultiClassHead(3, weight_column=weight_column)
    return heads.RegressionHead(weight_column=weight_column)


def _head_case(head: str, size: int, seed: int):
    """Labels and float32 logits of ``size`` examples, and the model outputs the evaluate step
    scores (the exported model's ``logistic``, ``probabilities`` or ``predictions``)."""
    r = np.random.RandomState(seed)
    if head == "binary":
        labels = r.randint(0, 2, size)
        logits = (r.normal(0, 2, size) + 1.5 * labels).astype(np.float32)[:, None]
        return labels, logits, tf.sigmoid(logits).numpy().ravel()
    if head == "multi_class":
        labels = r.randint(0, 3, size)
        logits = (r.normal(0, 1.5, (size, 3)) + 2.0 * np.eye(3)[labels]).astype(np.float32)
        return labels, logits, tf.nn.softmax(logits).numpy()
    labels = r.normal(0, 2, size).astype(np.float32)
    logits = (labels + r.normal(0, 1, size)).astype(np.float32)[:, None]
    return labels, logits, logits.ravel()


@pytest.mark.parametrize("weighted", [True, False], ids=["weighted", "unweighted"])
@pytest.mark.parametrize("head", sorted(HEADS))
def test_the_engines_heads_and_the_evaluate_step_agree_on_every_shared_metric(head, weighted):
    """The engine's head metrics (tf.estimator 2.15's: Keras metrics updated batch by batch
    with the weight column) against the evaluate step's on the same outputs: 3,001 examples in
    batches of 64 (the last of 57, holding a zero and the weight of 50), so that tf.estimator's
    200-threshold AUCs are not the exact ones and every shared name must be computed as
    tf.estimator computes it."""
    size, batch = 3001, 64
    labels, logits, outputs = _head_case(head, size, seed=11)
    weights = generated_weights(size, seed=12) if weighted else None
    engine = _engine_head(head, "w" if weighted else None)
    state = engine.metrics()
    for start in range(0, size, batch):
        part = slice(start, start + batch)
        features = {"w": tf.constant(weights[part], tf.float32)} if weighted else {}
        engine.update_metrics(state, features, tf.constant(logits[part]),
                              tf.constant(labels[part][:, None]))
    at_train = {name: float(metric.result()) for name, metric in state.items()}
    at_evaluate = evaluate_metrics.head_metrics(head, labels, outputs, weights)

    shared = set(at_train) & set(at_evaluate)
    assert SHARED[head] <= shared, (sorted(at_train), sorted(at_evaluate))
    for name in sorted(shared):
        assert at_evaluate[name] == pytest.approx(at_train[name], rel=2e-5, abs=1e-6), name
    if head == "binary":  # the approximations are not the exact numbers on these rows
        assert abs(at_evaluate["auc_precision_recall"] - at_evaluate["auc_pr"]) > 1e-4
        assert at_evaluate["auc"] != at_evaluate["auc_exact"]


@pytest.mark.slow
@pytest.mark.parametrize("head", sorted(HEADS))
def test_a_weighted_model_the_train_steps_evaluation_and_the_evaluate_step_agree(
        transformed_dir, tmp_path, head):
    """The real steps on a model declaring ``weight_column``: the train step's final evaluation
    (weighted, as tf.estimator's heads weigh) and the evaluate step's metrics.json, slices
    included, name by name; and a weight of 0 takes an example out of every metric."""
    size, column = 29, WEIGHT[head]
    integers = column == "label"
    rows = eval_rows(size, seed=3)
    weights = generated_weights(size, seed=4, integers=integers)
    for row, w in zip(rows, weights, strict=True):
        row[column] = int(w) if integers else float(w)
    train_rows = fx.make_rows(160, seed=5)
    for row, w in zip(train_rows, generated_weights(160, seed=6, integers=integers),
                      strict=True):
        row[column] = int(w) if integers else float(w)
    examples = tmp_path / "examples"
    transformed = write_eval_split(transformed_dir, tmp_path / "transformed", examples, rows,
                                   train_rows)
    fields = dict(HEADS[head])
    fields["model"] = dataclasses.replace(fields["model"], weight_column=column)
    pipeline = fx.pipeline(
        **fields,
        train=ef.TrainSpec(max_steps=30, batch_size=16, shuffle_buffer=64),
        eval=ef.EvalSpec(batch_size=EVAL_BATCH, start_delay_secs=0, throttle_secs=0,
                         slices=("color",)),
        run_config=ef.RunConfig(save_checkpoints_steps=30, save_summary_steps=10,
                                log_step_count_steps=30, steps_per_loop=10, tf_random_seed=7))
    trained = train.run(pipeline, transformed, tmp_path / "model", progress=lambda _: None)
    [final] = [row for row in trained["evaluations"] if row["step"] == 30]
    at_train = final["metrics"]
    evaluated = evaluate_step.run(pipeline, str(examples), str(tmp_path / "model"),
                                  str(tmp_path / "evaluation"), progress=lambda _: None)
    at_evaluate = evaluated["metrics"]
    assert at_evaluate["examples"] == size
    assert evaluated["weight"] == {"column": column, "sum": pytest.approx(weights.sum()),
                                   "zero": int((weights == 0).sum())}

    shared = set(at_train) & set(at_evaluate)
    assert SHARED[head] <= shared, (sorted(at_train), sorted(at_evaluate))
    for name in sorted(shared):
        assert at_evaluate[name] == pytest.approx(at_train[name], rel=1e-4, abs=1e-6), name

    # the slices are weighted too: each value's metrics are those of its rows and weights
    outputs = np.load(tmp_path / "evaluation" / Files.EVAL_OUTPUTS)["outputs"]
    labels = np.array([row["target" if head == "regression" else "label"] for row in rows])
    colors = np.array([row.get("color", MISSING) for row in rows], dtype=object)
    differs = False
    for value, got in evaluated["slices"]["color"].items():
        members = colors == value
        expected = evaluate_metrics.head_metrics(head, labels[members], outputs[members],
                                                 weights[members])
        unweighted = evaluate_metrics.head_metrics(head, labels[members], outputs[members])
        assert got["examples"] == members.sum(), value
        for name, number in expected.items():
            assert got[name] == pytest.approx(number, rel=1e-6, nan_ok=True) or \
                (got[name] is None and np.isnan(number)), (value, name)
        differs |= got["average_loss"] != pytest.approx(unweighted["average_loss"])
    assert differs, "no slice's weights change its loss: the case shows nothing"
    report = (tmp_path / "evaluation" / Files.REPORT).read_text()
    assert f"weight_column {column}" in report
