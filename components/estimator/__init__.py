"""The Estimator engine on TF 2: ``model_fn`` + ``EstimatorSpec`` training, evaluation,
prediction, checkpoints and export, without tf.estimator (removed in TF 2.16).

Importing this package imports TensorFlow and Keras.
"""

from estflow.components.estimator.estimator import Estimator
from estflow.components.estimator.estimator import NanLossError
from estflow.components.estimator.estimator import TrainHook
from estflow.components.estimator.export import ServingInputReceiver
from estflow.components.estimator.export import parsing_serving_input_receiver_fn
from estflow.components.estimator.feature_layers import InputLayer
from estflow.components.estimator.feature_layers import LinearLayer
from estflow.components.estimator.heads import BinaryClassHead
from estflow.components.estimator.heads import Head
from estflow.components.estimator.heads import MultiClassHead
from estflow.components.estimator.heads import RegressionHead
from estflow.components.estimator.premade import head_of
from estflow.components.estimator.premade import model_fn_for
from estflow.dsl.model_fn import EstimatorSpec
from estflow.dsl.model_fn import ModeKeys

__all__ = [
    "BinaryClassHead",
    "Estimator",
    "EstimatorSpec",
    "Head",
    "InputLayer",
    "LinearLayer",
    "ModeKeys",
    "MultiClassHead",
    "NanLossError",
    "RegressionHead",
    "ServingInputReceiver",
    "TrainHook",
    "head_of",
    "model_fn_for",
    "parsing_serving_input_receiver_fn",
]
