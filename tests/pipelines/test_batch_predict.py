"""Batch prediction in pipelines: the ``BatchPredict`` declaration, its place in the plan (after
push, or alone), the local runner and ``estflow run``/``estflow predict`` running the real step
on a real model, and the compiled KFP pipeline (after push inside the ``blessed`` condition,
never cached, its own resources, the Beam options parameter)."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import estflow.dsl as ef
from estflow.dsl.contracts import BATCH_PREDICT
from estflow.dsl.contracts import Files
from estflow.pipelines import cli
from estflow.pipelines.examples import taxi
from estflow.pipelines.kubeflow import compiler as kfp_compiler
from estflow.pipelines.local import runner as local_runner
from estflow.pipelines.plan import Plan
from estflow.pipelines.plan import PlannedStep
from estflow.pipelines.plan import build_plan
from tests.pipelines.kfp_ir import Ir

REPO = Path(__file__).resolve().parents[2]
ROWS = "trip_id,fare,trip_seconds,payment_type\nt1,1.5,3,Cash\nt2,oops,1,Cash\n" + "".join(
    f"t{i},{i}.5,{i},Card\n" for i in range(3, 120))
SOURCE = ef.CsvSource("data/to_score.csv", max_rejected_fraction=0.05)
AFTER_PUSH = dataclasses.replace(taxi.pipeline, predict=ef.BatchPredict(
    source=SOURCE, keys=("trip_id",)))


def _only(**options) -> ef.Pipeline:
    return ef.Pipeline(name="nightly", predict=ef.BatchPredict(
        model="gs://bucket/models/taxi", source=SOURCE, **options))


@pytest.fixture(scope="module")
def model_base(tmp_path_factory) -> Path:
    """A pushed model (the serving tests' fixture) and rows to score, in one directory."""
    from tests.components import _serving_fixtures as fx  # imports TensorFlow: only here

    base = tmp_path_factory.mktemp("scoring")
    fx.write_versions(base / "models" / "taxi", (1, 2))
    (base / "data").mkdir()
    (base / "data" / "to_score.csv").write_text(ROWS)
    return base


def _env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    return {**env, "PYTHONPATH": str(REPO), "TF_CPP_MIN_LOG_LEVEL": "2", **extra}


# --- the declaration -----------------------------------------------------------------------------

def test_a_pipeline_may_only_predict_and_round_trips():
    nightly = _only(keys=("trip_id",), format="parquet", signature="classify")
    assert not nightly.trains and nightly.raw_columns() == ()
    assert ef.Pipeline.from_json(nightly.to_json()) == nightly
    assert AFTER_PUSH.trains and ef.Pipeline.from_json(AFTER_PUSH.to_json()) == AFTER_PUSH


@pytest.mark.parametrize("build, field, expected", [
    (lambda: ef.BatchPredict(source=SOURCE, format="xml"), "format", "one of"),
    (lambda: ef.BatchPredict(source=SOURCE, keys=("id", "id")), "keys[1]", "named once"),
    (lambda: ef.BatchPredict(source="data.csv"), "source", "CsvSource"),
    (lambda: ef.BatchPredict(source=SOURCE, batch_size=0), "batch_size", "positive"),
    (lambda: ef.BatchPredict(source=SOURCE, signature="a b"), "signature", "signature name"),
    (lambda: ef.Pipeline(name="x", predict=ef.BatchPredict(source=SOURCE)), "predict.model",
     "where the served model is"),
    (lambda: ef.Pipeline(name="x", predict=_only().predict, split=ef.Split(eval_fraction=0.3)),
     "split", "only predicts"),
    (lambda: ef.Pipeline(name="x", predict=_only().predict,
                         resources={"train": ef.Resources(cpu_request="2")}),
     "resources['train']", "resources of 'batch_predict' only"),
    (lambda: dataclasses.replace(AFTER_PUSH, push=None), "push", "a PushTarget"),
    (lambda: dataclasses.replace(AFTER_PUSH, predict=_only().predict), "predict.model",
     "None in a pipeline that trains"),
    (lambda: dataclasses.replace(taxi.pipeline, resources={
        "batch_predict": ef.Resources(cpu_request="2")}), "resources['batch_predict']",
     "without predict"),
])
def test_invalid_declarations_name_the_field(build, field, expected):
    with pytest.raises((ef.DslError, ef.DslErrors)) as info:
        build()
    assert f"`{field}`" in str(info.value) and expected in str(info.value)


# --- the plan ----------------------------------------------------------------------------------

def test_batch_predict_runs_after_push_or_alone():
    plan = build_plan(AFTER_PUSH, source_root="/data", beam_options="--runner=X")
    assert [s.name for s in plan.steps][-2:] == ["push", "batch_predict"]
    step = plan.step("batch_predict")
    assert step.inputs == (("pushed", "push"),) and step.outputs == ("predictions",)
    assert dict(step.options) == {"source-root": "/data", "beam-options": "--runner=X"}

    alone = build_plan(_only(), source_root="/data")
    assert [(s.name, s.inputs) for s in alone.steps] == [("batch_predict", ())]


# --- local runs ----------------------------------------------------------------------------------

def _fake_push(push_json: dict) -> PlannedStep:
    options = {"name": "push", "reads": "", "writes": "pushed",
               "emit": json.dumps({Files.PUSH_RESULT: push_json})}
    return PlannedStep(name="push", module="tests.pipelines.fake_step", inputs=(),
                       outputs=("pushed",), options=tuple(options.items()),
                       description="fake push")


@pytest.mark.parametrize("pushed, said", [
    ({"pushed": True, "version": 1}, "scored 118 rows, rejected 1"),
    ({"pushed": False, "already_served": True, "version": 1}, "scored 118 rows, rejected 1"),
    ({"pushed": False, "reasons": ["auc 0.5 < 0.85"]}, "skipped: the model was not pushed"),
])
def test_after_push_the_local_runner_scores_the_pushed_model(model_base, tmp_path, pushed,
                                                             said):
    push_json = {**pushed, "model_name": "taxi"}
    if "version" in push_json:
        push_json["path"] = str(model_base / "models" / "taxi" / str(push_json["version"]))
    predict = PlannedStep.from_step(BATCH_PREDICT, {"pushed": "push"},
                                    {"source-root": str(model_base)})
    lines: list[str] = []
    result = local_runner.run_plan(Plan(AFTER_PUSH, (_fake_push(push_json), predict)),
                                   tmp_path / "run", echo=lines.append, env=_env())
    summary = result.read("predictions", Files.PREDICT_RESULT)
    assert any(said in line for line in lines), lines
    if "path" in push_json:
        assert summary["model"] == {"path": push_json["path"], "version": 1,
                                    "signature": "serving_default"}
        assert len(list(result.artifacts["predictions"].glob("predictions-*.jsonl"))) == 1
    else:
        assert summary["skipped"] is True


def test_estflow_run_of_a_pipeline_that_only_predicts(model_base, tmp_path, monkeypatch,
                                                      capsys):
    target = tmp_path / "nightly.py"
    target.write_text("import estflow.dsl as ef\n"
                      "pipeline = ef.Pipeline(name='nightly', predict=ef.BatchPredict(\n"
                      f"    model={str(model_base / 'models' / 'taxi')!r},\n"
                      f"    source=ef.CsvSource({str(model_base / 'data' / 'to_score.csv')!r}),\n"
                      f"    output={str(tmp_path / 'scores')!r}, keys=('trip_id',)))\n")
    monkeypatch.setenv("ESTFLOW_HOME", str(tmp_path / "runs"))
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    assert cli.main(["run", str(target), "--workdir", str(tmp_path / "run")]) == 0
    out = capsys.readouterr().out
    assert "Batch prediction: 118 rows scored, 1 rejected" in out
    assert f"predictions in {tmp_path / 'scores'}" in out
    lines = (tmp_path / "scores" / "predictions-00000-of-00001.jsonl").read_text().splitlines()
    assert json.loads(lines[0])["trip_id"] == "t1" and len(lines) == 118


def test_estflow_predict_scores_and_reports_mistakes_as_usage_errors(model_base, tmp_path):
    def estflow(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "estflow.pipelines", "predict", *args],
                              cwd=model_base, env=_env(), capture_output=True, text=True,
                              timeout=300)

    done = estflow("models/taxi", "--input", "data/*.csv", "--output", str(tmp_path / "out"),
                   "--keys", "trip_id", "--format", "csv", "--signature", "classify")
    assert done.returncode == 0, done.stderr
    assert "scored 118 rows, rejected 1" in done.stdout
    # TensorFlow's C++ start-up logging (XLA's CUDA probe, absl's banner, which
    # TF_CPP_MIN_LOG_LEVEL does not reach) is left out, as estflow run leaves it in the log.
    assert "absl::InitializeLog" not in done.stderr and ".cc:" not in done.stderr, done.stderr
    header = (tmp_path / "out" / "predictions-00000-of-00001.csv").read_text().splitlines()[0]
    assert header == "trip_id,classes_0,classes_1,scores_0,scores_1"
    summary = json.loads((tmp_path / "out" / Files.PREDICT_RESULT).read_text())
    assert summary["model"]["version"] == 2 and summary["format"] == "csv"

    for args, status, message in (
            (("models/taxi", "--input", "rows.txt", "--output", "o"), 2, "--input-format"),
            (("models/taxi", "--input", "data/to_score.csv"), 2, "--output is required"),
            (("models/taxi", "--input", "x.csv", "--output", "o", "--keys", "trip id"), 2,
             "keys[0]"),
            (("models/taxi", "--input", "x.csv", "--output", "o", "--runner", "dataflow"), 2,
             "--project"),
            (("models/none", "--input", "data/to_score.csv", "--output", "o"), 1,
             "no model at 'models/none'")):
        done = estflow(*args)
        assert (done.returncode, message in done.stderr) == (status, True), done.stderr


# --- Kubeflow ------------------------------------------------------------------------------------

def test_compiled_after_push_inside_the_blessing_never_cached_with_its_resources(tmp_path):
    pipeline = dataclasses.replace(
        AFTER_PUSH, push=ef.PushTarget("gs://bucket/models", "taxi"),
        resources={**AFTER_PUSH.resources,
                   "batch_predict": ef.Resources(cpu_request="4", memory_request="16Gi")})
    # before KFP 2.14 (the exit task reads no final state): inside the blessed condition
    # group, as push
    compiled = kfp_compiler.compile_pipeline(pipeline, tmp_path / "p.yaml", kfp_backend="2.13")
    assert compiled.tasks[-2:] == ("push", "batch_predict")
    ir = Ir(tmp_path / "p.yaml")
    assert ir.enclosing_groups("batch-predict") == ir.enclosing_groups("push")
    assert ir.task(ir.enclosing_groups("push")[0]).task_info.name == "blessed"
    assert ir.artifact_source("batch-predict", "pushed") == ("push", "pushed")
    assert "blessed" not in ir.task("batch-predict").inputs.parameters
    # from 2.14 on, the default and 2.17 included (a dsl.If in the exit handler leaves the
    # run RUNNING): next to push in the exit handler's DAG, gated by blessed itself
    for target in ("2.14", None, "2.17"):
        options = {"kfp_backend": target} if target else {}
        path = tmp_path / f"{target or 'default'}.yaml"
        compiled = kfp_compiler.compile_pipeline(pipeline, path, **options)
        assert compiled.tasks[-2:] == ("push", "batch_predict")
        gated = Ir(path)
        assert gated.enclosing_groups("batch-predict") == gated.enclosing_groups("push") == [
            "exit-handler-1"], target
        assert gated.parameter_source("batch-predict", "blessed")[0] == "evaluate"
        assert gated.artifact_source("batch-predict", "pushed") == ("push", "pushed")
    for compiled_ir in (ir, gated):
        assert not compiled_ir.task("batch-predict").caching_options.enable_cache
        resources = compiled_ir.container("batch-predict")["resources"]
        assert (resources["resourceCpuRequest"], resources["resourceMemoryRequest"]) == (
            "4", "16Gi")
        assert compiled_ir.parameter_source("batch-predict", "beam_options") == (
            "pipeline", "beam_options")


def test_a_pipeline_that_only_predicts_compiles_to_one_task(tmp_path):
    compiled = kfp_compiler.compile_pipeline(
        _only(), tmp_path / "p.yaml", beam_runner="dataflow",
        beam_options=["--project=my-project", "--region=r", "--temp_location=gs://b/tmp"])
    assert compiled.tasks == ("batch_predict",)
    ir = Ir(tmp_path / "p.yaml")
    assert ir.enclosing_groups("batch-predict") == ["exit-handler-1"]
    assert "--runner=DataflowRunner" in ir.spec.root.input_definitions.parameters[
        "beam_options"].default_value.string_value
    assert ir.container("batch-predict")["resources"]["resourceMemoryRequest"] == "4Gi"
