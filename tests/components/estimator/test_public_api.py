"""Snapshot of the engine's public API (``estflow.estimator``): a change here is a
deliberate API change, as for the DSL (tests/dsl/test_public_api.py)."""

import importlib
import pkgutil

import estflow.estimator as estimator

PUBLIC = {
    # the Estimator and its specs (tf.estimator names)
    "Estimator", "EstimatorSpec", "ModeKeys", "RunConfig", "TrainSpec", "EvalSpec",
    "train_and_evaluate", "model_to_estimator", "WarmStartSettings", "VocabInfo",
    # premade Estimators with tf.estimator's signatures (canned.py)
    "BaselineClassifier", "BaselineRegressor", "DNNClassifier", "DNNRegressor",
    "DNNLinearCombinedClassifier", "DNNLinearCombinedRegressor", "LinearClassifier",
    "LinearRegressor", "DNNEstimator", "LinearEstimator", "DNNLinearCombinedEstimator",
    # extenders.py
    "add_metrics",
    # gradient boosted trees with tf.estimator's signatures (boosted_trees.py)
    "BoostedTreesClassifier", "BoostedTreesRegressor",
    # heads
    "Head", "BinaryClassHead", "MultiClassHead", "MultiLabelHead", "MultiHead", "RegressionHead",
    "LogisticRegressionHead", "PoissonRegressionHead", "LossReduction", "head_of",
    # feature-column layers
    "DenseFeatures", "LinearModel", "InputLayer", "LinearLayer",
    # export
    "ServingInputReceiver", "parsing_serving_input_receiver_fn", "ClassificationOutput",
    "RegressionOutput", "PredictOutput", "Exporter", "LatestExporter", "BestExporter",
    "FinalExporter",
    # hooks
    "SessionRunHook", "SessionRunArgs", "SessionRunContext", "SessionRunValues", "TrainHook",
    "CheckpointSaverListener", "LoggingTensorHook", "NanTensorHook", "NanLossError",
    "StepCounterHook", "StopAtStepHook", "stop_if_higher_hook", "stop_if_lower_hook",
    "stop_if_no_decrease_hook", "stop_if_no_increase_hook",
    # the rest of tf.estimator 2.15's names (_surface.py; tests/compat/test_surface.py): working
    # ones, and TF 1 session hooks that raise at construction naming the replacement
    "BaselineEstimator", "classifier_parse_example_spec", "regressor_parse_example_spec",
    "SecondOrStepTimer", "NanLossDuringTrainingError", "CheckpointSaverHook", "FeedFnHook",
    "FinalOpsHook", "GlobalStepWaiterHook", "ProfilerHook", "SummarySaverHook",
    # the pipeline's premade model_fns
    "model_fn_for",
    # modules, as tf.estimator exposes them
    "early_stopping", "export", "feature_column", "heads", "hooks", "experimental", "inputs", "tpu",
    # tf.compat.v1.layers' functional layers, sharing variables by scope name (layers.py), and
    # TF 1's RNN cells and dynamic_rnn & co. (rnn_cell.py)
    "layers", "rnn_cell",
}


def test_public_api_snapshot():
    assert set(estimator.__all__) == PUBLIC
    assert len(estimator.__all__) == len(PUBLIC), "a name is listed twice in __all__"
    for name in estimator.__all__:
        assert getattr(estimator, name) is not None


def test_public_modules_are_tf_estimator_named_and_internals_private():
    """Public modules next to __init__ carry tf.estimator's module names; everything else is in
    a private folder (_boosted, _engine, _fc, _heads, _premade)."""
    public = sorted(m.name for m in pkgutil.iter_modules(estimator.__path__)
                    if not m.name.startswith("_"))
    assert public == ["boosted_trees", "canned", "distribute", "early_stopping", "estimator",
                      "experimental", "export", "exporters", "extenders", "feature_column", "heads",
                      "hooks", "inputs", "keras_estimator", "layers", "rnn_cell", "run_config", "tpu", "training",
                      "warm_starting"]
    for module in public:
        assert importlib.import_module(f"{estimator.__name__}.{module}").__doc__
