"""estflow.dsl: what users write. Declarations only; importing it never imports TensorFlow,
Beam or KFP.

Example:
    >>> import estflow.dsl as ef
    >>> ef.Numeric("fare", default=0.0, normalize="z_score")
    Numeric(name='fare', dtype='float', default=0.0, normalize='z_score', source=None)
"""

from estflow.dsl.batch import BatchPredict
from estflow.dsl.checks import DataChecks
from estflow.dsl.checks import Spans
from estflow.dsl.errors import DslError
from estflow.dsl.errors import DslErrors
from estflow.dsl.features import Bucketized
from estflow.dsl.features import CategoricalHash
from estflow.dsl.features import CategoricalIdentity
from estflow.dsl.features import CategoricalVocab
from estflow.dsl.features import Column
from estflow.dsl.features import Crossed
from estflow.dsl.features import Label
from estflow.dsl.features import Numeric
from estflow.dsl.model_fn import EstimatorSpec
from estflow.dsl.model_fn import ModeKeys
from estflow.dsl.models import BaselineClassifier
from estflow.dsl.models import BaselineRegressor
from estflow.dsl.models import BoostedTreesClassifier
from estflow.dsl.models import BoostedTreesRegressor
from estflow.dsl.models import Candidates
from estflow.dsl.models import CustomModel
from estflow.dsl.models import DNNClassifier
from estflow.dsl.models import DNNLinearCombinedClassifier
from estflow.dsl.models import DNNLinearCombinedRegressor
from estflow.dsl.models import DNNRegressor
from estflow.dsl.models import Embedding
from estflow.dsl.models import Indicator
from estflow.dsl.models import LinearClassifier
from estflow.dsl.models import LinearRegressor
from estflow.dsl.pipeline import Pipeline
from estflow.dsl.refs import CallableRef
from estflow.dsl.resources import Accelerator
from estflow.dsl.resources import PvcMount
from estflow.dsl.resources import Resources
from estflow.dsl.resources import SecretEnv
from estflow.dsl.resources import SecretVolume
from estflow.dsl.resources import Toleration
from estflow.dsl.sources import BigQuerySource
from estflow.dsl.sources import CsvSource
from estflow.dsl.sources import ParquetSource
from estflow.dsl.sources import SchemaCheck
from estflow.dsl.sources import TFRecordSource
from estflow.dsl.specs import Cluster
from estflow.dsl.specs import Derive
from estflow.dsl.specs import EvalSpec
from estflow.dsl.specs import PushTarget
from estflow.dsl.specs import RunConfig
from estflow.dsl.specs import Split
from estflow.dsl.specs import Threshold
from estflow.dsl.specs import TrainSpec
from estflow.dsl.specs import WarmStart
from estflow.dsl.steps import HTML
from estflow.dsl.steps import Artifact
from estflow.dsl.steps import Dataset
from estflow.dsl.steps import Evaluation
from estflow.dsl.steps import Examples
from estflow.dsl.steps import Input
from estflow.dsl.steps import Markdown
from estflow.dsl.steps import Metrics
from estflow.dsl.steps import ModelDir
from estflow.dsl.steps import Output
from estflow.dsl.steps import Predictions
from estflow.dsl.steps import Pushed
from estflow.dsl.steps import TrainedModel
from estflow.dsl.steps import Transformed
from estflow.dsl.steps import UserStep
from estflow.dsl.steps import Validation
from estflow.dsl.steps import When
from estflow.dsl.steps import blessed
from estflow.dsl.steps import result
from estflow.dsl.steps import step
from estflow.dsl.tune import Choice
from estflow.dsl.tune import FloatRange
from estflow.dsl.tune import HalvingStop
from estflow.dsl.tune import IntRange
from estflow.dsl.tune import MedianStop
from estflow.dsl.tune import Tune

__all__ = [
    "Artifact",
    "Dataset",
    "Evaluation",
    "Examples",
    "HTML",
    "Input",
    "Markdown",
    "Metrics",
    "ModelDir",
    "Output",
    "Predictions",
    "Pushed",
    "Transformed",
    "TrainedModel",
    "UserStep",
    "Validation",
    "When",
    "blessed",
    "result",
    "step",
    "Accelerator",
    "BaselineClassifier",
    "BaselineRegressor",
    "BoostedTreesClassifier",
    "BoostedTreesRegressor",
    "BatchPredict",
    "BigQuerySource",
    "Bucketized",
    "CallableRef",
    "CategoricalHash",
    "CategoricalIdentity",
    "CategoricalVocab",
    "Cluster",
    "DataChecks",
    "Column",
    "Crossed",
    "CsvSource",
    "Candidates",
    "CustomModel",
    "DNNClassifier",
    "DNNLinearCombinedClassifier",
    "DNNLinearCombinedRegressor",
    "DNNRegressor",
    "Derive",
    "DslError",
    "DslErrors",
    "Embedding",
    "EstimatorSpec",
    "EvalSpec",
    "Indicator",
    "Label",
    "LinearClassifier",
    "LinearRegressor",
    "ModeKeys",
    "Numeric",
    "ParquetSource",
    "Pipeline",
    "PushTarget",
    "PvcMount",
    "Resources",
    "RunConfig",
    "SchemaCheck",
    "SecretEnv",
    "SecretVolume",
    "Spans",
    "Split",
    "TFRecordSource",
    "Threshold",
    "Toleration",
    "TrainSpec",
    "WarmStart",
    # hyperparameter search (dsl/tune.py: Pipeline.tune)
    "Choice",
    "FloatRange",
    "IntRange",
    "MedianStop",
    "HalvingStop",
    "Tune",
]
