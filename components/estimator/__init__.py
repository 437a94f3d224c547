"""The Estimator engine on TF 2: ``model_fn`` + ``EstimatorSpec`` training, evaluation,
prediction, checkpoints and export, without tf.estimator (removed in TF 2.16).

Importing this package imports TensorFlow and Keras. Its name is ``estflow.estimator``; the
files live in ``components/estimator/`` (the train step is its first user).
"""

if __name__ != "estflow.estimator":
    # The folder is also reachable as estflow.components.estimator; a second copy of the engine
    # under that name would make its classes (EstimatorSpec, ModeKeys...) two different types.
    raise ImportError(f"the Estimator engine is imported as estflow.estimator, not {__name__} "
                      "(estflow migrate rewrites the old import)")

from estflow.dsl.model_fn import EstimatorSpec
from estflow.dsl.model_fn import ModeKeys
from estflow.estimator import early_stopping
from estflow.estimator import experimental
from estflow.estimator import export
from estflow.estimator import feature_column
from estflow.estimator import heads
from estflow.estimator import hooks
from estflow.estimator import inputs
from estflow.estimator import layers
from estflow.estimator import rnn_cell
from estflow.estimator import tpu
from estflow.estimator._premade.inputs import InputLayer
from estflow.estimator._premade.inputs import LinearLayer
from estflow.estimator._premade.model_fns import head_of
from estflow.estimator._premade.model_fns import model_fn_for
from estflow.estimator._surface import BaselineEstimator
from estflow.estimator._surface import CheckpointSaverHook
from estflow.estimator._surface import FeedFnHook
from estflow.estimator._surface import FinalOpsHook
from estflow.estimator._surface import GlobalStepWaiterHook
from estflow.estimator._surface import ProfilerHook
from estflow.estimator._surface import SecondOrStepTimer
from estflow.estimator._surface import SummarySaverHook
from estflow.estimator._surface import classifier_parse_example_spec
from estflow.estimator._surface import regressor_parse_example_spec
from estflow.estimator.boosted_trees import BoostedTreesClassifier
from estflow.estimator.boosted_trees import BoostedTreesRegressor
from estflow.estimator.canned import BaselineClassifier
from estflow.estimator.canned import BaselineRegressor
from estflow.estimator.canned import DNNClassifier
from estflow.estimator.canned import DNNEstimator
from estflow.estimator.canned import DNNLinearCombinedClassifier
from estflow.estimator.canned import DNNLinearCombinedEstimator
from estflow.estimator.canned import DNNLinearCombinedRegressor
from estflow.estimator.canned import DNNRegressor
from estflow.estimator.canned import LinearClassifier
from estflow.estimator.canned import LinearEstimator
from estflow.estimator.canned import LinearRegressor
from estflow.estimator.early_stopping import stop_if_higher_hook
from estflow.estimator.early_stopping import stop_if_lower_hook
from estflow.estimator.early_stopping import stop_if_no_decrease_hook
from estflow.estimator.early_stopping import stop_if_no_increase_hook
from estflow.estimator.estimator import Estimator
from estflow.estimator.estimator import NanLossError
from estflow.estimator.estimator import TrainHook
from estflow.estimator.export import ClassificationOutput
from estflow.estimator.export import PredictOutput
from estflow.estimator.export import RegressionOutput
from estflow.estimator.export import ServingInputReceiver
from estflow.estimator.export import parsing_serving_input_receiver_fn
from estflow.estimator.exporters import BestExporter
from estflow.estimator.exporters import Exporter
from estflow.estimator.exporters import FinalExporter
from estflow.estimator.exporters import LatestExporter
from estflow.estimator.extenders import add_metrics
from estflow.estimator.feature_column import DenseFeatures
from estflow.estimator.feature_column import LinearModel
from estflow.estimator.heads import BinaryClassHead
from estflow.estimator.heads import Head
from estflow.estimator.heads import LogisticRegressionHead
from estflow.estimator.heads import LossReduction
from estflow.estimator.heads import MultiClassHead
from estflow.estimator.heads import MultiHead
from estflow.estimator.heads import MultiLabelHead
from estflow.estimator.heads import PoissonRegressionHead
from estflow.estimator.heads import RegressionHead
from estflow.estimator.hooks import CheckpointSaverListener
from estflow.estimator.hooks import LoggingTensorHook
from estflow.estimator.hooks import NanLossDuringTrainingError
from estflow.estimator.hooks import NanTensorHook
from estflow.estimator.hooks import SessionRunArgs
from estflow.estimator.hooks import SessionRunContext
from estflow.estimator.hooks import SessionRunHook
from estflow.estimator.hooks import SessionRunValues
from estflow.estimator.hooks import StepCounterHook
from estflow.estimator.hooks import StopAtStepHook
from estflow.estimator.keras_estimator import model_to_estimator
from estflow.estimator.run_config import RunConfig
from estflow.estimator.training import EvalSpec
from estflow.estimator.training import TrainSpec
from estflow.estimator.training import train_and_evaluate
from estflow.estimator.warm_starting import VocabInfo
from estflow.estimator.warm_starting import WarmStartSettings

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
    # the rest of tf.estimator 2.15's names (tests/compat/test_surface.py)
    "BaselineEstimator",
    "CheckpointSaverHook",
    "FeedFnHook",
    "FinalOpsHook",
    "GlobalStepWaiterHook",
    "NanLossDuringTrainingError",
    "ProfilerHook",
    "SecondOrStepTimer",
    "SummarySaverHook",
    "classifier_parse_example_spec",
    "experimental",
    "inputs",
    "layers",
    "rnn_cell",
    "regressor_parse_example_spec",
    "tpu",
]
