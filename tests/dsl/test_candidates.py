"""``ef.Candidates`` as ``Pipeline.model``: each declaration mistake names its field; best_by
and higher_is_better defaults follow the head; a pipeline with candidates survives JSON."""

from __future__ import annotations

import pytest

import estflow.dsl as ef
from estflow.dsl import models as m

FEATURES = (ef.Numeric("x"), ef.Numeric("z"), ef.CategoricalVocab("c"))


def _linear(**kw) -> ef.LinearClassifier:
    return ef.LinearClassifier(feature_columns=("x", "z", "c"), **kw)


def _dnn(**kw) -> ef.DNNClassifier:
    return ef.DNNClassifier(hidden_units=(8, 4),
                            feature_columns=kw.pop("feature_columns",
                                                   ("x", "z", ef.Indicator("c"))), **kw)


def _pipeline(model, **kw) -> ef.Pipeline:
    return ef.Pipeline(name="cands", source=ef.CsvSource("data.csv"), features=FEATURES,
                       label=ef.Label("y"), model=model, train=kw.pop("train", ef.TrainSpec(
                           max_steps=10)), **kw)


def _error(build) -> ef.DslError:
    with pytest.raises(ef.DslError) as info:
        build()
    return info.value


# --- declaration errors, each naming its field -----------------------------------------------

@pytest.mark.parametrize("models", [
    {}, {"linear": _linear()}, [_linear(), _dnn()], (("linear", _linear()), ("dnn", _dnn())),
    None,
])
def test_fewer_than_two_models_or_not_a_dict_is_refused(models):
    err = _error(lambda: ef.Candidates(models))
    assert err.path == "models"
    assert "at least two" in err.expected


@pytest.mark.parametrize("name", ["lin-ear", "1st", "", "dnn model", "a.b", 3])
def test_a_candidate_name_that_is_not_an_identifier_is_named(name):
    err = _error(lambda: ef.Candidates({name: _linear(), "dnn": _dnn()}))
    assert err.path == f"models[{name!r}]"
    assert "identifier" in err.expected
    assert err.received == name


@pytest.mark.parametrize("value", ["DNNClassifier", None, 3, {"hidden_units": (4,)},
                                   ef.Numeric("x")])
def test_a_value_that_is_not_a_model_is_named_by_its_candidate(value):
    err = _error(lambda: ef.Candidates({"linear": _linear(), "dnn": value}))
    assert err.path == "models['dnn']"
    assert err.received == type(value).__name__
    assert "model" in err.expected


@pytest.mark.parametrize("other, attr", [
    (ef.DNNRegressor(hidden_units=(4,), feature_columns=("x",)), "head"),
    (ef.DNNClassifier(hidden_units=(4,), feature_columns=("x",), n_classes=3), "head"),
    (ef.CustomModel(model_fn="my.module:model_fn", head="regression"), "head"),
    (_dnn(weight_column="w"), "weight_column"),
    (_dnn(label_vocabulary=("no", "yes")), "label_vocabulary"),
])
def test_candidates_compared_on_different_terms_are_refused(other, attr):
    err = _error(lambda: ef.Candidates({"linear": _linear(), "dnn": other}))
    assert err.path == f"models[...].{attr}"
    assert "the same for every candidate" in err.expected
    # each candidate's value is shown, by name
    assert set(err.received) == {"linear", "dnn"}
    assert len({repr(v) for v in err.received.values()}) == 2


def test_regressors_with_different_label_dimensions_are_refused():
    err = _error(lambda: ef.Candidates({
        "a": ef.DNNRegressor(hidden_units=(4,), feature_columns=("x",), label_dimension=2),
        "b": ef.LinearRegressor(feature_columns=("x",))}))
    assert err.path == "models[...].label_dimension"
    assert err.received == {"a": 2, "b": 1}


def test_the_same_head_from_a_custom_model_and_a_premade_one_is_accepted():
    cands = ef.Candidates({"linear": _linear(),
                           "mine": ef.CustomModel(model_fn="my.module:model_fn", head="binary")})
    assert cands.head == "binary" and cands.best_by == "auc"


@pytest.mark.parametrize("best_by, head_of", [
    ("rmse", "binary"), ("examples", "binary"), ("loss", "binary"), ("AUC", "binary"),
    ("auc", "regression"), ("accuracy", "regression"), ("auc", "multi_class"),
])
def test_a_best_by_that_is_not_one_of_the_head_s_metrics_is_named(best_by, head_of):
    models = {
        "binary": {"linear": _linear(), "dnn": _dnn()},
        "multi_class": {"linear": _linear(n_classes=3), "dnn": _dnn(n_classes=3)},
        "regression": {"linear": ef.LinearRegressor(feature_columns=("x",)),
                       "dnn": ef.DNNRegressor(hidden_units=(4,), feature_columns=("x",))},
    }[head_of]
    err = _error(lambda: ef.Candidates(models, best_by=best_by))
    assert err.path == "best_by" and err.received == best_by
    assert head_of in err.expected
    # the message lists the metrics to choose from, "examples" (a count) not among them
    listed = [n for n in m.METRIC_NAMES[head_of] if n != "examples"]
    assert str(listed) in err.expected
    assert "'examples'" not in err.expected


@pytest.mark.parametrize("value", ["yes", 1, 0.0])
def test_higher_is_better_must_be_a_bool_or_none(value):
    err = _error(lambda: ef.Candidates({"linear": _linear(), "dnn": _dnn()},
                                       higher_is_better=value))
    assert err.path == "higher_is_better" and err.received == value


def test_warm_start_with_candidates_is_refused_in_a_pipeline():
    cands = ef.Candidates({"linear": _linear(), "dnn": _dnn()})
    with pytest.raises(ef.DslErrors) as info:
        _pipeline(cands, train=ef.TrainSpec(max_steps=10, warm_start=ef.WarmStart()),
                  push=ef.PushTarget("served", "cands"))
    (err,) = info.value.errors
    assert err.path == "train.warm_start"
    assert "Candidates" in err.expected
    # the same warm start with one of the candidates alone is a valid pipeline
    single = _pipeline(_dnn(), train=ef.TrainSpec(max_steps=10, warm_start=ef.WarmStart()),
                       push=ef.PushTarget("served", "cands"))
    assert single.train.warm_start == ef.WarmStart()


def test_a_candidate_s_undeclared_feature_column_is_named_by_its_path():
    cands = ef.Candidates({"linear": _linear(),
                           "dnn": _dnn(feature_columns=("nope", "x", ef.Indicator("c")))})
    with pytest.raises(ef.DslErrors) as info:
        _pipeline(cands)
    paths = [e.path for e in info.value.errors]
    assert paths == ["model.models['dnn'].feature_columns[0]"]
    assert info.value.errors[0].received == "nope"


def test_each_candidate_is_checked_and_every_mistake_reported():
    cands = ef.Candidates({
        "linear": ef.LinearClassifier(feature_columns=("x", "gone")),
        "dnn": _dnn(feature_columns=("x", ef.Indicator("missing"))),
    })
    with pytest.raises(ef.DslErrors) as info:
        _pipeline(cands)
    assert sorted(e.path for e in info.value.errors) == [
        "model.models['dnn'].feature_columns[1]", "model.models['linear'].feature_columns[1]"]


def test_a_candidate_s_undeclared_weight_column_is_named_by_its_path():
    cands = ef.Candidates({"linear": _linear(weight_column="w"), "dnn": _dnn(weight_column="w")})
    with pytest.raises(ef.DslErrors) as info:
        _pipeline(cands)
    assert sorted(e.path for e in info.value.errors) == [
        "model.models['dnn'].weight_column", "model.models['linear'].weight_column"]
    # declared as a raw column, both candidates are fine
    with_w = _pipeline(cands, columns=(ef.Column("w", "float", default=1.0),))
    assert with_w.model.weight_column == "w"


# --- defaults ---------------------------------------------------------------------------------

@pytest.mark.parametrize("models, best_by", [
    ({"linear": _linear(), "dnn": _dnn()}, "auc"),
    ({"linear": _linear(n_classes=3), "dnn": _dnn(n_classes=3)}, "accuracy"),
    ({"linear": ef.LinearRegressor(feature_columns=("x",)),
      "dnn": ef.DNNRegressor(hidden_units=(4,), feature_columns=("x",))}, "average_loss"),
])
def test_best_by_defaults_to_the_head_s_metric(models, best_by):
    cands = ef.Candidates(models)
    assert cands.best_by == best_by
    assert cands.higher_is_better is (best_by not in ("average_loss", "rmse", "mae"))
    assert cands.head == m.head_of(next(iter(models.values())))
    assert m.head_of(cands) == cands.head


@pytest.mark.parametrize("head, metric", [
    (head, metric) for head, names in m.METRIC_NAMES.items() for metric in names
    if metric != "examples"])
def test_higher_is_better_is_inferred_from_the_metric(head, metric):
    models = {
        "binary": {"linear": _linear(), "dnn": _dnn()},
        "multi_class": {"linear": _linear(n_classes=3), "dnn": _dnn(n_classes=3)},
        "regression": {"linear": ef.LinearRegressor(feature_columns=("x",)),
                       "dnn": ef.DNNRegressor(hidden_units=(4,), feature_columns=("x",))},
    }[head]
    cands = ef.Candidates(models, best_by=metric)
    lower = metric in ("average_loss", "rmse", "mae")
    assert cands.higher_is_better is (not lower)
    assert cands.best_by == metric


@pytest.mark.parametrize("declared", [True, False])
def test_a_declared_higher_is_better_is_kept(declared):
    for metric in ("auc", "average_loss"):
        cands = ef.Candidates({"linear": _linear(), "dnn": _dnn()}, best_by=metric,
                              higher_is_better=declared)
        assert cands.higher_is_better is declared


def test_the_candidates_share_their_head_s_properties():
    cands = ef.Candidates({"linear": _linear(label_vocabulary=("no", "yes"), weight_column="w"),
                           "dnn": _dnn(label_vocabulary=("no", "yes"), weight_column="w")})
    assert (cands.head, cands.weight_column, cands.label_vocabulary, cands.n_classes,
            cands.label_dimension) == ("binary", "w", ("no", "yes"), 2, 1)
    regressors = ef.Candidates({
        "a": ef.DNNRegressor(hidden_units=(4,), feature_columns=("x",), label_dimension=2),
        "b": ef.DNNRegressor(hidden_units=(8,), feature_columns=("x",), label_dimension=2)})
    assert (regressors.n_classes, regressors.label_dimension) == (None, 2)


def test_the_given_dict_is_copied():
    given = {"linear": _linear(), "dnn": _dnn()}
    cands = ef.Candidates(given)
    given["late"] = _linear()
    assert sorted(cands.models) == ["dnn", "linear"]


# --- JSON -------------------------------------------------------------------------------------

def test_a_pipeline_with_candidates_survives_a_json_round_trip():
    pipeline = _pipeline(
        ef.Candidates({"linear": _linear(), "dnn": _dnn(),
                       "wide": ef.DNNLinearCombinedClassifier(
                           linear_feature_columns=("c",), dnn_feature_columns=("x", "z"),
                           dnn_hidden_units=(4,))},
                      best_by="average_loss"),
        push=ef.PushTarget("served", "cands"))
    back = ef.Pipeline.from_json(pipeline.to_json())
    assert back == pipeline
    assert isinstance(back.model, ef.Candidates)
    assert sorted(back.model.models) == ["dnn", "linear", "wide"]
    assert back.model.models["dnn"] == pipeline.model.models["dnn"]
    assert (back.model.best_by, back.model.higher_is_better) == ("average_loss", False)
    assert back.to_json() == pipeline.to_json()


def test_a_round_trip_keeps_a_declared_higher_is_better():
    cands = ef.Candidates({"linear": _linear(), "dnn": _dnn()}, best_by="average_loss",
                          higher_is_better=True)
    back = ef.Pipeline.from_json(_pipeline(cands).to_json()).model
    assert (back.best_by, back.higher_is_better) == ("average_loss", True)
    assert back != ef.Candidates({"linear": _linear(), "dnn": _dnn()}, best_by="average_loss")
