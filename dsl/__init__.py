"""estflow.dsl: what users write. Declarations only; importing it never imports TensorFlow,
Beam or KFP.

Example:
    >>> import estflow.dsl as ef
    >>> ef.Numeric("fare", default=0.0, normalize="z_score")
    Numeric(name='fare', dtype='float', default=0.0, normalize='z_score', source=None)
"""

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
from estflow.dsl.specs import CsvSource
from estflow.dsl.specs import Derive
from estflow.dsl.specs import EvalSpec
from estflow.dsl.specs import PushTarget
from estflow.dsl.specs import RunConfig
from estflow.dsl.specs import Split
from estflow.dsl.specs import Threshold
from estflow.dsl.specs import TrainSpec

__all__ = [
    "Bucketized",
    "CallableRef",
    "CategoricalHash",
    "CategoricalIdentity",
    "CategoricalVocab",
    "Column",
    "Crossed",
    "CsvSource",
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
    "Pipeline",
    "PushTarget",
    "RunConfig",
    "Split",
    "Threshold",
    "TrainSpec",
]
