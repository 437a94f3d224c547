"""Chicago taxi: who tips more than 20% of the fare? A wide & deep classifier.

Run it end to end on this machine::

    estflow run pipelines/examples/taxi.py

or compile it for Kubeflow Pipelines on the images you published (``make image``, see
``taxi_gpu.py``), pushing to a bucket (it pushes to ``serving_models``, a relative
path, which a Kubeflow task's pod would lose: compile refuses it)::

    estflow compile pipelines/examples/taxi.py -o taxi.yaml --image REGISTRY/estflow:0.1.0 \\
        --push-base-path gs://BUCKET/models

The data (15,002 real trips with real gaps) ships next to this file; see
``data/chicago_taxi/README.md``.
"""

import estflow.dsl as ef


def big_tipper(columns):
    """Derived label: 1 when the tip is more than 20% of the fare.

    Runs inside the tf.Transform graph (so TensorFlow is imported here, not at module level:
    declaring and compiling the pipeline stays free of TensorFlow).
    """
    import tensorflow as tf

    return {"big_tipper": tf.cast(columns["tips"] > 0.2 * columns["fare"], tf.int64)}


_LAT_LON = ("pickup_latitude", "pickup_longitude", "dropoff_latitude", "dropoff_longitude")

FEATURES = (
    ef.Numeric("fare", default=0.0, normalize="z_score"),
    ef.Numeric("trip_miles", default=0.0, normalize="z_score"),
    ef.Numeric("trip_seconds", dtype="int", default=0, normalize="log"),
    ef.CategoricalVocab("payment_type", default="", num_oov_buckets=1),
    ef.CategoricalVocab("company", default="", top_k=100, num_oov_buckets=1),
    ef.CategoricalIdentity("trip_start_hour", num_buckets=24, default=0),
    ef.CategoricalIdentity("trip_start_day", num_buckets=8, default=0),
    ef.CategoricalIdentity("trip_start_month", num_buckets=13, default=0),
    ef.CategoricalIdentity("pickup_community_area", num_buckets=78, default=0),
    ef.CategoricalIdentity("dropoff_community_area", num_buckets=78, default=0),
    *(ef.Bucketized(f"{name}_bucket", source=name, num_buckets=10, default=0.0)
      for name in _LAT_LON),
    ef.Crossed("pickup_cell", keys=("pickup_latitude_bucket", "pickup_longitude_bucket"),
               hash_buckets=100),
    ef.Crossed("dropoff_cell", keys=("dropoff_latitude_bucket", "dropoff_longitude_bucket"),
               hash_buckets=100),
    ef.Crossed("payment_x_hour", keys=("payment_type", "trip_start_hour"), hash_buckets=200),
)

pipeline = ef.Pipeline(
    name="chicago-taxi",
    source=ef.CsvSource("data/chicago_taxi/data.csv"),
    columns=(ef.Column("tips", "float", default=0.0),),
    derive=ef.Derive(big_tipper, outputs=(ef.Column("big_tipper", "int"),)),
    features=FEATURES,
    label=ef.Label("big_tipper"),
    model=ef.DNNLinearCombinedClassifier(
        linear_feature_columns=("payment_type", "company", "trip_start_hour", "pickup_cell",
                                "dropoff_cell", "payment_x_hour"),
        dnn_feature_columns=(
            "fare", "trip_miles", "trip_seconds",
            ef.Indicator("payment_type"),
            ef.Embedding("company", dimension=8),
            ef.Indicator("trip_start_hour"),
            ef.Indicator("trip_start_day"),
            ef.Indicator("trip_start_month"),
            ef.Embedding("pickup_community_area", dimension=4),
            ef.Embedding("dropoff_community_area", dimension=4),
            ef.Embedding("pickup_cell", dimension=4),
            ef.Embedding("dropoff_cell", dimension=4),
        ),
        dnn_hidden_units=(32, 16),
    ),
    train=ef.TrainSpec(max_steps=2500, batch_size=256),
    eval=ef.EvalSpec(
        thresholds=(ef.Threshold("auc", lower_bound=0.85, max_regression=0.01),),
        slices=("payment_type",),
    ),
    run_config=ef.RunConfig(save_checkpoints_steps=1000),
    split=ef.Split(eval_fraction=0.2),
    push=ef.PushTarget(base_path="serving_models", model_name="chicago_taxi"),
)
