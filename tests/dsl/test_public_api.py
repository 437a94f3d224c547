"""Snapshot of the public DSL: a change here is a deliberate API change."""

import estflow.dsl as ef

PUBLIC = {
    "Bucketized", "CallableRef", "CategoricalHash", "CategoricalIdentity", "CategoricalVocab",
    "Candidates", "Column", "Crossed", "CsvSource", "CustomModel", "DNNClassifier",
    "DNNLinearCombinedClassifier", "DNNLinearCombinedRegressor", "DNNRegressor", "Derive",
    "DslError", "DslErrors", "Embedding", "EstimatorSpec", "EvalSpec", "Indicator", "Label",
    "LinearClassifier", "LinearRegressor", "ModeKeys", "Numeric", "Pipeline", "PushTarget",
    "RunConfig", "Split", "Threshold", "TrainSpec",
    # warm start from the served version (dsl/specs.py: TrainSpec.warm_start)
    "WarmStart",
    # premade baselines (dsl/models.py)
    "BaselineClassifier", "BaselineRegressor",
    # gradient boosted trees (dsl/models.py)
    "BoostedTreesClassifier", "BoostedTreesRegressor",
    # distribution (dsl/specs.py: RunConfig.cluster)
    "Cluster",
    # data sources (dsl/sources.py)
    "BigQuerySource", "ParquetSource", "SchemaCheck", "TFRecordSource",
    # resources (dsl/resources.py)
    "Accelerator", "PvcMount", "Resources", "SecretEnv", "SecretVolume", "Toleration",
    # batch prediction (dsl/batch.py: Pipeline.predict)
    "BatchPredict",
    # data checks and spans (dsl/checks.py: Pipeline.checks, CsvSource.spans)
    "DataChecks", "Spans",
    # user steps (dsl/steps.py: Pipeline.steps)
    "step", "Input", "Output", "UserStep", "When", "blessed", "result", "Artifact", "Examples",
    "Validation", "Transformed", "TrainedModel", "Evaluation", "Pushed", "Predictions",
    "Dataset", "ModelDir", "Metrics", "HTML", "Markdown",
    # hyperparameter search (dsl/tune.py: Pipeline.tune)
    "Tune", "IntRange", "FloatRange", "Choice", "MedianStop", "HalvingStop",
}


def test_public_api_snapshot():
    assert set(ef.__all__) == PUBLIC
    for name in ef.__all__:
        assert getattr(ef, name) is not None
