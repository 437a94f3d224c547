"""The Estimator engine on TF 2: ``model_fn`` + ``EstimatorSpec`` training, evaluation,
prediction, checkpoints and export, without tf.estimator (removed in TF 2.16).

Importing this package imports TensorFlow and Keras.
"""

from estflow.components.estimator import early_stopping
from estflow.components.estimator import export
from estflow.components.estimator import feature_column
from estflow.components.estimator import heads
from estflow.components.estimator import hooks
from estflow.components.estimator._premade.inputs import InputLayer
from estflow.components.estimator._premade.inputs import LinearLayer
from estflow.components.estimator._premade.model_fns import head_of
from estflow.components.estimator._premade.model_fns import model_fn_for
from estflow.components.estimator.boosted_trees import BoostedTreesClassifier
from estflow.components.estimator.boosted_trees import BoostedTreesRegressor
from estflow.components.estimator.canned import BaselineClassifier
from estflow.components.estimator.canned import BaselineRegressor
from estflow.components.estimator.canned import DNNClassifier
from estflow.components.estimator.canned import DNNEstimator
from estflow.components.estimator.canned import DNNLinearCombinedClassifier
from estflow.components.estimator.canned import DNNLinearCombinedEstimator
from estflow.components.estimator.canned import DNNLinearCombinedRegressor
from estflow.components.estimator.canned import DNNRegressor
from estflow.components.estimator.canned import LinearClassifier
from estflow.components.estimator.canned import LinearEstimator
from estflow.components.estimator.canned import LinearRegressor
from estflow.components.estimator.early_stopping import stop_if_higher_hook
from estflow.components.estimator.early_stopping import stop_if_lower_hook
from estflow.components.estimator.early_stopping import stop_if_no_decrease_hook
from estflow.components.estimator.early_stopping import stop_if_no_increase_hook
from estflow.components.estimator.estimator import Estimator
from estflow.components.estimator.estimator import NanLossError
from estflow.components.estimator.estimator import TrainHook
from estflow.components.estimator.export import ClassificationOutput
from estflow.components.estimator.export import PredictOutput
from estflow.components.estimator.export import RegressionOutput
from estflow.components.estimator.export import ServingInputReceiver
from estflow.components.estimator.export import parsing_serving_input_receiver_fn
from estflow.components.estimator.exporters import BestExporter
from estflow.components.estimator.exporters import Exporter
from estflow.components.estimator.exporters import FinalExporter
from estflow.components.estimator.exporters import LatestExporter
from estflow.components.estimator.extenders import add_metrics
from estflow.components.estimator.feature_column import DenseFeatures
from estflow.components.estimator.feature_column import LinearModel
from estflow.components.estimator.heads import BinaryClassHead
from estflow.components.estimator.heads import Head
from estflow.components.estimator.heads import LogisticRegressionHead
from estflow.components.estimator.heads import LossReduction
from estflow.components.estimator.heads import MultiClassHead
from estflow.components.estimator.heads import MultiHead
from estflow.components.estimator.heads import MultiLabelHead
from estflow.components.estimator.heads import PoissonRegressionHead
from estflow.components.estimator.heads import RegressionHead
from estflow.components.estimator.hooks import CheckpointSaverListener
from estflow.components.estimator.hooks import LoggingTensorHook
from estflow.components.estimator.hooks import NanTensorHook
from estflow.components.estimator.hooks import SessionRunArgs
from estflow.components.estimator.hooks import SessionRunContext
from estflow.components.estimator.hooks import SessionRunHook
from estflow.components.estimator.hooks import SessionRunValues
from estflow.components.estimator.hooks import StepCounterHook
from estflow.components.estimator.hooks import StopAtStepHook
from estflow.components.estimator.keras_estimator import model_to_estimator
from estflow.components.estimator.run_config import RunConfig
from estflow.components.estimator.training import EvalSpec
from estflow.components.estimator.training import TrainSpec
from estflow.components.estimator.training import train_and_evaluate
from estflow.components.estimator.warm_starting import VocabInfo
from estflow.components.estimator.warm_starting import WarmStartSettings
from estflow.dsl.model_fn import EstimatorSpec
from estflow.dsl.model_fn import ModeKeys

__all__ = [
    "BinaryClassHead",
    "DenseFeatures",
    "Estimator",
    "EstimatorSpec",
    "Head",
    "InputLayer",
    "LinearLayer",
    "LinearModel",
    "LogisticRegressionHead",
    "LossReduction",
    "ModeKeys",
    "MultiClassHead",
    "MultiHead",
    "MultiLabelHead",
    "NanLossError",
    "PoissonRegressionHead",
    "RegressionHead",
    "ServingInputReceiver",
    "ClassificationOutput",
    "PredictOutput",
    "RegressionOutput",
    "export",
    "TrainHook",
    "feature_column",
    "heads",
    "head_of",
    "model_fn_for",
    "parsing_serving_input_receiver_fn",
    # hooks, train_and_evaluate, exporters, early stopping, warm start, Keras models
    "BestExporter",
    "CheckpointSaverListener",
    "EvalSpec",
    "Exporter",
    "FinalExporter",
    "LatestExporter",
    "LoggingTensorHook",
    "NanTensorHook",
    "RunConfig",
    "SessionRunArgs",
    "SessionRunContext",
    "SessionRunHook",
    "SessionRunValues",
    "StepCounterHook",
    "StopAtStepHook",
    "TrainSpec",
    "VocabInfo",
    "WarmStartSettings",
    "early_stopping",
    "hooks",
    "model_to_estimator",
    "stop_if_higher_hook",
    "stop_if_lower_hook",
    "stop_if_no_decrease_hook",
    "stop_if_no_increase_hook",
    "train_and_evaluate",
    "add_metrics",
    # premade Estimators (tf.estimator signatures)
    "BaselineClassifier",
    "BaselineRegressor",
    "BoostedTreesClassifier",
    "BoostedTreesRegressor",
    "DNNClassifier",
    "DNNEstimator",
    "DNNLinearCombinedClassifier",
    "DNNLinearCombinedEstimator",
    "DNNLinearCombinedRegressor",
    "DNNRegressor",
    "LinearClassifier",
    "LinearEstimator",
    "LinearRegressor",
]
