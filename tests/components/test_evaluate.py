"""The evaluate step on a tiny exported model and hand-made raw examples: head and slice
metrics, the baseline served at the push target, blessing, the report and the KFP files."""

import dataclasses
import hashlib
import itertools
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import estflow.dsl as ef
from estflow.components import evaluate
from estflow.components import push
from estflow.components.evaluate import files as evaluation_files
from estflow.components.evaluate import metrics
from estflow.components.evaluate import outputs as _outputs
from estflow.components.evaluate import results
from estflow.components.evaluate import scoring
from estflow.components.evaluate import step
from estflow.dsl.contracts import Files
from tests.components import _eval_fixtures as fx

ROWS = fx.make_rows(600, seed=0)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("evaluate")
    fx.write_examples(root / "examples", ROWS)
    fx.good_model(root / "good" / "export")
    fx.random_model(root / "random" / "export")
    return root


def _run(data, tmp_path, model="good", **pipeline_args):
    pipeline = fx.pipeline(pipeline_args.pop("serving", tmp_path / "serving"), **pipeline_args)
    result = step.run(pipeline, str(data / "examples"), str(data / model),
                          str(tmp_path / "evaluation"))
    return pipeline, result


def _read(tmp_path, name):
    return json.loads((tmp_path / "evaluation" / name).read_text())


def _expected_probs(rows):
    w = fx.TRUE_WEIGHTS
    logits = np.array([np.float32(w["w_fare"]) * r.fare + w["w_card"] *
                       (r.payment_type == "Credit Card") + w["bias"] for r in rows])
    return 1 / (1 + np.exp(-logits))


def test_head_metrics_through_the_serving_signature(data, tmp_path):
    _, result = _run(data, tmp_path)
    y = np.array([r.big_tipper for r in ROWS])
    expected = metrics.binary_metrics(y, _expected_probs(ROWS))
    assert result["head"] == "binary"
    assert result["metrics"]["examples"] == len(ROWS)
    for name in ("auc", "accuracy", "average_loss", "auc_pr"):
        assert result["metrics"][name] == pytest.approx(expected[name], abs=1e-5)
    assert _read(tmp_path, "metrics.json") == result


def test_slices_match_metrics_on_the_slice_subset(data, tmp_path):
    _, result = _run(data, tmp_path)
    slices = result["slices"]["payment_type"]
    assert set(slices) == {"Cash", "Credit Card", "Mobile", scoring.MISSING}
    y, probs = np.array([r.big_tipper for r in ROWS]), _expected_probs(ROWS)
    for value, got in slices.items():
        members = np.array([(r.payment_type or scoring.MISSING) == value for r in ROWS])
        expected = metrics.binary_metrics(y[members], probs[members])
        assert got["examples"] == members.sum()
        for name in ("auc", "accuracy", "average_loss", "label/mean"):
            assert got[name] == pytest.approx(expected[name], abs=1e-5), (value, name)
    assert slices[scoring.MISSING]["examples"] < 30  # a small slice, reported with its count


def test_slices_by_a_float_column_and_undefined_metrics_are_null():
    labels = np.array([1, 1, 0, 1])
    outputs = np.array([0.9, 0.8, 0.3, 0.6])
    values = np.array(["2.5", "2.5", "7", "7"], dtype=object)
    result = results.slice_metrics("binary", labels, outputs, {"fare": values})
    assert result["fare"]["2.5"]["examples"] == 2
    assert np.isnan(result["fare"]["2.5"]["auc"])  # a single class: AUC undefined
    assert results.json_safe(result)["fare"]["2.5"]["auc"] is None


def test_first_push_thresholds_bless_without_baseline(data, tmp_path):
    _run(data, tmp_path, thresholds=(ef.Threshold("auc", lower_bound=0.7, max_regression=0.0),))
    blessing = _read(tmp_path, "blessing.json")
    assert blessing["blessed"] is True and blessing["baseline"] is None
    assert blessing["reasons"][0].startswith("PASS auc = 0.8")
    assert "no baseline" in blessing["reasons"][1]


def test_first_push_below_the_lower_bound_is_not_blessed(data, tmp_path, capsys):
    _run(data, tmp_path, "random", thresholds=(ef.Threshold("auc", lower_bound=0.7),))
    blessing = _read(tmp_path, "blessing.json")
    assert blessing["blessed"] is False
    assert blessing["reasons"][0].startswith("FAIL auc = 0.") and "< lower_bound 0.7" in \
        blessing["reasons"][0]
    assert "NOT BLESSED" in capsys.readouterr().out


def test_unknown_threshold_metric_fails_before_scoring(data, tmp_path):
    with pytest.raises(ValueError, match=r"thresholds\[0\]\.metric.*'auc_roc'") as info:
        _run(data, tmp_path, thresholds=(ef.Threshold("auc_roc", lower_bound=0.5),))
    assert "'auc'" in str(info.value) and "'recall'" in str(info.value)
    assert not (tmp_path / "evaluation").exists()


def test_a_random_model_is_not_pushed_over_a_better_served_model(data, tmp_path):
    serving = tmp_path / "serving"
    push.push_directory(data / "good" / "export", serving / "taxi", version=1)
    (serving / "taxi" / "2" / "variables").mkdir(parents=True)  # incomplete: not the baseline
    pipeline, result = _run(data, tmp_path, "random", thresholds=(
        ef.Threshold("auc", lower_bound=0.4, max_regression=0.02),))
    blessing = _read(tmp_path, "blessing.json")
    assert blessing["blessed"] is False
    assert blessing["baseline"]["version"] == 1
    base_auc = blessing["baseline"]["metrics"]["auc"]
    assert base_auc > 0.75 and result["metrics"]["auc"] < 0.6
    assert blessing["reasons"][0].startswith("PASS auc")  # the bound alone would pass
    regression = blessing["reasons"][1]
    assert regression.startswith("FAIL") and f"{base_auc:.6g}" in regression
    assert f"worse by {base_auc - result['metrics']['auc']:.6g}" in regression

    pushed = push.run(pipeline, str(data / "random"), str(tmp_path / "evaluation"),
                      str(tmp_path / "pushed"))
    assert pushed == json.loads((tmp_path / "pushed" / "push.json").read_text())
    assert pushed["pushed"] is False and pushed["reasons"] == [regression]
    assert push.list_versions(serving / "taxi") == [1, 2]


def test_a_better_model_is_pushed_over_the_served_one(data, tmp_path):
    serving = tmp_path / "serving"
    push.push_directory(data / "random" / "export", serving / "taxi", version=1)
    pipeline, _ = _run(data, tmp_path, thresholds=(ef.Threshold("auc", max_regression=0.0),))
    assert _read(tmp_path, "blessing.json")["blessed"] is True
    pushed = push.run(pipeline, str(data / "good"), str(tmp_path / "evaluation"),
                      str(tmp_path / "pushed"))
    assert pushed["pushed"] is True and pushed["version"] > 1
    assert push.list_versions(serving / "taxi") == [1, pushed["version"]]


def test_an_unreadable_baseline_blocks_max_regression(data, tmp_path):
    broken = tmp_path / "serving" / "taxi" / "5"
    shutil.copytree(data / "good" / "export", broken)
    (broken / "saved_model.pb").write_bytes(b"not a SavedModel")
    _run(data, tmp_path, thresholds=(ef.Threshold("auc", max_regression=0.1),))
    blessing = _read(tmp_path, "blessing.json")
    assert blessing["blessed"] is False and blessing["baseline"]["error"]
    assert "could not be evaluated" in blessing["reasons"][0]


def test_without_a_push_target_blessing_is_still_written(data, tmp_path):
    _run(data, tmp_path, serving=None, thresholds=(ef.Threshold("auc", lower_bound=0.5),))
    assert _read(tmp_path, "blessing.json")["blessed"] is True


def test_report_has_the_plots(data, tmp_path):
    serving = tmp_path / "serving"
    push.push_directory(data / "good" / "export", serving / "taxi", version=1)
    _run(data, tmp_path, "random", thresholds=(ef.Threshold("auc", max_regression=0.01),))
    report = (tmp_path / "evaluation" / "report.html").read_text()
    assert report.startswith("<!DOCTYPE html>") and "<script" not in report
    assert report.count("<svg") == 4  # ROC, precision-recall, calibration, slice bars
    for text in ("ROC curve", "Precision-recall curve", "Calibration (reliability)",
                 "auc by payment_type", "NOT BLESSED", "baseline v1", "Confusion matrix",
                 "&lt;missing&gt;", "small)"):
        assert text in report, text
    assert report.count('class="series"') == 5  # candidate + baseline ROC and PR, calibration


def test_kfp_files_and_log_to_kfp(data, tmp_path):
    _run(data, tmp_path)
    scalars = _read(tmp_path, "kfp_metrics.json")
    assert scalars["examples"] == len(ROWS) and 0.5 < scalars["auc"] < 1
    classification = _read(tmp_path, "kfp_classification.json")
    roc = classification["roc"]
    assert 2 < len(roc["fpr"]) == len(roc["tpr"]) == len(roc["thresholds"]) <= 200
    assert roc["fpr"][0] == roc["tpr"][0] == 0 and roc["fpr"][-1] == roc["tpr"][-1] == 1
    assert np.all(np.diff(roc["thresholds"]) < 0)
    matrix = classification["confusion_matrix"]
    assert matrix["categories"] == ["0", "1"]
    assert sum(map(sum, matrix["matrix"])) == len(ROWS)
    assert sum(matrix["matrix"][1]) == sum(r.big_tipper for r in ROWS)  # rows: the label

    class Recorder:
        def __init__(self):
            self.calls = []

        def __getattr__(self, name):
            return lambda *args: self.calls.append((name, args))

    scalar_log, classification_log = Recorder(), Recorder()
    evaluation_files.log_to_kfp(str(tmp_path / "evaluation"), scalar_log, classification_log)
    assert ("log_metric", ("auc", scalars["auc"])) in scalar_log.calls
    assert len(scalar_log.calls) == len(scalars)
    assert classification_log.calls == [
        ("log_roc_curve", (roc["fpr"], roc["tpr"], roc["thresholds"])),
        ("log_confusion_matrix", (matrix["categories"], matrix["matrix"]))]


def test_log_to_kfp_with_real_kfp_artifacts(data, tmp_path):
    kfp_dsl = pytest.importorskip("kfp.dsl")
    _run(data, tmp_path)
    scalars = kfp_dsl.Metrics(name="metrics", uri=str(tmp_path / "m"))
    classification = kfp_dsl.ClassificationMetrics(name="c", uri=str(tmp_path / "c"))
    evaluation_files.log_to_kfp(str(tmp_path / "evaluation"), scalars, classification)
    assert scalars.metadata["auc"] == _read(tmp_path, "kfp_metrics.json")["auc"]
    assert len(classification.metadata["confidenceMetrics"]) <= 200
    assert classification.metadata["confusionMatrix"]["annotationSpecs"] == [
        {"displayName": "0"}, {"displayName": "1"}]


def test_curves_for_multi_class_and_regression():
    probs = np.array([[0.7, 0.2, 0.1], [0.1, 0.8, 0.1], [0.2, 0.2, 0.6], [0.5, 0.4, 0.1]])
    multi = results.curves("multi_class", np.array([0, 1, 2, 1]), probs, ["a", "b", "c"])
    assert multi == {"confusion_matrix": {"categories": ["a", "b", "c"],
                                          "matrix": [[1, 0, 0], [1, 1, 0], [0, 0, 1]]}}
    regression = results.curves("regression", np.array([1.0, 2.0, 3.0]),
                                 np.array([1.5, 2.0, 2.5]), [])
    assert set(regression) == {"calibration"} and regression["calibration"][0]["count"] == 1


def test_slices_by_an_int_column_and_a_high_cardinality_float_column(data, tmp_path):
    _, result = _run(data, tmp_path, slices=("big_tipper", "fare"))
    by_label = result["slices"]["big_tipper"]
    assert set(by_label) == {"0", "1"}
    assert by_label["1"]["examples"] == sum(r.big_tipper for r in ROWS)
    assert by_label["1"]["auc"] is None and by_label["1"]["label/mean"] == 1.0
    assert len(result["slices"]["fare"]) == results.MAX_SLICE_VALUES  # the most frequent
    fares = {f"{r.fare:g}" for r in ROWS}
    assert set(result["slices"]["fare"]) <= fares  # raw float values, formatted with :g


def test_step_entry_points_read_the_spec_and_gate_the_push(data, tmp_path):
    serving = tmp_path / "serving"
    push.push_directory(data / "good" / "export", serving / "taxi", version=1)
    spec = tmp_path / "pipeline.json"
    spec.write_text(fx.pipeline(serving, thresholds=(
        ef.Threshold("auc", max_regression=0.01),)).to_json())
    evaluation, pushed = tmp_path / "evaluation", tmp_path / "pushed"
    assert evaluate.main(["--spec", str(spec), "--examples", str(data / "examples"),
                          "--model", str(data / "random"), "--evaluation", str(evaluation)]) == 0
    assert push.main(["--spec", str(spec), "--model", str(data / "random"),
                      "--evaluation", str(evaluation), "--pushed", str(pushed)]) == 0
    assert json.loads((pushed / "push.json").read_text())["pushed"] is False
    assert push.list_versions(serving / "taxi") == [1]
    for name in ("metrics.json", "blessing.json", "report.html", "kfp_metrics.json",
                 "kfp_classification.json"):
        assert (evaluation / name).is_file(), name


# -- a pushed version's stored eval outputs: read instead of scoring it again ---------------

def _push_evaluated(data, tmp_path, model="good"):
    """Evaluate ``model`` with nothing served, then push it: the served version carries its
    outputs on the eval rows."""
    first = tmp_path / "first"
    pipeline = fx.pipeline(tmp_path / "serving")
    step.run(pipeline, str(data / "examples"), str(data / model), str(first / "evaluation"))
    pushed = push.run(pipeline, str(data / model), str(first / "evaluation"),
                      str(first / "pushed"))
    assert pushed["pushed"] is True
    return Path(pushed["path"]), first / "evaluation"


def _baseline_of(tmp_path):
    return _read(tmp_path, "blessing.json")["baseline"]


def test_a_pushed_version_carries_its_eval_outputs(data, tmp_path):
    version, evaluation = _push_evaluated(data, tmp_path)
    stored = np.load(version / Files.SERVED_EVAL_OUTPUTS)
    written = np.load(evaluation / Files.EVAL_OUTPUTS)
    np.testing.assert_array_equal(stored["outputs"], written["outputs"])
    np.testing.assert_allclose(np.sort(stored["outputs"]), np.sort(_expected_probs(ROWS)),
                               atol=1e-5)  # one per row (in the shards' order)
    meta = json.loads(str(stored["meta"]))
    assert meta["rows"] == len(ROWS) and meta["head"] == "binary" and meta["limit"] is None
    assert [name for name, _ in meta["files"]] == sorted(
        p.name for p in (data / "examples" / "eval").iterdir())


def test_the_same_rows_read_the_baselines_stored_outputs(data, tmp_path, monkeypatch):
    version, _ = _push_evaluated(data, tmp_path)
    thresholds = (ef.Threshold("auc", max_regression=0.02),)
    # the reference: the baseline scored (its stored outputs hidden)
    hidden = version / Files.SERVED_EVAL_OUTPUTS
    hidden.rename(tmp_path / "hidden.npz")
    scored_dir = tmp_path / "scored"
    _run(data, scored_dir, "random", serving=tmp_path / "serving", thresholds=thresholds)
    scored = _baseline_of(scored_dir)
    assert scored["outputs"] == "scored"
    (tmp_path / "hidden.npz").rename(hidden)

    def no_load(path):
        assert path is None, f"the baseline {path} was loaded"
        return None, None

    monkeypatch.setattr(scoring, "_load_baseline", no_load)
    lines = []
    pipeline = fx.pipeline(tmp_path / "serving", thresholds=thresholds)
    step.run(pipeline, str(data / "examples"), str(data / "random"),
                 str(tmp_path / "reused" / "evaluation"), progress=lines.append)
    reused = _baseline_of(tmp_path / "reused")
    assert reused["outputs"] == "stored"
    assert reused["metrics"] == scored["metrics"]  # bit for bit what scoring gives
    assert _read(tmp_path / "reused", "blessing.json")["reasons"] == \
        _read(scored_dir, "blessing.json")["reasons"]
    assert any("were stored with it when it was evaluated: reused" in line for line in lines)


def test_other_rows_score_the_baseline(data, tmp_path):
    version, _ = _push_evaluated(data, tmp_path)
    other = tmp_path / "other_examples"
    fx.write_examples(other, fx.make_rows(400, seed=7))  # other rows, other file sizes
    pipeline = fx.pipeline(tmp_path / "serving", thresholds=(
        ef.Threshold("auc", max_regression=0.5),))
    lines = []
    step.run(pipeline, str(other), str(data / "random"), str(tmp_path / "evaluation"),
                 progress=lines.append)
    baseline = _baseline_of(tmp_path)
    assert baseline["outputs"] == "scored" and baseline["metrics"]["examples"] == 400
    assert "computed with other eval files" in lines[0]


@pytest.mark.parametrize("damage", ["digest", "limit", "head", "bytes"])
def test_stored_outputs_that_do_not_match_are_not_used(data, tmp_path, damage):
    """Names and sizes alike but another digest (the rows differ), another eval limit or head,
    or a damaged file: the baseline is scored, with the same metrics as without the file."""
    version, _ = _push_evaluated(data, tmp_path)
    path = version / Files.SERVED_EVAL_OUTPUTS
    if damage == "bytes":
        path.write_bytes(path.read_bytes()[:100])
    else:
        with np.load(path) as npz:
            outputs, meta = npz["outputs"], json.loads(str(npz["meta"]))
        meta.update({"digest": {"digest": "sha256:" + "0" * 64},
                     "limit": {"limit": 512}, "head": {"head": "regression"}}[damage])
        with open(path, "wb") as f:  # outputs that would change the metrics if used
            np.savez(f, outputs=outputs + 0.5, meta=np.asarray(json.dumps(meta)))
    thresholds = (ef.Threshold("auc", max_regression=0.5),)
    _run(data, tmp_path / "with", "random", serving=tmp_path / "serving", thresholds=thresholds)
    path.unlink()
    _run(data, tmp_path / "without", "random", serving=tmp_path / "serving",
         thresholds=thresholds)
    assert _baseline_of(tmp_path / "with") == _baseline_of(tmp_path / "without")
    assert _baseline_of(tmp_path / "with")["outputs"] == "scored"


@given(rows=st.lists(st.binary(max_size=40), max_size=30), cuts=st.lists(st.integers(0, 30)))
def test_the_row_digest_depends_on_rows_and_order_not_batches(rows, cuts):
    reference = hashlib.sha256(b"".join(len(r).to_bytes(8, "little") + r for r in rows))
    digest = _outputs.RowDigest()
    bounds = sorted({0, len(rows), *(c for c in cuts if c <= len(rows))})
    for start, end in itertools.pairwise(bounds):
        digest.update(rows[start:end])
    assert digest.hexdigest() == "sha256:" + reference.hexdigest()
    if len(rows) >= 2:
        merged = _outputs.RowDigest()  # two rows joined into one differ from the two
        merged.update([rows[0] + rows[1], *rows[2:]])
        assert merged.hexdigest() != digest.hexdigest()


# --- a model weight_column weighs every metric, as tf.estimator's heads do ---------------------

def _weighted_pipeline(serving, **kwargs) -> ef.Pipeline:
    """The fixture's pipeline with ``fare`` as the model's weight column (the exported model
    still reads it; to the evaluate step it is what each example weighs)."""
    pipeline = fx.pipeline(serving, **kwargs)
    return dataclasses.replace(
        pipeline, features=(ef.CategoricalVocab("payment_type", default=""),
                            ef.Numeric("noise", default=0.0)),
        columns=(ef.Column("fare", "float", default=0.0),),
        model=ef.LinearClassifier(feature_columns=("payment_type", "noise"),
                                  weight_column="fare"))


def test_a_weight_column_weighs_every_metric_the_slices_and_the_baseline(data, tmp_path,
                                                                        capsys):
    serving = tmp_path / "serving"
    push.push_directory(data / "good" / "export", serving / "taxi", version=1)
    pipeline = _weighted_pipeline(serving, thresholds=(
        ef.Threshold("average_loss", upper_bound=10.0, max_regression=10.0,
                     higher_is_better=False),))
    result = step.run(pipeline, str(data / "examples"), str(data / "random"),
                      str(tmp_path / "evaluation"))
    y = np.array([r.big_tipper for r in ROWS])
    fares = np.array([r.fare for r in ROWS])
    scored = np.load(tmp_path / "evaluation" / Files.EVAL_OUTPUTS)["outputs"]
    # the eval files are read shard by shard: the rows in the order scored
    order = [i for shard in range(2) for i in range(shard, len(ROWS), 2)]
    y, fares = y[order], fares[order]
    expected = metrics.binary_metrics(y, scored, weights=fares)
    assert result["metrics"] == pytest.approx(expected, rel=1e-9)
    assert result["metrics"] != pytest.approx(metrics.binary_metrics(y, scored))
    assert result["weight"] == {"column": "fare", "sum": pytest.approx(fares.sum()), "zero": 0}
    assert _read(tmp_path, "metrics.json") == result

    payment = np.array([ROWS[i].payment_type or scoring.MISSING for i in order], dtype=object)
    for value, got in result["slices"]["payment_type"].items():
        members = payment == value
        assert got == pytest.approx(metrics.binary_metrics(
            y[members], scored[members], weights=fares[members]), rel=1e-9), value

    # the served model's metrics, on the same rows, with the same weights
    baseline = _read(tmp_path, "blessing.json")["baseline"]
    good = metrics.binary_metrics(y, _expected_probs([ROWS[i] for i in order]), weights=fares)
    assert baseline["metrics"]["average_loss"] == pytest.approx(good["average_loss"], rel=1e-5)
    assert baseline["metrics"]["auc_exact"] == pytest.approx(good["auc_exact"], rel=1e-6)

    report = (tmp_path / "evaluation" / "report.html").read_text()
    assert "weighted by the model&#x27;s weight_column fare" in report or \
        "weighted by the model's weight_column fare" in report
    assert f"{len(ROWS)} examples weighing {fares.sum():.4f} (weight_column 'fare')" in \
        capsys.readouterr().out


def test_a_zero_weight_takes_an_example_out_of_every_metric():
    labels, outputs = np.array([1, 0, 1, 0]), np.array([0.9, 0.2, 0.1, 0.55])
    weights = np.array([1.0, 2.0, 3.0, 0.0])
    slices = {"kind": np.array(["a", "a", "b", "b"], dtype=object)}
    got = results.slice_metrics("binary", labels, outputs, slices, weights)["kind"]
    without = metrics.binary_metrics(labels[2:3], outputs[2:3], weights=weights[2:3])
    assert got["b"].pop("examples") == 2 and without.pop("examples") == 1
    assert got["b"] == pytest.approx(without, nan_ok=True) and got["b"]["label/mean"] == 1.0
    assert results.json_safe(got)["b"]["auc"] is None  # one class left: undefined
    plots = results.curves("binary", labels, outputs, ["0", "1"], weights)
    assert plots["roc"]["fpr"][-1] == 1.0 and sum(b["count"] for b in plots["calibration"]) \
        == 3  # the bin holding only the weight-0 example is not drawn
    assert plots["confusion_matrix"]["matrix"] == [[1, 1], [1, 1]]  # rows, not weight
