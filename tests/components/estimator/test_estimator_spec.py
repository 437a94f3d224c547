"""The model_fn contract (estflow.dsl.model_fn): EstimatorSpec validated per mode.

The DSL never imports TensorFlow, so the checks are duck-typed; they are exercised here with
stand-ins and with real tensors.
"""

import subprocess
import sys

import pytest

import estflow.dsl as ef
from estflow.dsl import ModeKeys
from estflow.dsl.model_fn import EstimatorSpec


class FakeShape(tuple):
    pass


class FakeTensor:
    def __init__(self, shape=()):
        self.shape = FakeShape(shape)
        self.dtype = "float32"


class FakeMetric:
    def update_state(self, *args):
        pass

    def result(self):
        return 0.0


class FakeOptimizer:
    def apply_gradients(self, grads_and_vars):
        pass


LOSS = FakeTensor()


def test_mode_keys_keep_tf_estimator_values():
    assert (ModeKeys.TRAIN, ModeKeys.EVAL, ModeKeys.PREDICT) == ("train", "eval", "infer")


@pytest.mark.parametrize("mode,kwargs,field", [
    (ModeKeys.TRAIN, {"train_op": object()}, "loss"),
    (ModeKeys.TRAIN, {"loss": LOSS}, "train_op"),
    (ModeKeys.EVAL, {"predictions": FakeTensor((4,))}, "loss"),
    (ModeKeys.PREDICT, {"loss": LOSS}, "predictions"),
])
def test_missing_field_names_the_field_and_the_mode(mode, kwargs, field):
    with pytest.raises(ef.DslError) as err:
        EstimatorSpec(mode, **kwargs)
    assert err.value.path == field
    assert f"mode={mode!r}" in str(err.value)
    assert f"`{field}`" in str(err.value)


def test_valid_specs_per_mode():
    EstimatorSpec(ModeKeys.TRAIN, loss=LOSS, train_op=object())
    EstimatorSpec(ModeKeys.TRAIN, loss=LOSS, optimizer=FakeOptimizer())
    EstimatorSpec(ModeKeys.TRAIN, loss=LOSS,
                  optimizer=((FakeOptimizer(), [object()]), (FakeOptimizer(), [])))
    EstimatorSpec(ModeKeys.EVAL, loss=LOSS, eval_metric_ops={"acc": FakeMetric()})
    EstimatorSpec(ModeKeys.PREDICT, predictions={"p": FakeTensor((4, 1))})
    EstimatorSpec(ModeKeys.PREDICT, predictions=FakeTensor((4,)))


@pytest.mark.parametrize("kwargs,field", [
    ({"mode": "training", "loss": LOSS}, "mode"),
    ({"mode": ModeKeys.EVAL, "loss": FakeTensor((3,))}, "loss"),
    ({"mode": ModeKeys.EVAL, "loss": 1.0}, "loss"),
    ({"mode": ModeKeys.EVAL, "loss": LOSS, "eval_metric_ops": {"acc": 0.5}},
     "eval_metric_ops['acc']"),
    ({"mode": ModeKeys.EVAL, "loss": LOSS, "eval_metric_ops": {"acc": (LOSS, object())}},
     "eval_metric_ops['acc']"),
    ({"mode": ModeKeys.EVAL, "loss": LOSS, "eval_metric_ops": [FakeMetric()]},
     "eval_metric_ops"),
    ({"mode": ModeKeys.PREDICT, "predictions": {"p": [1, 2]}}, "predictions['p']"),
    ({"mode": ModeKeys.TRAIN, "loss": LOSS, "train_op": object(),
      "optimizer": FakeOptimizer()}, "optimizer"),
    ({"mode": ModeKeys.TRAIN, "loss": LOSS, "optimizer": "Adagrad"}, "optimizer"),
])
def test_wrong_kinds_are_rejected_with_the_field(kwargs, field):
    with pytest.raises(ef.DslError) as err:
        EstimatorSpec(**kwargs)
    assert err.value.path == field


def test_spec_is_frozen():
    spec = EstimatorSpec(ModeKeys.PREDICT, predictions=FakeTensor((2,)))
    with pytest.raises(AttributeError):
        spec.loss = LOSS


def test_real_tensors_pass_and_unknown_rank_loss_is_allowed():
    import tensorflow as tf

    EstimatorSpec(ModeKeys.EVAL, loss=tf.constant(1.0))

    @tf.function(input_signature=[tf.TensorSpec(None, tf.float32)])
    def unknown_rank(x):
        EstimatorSpec(ModeKeys.EVAL, loss=tf.reduce_sum(x) + x[..., :0])  # rank unknown
        return x

    unknown_rank.get_concrete_function()
    with pytest.raises(ef.DslError, match="scalar"):
        EstimatorSpec(ModeKeys.EVAL, loss=tf.constant([1.0, 2.0]))

    # as tf.estimator: a loss of one element, or of an unknown number (a per-example loss at
    # batch size 1, as the TF 1 migration guide's model_fn returns), is taken as a scalar
    EstimatorSpec(ModeKeys.EVAL, loss=tf.constant([[1.0]]))

    @tf.function(input_signature=[tf.TensorSpec([None], tf.float32)])
    def per_example(x):
        EstimatorSpec(ModeKeys.EVAL, loss=x * 2.0)
        return x

    per_example.get_concrete_function()
    with pytest.raises(ef.DslError, match=r"scalar.*shape \(1, 2\)"):
        EstimatorSpec(ModeKeys.EVAL, loss=tf.zeros([1, 2]))


def test_model_fn_contract_does_not_import_tensorflow():
    code = ("import sys, estflow.dsl as ef; ef.EstimatorSpec; "
            "assert 'tensorflow' not in sys.modules, 'tensorflow imported'")
    subprocess.run([sys.executable, "-c", code], check=True)
