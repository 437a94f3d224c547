"""The KFP compiler: strict IR, loads back in kfp, the DAG and its wiring, determinism, goldens.

Assertions read the compiled YAML as data (parsed strictly into the KFP protos), never as text,
except the golden comparison, which is byte-for-byte on purpose.
"""

import dataclasses
import importlib.util
import inspect
import json
import os
import subprocess
import sys
import textwrap
import types
from importlib import metadata
from pathlib import Path

import estflow.components
import estflow.dsl as ef
import kfp.components
import pytest
import yaml
from estflow.dsl.contracts import STEPS
from estflow.dsl.contracts import Files
from estflow.pipelines import _kfp_components
from estflow.pipelines import goldens
from estflow.pipelines import kfp_compiler
from estflow.pipelines import loader
from estflow.pipelines.plan import build_plan
from google.protobuf import json_format
from kfp import compiler
from kfp import dsl
from kfp.pipeline_spec import pipeline_spec_pb2

TAXI = "estflow.pipelines.examples.taxi"
IMAGE = "registry.example.com/team/estflow:test-1"
STEP_NAMES = ("ingest", "transform", "train", "evaluate", "push")


@pytest.fixture(scope="module")
def taxi():
    return loader.load(TAXI)


@pytest.fixture(scope="module")
def compiled(taxi, tmp_path_factory):
    """The taxi example compiled with a non-default image: (path, YAML documents)."""
    path = tmp_path_factory.mktemp("kfp") / "taxi.yaml"
    result = kfp_compiler.compile_pipeline(taxi, path, image=IMAGE)
    assert result.path == path
    assert result.tasks == STEP_NAMES
    return path, list(yaml.safe_load_all(path.read_text()))


@pytest.fixture(scope="module")
def spec(compiled):
    """The PipelineSpec proto, parsed strictly (unknown or misspelled fields fail)."""
    return _parse_strict(compiled[1][0], pipeline_spec_pb2.PipelineSpec())


def _parse_strict(document: dict, message):
    return json_format.ParseDict(document, message, ignore_unknown_fields=False)


def _executor(spec, task: str):
    component = spec.root.dag.tasks[task].component_ref.name
    label = spec.components[component].executor_label
    return spec.deployment_spec["executors"][label]["container"]


# --- the IR is valid ----------------------------------------------------------------------------

def test_yaml_parses_strictly_into_pipeline_spec_and_platform_spec(compiled):
    _, documents = compiled
    assert 1 <= len(documents) <= 2  # PipelineSpec, then PlatformSpec when kfp-kubernetes is used
    spec = _parse_strict(documents[0], pipeline_spec_pb2.PipelineSpec())
    assert spec.pipeline_info.name == "chicago-taxi"
    assert spec.schema_version == "2.1.0"
    if len(documents) == 2:
        _parse_strict(documents[1], pipeline_spec_pb2.PlatformSpec())


def test_strict_parse_rejects_a_misspelled_field(compiled):
    """The strict parse is a real check: one misspelled field fails it."""
    document = json.loads(json.dumps(compiled[1][0]))
    document["root"]["dag"]["tasks"]["train"]["dependentTask"] = ["transform"]
    with pytest.raises(json_format.ParseError, match="dependentTask"):
        _parse_strict(document, pipeline_spec_pb2.PipelineSpec())


def test_loads_back_with_kfp(compiled, taxi):
    component = kfp.components.load_component_from_file(str(compiled[0]))
    assert component.name == "chicago-taxi"
    inputs = component.component_spec.inputs
    assert set(inputs) == {"spec", "source_root"}
    assert ef.Pipeline.from_json(inputs["spec"].default) == taxi.pipeline
    assert inputs["source_root"].default == f"module:{TAXI}"


# --- the tasks ----------------------------------------------------------------------------------

def test_one_task_per_planned_step_named_and_displayed_as_the_step(spec):
    tasks = spec.root.dag.tasks
    assert set(tasks) == set(STEP_NAMES)
    for name in STEP_NAMES:
        assert tasks[name].task_info.name == name
        assert tasks[name].component_ref.name == f"comp-{name}"


def test_every_task_runs_its_estflow_entry_point_in_the_configured_image(spec):
    for name in STEP_NAMES:
        container = _executor(spec, name)
        assert container["image"] == IMAGE
        command = list(container["command"])
        assert "python3 -m kfp.dsl.executor_main" in command[2]  # a lightweight component
        assert f"from estflow.components import {name} as step" in command[-1]
        assert list(container["args"])[-2:] == ["--function_to_execute", name]
        assert "pip install" not in " ".join(command)  # the image already has estflow and kfp


@pytest.mark.parametrize("step_name", STEP_NAMES)
def test_task_body_calls_main_with_the_plans_argv(spec, taxi, step_name, monkeypatch):
    """Execute the Python a task ships, against a recording fake of the step module: it calls
    ``main`` with exactly ``PlannedStep.argv`` (the local runner's arguments) and raises when
    ``main`` returns non-zero."""
    calls = []
    exit_codes = iter([0, 3])
    fake = types.ModuleType(f"estflow.components.{step_name}")
    fake.main = lambda argv: calls.append(argv) or next(exit_codes)
    monkeypatch.setitem(sys.modules, fake.__name__, fake)
    monkeypatch.setattr(estflow.components, step_name, fake, raising=False)
    namespace: dict = {}
    exec(_executor(spec, step_name)["command"][-1], namespace)
    function = namespace[step_name]

    step = build_plan(taxi.pipeline, source_root="ROOT").step(step_name)
    paths = {a: f"/artifacts/{a}" for a in [a for a, _ in step.inputs] + list(step.outputs)}
    kwargs = {"spec": "SPEC", "source_root": "ROOT"}
    kwargs.update({a: dsl.Artifact(uri=p) for a, p in paths.items()})
    kwargs = {k: v for k, v in kwargs.items() if k in inspect.signature(function).parameters}
    function(**kwargs)
    assert calls == [step.argv("SPEC", paths)]
    with pytest.raises(RuntimeError, match=f"estflow step {step_name} exited with code 3"):
        function(**kwargs)


# --- the DAG ------------------------------------------------------------------------------------

def test_dependencies_follow_the_artifacts(spec):
    dependencies = {name: sorted(task.dependent_tasks)
                    for name, task in spec.root.dag.tasks.items()}
    assert dependencies == {
        "ingest": [],
        "transform": ["ingest"],
        "train": ["transform"],
        "evaluate": ["ingest", "train"],
        "push": ["evaluate", "train"],
    }


def test_artifacts_are_wired_under_their_contract_names(spec):
    producers = {a: s.name for s in STEPS for a in s.outputs}
    for contract in STEPS:
        task = spec.root.dag.tasks[contract.name]
        wired = {name: (arg.task_output_artifact.producer_task,
                        arg.task_output_artifact.output_artifact_key)
                 for name, arg in task.inputs.artifacts.items()}
        assert wired == {a: (producers[a], a) for a in contract.inputs}
        component = spec.components[task.component_ref.name]
        assert set(component.output_definitions.artifacts) == set(contract.outputs)
        assert set(component.input_definitions.artifacts) == set(contract.inputs)


def test_artifact_types(spec):
    expected = {"examples": "system.Dataset", "transformed": "system.Dataset",
                "model": "system.Model", "evaluation": "system.Artifact",
                "pushed": "system.Artifact"}
    seen = {}
    for component in spec.components.values():
        for side in (component.input_definitions, component.output_definitions):
            for name, artifact in side.artifacts.items():
                seen[name] = artifact.artifact_type.schema_title
    assert seen == expected


def test_spec_and_source_root_are_pipeline_parameters(spec, taxi):
    parameters = spec.root.input_definitions.parameters
    assert ef.Pipeline.from_json(parameters["spec"].default_value.string_value) == taxi.pipeline
    assert parameters["source_root"].default_value.string_value == f"module:{TAXI}"
    for name, task in spec.root.dag.tasks.items():
        wired = {k: v.component_input_parameter for k, v in task.inputs.parameters.items()}
        expected = {"spec": "spec", "source_root": "source_root"} if name == "ingest" else \
            {"spec": "spec"}
        assert wired == expected


def test_caching_is_set_per_task_at_compile_time(spec, taxi, tmp_path):
    caching = {n: t.caching_options.enable_cache for n, t in spec.root.dag.tasks.items()}
    assert caching == {"ingest": True, "transform": True, "train": True, "evaluate": True,
                       "push": False}
    path = kfp_compiler.compile_pipeline(taxi, tmp_path / "p.yaml", caching={"train": False}).path
    tasks = _parse_strict(yaml.safe_load(path.read_text()), pipeline_spec_pb2.PipelineSpec())
    assert not tasks.root.dag.tasks["train"].caching_options.enable_cache
    assert tasks.root.dag.tasks["transform"].caching_options.enable_cache


def test_a_pipeline_without_push_target_has_no_push_task(taxi, tmp_path):
    bare = dataclasses.replace(taxi.pipeline, push=None)
    result = kfp_compiler.compile_pipeline(bare, tmp_path / "p.yaml")
    assert result.tasks == STEP_NAMES[:-1]
    spec = _parse_strict(yaml.safe_load(result.path.read_text()),
                         pipeline_spec_pb2.PipelineSpec())
    assert set(spec.root.dag.tasks) == set(STEP_NAMES[:-1])
    # a bare Pipeline has no module: relative data paths resolve in the task's working dir
    assert spec.root.input_definitions.parameters["source_root"].default_value.string_value == ""


def test_source_root_option(taxi, tmp_path):
    path = kfp_compiler.compile_pipeline(taxi, tmp_path / "p.yaml", source_root="/data").path
    spec = _parse_strict(yaml.safe_load(path.read_text()), pipeline_spec_pb2.PipelineSpec())
    assert spec.root.input_definitions.parameters["source_root"].default_value.string_value \
        == "/data"


# --- determinism and goldens --------------------------------------------------------------------

def test_compiling_twice_gives_identical_bytes(taxi, tmp_path):
    first = kfp_compiler.compile_pipeline(taxi, tmp_path / "a.yaml").path.read_bytes()
    second = kfp_compiler.compile_pipeline(taxi, tmp_path / "b.yaml").path.read_bytes()
    assert first == second


def test_compiling_in_a_fresh_process_gives_identical_bytes(tmp_path):
    """No per-process state (hash seeds, ids, timestamps) reaches the output."""
    code = textwrap.dedent(f"""
        import sys
        from estflow.pipelines import kfp_compiler, loader
        kfp_compiler.compile_pipeline(loader.load({TAXI!r}), sys.argv[1])
    """)
    outputs = []
    for seed in ("1", "2"):
        out = tmp_path / f"{seed}.yaml"
        subprocess.run([sys.executable, "-c", code, str(out)], check=True, cwd=tmp_path,
                       env={**_env(), "PYTHONHASHSEED": seed})
        outputs.append(out.read_bytes())
    assert outputs[0] == outputs[1]


@pytest.mark.parametrize("name", sorted(goldens.GOLDENS))
def test_golden(name, tmp_path):
    fresh = tmp_path / name
    goldens.render(goldens.GOLDENS[name], fresh)
    golden = Path(__file__).parent / "goldens" / name
    assert fresh.read_bytes() == golden.read_bytes(), (
        f"compiled output differs from {golden}; review the change, then regenerate with "
        "`python -m estflow.pipelines.goldens` (make goldens)")


def test_default_image_is_tagged_with_the_package_version():
    assert kfp_compiler.DEFAULT_IMAGE.endswith(":" + metadata.version("estflow"))


# --- errors -------------------------------------------------------------------------------------

@pytest.mark.parametrize("output, image, match", [
    ("taxi.json", kfp_compiler.DEFAULT_IMAGE, "ending in .yaml or .yml"),
    ("missing/taxi.yaml", kfp_compiler.DEFAULT_IMAGE, "existing directory"),
    ("taxi.yaml", "", "container image reference"),
    ("taxi.yaml", "bad image", "container image reference"),
])
def test_invalid_options_raise_and_write_nothing(taxi, tmp_path, output, image, match):
    with pytest.raises(kfp_compiler.CompileError, match=match):
        kfp_compiler.compile_pipeline(taxi, tmp_path / output, image=image)
    assert list(tmp_path.iterdir()) == []


def test_caching_of_an_unknown_step_is_an_error(taxi, tmp_path):
    with pytest.raises(kfp_compiler.CompileError, match="trian"):
        kfp_compiler.compile_pipeline(taxi, tmp_path / "t.yaml", caching={"trian": False})


def test_generated_source_rejects_an_embedded_placeholder():
    step = build_plan(loader.load(TAXI).pipeline, source_root="x").step("ingest")
    broken = dataclasses.replace(step, options=(("flag", "a{{estflow-param:spec}}b"),))
    with pytest.raises(ValueError, match="placeholder"):
        _kfp_components.render_source(broken)


# --- runs under kfp.local ----------------------------------------------------------------------

# In a subprocess: kfp.local keeps its configuration in a process-wide singleton.
_KFP_LOCAL_RUN = textwrap.dedent("""
    import json
    import sys
    import kfp.components
    import kfp.local
    yaml_path, root, arguments = sys.argv[1:4]
    kfp.local.init(runner=kfp.local.SubprocessRunner(use_venv=False), pipeline_root=root,
                   workspace_root=root + "/workspace")
    kfp.components.load_component_from_file(yaml_path)(**json.loads(arguments))
""")


def _run_under_kfp_local(yaml_path: Path, tmp_path: Path, **arguments) -> None:
    subprocess.run([sys.executable, "-c", _KFP_LOCAL_RUN, str(yaml_path), str(tmp_path / "root"),
                    json.dumps(arguments)], check=True, cwd=tmp_path, env=_env(), timeout=900)


def _env() -> dict:
    return {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}


@pytest.mark.slow
def test_ingest_task_runs_under_kfp_local(taxi, tmp_path):
    """The generated ingest component, run by kfp.local.SubprocessRunner: the embedded Python
    imports the real step, which reads the example's data through ``source_root``."""
    step = build_plan(taxi.pipeline, source_root=_kfp_components.param_placeholder(
        "source_root")).step("ingest")
    component_yaml = tmp_path / "ingest.yaml"
    compiler.Compiler().compile(_kfp_components.build_component(step, IMAGE),
                                str(component_yaml))
    _run_under_kfp_local(component_yaml, tmp_path, spec=taxi.pipeline.to_json(),
                         source_root=f"module:{TAXI}")
    [examples] = (tmp_path / "root").glob("ingest-*/ingest/examples")
    assert (examples / Files.INGEST_STATS).is_file()


def _steps_available() -> bool:
    return all(importlib.util.find_spec(s.module) is not None for s in STEPS)


@pytest.mark.slow
@pytest.mark.skipif(not _steps_available(), reason="not every estflow.components step exists yet")
def test_compiled_yaml_runs_end_to_end_under_kfp_local(taxi, tmp_path):
    """kfp.local.SubprocessRunner runs the compiled YAML itself (each task a subprocess running
    the embedded Python), with the ``spec`` parameter overridden for a short run."""
    yaml_path = kfp_compiler.compile_pipeline(taxi, tmp_path / "taxi.yaml").path
    small = dataclasses.replace(
        taxi.pipeline, train=ef.TrainSpec(max_steps=20, batch_size=64),
        push=ef.PushTarget(base_path=str(tmp_path / "serving"), model_name="chicago_taxi"))
    _run_under_kfp_local(yaml_path, tmp_path, spec=small.to_json())
    versions = list((tmp_path / "serving" / "chicago_taxi").iterdir())
    assert len(versions) == 1 and (versions[0] / "saved_model.pb").is_file()
