"""``ef.Tune`` as ``Pipeline.tune``: each declaration mistake names its field path, what was
expected and what was received; ``apply`` makes the pipeline a trial trains; a pipeline with
a search survives JSON and its fingerprint covers the search."""

from __future__ import annotations

import dataclasses
import json

import pytest
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

import estflow.dsl as ef
from estflow.dsl import fingerprints as fp
from estflow.dsl import tune as tn
from estflow.dsl.contracts import STEPS

FEATURES = (ef.Numeric("fare"), ef.Numeric("miles"), ef.CategoricalVocab("company"),
            ef.CategoricalVocab("payment"))


def _wide_deep(**kw) -> ef.DNNLinearCombinedClassifier:
    return ef.DNNLinearCombinedClassifier(
        linear_feature_columns=("company", "payment"),
        dnn_feature_columns=("fare", "miles", ef.Embedding("company", dimension=8),
                             ef.Indicator("payment")),
        dnn_hidden_units=(32, 16), **kw)


def _pipeline(tune=None, model=None, **kw) -> ef.Pipeline:
    return ef.Pipeline(name="tuned", source=ef.CsvSource("data.csv"), features=FEATURES,
                       label=kw.pop("label", ef.Label("tipped")), model=model or _wide_deep(),
                       train=kw.pop("train", ef.TrainSpec(max_steps=1000)), tune=tune, **kw)


def _tune(space=None, **kw) -> ef.Tune:
    if space is None:
        space = {"model.dnn_optimizer": ef.Choice(("Adagrad", "Adam"))}
    return ef.Tune(space,
                   kw.pop("objective", "auc"), **kw)


SPACE = {
    "model.dnn_hidden_units": ef.Choice(((64, 32), (32, 16), (16,))),
    "model.dnn_optimizer": ef.Choice(("Adagrad", "Adam", "SGD")),
    "model.dnn_learning_rate": ef.FloatRange(1e-4, 0.1, log=True,
                                             when=("model.dnn_optimizer", "Adam")),
    "model.dnn_dropout": ef.Choice((None, 0.1, 0.3)),
    "model.dnn_feature_columns[company].dimension": ef.IntRange(2, 16, step=2),
    "model.dnn_feature_columns[company].combiner": ef.Choice(("mean", "sqrtn")),
    "model.batch_norm": ef.Choice((False, True)),
    "model.linear_learning_rate": ef.FloatRange(0.01, 0.5),
    "train.batch_size": ef.IntRange(32, 512, log=True),
    "train.max_steps": ef.IntRange(100, 1000, step=100),
}


def _errors(build) -> list[ef.DslError]:
    with pytest.raises((ef.DslError, ef.DslErrors)) as info:
        build()
    err = info.value
    return err.errors if isinstance(err, ef.DslErrors) else [err]


def _error(build, path: str) -> ef.DslError:
    errors = _errors(build)
    found = [e for e in errors if e.path == path]
    assert found, f"no error at {path!r}: {[e.path for e in errors]}"
    return found[0]


# --- the dimensions --------------------------------------------------------------------------

@pytest.mark.parametrize("build, path, expected, received", [
    (lambda: ef.IntRange(5, 5), "high", "an integer > low (5)", 5),
    (lambda: ef.IntRange(1.5, 5), "low", "an integer", 1.5),
    (lambda: ef.IntRange(True, 5), "low", "an integer", True),
    (lambda: ef.IntRange(1, 10, step=4), "high", "low plus a multiple of step (4), e.g. 9", 10),
    (lambda: ef.IntRange(1, 10, step=0), "step", "a positive integer", 0),
    (lambda: ef.IntRange(0, 10, log=True), "low", "an integer >= 1 with log=True", 0),
    (lambda: ef.IntRange(1, 9, log=True, step=2), "step", "1 with log=True", 2),
    (lambda: ef.FloatRange(0.1, 0.01), "high", "a number > low (0.1)", 0.01),
    (lambda: ef.FloatRange(0, 1, log=True), "low", "a number > 0 with log=True", 0.0),
    (lambda: ef.FloatRange(float("nan"), 1), "low", "a finite number", None),
    (lambda: ef.Choice(()), "values", "at least one value", ()),
    (lambda: ef.Choice("Adam"), "values", "a tuple of values", "Adam"),
    (lambda: ef.Choice(("Adam", {"lr": 1})), "values[1]", "a JSON value", {"lr": 1}),
    (lambda: ef.Choice(((64, (32,)),)), "values[0]", "a tuple of numbers or strings",
     (64, (32,))),
    (lambda: ef.Choice((64, 32, 64.0)), "values[2]", "a value other than values[0]", 64.0),
    (lambda: ef.Choice(("a", "b"), when="model.x"), "when", "None or (path, value)",
     "model.x"),
    (lambda: ef.MedianStop(0), "every_steps", "a positive integer", 0),
    (lambda: ef.MedianStop(10, warmup_steps=-1), "warmup_steps", "an integer >= 0", -1),
    (lambda: ef.MedianStop(10, warmup_trials=-1), "warmup_trials", "an integer >= 0", -1),
    (lambda: ef.HalvingStop(0), "min_steps", "a positive integer", 0),
    (lambda: ef.HalvingStop(100, factor=1), "factor", "an integer >= 2", 1),
    (lambda: ef.HalvingStop(100, factor=2.5), "factor", "an integer >= 2", 2.5),
])
def test_a_bad_dimension_names_its_field(build, path, expected, received):
    err = _error(build, path)
    assert expected in err.expected
    if received is not None:
        assert err.received == received
    assert f"`{path}`" in str(err) and "expected" in str(err) and "Received:" in str(err)


def test_choice_values_are_frozen_and_compared_as_json_values():
    choice = ef.Choice([[64, 32], [16]], when=["model.dnn_optimizer", "Adam"])
    assert choice.values == ((64, 32), (16,))
    assert choice.when == ("model.dnn_optimizer", "Adam")
    assert choice.contains([64, 32]) and choice.contains((16,)) and not choice.contains((16, 8))
    assert ef.Choice((1, True)).values == (1, True)  # True is not 1
    assert hash(choice) == hash(ef.Choice(((64, 32), (16,)), when=("model.dnn_optimizer",
                                                                   "Adam")))


def test_a_conditional_dimension_is_active_only_for_its_value():
    rate = ef.FloatRange(1e-4, 0.1, log=True, when=("model.dnn_optimizer", "Adam"))
    assert rate.active({"model.dnn_optimizer": "Adam"})
    assert not rate.active({"model.dnn_optimizer": "SGD"})
    assert not rate.active({})
    assert ef.IntRange(1, 3).active({})


# --- the search, alone -----------------------------------------------------------------------

@pytest.mark.parametrize("kw, path, expected, received", [
    ({"space": {}}, "space", "at least one dimension", {}),
    ({"space": ["model.x"]}, "space", "a dict: path -> IntRange, FloatRange or Choice",
     ["model.x"]),
    ({"space": {"dnn_optimizer": ef.Choice(("Adam",))}}, "space['dnn_optimizer']",
     "a path 'model.<field>'", "dnn_optimizer"),
    ({"space": {"model.dnn_optimizer": ("Adam", "SGD")}}, "space['model.dnn_optimizer']",
     "an IntRange, FloatRange or Choice", "tuple"),
    ({"space": {"model.dnn_feature_columns": ef.Choice((("fare",),)),
                "model.dnn_feature_columns[company].dimension": ef.IntRange(2, 4)}},
     "space['model.dnn_feature_columns[company].dimension']", "a path outside "
     "'model.dnn_feature_columns'", "model.dnn_feature_columns[company].dimension"),
    ({"trials": 0}, "trials", "a budget of 0 trains nothing", 0),
    ({"trials": -3}, "trials", "a positive integer", -3),
    ({"parallel": 0}, "parallel", "an integer from 1 to trials (20)", 0),
    ({"trials": 4, "parallel": 5}, "parallel", "an integer from 1 to trials (4)", 5),
    ({"max_failures": -1}, "max_failures", "an integer >= 0", -1),
    ({"trial_steps": 0}, "trial_steps", "a positive integer or None", 0),
    ({"timeout_s": 0}, "timeout_s", "a finite number > 0 or None", 0),
    ({"seed": -1}, "seed", "an integer >= 0", -1),
    ({"algorithm": "bayes"}, "algorithm", "one of ['tpe', 'random', 'grid']", "bayes"),
    ({"higher_is_better": "yes"}, "higher_is_better", "True, False or None", "yes"),
    ({"early_stopping": 100}, "early_stopping", "None, a MedianStop or a HalvingStop", 100),
    ({"objective": ""}, "objective", "a metric name", ""),
    ({"space": {"train.max_steps": ef.IntRange(100, 1000)}, "trial_steps": 50},
     "trial_steps", "None when the space searches train.max_steps", 50),
])
def test_a_bad_search_names_its_field(kw, path, expected, received):
    err = _error(lambda: _tune(**kw), path)
    assert expected in err.expected
    assert err.received == received
    assert f"Received: {path}={received!r}" in str(err)


@pytest.mark.parametrize("when, expected", [
    (("model.dnn_optimiser", "Adam"), "a path of the space, one of ['model.dnn_learning_rate',"
                                      " 'model.dnn_optimizer', 'train.batch_size']"),
    (("train.batch_size", 64), "the path of a Choice ('train.batch_size' is an IntRange)"),
    (("model.dnn_optimizer", "Adamw"), "a value of 'model.dnn_optimizer': one of ['Adagrad', "
                                       "'Adam']"),
])
def test_a_bad_condition_names_the_dimension(when, expected):
    space = {"model.dnn_optimizer": ef.Choice(("Adagrad", "Adam")),
             "train.batch_size": ef.IntRange(32, 512, log=True),
             "model.dnn_learning_rate": ef.FloatRange(1e-4, 0.1, when=when)}
    err = _error(lambda: _tune(space), "space['model.dnn_learning_rate'].when")
    assert expected in err.expected
    assert err.received == when
    if when[0] == "model.dnn_optimiser":
        assert "did you mean 'model.dnn_optimizer'?" in str(err)


def test_conditions_in_a_cycle_are_refused():
    space = {"model.dnn_optimizer": ef.Choice(("Adagrad", "Adam"),
                                              when=("model.dnn_activation", "relu")),
             "model.dnn_activation": ef.Choice(("relu", "tanh"),
                                               when=("model.dnn_optimizer", "Adam"))}
    err = _errors(lambda: _tune(space))[0]
    assert err.path.endswith(".when")
    assert "does not depend on this one" in err.expected


def test_a_grid_takes_only_enumerable_dimensions_and_at_most_its_size_in_trials():
    err = _error(lambda: _tune({"model.dnn_learning_rate": ef.FloatRange(0.01, 0.1)},
                               algorithm="grid"), "space['model.dnn_learning_rate']")
    assert "a Choice or an IntRange without log with algorithm='grid'" in err.expected
    err = _error(lambda: _tune({"train.batch_size": ef.IntRange(32, 64, log=True)},
                               algorithm="grid"), "space['train.batch_size']")
    space = {"model.dnn_optimizer": ef.Choice(("Adagrad", "Adam")),
             "model.dnn_hidden_units": ef.Choice(((8,), (16,), (32,)),
                                                 when=("model.dnn_optimizer", "Adam")),
             "train.batch_size": ef.IntRange(64, 256, step=64)}
    err = _error(lambda: _tune(space, algorithm="grid", trials=17), "trials")
    # Adagrad: 4 batch sizes; Adam: 3 widths x 4 batch sizes
    assert err.expected.startswith("at most 16, the number of points of the grid")
    assert err.received == 17
    assert "at most 16" in str(err) and "trials=17" in str(err)
    tune = _tune(space, algorithm="grid", trials=16)
    grid = list(tune.grid())
    assert tune.grid_size() == len(grid) == 16
    assert {"model.dnn_optimizer": "Adagrad", "train.batch_size": 128} in grid
    assert all(("model.dnn_hidden_units" in a) == (a["model.dnn_optimizer"] == "Adam")
               for a in grid)


def test_the_space_is_sorted_pairs_and_dimensions_put_a_condition_after_its_choice():
    tune = _tune(SPACE)
    assert [p for p, _ in tune.space] == sorted(SPACE)
    assert tune.space == _tune(tuple(reversed(list(SPACE.items())))).space
    order = [p for p, _ in tune.dimensions()]
    assert order.index("model.dnn_optimizer") < order.index("model.dnn_learning_rate")
    assert sorted(order) == sorted(SPACE)
    assert tune.dimension("train.batch_size") == SPACE["train.batch_size"]
    hash(tune)  # hashable: a frozen declaration of tuples


# --- the search in the pipeline --------------------------------------------------------------

def test_a_path_naming_no_field_is_named_with_a_suggestion():
    err = _error(lambda: _pipeline(_tune({"model.dnn_hiden_units": ef.Choice(((8,),))})),
                 "tune.space['model.dnn_hiden_units']")
    assert err.expected.startswith("the path of a field of DNNLinearCombinedClassifier or "
                                   "TrainSpec, one of [")
    assert "'model.dnn_hidden_units'" in err.expected
    assert "'model.dnn_feature_columns[<column>].dimension'" in err.expected
    assert err.received == "model.dnn_hiden_units"
    assert "did you mean 'model.dnn_hidden_units'?" in str(err)


@pytest.mark.parametrize("path, suggestion", [
    ("model.dnn_feature_columns[compny].dimension",
     "model.dnn_feature_columns[company].dimension"),
    ("train.batch_sise", "train.batch_size"),
    ("model.dnn_feature_columns[company].dimensions",
     "model.dnn_feature_columns[company].dimension"),
])
def test_element_and_train_paths_are_checked_too(path, suggestion):
    err = _error(lambda: _pipeline(_tune({path: ef.IntRange(2, 4)})), f"tune.space[{path!r}]")
    assert err.received == path
    assert f"did you mean {suggestion!r}?" in str(err)


@pytest.mark.parametrize("path", ["model.n_classes", "model.weight_column",
                                  "train.warm_start", "model.label_vocabulary"])
def test_what_defines_the_problem_is_not_searched(path):
    err = _error(lambda: _pipeline(_tune({path: ef.Choice((2, 3))})), f"tune.space[{path!r}]")
    assert f"a field other than {path}, which defines the problem" in err.expected


def test_the_field_a_column_is_named_by_is_not_searched():
    path = "model.dnn_feature_columns[company].feature"
    err = _error(lambda: _pipeline(_tune({path: ef.Choice(("payment",))})),
                 f"tune.space[{path!r}]")
    assert err.received == path


@pytest.mark.parametrize("path, dimension, where, expected, received", [
    ("model.dnn_learning_rate", ef.FloatRange(0, 0.1), ".low",
     "a finite number > 0 or None (what model.dnn_learning_rate takes)", 0.0),
    ("model.dnn_optimizer", ef.Choice(("Adam", "Adamw")), ".values[1]",
     "one of ['Adagrad', 'Adam', 'Ftrl', 'RMSProp', 'SGD'] (what model.dnn_optimizer takes)",
     "Adamw"),
    ("model.dnn_dropout", ef.FloatRange(0.1, 1.0), ".high",
     "a finite number >= 0 and <= 0.99 or None (what model.dnn_dropout takes)", 1.0),
    ("model.dnn_hidden_units", ef.Choice(((64, 32), (64, 0))), ".values[1]",
     "a positive integer (what model.dnn_hidden_units[1] takes)", (64, 0)),
    ("model.dnn_hidden_units", ef.IntRange(8, 64), ".low",
     "a tuple of positive layer widths (what model.dnn_hidden_units takes)", 8),
    ("model.dnn_feature_columns[company].dimension", ef.IntRange(0, 8), ".low",
     "a positive integer (what model.dnn_feature_columns[company].dimension takes)", 0),
    ("model.dnn_feature_columns[company].combiner", ef.Choice(("mean", "max")), ".values[1]",
     "one of ['mean', 'sum', 'sqrtn'] (what model.dnn_feature_columns[company].combiner "
     "takes)", "max"),
    ("train.batch_size", ef.FloatRange(16, 64), ".low",
     "a positive integer (what train.batch_size takes)", 16.0),
    # the pipeline's own checks speak too: a feature the pipeline does not declare
    ("model.linear_feature_columns", ef.Choice((("company",), ("company", "hour"))),
     ".values[1]", "a declared feature, one of ['company', 'fare', 'miles', 'payment'] (what "
     "model.linear_feature_columns[1] takes)", ("company", "hour")),
])
def test_a_value_the_field_refuses_is_named_by_its_dimension(path, dimension, where, expected,
                                                             received):
    err = _error(lambda: _pipeline(_tune({path: dimension})), f"tune.space[{path!r}]{where}")
    assert err.expected == expected
    assert err.received == received
    assert f"Received: tune.space[{path!r}]{where}={received!r}" in str(err)


def test_an_objective_the_head_does_not_produce_is_named():
    err = _error(lambda: _pipeline(_tune(objective="acuracy")), "tune.objective")
    assert err.expected.startswith("one of the binary head's metrics ['average_loss', "
                                   "'accuracy', 'auc'")
    assert err.received == "acuracy"
    assert "did you mean 'accuracy'?" in str(err)
    regression = ef.DNNRegressor(hidden_units=(8,), feature_columns=("fare",))
    err = _error(lambda: _pipeline(_tune({"model.optimizer": ef.Choice(("Adam", "SGD"))}),
                                   model=regression, label=ef.Label("tips", dtype="float")),
                 "tune.objective")
    assert "regression head's metrics" in err.expected
    assert "'auc'" not in err.expected


@pytest.mark.parametrize("objective, higher", [("auc", True), ("average_loss", False),
                                               ("accuracy", True)])
def test_the_direction_is_inferred_as_candidates_infer_it(objective, higher):
    pipeline = _pipeline(_tune(objective=objective))
    assert pipeline.tune.higher_is_better is higher
    assert pipeline.tune.objective == objective
    explicit = _pipeline(_tune(objective=objective, higher_is_better=not higher))
    assert explicit.tune.higher_is_better is (not higher)


def test_every_error_is_reported_at_once():
    tune = _tune({"model.dnn_hiden_units": ef.Choice(((8,),)),
                  "model.dnn_learning_rate": ef.FloatRange(0, 0.1),
                  "train.batch_sise": ef.IntRange(32, 64)}, objective="acuracy")
    paths = [e.path for e in _errors(lambda: _pipeline(tune))]
    assert paths == ["tune.objective", "tune.space['model.dnn_hiden_units']",
                     "tune.space['model.dnn_learning_rate'].low",
                     "tune.space['train.batch_sise']"]


def test_other_errors_come_with_the_search_s_own():
    tune = _tune({"model.dnn_hiden_units": ef.Choice(((8,),))})
    errors = _errors(lambda: _pipeline(tune, eval=ef.EvalSpec(slices=("nope",))))
    assert [e.path for e in errors] == ["eval.slices[0]", "tune.space['model.dnn_hiden_units']"]


def test_tune_with_candidates_is_refused():
    candidates = ef.Candidates({"linear": ef.LinearClassifier(feature_columns=("company",)),
                                "dnn": _wide_deep()})
    err = _error(lambda: _pipeline(_tune(), model=candidates), "tune")
    assert "None with Candidates: a search tunes the hyperparameters of one model" in (
        err.expected)
    assert err.received == "Tune over ['model.dnn_optimizer']"


def test_tune_with_warm_start_is_refused():
    err = _error(lambda: _pipeline(_tune(), push=ef.PushTarget("models", "taxi"),
                                   train=ef.TrainSpec(max_steps=10,
                                                      warm_start=ef.WarmStart())),
                 "train.warm_start")
    assert err.expected.startswith("None with tune (every trial would start from the served "
                                   "version's checkpoint")
    assert err.received == ef.WarmStart()


def test_a_pipeline_that_only_predicts_declares_no_search():
    err = _error(lambda: ef.Pipeline(name="scores", predict=ef.BatchPredict(
        model="models/taxi", source=ef.CsvSource("new.csv")), tune=_tune()), "tune")
    assert "left at its default (None)" in err.expected


def test_a_custom_model_s_params_are_searched_by_key():
    model = ef.CustomModel("my.models:model_fn", params={"units": [16], "lr": 0.1})
    space = {"model.params.units": ef.Choice(((16,), (32, 16))),
             "model.params.lr": ef.FloatRange(1e-3, 0.3, log=True)}
    pipeline = _pipeline(_tune(space), model=model)
    trial = tn.apply(pipeline, {"model.params.units": [32, 16], "model.params.lr": 0.01})
    assert trial.model.params == {"units": (32, 16), "lr": 0.01}
    err = _error(lambda: _pipeline(_tune({"model.params.unit": ef.Choice(((8,),))}),
                                   model=model), "tune.space['model.params.unit']")
    assert "a key of the CustomModel's params: one of ['model.params.units', " in err.expected
    assert "did you mean 'model.params.units'?" in str(err)
    err = _error(lambda: _pipeline(_tune({"model.params.lr": ef.FloatRange(0.1, 0.2)})),
                 "tune.space['model.params.lr']")
    assert "params are a CustomModel's" in err.expected


# --- apply -----------------------------------------------------------------------------------

def test_apply_sets_each_path_and_converts_json_lists_back_to_tuples():
    pipeline = _pipeline(_tune(SPACE))
    assignment = json.loads(json.dumps({
        "model.dnn_hidden_units": [64, 32], "model.dnn_optimizer": "Adam",
        "model.dnn_learning_rate": 0.003, "model.dnn_dropout": None,
        "model.dnn_feature_columns[company].dimension": 4,
        "model.dnn_feature_columns[company].combiner": "sqrtn", "model.batch_norm": True,
        "model.linear_learning_rate": 0.2, "train.batch_size": 100, "train.max_steps": 300}))
    trial = tn.apply(pipeline, assignment)
    assert trial.model == dataclasses.replace(
        _wide_deep(), dnn_hidden_units=(64, 32), dnn_optimizer="Adam", dnn_learning_rate=0.003,
        batch_norm=True, linear_learning_rate=0.2,
        dnn_feature_columns=("fare", "miles", ef.Embedding("company", 4, "sqrtn"),
                             ef.Indicator("payment")))
    assert trial.train == ef.TrainSpec(max_steps=300, batch_size=100)
    assert trial.tune == pipeline.tune
    assert (trial.features, trial.label, trial.eval) == (pipeline.features, pipeline.label,
                                                         pipeline.eval)
    assert pipeline.tune.apply(pipeline, assignment) == trial
    assert tn.apply(pipeline, {}) == pipeline


def test_an_inactive_conditional_path_is_absent_and_the_field_keeps_its_value():
    pipeline = _pipeline(_tune(SPACE))
    trial = tn.apply(pipeline, {"model.dnn_optimizer": "SGD"})
    assert (trial.model.dnn_optimizer, trial.model.dnn_learning_rate) == ("SGD", 0.05)
    err = _error(lambda: tn.apply(pipeline, {"model.dnn_optimizer": "SGD",
                                             "model.dnn_learning_rate": 0.01}),
                 "assignment['model.dnn_learning_rate']")
    assert err.expected == ("no value: the dimension is searched only when "
                            "model.dnn_optimizer is 'Adam' (here 'SGD')")
    # absent from the assignment: the parent's declared value decides
    err = _error(lambda: tn.apply(pipeline, {"model.dnn_learning_rate": 0.01}),
                 "assignment['model.dnn_learning_rate']")
    assert "(here 'Adagrad')" in err.expected


@pytest.mark.parametrize("assignment, path, expected, received", [
    ({"model.dnn_hiden_units": [8]}, "assignment['model.dnn_hiden_units']",
     "a path of the tune space, one of ['model.batch_norm'", "model.dnn_hiden_units"),
    ({"model.dnn_optimizer": "Adamw"}, "assignment['model.dnn_optimizer']",
     "one of ['Adagrad', 'Adam', 'SGD']", "Adamw"),
    ({"train.batch_size": 1024}, "assignment['train.batch_size']",
     "an integer from 32 to 512", 1024),
    ({"train.max_steps": 150}, "assignment['train.max_steps']",
     "an integer from 100 to 1000 in steps of 100", 150),
    ({"model.dnn_hidden_units": [8, 4]}, "assignment['model.dnn_hidden_units']",
     "one of [(64, 32), (32, 16), (16,)]", (8, 4)),
])
def test_apply_refuses_a_path_or_value_outside_the_space(assignment, path, expected,
                                                         received):
    err = _error(lambda: tn.apply(_pipeline(_tune(SPACE)), assignment), path)
    assert err.expected.startswith(expected)
    assert err.received == received


def test_apply_without_a_search_takes_any_field_and_lets_the_field_refuse():
    pipeline = _pipeline()
    trial = tn.apply(pipeline, {"model.dnn_feature_columns[company].dimension": 3,
                                "train.shuffle_buffer": 50})
    assert trial.model.dnn_feature_columns[2] == ef.Embedding("company", 3)
    assert trial.train.shuffle_buffer == 50
    errors = _errors(lambda: tn.apply(pipeline, {"model.dnn_learning_rate": -1,
                                                 "model.dnn_optimiser": "Adam"}))
    assert [e.path for e in errors] == ["assignment['model.dnn_optimiser']"]
    assert "did you mean 'model.dnn_optimizer'?" in str(errors[0])
    err = _error(lambda: tn.apply(pipeline, {"model.dnn_learning_rate": -1}),
                 "assignment['model.dnn_learning_rate']")
    assert err.expected == "a finite number > 0 or None (what model.dnn_learning_rate takes)"
    assert err.received == -1
    err = _error(lambda: tn.apply(pipeline, {"model.linear_feature_columns": ["nope"]}),
                 "assignment['model.linear_feature_columns']")
    assert "a declared feature" in err.expected and err.received == ("nope",)


def test_apply_sets_interdependent_fields_together():
    model = ef.BoostedTreesClassifier(("fare", ef.Indicator("payment")), n_batches_per_layer=1)
    pipeline = _pipeline(model=model)
    trial = tn.apply(pipeline, {"model.pruning_mode": "pre", "model.tree_complexity": 0.1})
    assert (trial.model.pruning_mode, trial.model.tree_complexity) == ("pre", 0.1)
    err = _errors(lambda: tn.apply(pipeline, {"model.pruning_mode": "pre"}))[0]
    assert err.path == "assignment['model.pruning_mode']"
    assert "(what model.tree_complexity takes)" in err.expected


# --- JSON and fingerprints -------------------------------------------------------------------

def test_a_pipeline_with_a_search_survives_json():
    pipeline = _pipeline(_tune(SPACE, trials=40, parallel=4, algorithm="random",
                               early_stopping=ef.MedianStop(100, warmup_steps=200),
                               max_failures=0, timeout_s=3600, trial_steps=None, seed=7))
    back = ef.Pipeline.from_json(pipeline.to_json())
    assert back == pipeline
    assert back.tune.dimension("model.dnn_hidden_units").values == ((64, 32), (32, 16), (16,))
    assert back.tune.dimension("model.dnn_learning_rate").when == ("model.dnn_optimizer",
                                                                   "Adam")
    assert ef.Pipeline.from_json(_pipeline().to_json()).tune is None


def test_the_pipeline_fingerprint_covers_the_search():
    plain, tuned = _pipeline(), _pipeline(_tune(SPACE))
    more = _pipeline(_tune(SPACE, trials=21))
    digests = {fp.digest(json.loads(p.to_json())) for p in (plain, tuned, more)}
    assert len(digests) == 3  # the run's spec digest
    facts = fp.Facts(estflow={"version": "1"}, source={"digest": "d"}, code={})
    whole = [fp.StepKeyInput("all", (), ("out",), None)]  # a step reading the whole spec
    keys = {fp.step_keys(p, whole, facts)["all"].key for p in (plain, tuned, more)}
    assert len(keys) == 3
    # the built-in steps but tune read no search: a trial's train step is keyed by its model
    # alone; the tune step's key covers the search, its budget included
    plan = [fp.StepKeyInput(s.name, tuple((a, next(p.name for p in STEPS if a in p.outputs))
                                          for a in s.inputs), s.outputs, s.reads,
                            s.side_effects, s.module) for s in STEPS]
    keys = [{n: k.key for n, k in fp.step_keys(p, plan, facts).items()} for p in (tuned, more)]
    assert [n for n in keys[0] if keys[0][n] != keys[1][n]] == ["tune"]
    assert ({n: k for n, k in fp.step_keys(plain, plan[:3], facts).items()}
            == {n: k for n, k in fp.step_keys(tuned, plan[:3], facts).items()})


# --- property: random assignments of a space -------------------------------------------------

def _drawn(draw, tune: ef.Tune) -> dict:
    assignment: dict = {}
    for path, dim in tune.dimensions():
        if not dim.active(assignment):
            continue
        if isinstance(dim, ef.Choice):
            assignment[path] = draw(st.sampled_from(dim.values))
        elif isinstance(dim, ef.IntRange):
            assignment[path] = dim.low + dim.step * draw(
                st.integers(0, (dim.high - dim.low) // dim.step))
        else:
            assignment[path] = draw(st.floats(dim.low, dim.high, allow_nan=False))
    return assignment


TUNED = _pipeline(_tune(SPACE))


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_a_random_assignment_applies_and_survives_json(data):
    assignment = _drawn(data.draw, TUNED.tune)
    as_json = json.loads(json.dumps(assignment))  # what a tuner's records hold: lists
    trial = tn.apply(TUNED, as_json)
    for path, value in assignment.items():
        target = tn._target(trial, path, path)
        assert target.get(trial) == value, path
    for path, _ in TUNED.tune.space:
        if path not in assignment:  # inactive: the declared value
            assert tn._target(trial, path, path).get(trial) == tn._target(
                TUNED, path, path).get(TUNED)
    assert ef.Pipeline.from_json(trial.to_json()) == trial


def test_a_search_over_a_multi_worker_cluster_is_refused_naming_the_cluster():
    config = ef.RunConfig(cluster=ef.Cluster(workers=2, shared_dir="gs://bucket/estflow"))
    errors = _errors(lambda: _pipeline(_tune(), run_config=config))
    assert [e.path for e in errors] == ["run_config.cluster"]
    assert "multi-worker search is not supported" in str(errors[0])
    _pipeline(_tune(), run_config=ef.RunConfig(cluster=ef.Cluster(workers=1)))  # one process
