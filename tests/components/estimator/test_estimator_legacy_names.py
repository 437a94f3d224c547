"""tf.estimator 2.15's variable names on the premade Estimators (issue 23): programs and
tests print and read ``get_variable_names()`` / ``get_variable_value(name)`` with them. The
names checked are tensorflow/estimator's own test constants:
tensorflow_estimator/python/estimator/canned/linear_testing_utils.py (``AGE_WEIGHT_NAME =
'linear/linear_model/age/weights'``, ``BIAS_NAME = 'linear/linear_model/bias_weights'``) and
canned/dnn_testing_utils.py (``HIDDEN_WEIGHTS_NAME_PATTERN = 'dnn/hiddenlayer_%d/kernel'``,
``LOGITS_WEIGHTS_NAME = 'dnn/logits/kernel'``, ``LOGITS_BIASES_NAME = 'dnn/logits/bias'``)."""

import numpy as np
import tensorflow as tf

import estflow.estimator as estimator

fc = estimator.feature_column
AGE = np.arange(32, dtype="float32").reshape(-1, 1) / 32.0


def _input_fn():
    return tf.data.Dataset.from_tensor_slices(({"age": AGE}, 2 * AGE + 1)).repeat().batch(8)


def test_linear_and_dnn_variables_answer_to_tf_estimator_names(tmp_path):
    linear = estimator.LinearRegressor([fc.numeric_column("age")], model_dir=str(tmp_path / "l"),
                                       progress=lambda _: None)
    linear.train(_input_fn, steps=3)
    names = linear.get_variable_names()
    assert {"linear/linear_model/age/weights", "linear/linear_model/bias_weights"} <= set(names)
    own = [n for n in names if n.startswith("store/model/") and n.endswith("age_weights")]
    np.testing.assert_array_equal(linear.get_variable_value("linear/linear_model/age/weights"),
                                  linear.get_variable_value(own[0]))
    assert linear.get_variable_value("linear/linear_model/age/weights").shape == (1, 1)

    dnn = estimator.DNNRegressor([4, 3], [fc.numeric_column("age")],
                                 model_dir=str(tmp_path / "d"), progress=lambda _: None)
    dnn.train(_input_fn, steps=3)
    names = set(dnn.get_variable_names())
    assert {"dnn/hiddenlayer_0/kernel", "dnn/hiddenlayer_0/bias", "dnn/hiddenlayer_1/kernel",
            "dnn/logits/kernel", "dnn/logits/bias"} <= names
    assert dnn.get_variable_value("dnn/hiddenlayer_1/kernel").shape == (4, 3)
    assert dnn.get_variable_value("dnn/logits/bias").shape == (1,)
