"""A pipeline with ``ef.Candidates`` in the plan, its step keys and its Kubeflow compile.

Each candidate gets its own ``train_<name>`` and ``evaluate_<name>`` (by name), none waiting
for another candidate's steps, taking the candidate's ``model_<name>`` and
``evaluation_<name>`` under the entry point's ``--model`` and ``--evaluation`` flags; the
``select`` step reads them all and writes the pipeline's ``model`` and ``evaluation``: push
and the user's gated steps wait for it and are gated by its blessing. Each candidate's keys
cover that candidate's declaration only. The Kubeflow IR is read strictly (:mod:`kfp_ir`),
as test_kfp_compiler.py and test_kfp_user_steps.py read it.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import kfp.components
import pytest
import yaml
from kfp import dsl
from kfp.pipeline_spec import pipeline_spec_pb2

import estflow.components
import estflow.dsl as ef
from estflow.dsl import fingerprints as fp
from estflow.dsl.contracts import Files
from estflow.pipelines.kubeflow import compiler as kfp_compiler
from estflow.pipelines.kubeflow import components as kfp_components
from estflow.pipelines.plan import build_plan
from tests.pipelines.kfp_ir import Ir
from tests.pipelines.kfp_ir import parse_strict

IMAGE = "registry.example.com/team/estflow:test-1"
BUCKET = "gs://estflow-examples/serving_models"
FEATURES = (ef.Numeric("x"), ef.Numeric("z"), ef.CategoricalVocab("c"))
# declared out of name order: the plan orders the candidates by name
DECLARED = ("linear", "dnn")
NAMES = sorted(DECLARED)


@ef.step(when=ef.blessed())
def announce(pushed: ef.Input[ef.Pushed]) -> None:
    pass


@ef.step
def business_check(evaluation: ef.Input[ef.Evaluation]) -> dict:
    return {}


@ef.step(after=("evaluate",))
def after_evaluate() -> None:
    pass


def _models(hidden=(8, 4)) -> dict:
    return {"linear": ef.LinearClassifier(feature_columns=("x", "z", "c")),
            "dnn": ef.DNNClassifier(hidden_units=hidden,
                                    feature_columns=("x", "z", ef.Indicator("c")))}


def _pipeline(models=None, *, steps=(), best_by=None, push=BUCKET, **kw) -> ef.Pipeline:
    return ef.Pipeline(
        name="cands", source=ef.CsvSource("data.csv"), features=FEATURES, label=ef.Label("y"),
        model=ef.Candidates(models or _models(), best_by=best_by),
        train=ef.TrainSpec(max_steps=30), push=ef.PushTarget(push, "cands"), steps=steps, **kw)


def _ancestors(plan, name: str) -> set[str]:
    """Every step ``name`` waits for, through inputs, ``after`` and ``when``."""
    by_name = {s.name: s for s in plan.steps}
    seen: set[str] = set()
    todo = [name]
    while todo:
        step = by_name[todo.pop()]
        direct = ({p for _, p in step.inputs} | set(step.after)
                  | ({step.when.step} if step.when is not None else set())
                  | ({step.runs_if} if step.runs_if else set()))
        for d in direct - seen:
            seen.add(d)
            todo.append(d)
    return seen


# --- the plan ---------------------------------------------------------------------------------

def test_each_candidate_gets_its_train_and_evaluate_then_select_then_push():
    plan = build_plan(_pipeline(), source_root=".")
    assert [s.name for s in plan.steps] == [
        "ingest", "transform", *(f"train_{n}" for n in NAMES),
        *(f"evaluate_{n}" for n in NAMES), "select", "push"]
    for n in NAMES:
        train, evaluate = plan.step(f"train_{n}"), plan.step(f"evaluate_{n}")
        assert train.module == "estflow.components.train"
        assert evaluate.module == "estflow.components.evaluate"
        assert (train.of, evaluate.of) == ("train", "evaluate")
        assert train.inputs == (("transformed", "transform"),)
        assert train.outputs == (f"model_{n}",)
        assert evaluate.inputs == (("examples", "ingest"), (f"model_{n}", f"train_{n}"))
        assert evaluate.outputs == (f"evaluation_{n}",)
    assert plan.step("select").module == "estflow.components.select"


def test_a_single_model_keeps_the_plain_plan():
    single = dataclasses.replace(_pipeline(), model=_models()["dnn"])
    plan = build_plan(single, source_root=".")
    assert [s.name for s in plan.steps] == ["ingest", "transform", "train", "evaluate", "push"]
    assert plan.step("push").runs_if == "evaluate"
    assert all(s.roles == () and s.of is None for s in plan.steps)


def test_no_candidate_waits_for_another_candidate_s_steps():
    plan = build_plan(_pipeline(), source_root=".")
    for n in NAMES:
        others = {f"{step}_{o}" for o in NAMES if o != n for step in ("train", "evaluate")}
        for step in (f"train_{n}", f"evaluate_{n}"):
            assert not set(plan.step(step).after) & others, step
            assert not _ancestors(plan, step) & others, step
        assert plan.step(f"train_{n}").after == ("transform",)
    # select waits for every candidate's evaluation (and so for every train)
    assert set(plan.step("select").after) == {f"evaluate_{n}" for n in NAMES}
    assert _ancestors(plan, "select") >= {f"{s}_{n}" for n in NAMES for s in ("train",
                                                                             "evaluate")}


def test_each_candidate_s_steps_take_its_artifacts_under_the_step_s_own_flags():
    plan = build_plan(_pipeline(), source_root=".")
    artifacts = {a for s in plan.steps for a in (*(i for i, _ in s.inputs), *s.outputs)}
    paths = {a: f"/runs/{a}" for a in artifacts}
    for n in NAMES:
        argv = plan.step(f"evaluate_{n}").argv("SPEC", paths)
        flags = dict(zip(argv[::2], argv[1::2], strict=True))
        assert flags == {"--spec": "SPEC", "--examples": paths["examples"],
                         "--model": paths[f"model_{n}"],
                         "--evaluation": paths[f"evaluation_{n}"]}
        argv = plan.step(f"train_{n}").argv("SPEC", paths)
        flags = dict(zip(argv[::2], argv[1::2], strict=True))
        assert flags["--model"] == paths[f"model_{n}"]
        assert not any(a.startswith(("--model_", "--evaluation_")) for a in argv)


def test_select_reads_every_candidate_and_writes_the_pipeline_s_model_and_evaluation():
    plan = build_plan(_pipeline(), source_root=".")
    select = plan.step("select")
    assert select.inputs == tuple(
        pair for n in NAMES for pair in ((f"model_{n}", f"train_{n}"),
                                         (f"evaluation_{n}", f"evaluate_{n}")))
    assert select.outputs == ("evaluation", "model")  # the summary's (metrics.json) first
    assert select.result is not None and select.result.artifact == "evaluation"
    paths = {a: f"/p/{a}" for a in (*(i for i, _ in select.inputs), *select.outputs)}
    argv = select.argv("SPEC", paths)
    assert dict(zip(argv[::2], argv[1::2], strict=True)) == {
        "--spec": "SPEC", **{f"--{a}": p for a, p in paths.items()},
        "--candidate-fingerprints": "{{estflow-input:candidate_fingerprints}}"}
    push = plan.step("push")
    assert push.inputs == (("model", "select"), ("evaluation", "select"))
    assert push.runs_if == "select"
    assert "select" in push.after


def test_the_user_s_gated_steps_are_gated_on_select():
    plan = build_plan(_pipeline(steps=(announce, business_check, after_evaluate)),
                      source_root=".")
    names = [s.name for s in plan.steps]
    assert plan.step("announce").when == ef.When("select", "blessed", "==", True)
    assert plan.step("business_check").inputs == (("evaluation", "select"),)
    assert plan.step("after_evaluate").after == ("select",)
    for user in ("announce", "business_check", "after_evaluate"):
        assert names.index(user) > names.index("select"), user
        step = plan.step(user)
        waits = set(step.after) | {p for _, p in step.inputs} | (
            {step.when.step} if step.when else set())
        assert not waits & {"evaluate", "train", *(f"evaluate_{n}" for n in NAMES)}, user
    assert not {"train", "evaluate"} & set(names)


# --- the keys ---------------------------------------------------------------------------------

FACTS = fp.Facts(estflow={"version": "1"}, source={"digest": "data-1"}, code={})


def _step_keys(pipeline: ef.Pipeline, facts: fp.Facts = FACTS) -> dict[str, fp.StepKey]:
    plan = build_plan(pipeline, source_root=".")
    return fp.step_keys(pipeline, [s.plan_step() for s in plan.steps], facts)


def _keys(pipeline: ef.Pipeline, facts: fp.Facts = FACTS) -> dict[str, str]:
    return {name: k.key for name, k in _step_keys(pipeline, facts).items()}


def _changed(before: dict, after: dict) -> list[str]:
    assert list(before) == list(after)
    return [n for n in before if before[n] != after[n]]


def test_editing_one_candidate_changes_its_keys_and_select_s_only():
    before = _keys(_pipeline())
    wider = _keys(_pipeline(_models(hidden=(16, 8))))
    assert _changed(before, wider) == ["train_dnn", "evaluate_dnn", "select", "push"]
    models = _models()
    models["linear"] = ef.LinearClassifier(feature_columns=("x", "z", "c"), learning_rate=0.1)
    relearned = _keys(_pipeline(models))
    assert _changed(before, relearned) == ["train_linear", "evaluate_linear", "select", "push"]


def test_best_by_is_select_s_alone():
    before = _keys(_pipeline())
    by_loss = _keys(_pipeline(best_by="average_loss"))
    assert _changed(before, by_loss) == ["select", "push"]


def test_a_new_candidate_keeps_the_others_keys():
    before = _keys(_pipeline())
    grown = _keys(_pipeline({**_models(), "boosted": ef.BoostedTreesClassifier(
        ("x", "z", ef.Indicator("c")), n_batches_per_layer=1)}))
    assert {n: grown[n] for n in before if n not in ("select", "push")} == {
        n: k for n, k in before.items() if n not in ("select", "push")}
    assert grown["select"] != before["select"]
    assert {"train_boosted", "evaluate_boosted"} <= set(grown)


def test_each_candidate_s_steps_get_that_candidate_as_the_model():
    pipeline = _pipeline(steps=(business_check,))
    keys = _step_keys(pipeline)
    for n in NAMES:
        for step in (f"train_{n}", f"evaluate_{n}"):
            spec = keys[step].spec
            assert spec.model == pipeline.model.models[n], step
            assert ef.Pipeline.from_json(spec.to_json()) == spec  # what the step reads back
    assert keys["select"].spec.model == pipeline.model
    # a candidate's model fingerprint is what select reads and what its evaluation reads
    for n in NAMES:
        assert keys["select"].inputs[f"model_{n}"] == keys[f"train_{n}"].outputs[f"model_{n}"]
        assert keys[f"evaluate_{n}"].inputs[f"model_{n}"] == \
            keys[f"train_{n}"].outputs[f"model_{n}"]
    assert keys["push"].inputs["model"] == keys["select"].outputs["model"]


def _served_after_a_push_of(keys: dict[str, fp.StepKey], picked: str) -> fp.Facts:
    """The facts of the run after a first run pushed candidate ``picked`` (evaluated against
    nothing served), as the local runner records it (the picked candidate's fingerprint)."""
    return dataclasses.replace(FACTS, served={
        "version": 1, "fingerprint": keys[f"train_{picked}"].outputs[f"model_{picked}"],
        "evaluated_against": None})


@pytest.mark.parametrize("picked", NAMES)
def test_after_a_push_the_picked_candidate_s_evaluation_is_keyed_as_before(picked):
    pipeline = _pipeline()
    first = _step_keys(pipeline)
    again = _keys(pipeline, _served_after_a_push_of(first, picked))
    assert again[f"evaluate_{picked}"] == first[f"evaluate_{picked}"].key
    assert again[f"train_{picked}"] == first[f"train_{picked}"].key


@pytest.mark.parametrize("picked", NAMES)
def test_after_a_push_an_identical_rerun_keeps_every_candidate_s_evaluation(picked):
    pipeline = _pipeline()
    first = _step_keys(pipeline)
    again = _keys(pipeline, _served_after_a_push_of(first, picked))
    assert {n: again[n] for n in again if n != "push"} == {
        n: k.key for n, k in first.items() if n != "push"}


# --- Kubeflow ---------------------------------------------------------------------------------

PIPELINE_FILE = '''
import estflow.dsl as ef

pipeline = ef.Pipeline(
    name="cands", source=ef.CsvSource("data.csv"),
    features=(ef.Numeric("x"), ef.Numeric("z"), ef.CategoricalVocab("c")), label=ef.Label("y"),
    model=ef.Candidates({
        "linear": ef.LinearClassifier(feature_columns=("x", "z", "c")),
        "dnn": ef.DNNClassifier(hidden_units=(8, 4),
                                feature_columns=("x", "z", ef.Indicator("c"))),
    }),
    train=ef.TrainSpec(max_steps=30),
    push=ef.PushTarget("gs://estflow-examples/serving_models", "cands"))
'''


@pytest.fixture(scope="module")
def compiled(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    """``estflow compile`` of a pipeline file with candidates, as a user runs it."""
    folder = tmp_path_factory.mktemp("kfp_candidates")
    (folder / "cands.py").write_text(textwrap.dedent(PIPELINE_FILE))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ESTFLOW_", "PYTEST"))}
    done = subprocess.run([sys.executable, "-m", "estflow.pipelines.cli", "compile", "cands.py",
                           "-o", "cands.yaml", "--image", IMAGE], cwd=folder, env=env,
                          capture_output=True, text=True, timeout=300)
    return folder / "cands.yaml", done


def test_estflow_compile_writes_strict_ir_with_a_task_per_candidate_step(compiled, tmp_path):
    path, done = compiled
    assert done.returncode == 0, done.stderr
    assert "8 tasks" in done.stdout
    assert ("ingest -> transform -> train_dnn -> train_linear -> evaluate_dnn -> "
            "evaluate_linear -> select -> push") in done.stdout
    ir = Ir(path)
    documents = ir.documents
    assert len(documents) == 2
    parse_strict(documents[0], pipeline_spec_pb2.PipelineSpec())
    platform = parse_strict(documents[1], pipeline_spec_pb2.PlatformSpec())
    again = tmp_path / "again.yaml"
    again.write_text(yaml.safe_dump_all(documents))
    assert kfp.components.load_component_from_file(str(again)).platform_spec == platform
    executors = documents[1]["platforms"]["kubernetes"]["deploymentSpec"]["executors"]
    assert set(executors) == {ir.executor_label(t) for t in ir.tasks()}
    for task in ir.tasks():
        ir.k8s(task)  # every executor config parses strictly
    assert set(ir.tasks()) == {"fingerprint", "ingest", "transform", "select", "push",
                               "report", *(f"{s}-{n}" for n in NAMES
                                           for s in ("train", "evaluate"))}
    for n in NAMES:
        for step in ("train", "evaluate"):
            assert ir.task(f"{step}-{n}").task_info.name == f"{step}_{n}"
            container = ir.container(f"{step}-{n}")
            # the candidate's task runs the step's own entry point
            assert f"from estflow.components import {step} as step" in container["command"][-1]
            assert container["args"][-2:] == ["--function_to_execute", f"{step}_{n}"]
    spec = ef.Pipeline.from_json(
        ir.spec.root.input_definitions.parameters["spec"].default_value.string_value)
    assert sorted(spec.model.models) == NAMES


def test_the_compiled_tasks_are_wired_by_candidate(compiled):
    ir = Ir(compiled[0])
    for n in NAMES:
        assert ir.artifact_source(f"evaluate-{n}", f"model_{n}") == (f"train-{n}", f"model_{n}")
        assert ir.artifact_source(f"train-{n}", "transformed") == ("transform", "transformed")
        others = {f"{s}-{o}" for o in NAMES if o != n for s in ("train", "evaluate")}
        assert not set(ir.task(f"train-{n}").dependent_tasks) & others
        assert not set(ir.task(f"evaluate-{n}").dependent_tasks) & others
        assert ir.artifact_source("select", f"model_{n}") == (f"train-{n}", f"model_{n}")
        assert ir.artifact_source("select", f"evaluation_{n}") == (
            f"evaluate-{n}", f"evaluation_{n}")
    assert ir.artifact_source("push", "model") == ("select", "model")
    assert ir.artifact_source("push", "evaluation") == ("select", "evaluation")


def _artifact_types(ir: Ir) -> dict[str, set[str]]:
    seen: dict[str, set[str]] = {}
    for component in ir.spec.components.values():
        if component.WhichOneof("implementation") == "dag":
            continue
        for side in (component.input_definitions, component.output_definitions):
            for artifact, definition in side.artifacts.items():
                seen.setdefault(artifact, set()).add(definition.artifact_type.schema_title)
    return seen


def test_the_candidates_models_are_written_and_evaluated_as_models(compiled):
    ir = Ir(compiled[0])
    spec = ir.spec
    for n in NAMES:
        train = spec.components[ir.task(f"train-{n}").component_ref.name]
        evaluate = spec.components[ir.task(f"evaluate-{n}").component_ref.name]
        assert train.output_definitions.artifacts[f"model_{n}"].artifact_type.schema_title \
            == "system.Model"
        assert evaluate.input_definitions.artifacts[f"model_{n}"].artifact_type.schema_title \
            == "system.Model"
        assert evaluate.output_definitions.artifacts[
            f"evaluation_{n}"].artifact_type.schema_title == "system.Artifact"
    select = spec.components[ir.task("select").component_ref.name]
    assert select.output_definitions.artifacts["model"].artifact_type.schema_title == \
        "system.Model"
    types_ = _artifact_types(ir)
    assert types_["model"] == {"system.Model"}
    assert types_["evaluation"] == {"system.Artifact"}


def test_every_component_types_a_candidate_s_model_as_a_model(compiled):
    types_ = _artifact_types(Ir(compiled[0]))
    assert {a: types_[a] for a in types_ if a.startswith("model")} == {
        a: {"system.Model"} for a in ("model", *(f"model_{n}" for n in NAMES))}


def _compile_gated(tmp_path, backend: str, steps) -> Ir:
    return Ir(kfp_compiler.compile_pipeline(_pipeline(steps=steps), tmp_path / f"{backend}.yaml",
                                            image=IMAGE, kfp_backend=backend).path)


def _gate(ir: Ir, task: str) -> tuple[str, str]:
    """(producer task, output) of the blessing gating ``task``: a ``dsl.If`` group around it
    (KFP backends before 2.14, ...) or a ``blessed`` input it checks itself (2.14 on)."""
    if "blessed" in ir.task(task).inputs.parameters:
        assert not [g for g in ir.enclosing_groups(task) if ir.task(g).trigger_policy.condition]
        return ir.parameter_source(task, "blessed")
    groups = [g for g in ir.enclosing_groups(task) if ir.task(g).trigger_policy.condition]
    assert groups, f"{task} runs under no condition"
    condition = ir.task(groups[0])
    assert condition.task_info.name == "blessed"
    match = re.fullmatch(r"inputs\.parameter_values\['([\w-]+)'\] == true",
                         condition.trigger_policy.condition)
    assert match, condition.trigger_policy.condition
    return ir.parameter_source(groups[0], match.group(1))


# both forms of a gate: a dsl.If group (2.5) and a task gating itself (the default backend)
BACKENDS = ["2.5", kfp_compiler.DEFAULT_KFP_BACKEND]


@pytest.mark.parametrize("backend", BACKENDS)
def test_push_is_gated_by_select_s_blessing(tmp_path, backend):
    ir = _compile_gated(tmp_path, backend, (business_check,))
    assert _gate(ir, "push") == ("select", kfp_components.RESULT_OUTPUT)
    assert ir.artifact_source("business-check", "evaluation") == ("select", "evaluation")
    outputs = ir.spec.components[ir.task("select").component_ref.name].output_definitions
    assert outputs.parameters[kfp_components.RESULT_OUTPUT].parameter_type == \
        pipeline_spec_pb2.ParameterType.BOOLEAN
    # the candidates' own blessings gate nothing: no task or group reads their result
    sources = {ir.parameter_source(t, p) for t in (*ir.tasks(), *ir.groups())
               for p in ir.task(t).inputs.parameters}
    assert ("select", kfp_components.RESULT_OUTPUT) in sources
    assert not sources & {(f"evaluate-{n}", kfp_components.RESULT_OUTPUT) for n in NAMES}


def test_a_blessed_user_step_is_gated_by_select_under_a_dsl_if(tmp_path):
    ir = _compile_gated(tmp_path, "2.5", (business_check, announce))
    assert _gate(ir, "announce") == ("select", kfp_components.RESULT_OUTPUT)
    assert ir.artifact_source("announce", "pushed") == ("push", "pushed")


def test_a_blessed_user_step_that_gates_itself_is_gated_by_select(tmp_path):
    ir = _compile_gated(tmp_path, "2.14", (business_check, announce))
    assert _gate(ir, "announce") == ("select", kfp_components.RESULT_OUTPUT)


def _fingerprint_task(ir: Ir, monkeypatch, keyed: dict):
    """The fingerprint task's function, its step faked to write ``keyed`` as fingerprints.json."""
    def main(argv):
        folder = Path(argv[argv.index("--fingerprints") + 1])
        folder.mkdir(parents=True, exist_ok=True)
        (folder / Files.FINGERPRINTS).write_text(json.dumps({"steps": keyed, "source": {}}))
        return 0

    fake = types.ModuleType("estflow.components.fingerprint")
    fake.main = main
    monkeypatch.setitem(sys.modules, fake.__name__, fake)
    monkeypatch.setattr(estflow.components, "fingerprint", fake, raising=False)
    namespace: dict = {}
    exec(ir.container("fingerprint")["command"][-1], namespace)
    return namespace["fingerprint"]


def test_kfp_select_is_given_each_trained_candidate_s_model_fingerprint(compiled, monkeypatch,
                                                                      tmp_path):
    """On Kubeflow as locally, push records the picked candidate's own model fingerprint:
    the fingerprint task gives the select task each candidate's (select writes the picked
    one's into candidates.json, which push prefers), so a rerun picking the same trained model
    pushes nothing and the served candidate is never its own baseline."""
    ir = Ir(compiled[0])
    pipeline = ef.Pipeline.from_json(
        ir.spec.root.input_definitions.parameters["spec"].default_value.string_value)
    keys = _step_keys(pipeline)
    keyed = {n: {**k.to_dict(), "spec": k.spec.to_json()} for n, k in keys.items()}
    task = _fingerprint_task(ir, monkeypatch, keyed)
    outputs = task(spec="SPEC", source_root="ROOT",
                   fingerprints=dsl.Artifact(uri=str(tmp_path / "fingerprints")))
    assert ir.parameter_source("select", "candidate_fingerprints") == (
        "fingerprint", "candidate_fingerprints")
    assert json.loads(outputs.candidate_fingerprints) == {
        n: keys[f"train_{n}"].outputs[f"model_{n}"] for n in NAMES}


def test_each_candidate_s_train_task_gets_the_declared_train_resources(tmp_path):
    pipeline = _pipeline(resources={"train": ef.Resources(cpu_request="3", memory_limit="5Gi"),
                                    "evaluate": ef.Resources(cpu_limit="1500m")})
    ir = Ir(kfp_compiler.compile_pipeline(pipeline, tmp_path / "p.yaml", image=IMAGE).path)
    for n in NAMES:
        train = ir.container(f"train-{n}")["resources"]
        assert (train["resourceCpuRequest"], train["resourceMemoryLimit"]) == ("3", "5Gi")
        assert ir.container(f"evaluate-{n}")["resources"]["resourceCpuLimit"] == "1500m"
    assert "resourceCpuLimit" not in ir.container("select")["resources"]
    assert "resourceMemoryLimit" not in ir.container("select")["resources"]


def test_no_cache_takes_the_candidates_steps_and_train_means_every_candidate_s():
    """``estflow run --no-cache`` names the steps the plan runs: a candidate's own, select, and
    ``train`` / ``evaluate`` for every candidate's; a name no step has is refused, listing
    them."""
    from estflow.pipelines.cli.local_runs import _forced_steps
    from estflow.pipelines.cli.usage import UsageError

    pipeline = _pipeline()
    assert _forced_steps("train,select", pipeline) == {*(f"train_{n}" for n in NAMES), "select"}
    assert _forced_steps(f"evaluate_{NAMES[0]}", pipeline) == {f"evaluate_{NAMES[0]}"}
    with pytest.raises(UsageError, match=f"train_{NAMES[0]}"):
        _forced_steps("trian", pipeline)
