"""User steps (``@ef.step``) compiled for Kubeflow: their results as output parameters, their
``when`` checked in the task (KFP backends 2.14 on, 2.17 included) or, for older backends, as
``dsl.If`` conditions with the steps reading a conditional step nested in its condition; their
own resources, image, packages and caching; the refusals; and a compiled pipeline run by ``kfp.local`` with the real user step
entry point.

The IR is read strictly (:mod:`kfp_ir`), as test_kfp_compiler.py reads it.
"""

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

import kfp.components
import pytest
import yaml
from kfp import compiler
from kfp.pipeline_spec import pipeline_spec_pb2

import estflow.dsl as ef
from estflow.dsl.contracts import Files
from estflow.pipelines import loader
from estflow.pipelines.kubeflow import compiler as kfp_compiler
from estflow.pipelines.kubeflow import components as kfp_components
from estflow.pipelines.plan import build_plan
from tests.pipelines import kfp_local_fakes
from tests.pipelines.kfp_ir import Ir
from tests.pipelines.kfp_ir import parse_strict

TAXI = "estflow.pipelines.examples.taxi"
IMAGE = "registry.example.com/team/estflow:test-1"
TOOLS_IMAGE = "registry.example.com/team/tools:7"
BUCKET = "gs://estflow-examples/serving_models"
REPO = Path(__file__).resolve().parents[2]


# --- the user steps (module-level: a task imports them by this module's name) -------------------

class Check(NamedTuple):
    auc: float
    ok: bool


def _log(name: str) -> None:
    if os.environ.get("ESTFLOW_TEST_LOG"):
        with open(os.environ["ESTFLOW_TEST_LOG"], "a") as log:
            log.write(name + "\n")


@ef.step
def business_check(evaluation: ef.Input[ef.Evaluation], report: ef.Output[ef.Markdown],
                   floor: float = 0.5) -> Check:
    _log("business_check")
    metrics = json.loads((evaluation / Files.METRICS).read_text())["metrics"]
    (report / "report.md").write_text(f"# auc {metrics['auc']:.3f}\n")
    return Check(auc=metrics["auc"], ok=metrics["auc"] > floor)


@ef.step(when=ef.result("business_check")["auc"] > 0.7)
def record(report: ef.Input[ef.Markdown], table: ef.Output[ef.Dataset]) -> None:
    _log("record")
    (table / "rows.txt").write_text((report / "report.md").read_text())


@ef.step(when=ef.blessed())
def announce(pushed: ef.Input[ef.Pushed]) -> None:
    _log("announce")


@ef.step
def archive(table: ef.Input[ef.Dataset]) -> None:
    _log("archive")


notify = ef.step(archive.python_func, name="notify",
                 resources=ef.Resources(cpu_request="2", memory_request="3Gi", retries=2,
                                        timeout_seconds=600),
                 image=TOOLS_IMAGE, packages=("requests==2.31.0",), cache=False,
                 after=("business_check",))


# --- fixtures ---------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def taxi():
    loaded = loader.load(TAXI)
    loaded.pipeline = dataclasses.replace(loaded.pipeline, push=dataclasses.replace(
        loaded.pipeline.push, base_path=BUCKET))
    return loaded


def _with_steps(taxi, *steps) -> ef.Pipeline:
    return dataclasses.replace(taxi.pipeline, steps=steps)


@pytest.fixture(scope="module")
def declared(taxi):
    return _with_steps(taxi, business_check(floor=0.6), record, announce, notify)


def _compile(pipeline, path: Path, **options) -> tuple[kfp_compiler.CompiledPipeline, Ir]:
    compiled = kfp_compiler.compile_pipeline(pipeline, path, image=IMAGE, **options)
    return compiled, Ir(compiled.path)


@pytest.fixture(scope="module")
def ir_213(declared, tmp_path_factory):
    """Compiled for KFP 2.13 (before the exit task reads the final status): conditions are
    dsl.If groups."""
    return _compile(declared, tmp_path_factory.mktemp("kfp") / "steps.yaml",
                    kfp_backend="2.13")[1]


@pytest.fixture(scope="module")
def ir_214(declared, tmp_path_factory):
    """Compiled for KFP 2.14, the first backend whose exit task reads the final status: gated
    steps check their conditions in the task."""
    return _compile(declared, tmp_path_factory.mktemp("kfp") / "steps.yaml",
                    kfp_backend="2.14")[1]


@pytest.fixture(scope="module")
def ir_default(declared, tmp_path_factory):
    """Compiled for the default backend (2.16): gated steps check their conditions in the
    task."""
    return _compile(declared, tmp_path_factory.mktemp("kfp") / "steps.yaml")[1]


@pytest.fixture(scope="module")
def ir_217(declared, tmp_path_factory):
    """Compiled for KFP 2.17: gated steps check their conditions in the task too (a false
    dsl.If in the exit handler would leave the run RUNNING there as well)."""
    return _compile(declared, tmp_path_factory.mktemp("kfp") / "steps.yaml",
                    kfp_backend="2.17")[1]


# Targets where the exit task reads the final status: no condition groups, gates in the task.
IN_TASK_GATES = ["ir_214", "ir_default", "ir_217"]


def _group(ir: Ir, task: str):
    """The innermost condition group around ``task`` (its task spec), or None."""
    groups = [g for g in ir.enclosing_groups(task) if ir.task(g).trigger_policy.condition]
    return (groups[0], ir.task(groups[0])) if groups else (None, None)


def _parameter_types(ir: Ir, task: str) -> dict[str, str]:
    outputs = ir.spec.components[ir.task(task).component_ref.name].output_definitions
    return {name: pipeline_spec_pb2.ParameterType.ParameterTypeEnum.Name(p.parameter_type)
            for name, p in outputs.parameters.items()}


# --- the IR -----------------------------------------------------------------------------------

@pytest.mark.parametrize("fixture", ["ir_213", *IN_TASK_GATES])
def test_the_yaml_is_strict_and_loads_back_with_kfp(fixture, request):
    ir = request.getfixturevalue(fixture)
    documents = ir.documents
    assert len(documents) == 2
    parse_strict(documents[0], pipeline_spec_pb2.PipelineSpec())
    platform = parse_strict(documents[1], pipeline_spec_pb2.PlatformSpec())
    path = Path(request.getfixturevalue("tmp_path")) / "again.yaml"
    path.write_text(yaml.safe_dump_all(documents))
    assert kfp.components.load_component_from_file(str(path)).platform_spec == platform
    assert {"business-check", "record", "announce", "notify"} <= set(ir.tasks())
    for task in ir.tasks():
        ir.k8s(task)  # every executor config parses strictly


def test_a_user_step_returns_its_result_names_as_typed_output_parameters(ir_217):
    # auc is compared with a number (record's when): a double; ok, compared by no when: text
    assert _parameter_types(ir_217, "business-check") == {"auc": "NUMBER_DOUBLE",
                                                          "ok": "STRING"}
    assert ir_217.artifact_source("business-check", "evaluation") == ("evaluate", "evaluation")
    assert _parameter_types(ir_217, "record") == {}


def test_a_when_on_a_result_is_a_dsl_if_on_that_output(ir_213):
    """Before 2.14 (the exit task reads no final state): a dsl.If group."""
    name, group = _group(ir_213, "record")
    assert group.task_info.name == "business_check.auc > 0.7"
    condition = group.trigger_policy.condition
    assert condition == "inputs.parameter_values['pipelinechannel--business-check-auc'] > 0.7"
    assert ir_213.parameter_source(name, "pipelinechannel--business-check-auc") == (
        "business-check", "auc")
    assert ir_213.artifact_source("record", "report") == ("business-check", "report")
    assert "business_check_result" not in ir_213.task("record").inputs.artifacts


@pytest.mark.parametrize("fixture", IN_TASK_GATES)
def test_from_214_a_when_on_a_result_is_checked_in_its_task(fixture, request):
    """From 2.14 on, 2.17 included: no group; record takes business_check's result artifact
    and compares auc itself."""
    ir = request.getfixturevalue(fixture)
    assert _group(ir, "record") == (None, None)
    assert ir.enclosing_groups("record") == ir.enclosing_groups("business-check")
    assert ir.artifact_source("record", "business_check_result") == (
        "business-check", "business_check_result")
    assert ir.artifact_source("record", "report") == ("business-check", "report")
    source = ir.container("record")["command"][-1]
    assert "operator.gt(_ef_found, 0.7)" in source
    assert "its condition business_check.auc > 0.7" in source


def test_blessed_uses_the_evaluate_gate_with_push(ir_213):
    """Before 2.14: announce runs in push's dsl.If group on evaluate's blessing."""
    name, group = _group(ir_213, "announce")
    assert group.task_info.name == "blessed"
    assert _group(ir_213, "push")[0] == name  # the one group push runs in
    assert "pipelinechannel--evaluate-Output" in group.trigger_policy.condition
    assert ir_213.artifact_source("announce", "pushed") == ("push", "pushed")
    assert "blessed" not in ir_213.task("announce").inputs.parameters


@pytest.mark.parametrize("fixture", IN_TASK_GATES)
def test_from_214_blessed_takes_the_evaluate_gate_as_push_does(fixture, request):
    """From 2.14 on, 2.17 included: announce and push take evaluate's blessing as an input
    and skip themselves; neither is in a condition group."""
    ir = request.getfixturevalue(fixture)
    assert _group(ir, "announce") == (None, None) and _group(ir, "push") == (None, None)
    assert ir.enclosing_groups("announce") == ir.enclosing_groups("push")
    assert ir.parameter_source("announce", "blessed") == ("evaluate", "Output")
    assert ir.parameter_source("push", "blessed") == ("evaluate", "Output")
    assert ir.artifact_source("announce", "pushed") == ("push", "pushed")


def test_a_step_reading_a_conditional_step_runs_inside_its_condition(ir_213):
    """Before 2.14: notify, reading record's table, is nested in record's dsl.If group."""
    assert _group(ir_213, "notify")[0] == _group(ir_213, "record")[0]
    assert ir_213.artifact_source("notify", "table") == ("record", "table")
    # its `after`: an order without data (here lifted to the condition group around it)
    assert "business-check" in ir_213.task(_group(ir_213, "notify")[0]).dependent_tasks
    # the unconditional user step is in no condition
    assert _group(ir_213, "business-check") == (None, None)


@pytest.mark.parametrize("fixture", IN_TASK_GATES)
def test_from_214_a_step_reading_a_conditional_step_checks_its_inputs(fixture, request):
    """From 2.14 on, 2.17 included: notify sits next to record, takes record's condition
    through its input (skipped.json in record's table) and its `after` directly."""
    ir = request.getfixturevalue(fixture)
    assert _group(ir, "notify") == (None, None)
    assert ir.enclosing_groups("notify") == ir.enclosing_groups("record")
    assert ir.artifact_source("notify", "table") == ("record", "table")
    assert "business-check" in ir.task("notify").dependent_tasks
    assert "skipped.json" in ir.container("notify")["command"][-1]
    assert _group(ir, "business-check") == (None, None)


def test_a_user_steps_own_resources_image_packages_and_caching(ir_217):
    container = ir_217.container("notify")
    assert container["image"] == TOOLS_IMAGE
    assert (container["resources"]["resourceCpuRequest"],
            container["resources"]["resourceMemoryRequest"]) == ("2", "3Gi")
    assert any("pip install" in part and "'requests==2.31.0'" in part
               for part in container["command"])
    task = ir_217.task("notify")
    assert task.retry_policy.max_retry_count == 2
    assert not task.caching_options.enable_cache
    assert ir_217.k8s("notify").active_deadline_seconds == 600
    # the other user steps: the base image, the row's default requests, cached, no pip
    other = ir_217.container("business-check")
    assert other["image"] == IMAGE
    assert other["resources"]["resourceCpuRequest"] == "500m"
    assert not any("pip install" in part for part in other["command"])
    assert ir_217.task("business-check").caching_options.enable_cache
    assert not ir_217.task("business-check").HasField("retry_policy")


def test_compile_reports_each_user_steps_image(declared, tmp_path):
    compiled, _ = _compile(declared, tmp_path / "p.yaml", kfp_backend="2.17")
    assert compiled.images["notify"] == TOOLS_IMAGE
    assert compiled.images["record"] == IMAGE
    # --step-image names it: that wins
    compiled, ir = _compile(declared, tmp_path / "q.yaml",
                            step_images={"notify": "registry.example.com/other:1"})
    assert ir.container("notify")["image"] == "registry.example.com/other:1"


@pytest.mark.parametrize("fixture", IN_TASK_GATES)
def test_from_214_gated_user_steps_check_their_condition_in_the_task(fixture, request):
    """KFP 2.14 on, 2.17 included: no condition group (before 2.17 it would leave the exit
    handler RUNNING; on 2.17 a false one is created CANCELED and the exit handler stays
    RUNNING): a gated step takes what its condition reads and skips itself, as push does."""
    ir = request.getfixturevalue(fixture)
    assert not [g for g in ir.groups() if ir.task(g).trigger_policy.condition]
    # record reads business_check's result artifact (result.json, or skipped.json)
    assert ir.artifact_source("record", "business_check_result") == (
        "business-check", "business_check_result")
    # announce takes evaluate's blessing, as push does
    assert ir.parameter_source("announce", "blessed") == ("evaluate", "Output")
    assert ir.parameter_source("push", "blessed") == ("evaluate", "Output")
    # its `after`: an order without data
    assert "business-check" in ir.task("notify").dependent_tasks
    # notify, under record's condition by its input, checks its inputs for skipped.json
    source = ir.container("notify")["command"][-1]
    assert "skipped.json" in source
    assert "skipped.json" not in ir.container("business-check")["command"][-1]


def test_before_214_gated_user_steps_carry_no_in_task_check(ir_213):
    """Before 2.14 the dsl.If groups gate: the tasks take neither the result nor the
    blessing, and check no skipped.json."""
    for task in ("record", "announce", "notify", "push"):
        assert "business_check_result" not in ir_213.task(task).inputs.artifacts, task
        assert "blessed" not in ir_213.task(task).inputs.parameters, task
    assert "skipped.json" not in ir_213.container("notify")["command"][-1]


def _task_function(ir: Ir, task: str):
    """The component function of ``task``, defined from the compiled YAML."""
    label = ir.executor_label(task)
    source = ir.documents[0]["deploymentSpec"]["executors"][label]["container"]["command"][-1]
    name = ir.task(task).component_ref.name[len("comp-"):].replace("-", "_")
    return kfp_components.define(name, source)


@dataclasses.dataclass
class _Artifact:
    path: str


@pytest.mark.parametrize("auc, runs", [(0.9, True), (0.7, False), (None, False)])
def test_the_in_task_condition_compares_the_result_as_when_does(ir_default, tmp_path,
                                                                monkeypatch, auc, runs):
    """record's generated body: it runs its step only when business_check.auc > 0.7; else it
    writes skipped.json in each output, and calls nothing."""
    calls = []
    import estflow.components.user_step as user_step
    monkeypatch.setattr(user_step, "main", lambda argv: calls.append(argv) or 0)
    result = tmp_path / "result"
    result.mkdir()
    (result / "result.json").write_text(json.dumps({"auc": auc, "ok": True}))
    report = tmp_path / "report"
    report.mkdir()
    outputs = {name: _Artifact(str(tmp_path / name)) for name in ("record_result", "table")}
    function = _task_function(ir_default, "record")
    function(business_check_result=_Artifact(str(result)), spec="{}", cache_key="k",
             report=_Artifact(str(report)), **outputs)
    assert bool(calls) == runs
    for artifact in outputs.values():
        assert (Path(artifact.path) / "skipped.json").is_file() != runs


def test_the_result_task_refuses_a_compared_value_of_another_type(ir_217, tmp_path,
                                                                   monkeypatch):
    import estflow.components.user_step as user_step
    monkeypatch.setattr(user_step, "main", lambda argv: 0)
    result = tmp_path / "result"
    result.mkdir()
    function = _task_function(ir_217, "business-check")
    arguments = dict(spec="{}", cache_key="k", evaluation=_Artifact(str(tmp_path)),
                     business_check_result=_Artifact(str(result)),
                     report=_Artifact(str(tmp_path / "r")))
    (result / "result.json").write_text(json.dumps({"auc": 0.8, "ok": False}))
    assert tuple(function(**arguments)) == (0.8, "false")
    (result / "result.json").write_text(json.dumps({"auc": "high", "ok": False}))
    with pytest.raises(TypeError, match="business_check: its result auc is 'high', expected a "
                                        "float"):
        function(**arguments)


# --- refusals and notes -------------------------------------------------------------------------

@ef.step(when=ef.result("business_check")["ok"] == True)  # noqa: E712
def publish(report: ef.Input[ef.Markdown], out: ef.Output[ef.Dataset]) -> None:
    pass


@ef.step
def merge(out: ef.Input[ef.Dataset], table: ef.Input[ef.Dataset]) -> None:
    pass


def test_a_step_under_two_conditions_that_do_not_nest_is_refused(taxi, tmp_path):
    pipeline = _with_steps(taxi, business_check, record, publish, merge)
    with pytest.raises(kfp_compiler.CompileError) as err:
        kfp_compiler.compile_pipeline(pipeline, tmp_path / "p.yaml", image=IMAGE,
                                      kfp_backend="2.17")
    message = str(err.value)
    assert "step 'merge'" in message and "'record'" in message and "'publish'" in message
    assert "business_check.auc > 0.7" in message and "business_check.ok == True" in message
    assert not (tmp_path / "p.yaml").exists()


@ef.step(when=ef.result("business_check")["auc"] == "high")
def shout(report: ef.Input[ef.Markdown]) -> None:
    pass


def test_one_result_name_compared_with_two_types_is_refused(taxi, tmp_path):
    pipeline = _with_steps(taxi, business_check, record, shout)
    with pytest.raises(kfp_compiler.CompileError,
                       match=r"steps 'record' and 'shout' comparing business_check.auc with a "
                             r"float and a str"):
        kfp_compiler.compile_pipeline(pipeline, tmp_path / "p.yaml", image=IMAGE)


def test_a_function_in_a_pipeline_file_that_is_not_a_module_gets_a_note(tmp_path):
    """As a model_fn in such a file: the task loads it from the compiling machine's path."""
    file = tmp_path / "mine.py"
    file.write_text(
        "import dataclasses\n"
        "import estflow.dsl as ef\n"
        "from estflow.pipelines import loader\n"
        "@ef.step\n"
        "def tally(evaluation: ef.Input[ef.Evaluation]) -> None:\n"
        "    pass\n"
        f"_taxi = loader.load({TAXI!r}).pipeline\n"
        "pipeline = dataclasses.replace(_taxi, steps=(tally,), push=dataclasses.replace(\n"
        f"    _taxi.push, base_path={BUCKET!r}))\n")
    loaded = loader.load(f"{file}:pipeline")
    assert not loaded.importable
    compiled = kfp_compiler.compile_pipeline(loaded, tmp_path / "p.yaml", image=IMAGE)
    [note] = [n for n in compiled.notes if n.startswith("step 'tally'")]
    assert str(file) in note and "not an importable module" in note
    # the spec alone (read back from JSON) carries the file too: the same note
    compiled = kfp_compiler.compile_pipeline(ef.Pipeline.from_json(loaded.pipeline.to_json()),
                                             tmp_path / "q.yaml", image=IMAGE)
    assert [n for n in compiled.notes if n.startswith("step 'tally'")] == [note]


def test_a_step_in_an_importable_module_gets_no_note(declared, tmp_path):
    compiled, _ = _compile(declared, tmp_path / "p.yaml")
    assert not [n for n in compiled.notes if n.startswith("step ")]


# --- run by kfp.local ----------------------------------------------------------------------------

_STAND_IN = """
import json
import os

def main(argv):
    args = dict(zip(argv[::2], argv[1::2]))
    with open(os.environ["ESTFLOW_TEST_LOG"], "a") as log:
        log.write(NAME + "\\n")
    for output in OUTPUTS:
        os.makedirs(args["--" + output], exist_ok=True)
    if NAME == "evaluate":
        folder = args["--evaluation"]
        auc = float(os.environ["ESTFLOW_TEST_AUC"])
        with open(os.path.join(folder, METRICS), "w") as f:
            json.dump({"head": "binary", "metrics": {"auc": auc}}, f)
        with open(os.path.join(folder, BLESSING), "w") as f:
            json.dump({"blessed": os.environ["ESTFLOW_TEST_BLESSED"] == "1", "reasons": []}, f)
    return 0
"""


def _compile_with_stand_ins(pipeline: ef.Pipeline, folder: Path, kfp_backend: str) -> Path:
    """``pipeline`` compiled with stand-ins for the built-in steps and the fingerprint task;
    the user steps run their real entry point (estflow.components.user_step)."""
    package = folder / "user_step_stand_ins"
    package.mkdir()
    (package / "__init__.py").write_text("")
    plan = build_plan(pipeline, source_root=kfp_components.param_placeholder("source_root"))
    steps = []
    for step in plan.steps:
        if step.module != "estflow.components.user_step":
            (package / f"{step.name}.py").write_text(
                f"NAME = {step.name!r}\nOUTPUTS = {step.outputs!r}\n"
                f"METRICS = {Files.METRICS!r}\nBLESSING = {Files.BLESSING!r}\n" + _STAND_IN)
            step = dataclasses.replace(step, module=f"user_step_stand_ins.{step.name}")
        steps.append(step)
    (package / "fingerprint.py").write_text(kfp_local_fakes._STAND_IN_FINGERPRINT)
    fingerprint = dataclasses.replace(plan.fingerprint, module="user_step_stand_ins.fingerprint")
    graph = kfp_compiler.build_pipeline(
        dataclasses.replace(plan, steps=tuple(steps), fingerprint=fingerprint), image=IMAGE,
        source_root="", caching={s.name: s.caching for s in plan.steps},
        kfp_backend=kfp_backend)
    path = folder / "user_steps.yaml"
    compiler.Compiler().compile(graph, str(path))
    return path


def _run(yaml_path: Path, folder: Path, auc: float, blessed: bool) -> tuple[list[str], str]:
    log = folder / "steps.log"
    log.write_text("")
    env = {**kfp_local_fakes.env(), "ESTFLOW_TEST_LOG": str(log),
           "ESTFLOW_TEST_AUC": str(auc), "ESTFLOW_TEST_BLESSED": "1" if blessed else "0"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(folder), str(REPO),
                                                    env.get("PYTHONPATH")) if p)
    done = subprocess.run([sys.executable, "-c", kfp_local_fakes.KFP_LOCAL_RUN, str(yaml_path),
                           str(folder / "root"), "{}"], cwd=folder, env=env, timeout=600,
                          capture_output=True, text=True)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-4000:]
    return log.read_text().split(), output


# The user steps of the kfp.local run, in a module of their own that a task imports by name
# (this test module imports kfp, which a KFP executor process is importing when it loads it).
_STEPS_MODULE = """
import json
import os
from typing import NamedTuple

import estflow.dsl as ef


class Check(NamedTuple):
    auc: float
    ok: bool


def _log(name):
    with open(os.environ["ESTFLOW_TEST_LOG"], "a") as log:
        log.write(name + "\\n")


@ef.step
def business_check(evaluation: ef.Input[ef.Evaluation], report: ef.Output[ef.Markdown],
                   floor: float = 0.5) -> Check:
    _log("business_check")
    metrics = json.loads((evaluation / METRICS).read_text())["metrics"]
    (report / "report.md").write_text("# auc %.3f" % metrics["auc"])
    return Check(auc=metrics["auc"], ok=metrics["auc"] > floor)


@ef.step(when=ef.result("business_check")["auc"] > 0.7)
def record(report: ef.Input[ef.Markdown], table: ef.Output[ef.Dataset]) -> None:
    _log("record")
    (table / "rows.txt").write_text((report / "report.md").read_text())


@ef.step(when=ef.blessed())
def announce(pushed: ef.Input[ef.Pushed]) -> None:
    _log("announce")


@ef.step
def archive(table: ef.Input[ef.Dataset]) -> None:
    _log("archive")
"""


@pytest.fixture
def steps_module(tmp_path, monkeypatch):
    """The module of :data:`_STEPS_MODULE`, written into ``tmp_path`` and imported."""
    (tmp_path / "kfp_local_user_steps.py").write_text(
        f"METRICS = {Files.METRICS!r}\n" + _STEPS_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "kfp_local_user_steps", raising=False)
    import kfp_local_user_steps
    yield kfp_local_user_steps
    sys.modules.pop("kfp_local_user_steps", None)


@pytest.mark.parametrize("auc, blessed", [(0.9, True), (0.65, False)])
def test_kfp_local_runs_user_steps_and_their_conditions(taxi, tmp_path, steps_module, auc,
                                                        blessed):
    """kfp.local.SubprocessRunner runs the compiled pipeline (default backend: in-task
    conditions): business_check's function reads the evaluation, record runs only when its auc
    is over 0.7 (and archive, reading record's table, with it), announce only when blessed."""
    m = steps_module
    pipeline = _with_steps(taxi, m.business_check(floor=0.6), m.record, m.announce, m.archive)
    yaml_path = _compile_with_stand_ins(pipeline, tmp_path, kfp_compiler.DEFAULT_KFP_BACKEND)
    ran, output = _run(yaml_path, tmp_path, auc, blessed)
    assert "business_check" in ran and "evaluate" in ran
    assert ran.index("business_check") > ran.index("evaluate")
    assert ("record" in ran) == (auc > 0.7), output[-4000:]
    assert ("archive" in ran) == (auc > 0.7)
    assert ("announce" in ran) == blessed and ("push" in ran) == blessed
    assert f"estflow step business_check: result auc={auc!r}, ok='true'" in output
    if auc <= 0.7:
        assert ("estflow step record: skipped: its condition business_check.auc > 0.7 does "
                f"not hold (business_check.auc = {auc!r})") in output
        assert "estflow step archive: skipped: its input table was not written" in output
    # the function's own result, as the task wrote it
    [result] = (tmp_path / "root").glob("*/business-check/business_check_result/result.json")
    assert json.loads(result.read_text()) == {"auc": auc, "ok": auc > 0.6}
