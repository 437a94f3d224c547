"""A compiled pipeline's search as a ``dsl.ParallelFor`` of trials (``estflow compile --tune-on
parallel-for``, pipelines/kubeflow/tune_fan_out.py), the KFP-only fallback where Katib is not
installed:

* the compiled IR (read strictly, tests/pipelines/kfp_ir.py, every group input bound): a loop
  over one item per drawn trial (the compiled draw, returned by the small ``tune-trials``
  task) with ``Tune.parallel`` as its parallelism, each iteration a ``tune-trial`` task
  reading the tune step's inputs, then the ``tune`` task collecting their artifacts; the tasks
  after it as with ``--tune-on task``; deterministic; what is refused (``tpe``,
  ``early_stopping``, a backend before 2.17), through the command line too (exit 2);
* the draw at compile time equals what the local search (components/tune/step.py) draws for
  the same seed, for ``random`` and ``grid`` (a differential check, through the search's own
  ``run`` with a trial runner that records the assignments);
* the trial entry's ``--result`` (its failure recorded, exit status 0) and the collector
  (components/tune/on_parallel_for.py): its choice over generated results equals a plain
  reference (hypothesis), and it writes ``best.json`` where the final train reads it;
* slow: ``kfp.local``'s SubprocessRunner runs the compiled loop and collector with stand-in
  steps (tests/pipelines/kfp_local_fakes.py) and real collection.
"""

from __future__ import annotations

import dataclasses
import json
import math
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

import estflow.dsl as ef
from estflow.components.tune import katib_trial
from estflow.components.tune import on_parallel_for
from estflow.components.tune.step import run as local_search
from estflow.dsl.contracts import TUNE_BEST
from estflow.dsl.contracts import TUNED
from estflow.dsl.contracts import Files
from estflow.pipelines.kubeflow import compiler as kfp_compiler
from estflow.pipelines.kubeflow import tune_fan_out
from tests.components import _train_fixtures as fx
from tests.components.tune._fake import FakeTrials
from tests.pipelines import kfp_local_fakes as fakes
from tests.pipelines.kfp_ir import Ir
from tests.pipelines.test_katib_compile import IMAGE
from tests.pipelines.test_katib_compile import tuned_pipeline

BACKEND = "2.17"


def _tune(pipeline: ef.Pipeline, **changes) -> ef.Pipeline:
    return dataclasses.replace(pipeline, tune=dataclasses.replace(pipeline.tune, **changes))


def fan_out_pipeline(**changes) -> ef.Pipeline:
    """The Katib tests' pipeline (conditional dimension, tuple choices) with a search a loop can
    run: random, no early stopping."""
    return _tune(tuned_pipeline(), **{"algorithm": "random", "early_stopping": None,
                                      **changes})


def grid_pipeline(**changes) -> ef.Pipeline:
    return tuned_pipeline(tune=ef.Tune(
        {"model.hidden_units": ef.Choice(((8,), (16, 8))),
         "model.optimizer": ef.Choice(("Adagrad", "Adam")),
         "model.feature_columns[company].dimension": ef.IntRange(2, 8, step=2,
                                                                 when=("model.optimizer",
                                                                       "Adam"))},
        objective="auc", algorithm="grid", trials=5, parallel=3, seed=11, **changes))


def _compile(pipeline: ef.Pipeline, path: Path, tune_on: str = "parallel-for",
             kfp_backend: str = BACKEND) -> kfp_compiler.CompiledPipeline:
    return kfp_compiler.compile_pipeline(pipeline, path, image=IMAGE, tune_on=tune_on,
                                         kfp_backend=kfp_backend)


@pytest.fixture(scope="module")
def compiled(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("tune-parallel-for")
    paths = {"random": folder / "random.yaml", "grid": folder / "grid.yaml",
             "task": folder / "task.yaml"}
    _compile(fan_out_pipeline(), paths["random"])
    _compile(grid_pipeline(), paths["grid"])
    _compile(fan_out_pipeline(), paths["task"], tune_on="task")
    return paths


def _loop(ir: Ir):
    (loop,) = [t for c in ir.spec.components.values() if c.WhichOneof("implementation") == "dag"
               for t in c.dag.tasks.values() if t.WhichOneof("iterator") == "parameter_iterator"]
    return loop


def _draw_of(ir: Ir) -> list[dict]:
    """The assignments compiled into the pipeline: the ``tune-trials`` task's constant."""
    kind, text = ir.parameter_source("tune-trials", "trials")
    assert kind == "constant"
    return json.loads(text)


def _unbound_inputs(ir: Ir) -> list[str]:
    """Every task input read from its DAG's inputs that the DAG does not declare (what the
    backend's driver cannot resolve)."""
    dags = [("root", ir.spec.root)] + [(n, c) for n, c in ir.spec.components.items()
                                       if c.WhichOneof("implementation") == "dag"]
    found = []
    for name, component in dags:
        declared = component.input_definitions.parameters
        for task_name, task in component.dag.tasks.items():
            for key, spec in task.inputs.parameters.items():
                if spec.WhichOneof("kind") == "component_input_parameter" and \
                        spec.component_input_parameter not in declared and \
                        spec.component_input_parameter != task.parameter_iterator.item_input:
                    found.append(f"{name}/{task_name}.{key}: {spec.component_input_parameter}")
    return found


def _source(ir: Ir, task: str) -> str:
    container = ir.container(task)
    return next(part for part in (*container["command"], *container.get("args", ()))
                if "def " in part)


# --- the compiled graph ------------------------------------------------------------------------

@pytest.mark.parametrize("kind, pipeline", [("random", fan_out_pipeline),
                                            ("grid", grid_pipeline)])
def test_the_trials_are_a_parallel_for_over_the_draw_with_the_searchs_parallelism(
        compiled, kind, pipeline):
    ir = Ir(compiled[kind])  # strict: every field known, the kubernetes configs too
    assert _unbound_inputs(ir) == []
    tune = pipeline().tune
    loop = _loop(ir)
    assert loop.iterator_policy.parallelism_limit == tune.parallel
    assert loop.parameter_iterator.items.input_parameter == \
        "pipelinechannel--tune-trials-Output"
    expected = [{k: list(v) if isinstance(v, tuple) else v for k, v in a.items()}
                for a in tune_fan_out.draw(tune)]
    assert len(expected) == tune.trials and _draw_of(ir) == expected
    # the items carry the tune step's part of the spec and its key, from the fingerprint task
    assert ir.parameter_source("tune-trials", "spec") == ("fingerprint", "tune_spec")
    assert ir.parameter_source("tune-trials", "cache_key") == ("fingerprint", "tune_key")
    assert ir.container("tune-trials")["image"] == IMAGE + "-slim"
    # each iteration: one trial reading the tune step's inputs and its item's fields
    assert ir.enclosing_groups("tune-trial")[0] in ir.groups()
    assert ir.artifact_source("tune-trial", "examples") == ("ingest", "examples")
    assert ir.artifact_source("tune-trial", "transformed") == ("transform", "transformed")
    for name, field in (("spec", "spec"), ("cache_key", "key"), ("number", "number"),
                        ("assignment", "assignment")):
        given = ir.task("tune-trial").inputs.parameters[name]
        assert given.component_input_parameter == loop.parameter_iterator.item_input
        assert given.parameter_expression_selector == f'parseJson(string_value)["{field}"]'
    assert "from estflow.components.tune import katib_trial as step" in _source(ir, "tune-trial")
    assert "'--result', trial.path" in _source(ir, "tune-trial")
    # then the tune task collects them, and the final train reads its output as before
    collector = ir.spec.components[ir.task("tune").component_ref.name]
    assert collector.input_definitions.artifacts["trial_list"].is_artifact_list
    assert "from estflow.components.tune import on_parallel_for as step" in _source(ir, "tune")
    assert ir.artifact_source("train", TUNED) == ("tune", TUNED)
    assert ir.k8s("tune-trial").pod_metadata.labels["app.kubernetes.io/component"] == \
        "tune-trial"


def test_the_steps_after_the_search_are_those_of_a_search_in_the_task(compiled):
    fan_out, in_task = Ir(compiled["random"]), Ir(compiled["task"])
    for name in ("ingest", "transform", "train", "evaluate"):
        assert fan_out.container(name) == in_task.container(name), name
    assert fan_out.artifact_source("evaluate", "model") == ("train", "model")
    assert "tune-trial" not in in_task.tasks()


def test_each_trial_pod_is_sized_and_imaged_as_a_katib_trial(compiled, tmp_path):
    ir = Ir(compiled["random"])  # no resources["tune"]: the train step's
    assert ir.container("tune-trial")["resources"]["resourceCpuRequest"] == "2"
    assert ir.container("tune-trial")["image"] == IMAGE
    assert ir.container("tune")["resources"]["resourceCpuRequest"] == "100m"  # only collects
    pipeline = dataclasses.replace(fan_out_pipeline(), resources={
        "tune": ef.Resources(cpu_request="3", accelerator=ef.Accelerator("nvidia-tesla-t4"))})
    result = _compile(pipeline, tmp_path / "gpu.yaml")
    assert result.images["tune-trial"] == IMAGE + "-gpu"
    gpu = Ir(result.path).container("tune-trial")
    assert gpu["image"] == IMAGE + "-gpu"
    assert gpu["resources"]["resourceCpuRequest"] == "3"
    assert gpu["resources"]["accelerator"]["resourceCount"] == "1"


def test_compiling_is_deterministic(compiled, tmp_path):
    _compile(fan_out_pipeline(), tmp_path / "again.yaml")
    assert (tmp_path / "again.yaml").read_bytes() == compiled["random"].read_bytes()


def test_another_seed_draws_other_trials_and_keys_the_tune_step_with_them(compiled, tmp_path):
    _compile(fan_out_pipeline(seed=1), tmp_path / "seed1.yaml")
    other = Ir(tmp_path / "seed1.yaml")
    assert _draw_of(other) != _draw_of(Ir(compiled["random"]))
    # the fingerprint task's plan carries the draw: the tune step's cache key covers it
    assert other.container("fingerprint") != Ir(compiled["random"]).container("fingerprint")


def test_a_pipeline_without_a_search_compiles_as_with_any_tune_on(tmp_path):
    pipeline = dataclasses.replace(tuned_pipeline(), tune=None)
    _compile(pipeline, tmp_path / "a.yaml")
    _compile(pipeline, tmp_path / "b.yaml", tune_on="task")
    assert (tmp_path / "a.yaml").read_bytes() == (tmp_path / "b.yaml").read_bytes()


def test_timeout_s_has_no_counterpart_and_a_note_says_so(tmp_path):
    result = _compile(fan_out_pipeline(timeout_s=600.0), tmp_path / "t.yaml")
    assert any("tune.timeout_s=600" in note and "parallel-for" in note
               for note in result.notes), result.notes


# --- what is refused ---------------------------------------------------------------------------

def test_tpe_and_early_stopping_are_refused_each_naming_katib_and_task(tmp_path):
    with pytest.raises(kfp_compiler.CompileError) as raised:
        _compile(_tune(tuned_pipeline(), algorithm="tpe"), tmp_path / "x.yaml")
    tpe, stop = raised.value.problems  # tuned_pipeline(): tpe and a MedianStop
    assert "tune.algorithm='tpe'" in tpe and "tune.early_stopping" in stop
    for problem in (tpe, stop):
        assert "--tune-on katib" in problem and "--tune-on task" in problem
    assert not (tmp_path / "x.yaml").exists()


def test_a_backend_before_217_is_refused(tmp_path):
    with pytest.raises(kfp_compiler.CompileError, match=r"parallel-for.*--kfp-backend 2\.17"):
        _compile(fan_out_pipeline(), tmp_path / "x.yaml", kfp_backend="2.16")


_PIPELINE_FILE = """
import estflow.dsl as ef

pipeline = ef.Pipeline(
    name="tuned", source=ef.CsvSource("gs://bucket/data.csv"),
    features=(ef.Numeric("x"), ef.Numeric("z")), label=ef.Label("y"),
    model=ef.DNNClassifier(hidden_units=(8,), feature_columns=("x", "z")),
    train=ef.TrainSpec(max_steps=40),
    tune=ef.Tune({"model.hidden_units": ef.Choice(((8,), (16, 8)))}, objective="auc",
                 trials=2, TUNE))
"""


@pytest.mark.parametrize("tune, refused", [
    ("algorithm='tpe'", ["tune.algorithm='tpe'"]),
    ("algorithm='random', early_stopping=ef.MedianStop(every_steps=10)",
     ["tune.early_stopping"]),
    ("algorithm='random'", []),
])
def test_the_command_line(tmp_path, capsys, tune, refused):
    from estflow.pipelines import cli

    source = tmp_path / "tuned.py"
    source.write_text(_PIPELINE_FILE.replace("TUNE", tune))
    out = tmp_path / "tuned.yaml"
    code = cli.main(["compile", str(source), "-o", str(out), "--image", IMAGE,
                     "--source-root", "/data", "--tune-on", "parallel-for",
                     "--kfp-backend", BACKEND])
    err = capsys.readouterr().err
    if not refused:
        assert code == 0, err
        assert len(_draw_of(Ir(out))) == 2
        return
    assert code == 2, err
    assert all(r in err for r in refused), err
    assert "--tune-on katib" in err and "--tune-on task" in err
    assert not out.exists()


# --- the draw: what the local search draws for the same seed -----------------------------------

def _differential_pipeline(algorithm: str, seed: int) -> ef.Pipeline:
    space = {"model.hidden_units": ef.Choice(((8, 4), (4,), (16, 8))),
             "model.optimizer": ef.Choice(("Adagrad", "Adam")),
             "train.batch_size": ef.IntRange(8, 32, step=8)}
    if algorithm == "random":
        space["model.learning_rate"] = ef.FloatRange(0.005, 0.5, log=True,
                                                     when=("model.optimizer", "Adam"))
        space["train.max_steps"] = ef.IntRange(20, 400, log=True)
    return fx.pipeline(tune=ef.Tune(space, "auc", algorithm=algorithm, trials=9, parallel=1,
                                    seed=seed))


@pytest.mark.parametrize("algorithm", ["random", "grid"])
@pytest.mark.parametrize("seed", [0, 7])
def test_the_draw_is_what_the_local_search_draws(tmp_path, algorithm, seed):
    pipeline = _differential_pipeline(algorithm, seed)
    runner = FakeTrials()
    local_search(pipeline, tmp_path / "examples", tmp_path / "transformed", tmp_path / "hp",
                 lambda line: None, study_dir=tmp_path / "studies", study_key="differential",
                 trial_runner=runner)
    searched = {trial.number: trial.assignment for trial in runner.runs}
    assert sorted(searched) == list(range(pipeline.tune.trials))
    assert tune_fan_out.draw(pipeline.tune) == [searched[n] for n in sorted(searched)]


def test_the_draw_does_not_change_optunas_logging():
    import optuna

    before = optuna.logging.get_verbosity()
    tune_fan_out.draw(fan_out_pipeline().tune)
    assert optuna.logging.get_verbosity() == before


# --- a trial's result, and the collector -------------------------------------------------------

def test_a_failed_trial_is_recorded_and_its_task_succeeds(tmp_path, capsys):
    spec = fan_out_pipeline().to_json()
    result = tmp_path / "trial"
    argv = ["--spec", spec, "--examples", str(tmp_path / "none"), "--transformed",
            str(tmp_path / "none"), "--assignment", json.dumps({"model.optimizer": "Adam"})]
    assert katib_trial.main(argv) == 1  # as Katib runs it: a failed trial's exit status
    assert katib_trial.main([*argv, "--trial", "3", "--result", str(result)]) == 0
    recorded = json.loads((result / on_parallel_for.RESULT_FILE).read_text())
    assert recorded["trial"] == 3 and recorded["state"] == on_parallel_for.FAIL
    assert recorded["objective"] == "auc" and recorded["value"] is None
    assert "no such folder" in recorded["error"]
    assert recorded["assignment"] == {"model.optimizer": "Adam"}
    # wrong arguments (a path the search does not declare) too
    bad = ["--assignment", json.dumps({"model.nope": 1})]
    assert katib_trial.main([*argv[:-2], *bad, "--result", str(tmp_path / "bad")]) == 0
    recorded = json.loads((tmp_path / "bad" / on_parallel_for.RESULT_FILE).read_text())
    assert recorded["state"] == on_parallel_for.FAIL and "model.nope" in recorded["error"]
    capsys.readouterr()


def _reference(results: list[dict], higher: bool, max_failures: int):
    """The collector's rule, written plainly: (best trial's number, complete, failed), or None
    when the search gave up."""
    ok = [r for r in results if r["state"] == "COMPLETE" and r["value"] is not None
          and math.isfinite(r["value"])]
    failed = len(results) - len(ok)
    if failed > max_failures or not ok:
        return None
    best_value = max(r["value"] for r in ok) if higher else min(r["value"] for r in ok)
    best = min(r["trial"] for r in ok if r["value"] == best_value)
    return best, len(ok), failed


_OUTCOMES = st.one_of(
    st.floats(min_value=-1e6, max_value=1e6, allow_nan=False).map(lambda v: ("COMPLETE", v)),
    st.sampled_from([0.25, 0.5, 0.75]).map(lambda v: ("COMPLETE", v)),  # ties
    st.just(("COMPLETE", math.nan)),  # a value that is no number: a failure
    st.just(("FAIL", None)))


@settings(max_examples=300, deadline=None)
@given(st.lists(_OUTCOMES, min_size=1, max_size=12), st.booleans(),
       st.integers(min_value=0, max_value=12), st.randoms(use_true_random=False))
def test_the_collectors_choice_is_the_plain_rules(outcomes, higher, max_failures, rnd):
    results = [{"trial": n, "state": state, "value": value, "error": None if value else "x",
                "assignment": {"n": n}} for n, (state, value) in enumerate(outcomes)]
    rnd.shuffle(results)  # the order the artifacts are collected in does not matter
    expected = _reference(results, higher, max_failures)
    if expected is None:
        with pytest.raises(on_parallel_for.CollectError, match="failed|no trial completed"):
            on_parallel_for.choose(results, higher_is_better=higher, max_failures=max_failures)
        return
    best, counts = on_parallel_for.choose(results, higher_is_better=higher,
                                          max_failures=max_failures)
    assert (best["trial"], counts["complete"], counts["failed"]) == expected


def _trials(folder: Path, values: list[float | None]) -> list[Path]:
    found = []
    for n, value in enumerate(values):
        found.append(folder / f"trial-{n}")
        on_parallel_for.write_result(
            found[-1], trial=n, assignment={"model.hidden_units": (16, 8) if n % 2 else (8,),
                                            "train.batch_size": 32 + 32 * (n % 2)},
            objective="auc", value=value, error=None if value is not None else "it broke",
            metrics={"auc": value, "loss": 0.5} if value is not None else None)
    return found


def test_the_tune_task_writes_the_best_trial_where_the_final_train_reads_it(tmp_path, capsys):
    pipeline = fan_out_pipeline()  # max_failures=3 (the default)
    folders = _trials(tmp_path, [0.61, None, 0.73, 0.70])
    out = tmp_path / "hyperparameters"
    argv = ["--spec", pipeline.to_json(), *(a for f in folders for a in ("--trial", str(f))),
            "--hyperparameters", str(out)]
    assert on_parallel_for.main(argv) == 0, capsys.readouterr().err
    best = json.loads((out / TUNE_BEST).read_text())
    assert best == {"assignment": {"model.hidden_units": [8], "train.batch_size": 32},
                    "objective": "auc", "value": 0.73, "trial": 2, "higher_is_better": True,
                    "metrics": {"auc": 0.73, "loss": 0.5}}
    metrics = json.loads((out / Files.METRICS).read_text())
    assert (metrics["best_trial"], metrics["complete"], metrics["failed"]) == (2, 3, 1)
    # what the final train does with it (components/train: dsl.tune.apply)
    tuned = pipeline.tune.apply(pipeline, best["assignment"])
    assert tuned.model.hidden_units == (8,) and tuned.train.batch_size == 32
    assert "trial 1: failed: it broke" in capsys.readouterr().out


def test_the_tune_task_fails_when_more_than_max_failures_trials_failed(tmp_path, capsys):
    pipeline = fan_out_pipeline(max_failures=1)
    folders = [*_trials(tmp_path, [0.61, None, None]), tmp_path / "died"]  # died: no file
    argv = ["--spec", pipeline.to_json(), *(a for f in folders for a in ("--trial", str(f))),
            "--hyperparameters", str(tmp_path / "out")]
    assert on_parallel_for.main(argv) == 1
    err = capsys.readouterr().err
    assert "3 of 4 trial(s) failed, more than max_failures=1" in err, err
    assert not (tmp_path / "out" / TUNE_BEST).exists()


@pytest.mark.slow
def test_two_real_trials_as_the_loops_tasks_run_them_then_the_tune_task(tmp_path_factory,
                                                                        tmp_path):
    """The train fixture's tiny data at local paths (as a KFP task's inputs are), the drawn
    trials run by the trial entry with ``--result``, one of them with a value the model
    refuses; then the tune task keeps the completed one."""
    from tests.components.tune.test_tune_trials import write_raw_eval

    transformed = fx.transformed(tmp_path_factory)
    examples = write_raw_eval(tmp_path / "examples")
    pipeline = fx.pipeline(model=ef.LinearClassifier(feature_columns=("x", "z", "color")),
                           tune=ef.Tune({"model.learning_rate": ef.Choice((0.3, 0.5)),
                                         "train.batch_size": ef.Choice((16, 32))},
                                        objective="auc", trials=2, algorithm="grid",
                                        trial_steps=20))
    drawn = tune_fan_out.draw(pipeline.tune)
    assignments = [json.dumps(drawn[0]), json.dumps({**drawn[1], "train.batch_size": 0})]
    folders = []
    for n, assignment in enumerate(assignments):
        folders.append(tmp_path / f"trial-{n}")
        assert katib_trial.main(["--spec", pipeline.to_json(), "--examples", str(examples),
                                 "--transformed", str(transformed), "--assignment", assignment,
                                 "--trial", str(n), "--result", str(folders[-1])]) == 0
    results = [on_parallel_for.read_result(f) for f in folders]
    assert [r["state"] for r in results] == ["COMPLETE", "FAIL"], results
    assert 0.0 <= results[0]["value"] <= 1.0 and results[0]["metrics"]["auc"] == \
        results[0]["value"]
    out = tmp_path / "hyperparameters"
    argv = ["--spec", pipeline.to_json(), "--trial", str(folders[0]), "--trial",
            str(folders[1]), "--hyperparameters", str(out)]
    assert on_parallel_for.main(argv) == 0
    best = json.loads((out / TUNE_BEST).read_text())
    assert best["trial"] == 0 and best["assignment"] == drawn[0]


# --- kfp.local: the loop and the collector run -------------------------------------------------

_STAND_IN_TRIAL = """
import json

from estflow.components.tune.on_parallel_for import write_result


def main(argv):
    args = dict(zip(argv[::2], argv[1::2]))
    spec = json.loads(args["--spec"])
    number = int(args["--trial"])
    with open(spec["log"], "a") as log:
        log.write("trial:%s\\n" % number)
    value = spec["values"][number]  # None: this trial fails
    write_result(args["--result"], trial=number, assignment=json.loads(args["--assignment"]),
                 objective="auc", value=value, error=None if value is not None else "stand-in")
    return 0
"""

_STAND_IN_COLLECTOR = """
import json
import os

from estflow.components.tune.on_parallel_for import collect


def main(argv):
    spec = json.loads(argv[argv.index("--spec") + 1])
    with open(spec["log"], "a") as log:
        log.write("tune\\n")
    trials = [argv[i + 1] for i, a in enumerate(argv) if a == "--trial"]
    collect(trials, argv[argv.index("--hyperparameters") + 1], objective="auc",
            higher_is_better=True, max_failures=spec["max_failures"])
    return 0
"""


def _compile_with_stand_ins(pipeline: ef.Pipeline, folder: Path) -> Path:
    """As kfp_local_fakes.compile_with_stand_ins, with the search's trials drawn and the tune
    step's package (its trial entry and collector) a stand-in package too."""
    from kfp import compiler

    from estflow.pipelines.kubeflow import components as kfp_components
    from estflow.pipelines.plan import build_plan

    package = folder / fakes.PACKAGE
    package.mkdir()
    (package / "__init__.py").write_text("")
    plan = tune_fan_out.with_trials(build_plan(
        pipeline, source_root=kfp_components.param_placeholder("source_root")))
    steps = []
    for step in plan.steps:
        header = (f"NAME = {step.name!r}\nOUTPUTS = {step.outputs!r}\n"
                  f"UI_METRICS = {fakes.UI_METRICS!r}\n"
                  f"UI_CLASSIFICATION = {fakes.UI_CLASSIFICATION!r}\n"
                  f"UI_REPORT = {fakes.UI_REPORT!r}\n")
        if step.name == "tune":
            (package / "tune").mkdir()
            (package / "tune" / "__init__.py").write_text("")
            (package / "tune" / f"{tune_fan_out.TRIAL_ENTRY}.py").write_text(_STAND_IN_TRIAL)
            (package / "tune" / f"{tune_fan_out.COLLECTOR_ENTRY}.py").write_text(
                _STAND_IN_COLLECTOR)
        else:
            (package / f"{step.name}.py").write_text(header + fakes._STAND_IN)
        steps.append(dataclasses.replace(step, module=f"{fakes.PACKAGE}.{step.name}"))
    (package / "fingerprint.py").write_text(fakes._STAND_IN_FINGERPRINT)
    fingerprint = dataclasses.replace(plan.fingerprint, module=f"{fakes.PACKAGE}.fingerprint")
    graph = kfp_compiler.build_pipeline(
        dataclasses.replace(plan, steps=tuple(steps), fingerprint=fingerprint), image=IMAGE,
        source_root="", caching=kfp_compiler.DEFAULT_CACHING, kfp_backend=BACKEND)
    path = folder / "stand_ins.yaml"
    compiler.Compiler().compile(graph, str(path))
    return path


@pytest.mark.slow
def test_kfp_local_runs_every_trial_then_the_collector_then_the_final_train(tmp_path):
    pipeline = fan_out_pipeline(trials=4, parallel=2, seed=3)
    drawn = tune_fan_out.draw(pipeline.tune)
    yaml_path = _compile_with_stand_ins(pipeline, tmp_path)
    code, ran, output = fakes.run(yaml_path, tmp_path, {
        "blessed": True, "values": [0.5, None, 0.8, 0.7], "max_failures": 1})
    assert code == 0, output[-6000:]
    assert sorted(r for r in ran if r.startswith("trial:")) == [f"trial:{n}" for n in range(4)]
    assert ran.index("tune") > max(ran.index(f"trial:{n}") for n in range(4))
    assert ran.index("train") > ran.index("tune")
    [best] = (tmp_path / "root").glob(f"*/tune/{TUNED}/{TUNE_BEST}")
    chosen = json.loads(best.read_text())
    assert (chosen["trial"], chosen["value"]) == (2, 0.8)
    assert chosen["assignment"] == {k: list(v) if isinstance(v, tuple) else v
                                    for k, v in drawn[2].items()}
    metrics = json.loads((best.parent / Files.METRICS).read_text())
    assert (metrics["complete"], metrics["failed"]) == (3, 1)


@pytest.mark.slow
def test_kfp_local_fails_the_tune_task_when_too_many_trials_failed(tmp_path):
    pipeline = fan_out_pipeline(trials=3, parallel=3, seed=3)
    yaml_path = _compile_with_stand_ins(pipeline, tmp_path)
    code, ran, output = fakes.run(yaml_path, tmp_path, {
        "blessed": True, "values": [None, None, 0.4], "max_failures": 1})
    assert code != 0
    assert "2 of 3 trial(s) failed, more than max_failures=1" in output, output[-6000:]
    assert "tune" in ran and "train" not in ran


_FRESH_COMPILE = """
import json
import sys

from estflow.pipelines.kubeflow import compiler

namespace = {}
exec(sys.argv[1], namespace)
compiler.compile_pipeline(namespace["pipeline"], sys.argv[2], image=sys.argv[3],
                          tune_on="parallel-for", kfp_backend="2.17")
print(json.dumps({"heavy": sorted(m for m in sys.modules if m.split(".")[0] in (
    "tensorflow", "apache_beam", "tensorflow_transform")), "optuna": "optuna" in sys.modules,
    "components": sorted(m for m in sys.modules if m.startswith("estflow.components"))}))
"""


def test_compiling_imports_optuna_but_never_tensorflow_beam_or_the_steps(tmp_path):
    """In a fresh interpreter (this one has imported the steps' modules)."""
    import subprocess

    out = tmp_path / "fresh.yaml"
    done = subprocess.run([sys.executable, "-c", _FRESH_COMPILE,
                           _PIPELINE_FILE.replace("TUNE", "algorithm='random'"), str(out),
                           IMAGE], capture_output=True, text=True, timeout=120,
                          cwd=Path(__file__).resolve().parents[2], env=fakes.env())
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report == {"heavy": [], "optuna": True, "components": []}
    assert out.exists()
