"""``estflow migrate``'s tables: what estflow.estimator has under tf.estimator's names, and the
TF 1 calls :mod:`.migrate` rewrites (no TensorFlow imported)."""

from __future__ import annotations

ESTFLOW_MODULE = "estflow.estimator"
# The engine's name before estflow 0.2 (its folder's path); migrate rewrites it.
_OLD_ENGINE = "estflow.components.estimator"

# What estflow.estimator exports under tf.estimator's names (tests check that each
# is there).
ESTIMATOR_NAMES = frozenset({
    "BaselineClassifier", "BaselineRegressor", "BestExporter", "BinaryClassHead",
    "BoostedTreesClassifier", "BoostedTreesRegressor",
    "CheckpointSaverListener", "DNNClassifier", "DNNEstimator", "DNNLinearCombinedClassifier",
    "DNNLinearCombinedEstimator", "DNNLinearCombinedRegressor", "DNNRegressor", "Estimator",
    "EstimatorSpec", "EvalSpec", "Exporter", "FinalExporter", "Head", "LatestExporter",
    "LinearClassifier", "LinearEstimator", "LinearRegressor",
    "LoggingTensorHook", "LogisticRegressionHead", "ModeKeys", "MultiClassHead", "MultiHead",
    "MultiLabelHead", "NanTensorHook", "PoissonRegressionHead", "RegressionHead", "RunConfig",
    "SessionRunArgs", "SessionRunContext", "SessionRunHook", "SessionRunValues",
    "StepCounterHook", "StopAtStepHook", "TrainSpec", "VocabInfo", "WarmStartSettings",
    "add_metrics", "train_and_evaluate",
})
EXPORT_NAMES = frozenset({
    "ClassificationOutput", "PredictOutput", "RegressionOutput", "ServingInputReceiver",
    "TensorServingInputReceiver", "build_parsing_serving_input_receiver_fn",
    "build_raw_serving_input_receiver_fn",
})
EARLY_STOPPING = {
    "stop_if_higher_hook": "stop_if_higher_hook",
    "stop_if_lower_hook": "stop_if_lower_hook",
    "stop_if_no_decrease_hook": "stop_if_no_decrease_hook",
    "stop_if_no_increase_hook": "stop_if_no_increase_hook",
    "make_early_stopping_hook": "early_stopping.make_early_stopping_hook",
}
FEATURE_COLUMN_NAMES = frozenset({
    "bucketized_column", "categorical_column_with_hash_bucket", "categorical_column_with_identity",
    "categorical_column_with_vocabulary_file", "categorical_column_with_vocabulary_list",
    "crossed_column", "embedding_column", "indicator_column", "input_layer", "linear_model",
    "make_parse_example_spec", "numeric_column", "shared_embeddings",
    "weighted_categorical_column", "DenseFeatures", "LinearModel",
})
# tf.compat.v1.train.X hooks -> the engine's.
V1_TRAIN_HOOKS = frozenset({
    "SessionRunHook", "SessionRunArgs", "SessionRunContext", "SessionRunValues",
    "LoggingTensorHook", "StopAtStepHook", "NanTensorHook", "StepCounterHook",
    "CheckpointSaverListener",
})
# tf.compat.v1.layers classes with the same name and arguments in Keras.
V1_LAYER_CLASSES = frozenset({
    "Dense", "Flatten", "Dropout", "Conv1D", "Conv2D", "Conv3D", "Conv2DTranspose",
    "MaxPooling1D", "MaxPooling2D", "MaxPooling3D", "AveragePooling1D", "AveragePooling2D",
    "AveragePooling3D", "BatchNormalization", "SeparableConv1D", "SeparableConv2D",
    "Conv3DTranspose", "Layer", "InputSpec",
})
GLOBAL_STEP_FUNCS = frozenset({("tensorflow", "train", "get_global_step"),
                               ("tensorflow", "train", "get_or_create_global_step")})
# TF 1 learning-rate decays over the global step -> Keras schedules:
# (schedule class, TF 1 parameters in order, the global-step parameter, TF 1 name -> Keras name).
DECAYS = {
    "exponential_decay": ("ExponentialDecay", ["learning_rate", "global_step", "decay_steps",
                                               "decay_rate", "staircase", "name"]),
    "inverse_time_decay": ("InverseTimeDecay", ["learning_rate", "global_step", "decay_steps",
                                                "decay_rate", "staircase", "name"]),
    "polynomial_decay": ("PolynomialDecay", ["learning_rate", "global_step", "decay_steps",
                                             "end_learning_rate", "power", "cycle", "name"]),
    "cosine_decay": ("CosineDecay", ["learning_rate", "global_step", "decay_steps", "alpha",
                                     "name"]),
    "piecewise_constant": ("PiecewiseConstantDecay", ["x", "boundaries", "values", "name"]),
}
DECAY_RENAMES = {"learning_rate": "initial_learning_rate"}
DECAY_STEP_PARAMS = {"global_step", "x"}
# tf.compat.v1.estimator's premade classes default to loss_reduction=SUM (TF 2's, and estflow's,
# to SUM_OVER_BATCH_SIZE): the migration keeps SUM.
V1_SUM_CANNED = frozenset({
    "BaselineClassifier", "BaselineRegressor", "DNNClassifier", "DNNRegressor",
    "DNNLinearCombinedClassifier", "DNNLinearCombinedRegressor", "LinearClassifier",
    "LinearRegressor",
})
# ... and their DNN part to TF 1's Adagrad: (keyword, its position in the TF 1 signature, the
# TF 1 class's learning rate: 0.05 for DNN*, 0.001 for the DNN part of DNNLinearCombined*).
V1_DNN_OPTIMIZER = {"DNNClassifier": ("optimizer", 6, "0.05"),
                    "DNNRegressor": ("optimizer", 5, "0.05"),
                    "DNNLinearCombinedClassifier": ("dnn_optimizer", 4, "0.001"),
                    "DNNLinearCombinedRegressor": ("dnn_optimizer", 4, "0.001")}
PANDAS_INPLACE = frozenset({"replace", "fillna", "where", "mask", "clip", "ffill", "bfill",
                            "interpolate", "rename", "drop_duplicates", "sort_values"})
GRAPH_MODE_SWITCHES = frozenset({"disable_eager_execution", "disable_v2_behavior",
                                 "enable_eager_execution", "enable_v2_behavior"})


def short(text: str, limit: int = 70) -> str:
    """``text`` on one line, cut to ``limit`` characters."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 3] + "..."
