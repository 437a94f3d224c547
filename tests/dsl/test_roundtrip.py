"""Every declaration class survives a JSON round trip: from_json(to_json(x)) == x."""

import dataclasses

import pytest

import estflow.dsl as ef
from estflow.dsl import serialization
from estflow.dsl.steps import Port
from estflow.dsl.steps import UserStep
from estflow.pipelines.examples import taxi

EXAMPLES = [
    ef.Column("tips", "float", 0.0),
    ef.DataChecks(schema="schema.pbtxt", min_examples=10, max_missing_fraction=0.1,
                  drift={"company": 0.2}, drift_linf=0.3, drift_js=0.1,
                  warn_only=("missing", "SCHEMA_NEW_COLUMN")),
    ef.CsvSource("data/{span:%Y-%m-%d}/*.csv", spans=ef.Spans()),
    ef.Spans(),
    ef.Numeric("fare", default=0.0, normalize="z_score"),
    ef.Bucketized("lat", boundaries=(1.0, 2.5)),
    ef.Bucketized("lat_q", source="lat", num_buckets=10, default=0.0),
    ef.CategoricalVocab("company", default="", top_k=10, frequency_threshold=2),
    ef.CategoricalHash("company_h", source="company", hash_buckets=100),
    ef.CategoricalIdentity("hour", num_buckets=24, default=0),
    ef.Crossed("x", keys=("a", "b"), hash_buckets=10),
    ef.Label("y", dtype="string", vocabulary=("no", "yes")),
    ef.Embedding("company", dimension=4),
    ef.Indicator("hour"),
    ef.DNNClassifier(hidden_units=(8, 4), feature_columns=("fare", ef.Indicator("hour")),
                     dropout=0.1, batch_norm=True),
    ef.DNNRegressor(hidden_units=(8,), feature_columns=("fare",), label_dimension=2),
    ef.LinearClassifier(feature_columns=("hour",), n_classes=3),
    ef.LinearRegressor(feature_columns=("hour",)),
    ef.DNNLinearCombinedRegressor(linear_feature_columns=("hour",),
                                  dnn_feature_columns=("fare",), dnn_hidden_units=(4,)),
    ef.DNNClassifier(hidden_units=(4,), feature_columns=("fare",), weight_column="w",
                     label_vocabulary=("no", "yes"), thresholds=(0.3, 0.7), loss_reduction="sum"),
    ef.BaselineClassifier(n_classes=3, label_vocabulary=("a", "b", "c"), learning_rate=0.1),
    ef.BaselineRegressor(label_dimension=2, weight_column="w", loss_reduction="sum"),
    ef.BoostedTreesClassifier(("fare", ef.Indicator("hour")), n_batches_per_layer=2,
                              n_classes=3, pruning_mode="post", tree_complexity=0.01),
    ef.BoostedTreesRegressor(("fare",), n_batches_per_layer=1, center_bias=True,
                             weight_column="w"),
    ef.CustomModel(model_fn="my.module:model_fn", params={"units": [8, 4], "lr": 0.1}),
    ef.Candidates({"linear": ef.LinearClassifier(feature_columns=("hour",)),
                   "dnn": ef.DNNClassifier(hidden_units=(4,), feature_columns=("fare",))},
                  best_by="average_loss"),
    ef.CsvSource("data/*.csv", delimiter=";"),
    ef.Split(eval_fraction=0.1, key="trip_id"),
    ef.Derive(taxi.big_tipper, outputs=(ef.Column("big_tipper", "int"),)),
    ef.TrainSpec(max_steps=10),
    ef.WarmStart(vars_to_warm_start=("store/model/.*",), optimizer_state=True,
                 var_name_to_prev_var_name={"store/model/000_kernel": "old/kernel"}),
    ef.TrainSpec(max_steps=10, warm_start=ef.WarmStart()),
    ef.EvalSpec(steps=3),
    ef.Threshold("loss", upper_bound=0.5, higher_is_better=False),
    ef.EvalSpec(thresholds=(ef.Threshold("auc", lower_bound=0.8, max_regression=0.01),),
                slices=("payment_type",)),
    ef.RunConfig(tf_random_seed=None),
    ef.Cluster(workers=2, parameter_servers=1, evaluator=True, shared_dir="gs://bucket/estflow",
               ps_resources=ef.Resources(cpu_request="2"),
               evaluator_resources=ef.Resources(memory_request="4Gi"), job_kind="tfjob"),
    ef.RunConfig(train_distribute="parameter_server", cluster=ef.Cluster(2, parameter_servers=1)),
    ef.RunConfig(train_distribute="mirrored", eval_distribute="mirrored"),
    ef.PushTarget("models", "taxi", keep_versions=3),
    ef.Accelerator("tpu-v5-lite-podslice", count=4, tpu_topology="2x2"),
    ef.Toleration("dedicated", operator="Equal", value="ml"),
    ef.SecretEnv("db", {"user": "DB_USER"}),
    ef.SecretVolume("gcp-sa", "/var/secrets/gcp"),
    ef.PvcMount("data", "/data"),
    ef.Resources(cpu_request="2", memory_request="8Gi", accelerator=ef.Accelerator(
        "nvidia-tesla-t4"), node_pool="gpu-pool", retries=2),
    ef.SchemaCheck(max_missing_fraction=0.5, allow_unseen_columns=False),
    ef.TFRecordSource("data/*.tfrecord.gz"),
    ef.ParquetSource("data/*.parquet", schema_check=ef.SchemaCheck()),
    ef.BigQuerySource(table="project.dataset.trips"),
    ef.BatchPredict(source=ef.ParquetSource("s/*.parquet"), output="gs://b/scores",
                    keys=("trip_id",), model="gs://b/models/taxi", format="csv"),
    ef.Pipeline(name="nightly", predict=ef.BatchPredict(model="models/taxi",
                                                        source=ef.CsvSource("new.csv"))),
    taxi.pipeline,
    UserStep(name="export", fn=ef.CallableRef("my.steps", "export"),
             inputs=(Port("evaluation", "Evaluation"),), outputs=(Port("table", "Dataset"),),
             parameters='{"table": "daily", "tags": [1, null]}', returns=("rows",),
             when=ef.result("check")["auc"] >= 0.5, after=("push",),
             resources=ef.Resources(cpu_request="1", retries=2), image="img:1",
             packages=("psycopg2-binary",), cache=False),
    Port("scores", "Dataset"),
    ef.blessed(),
    ef.IntRange(32, 512, log=True),
    ef.FloatRange(1e-4, 0.1, log=True, when=("model.optimizer", "Adam")),
    ef.Choice(((64, 32), (16,), None), when=("model.optimizer", "SGD")),
    ef.MedianStop(every_steps=100, warmup_steps=200, warmup_trials=3),
    ef.HalvingStop(min_steps=100, factor=3),
    ef.Tune({"model.dnn_hidden_units": ef.Choice(((64, 32), (32, 16))),
             "model.dnn_feature_columns[company].dimension": ef.IntRange(4, 16, step=4),
             "train.batch_size": ef.Choice((128, 256))}, objective="auc", trials=4,
            algorithm="grid", early_stopping=ef.MedianStop(every_steps=100)),
    dataclasses.replace(taxi.pipeline, tune=ef.Tune(
        {"model.dnn_optimizer": ef.Choice(("Adagrad", "Adam")),
         "model.dnn_learning_rate": ef.FloatRange(1e-4, 0.1, log=True,
                                                  when=("model.dnn_optimizer", "Adam"))},
        objective="average_loss", trials=8, parallel=2)),
]


@pytest.mark.parametrize("value", EXAMPLES, ids=lambda v: type(v).__name__)
def test_round_trip(value):
    text = serialization.to_json(value)
    assert serialization.from_json(text) == value
    assert serialization.to_json(serialization.from_json(text)) == text  # deterministic


def test_every_registered_class_has_an_example():
    covered = {type(v).__name__ for v in EXAMPLES} | {"CallableRef"}
    # estflow's own classes: a test may register a kind of its own (a new Source subclass)
    # in this process, which is not estflow's to give an example of.
    estflow_classes = {name for name, cls in serialization._REGISTRY.items()
                       if cls.__module__.startswith("estflow.")}
    assert estflow_classes <= covered | {"DNNLinearCombinedClassifier"}


def test_unknown_kind_is_refused():
    with pytest.raises(ef.DslError) as info:
        serialization.from_json('{"kind": "os.system"}')
    assert "`kind`" in str(info.value)


def test_callable_becomes_an_importable_reference():
    ref = taxi.pipeline.derive.fn
    assert str(ref) == "estflow.pipelines.examples.taxi:big_tipper"
