"""The compiled pipeline's cache on Kubeflow, run for real by ``kfp.local`` (which has KFP's
caching): the first task fingerprints the data and keys every step; a scheduled run on the same
data reuses every step and pushes nothing, one on new data runs them all and pushes a new
version, one with only the model changed reuses ingest and transform. The fingerprint and push
tasks run estflow's real steps; ingest, transform, train and evaluate are quick stand-ins
(no TensorFlow or Beam), which log when they run.

Also: compiling refuses a push target a Kubeflow task cannot reach."""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from kfp import compiler

import estflow.dsl as ef
from estflow.dsl.contracts import Files
from estflow.pipelines import cli
from estflow.pipelines.examples import taxi
from estflow.pipelines.kubeflow import compiler as kfp_compiler
from estflow.pipelines.kubeflow import components as kfp_components
from estflow.pipelines.plan import build_plan
from tests.pipelines import kfp_local_fakes

DATA = Path(taxi.__file__).parent / "data" / "chicago_taxi" / "data.csv"

# --- where a compiled pipeline may push ---------------------------------------------------------


@pytest.mark.parametrize("base_path, resources, match", [
    ("serving_models", {}, r"`push.base_path`.*a relative path is resolved in the task's pod"),
    ("/models", {}, r"a path on a volume the push task mounts \(resources\['push'\]"),
    ("/mnt/m/taxi", {"push": ef.Resources(pvcs=(ef.PvcMount("m", "/mnt/m"),))},
     r"volume the evaluate task mounts"),
    ("file:///models", {}, "a volume the push task mounts"),
])
def test_compile_refuses_a_push_target_a_kubeflow_task_cannot_reach(tmp_path, base_path,
                                                                    resources, match):
    pipeline = dataclasses.replace(taxi.pipeline, resources=resources,
                                   push=ef.PushTarget(base_path, "taxi"))
    with pytest.raises(kfp_compiler.CompileError, match=match):
        kfp_compiler.compile_pipeline(pipeline, tmp_path / "p.yaml")
    assert not (tmp_path / "p.yaml").exists()


@pytest.mark.parametrize("base_path", ["gs://bucket/models", "s3://bucket/models",
                                       "/mnt/m/serving"])
def test_a_bucket_or_a_mounted_volume_is_reachable(tmp_path, base_path):
    mounted = ef.Resources(pvcs=(ef.PvcMount("m", "/mnt/m"),))
    pipeline = dataclasses.replace(taxi.pipeline, push=ef.PushTarget(base_path, "taxi"),
                                   resources={"push": mounted, "evaluate": mounted})
    kfp_compiler.compile_pipeline(pipeline, tmp_path / "p.yaml")


def test_with_data_checks_the_validate_task_must_mount_the_push_target_too(tmp_path):
    """validate reads the served model's training statistics at the push target (drift): a
    path on a volume it does not mount would find none and check no drift."""
    mounted = ef.Resources(pvcs=(ef.PvcMount("m", "/mnt/m"),))
    pipeline = dataclasses.replace(
        taxi.pipeline, push=ef.PushTarget("/mnt/m/serving", "taxi"),
        checks=ef.DataChecks(), resources={"push": mounted, "evaluate": mounted})
    with pytest.raises(kfp_compiler.CompileError,
                       match=r"volume the validate task mounts \(resources\['validate'\]"):
        kfp_compiler.compile_pipeline(pipeline, tmp_path / "p.yaml")
    kfp_compiler.compile_pipeline(dataclasses.replace(
        pipeline, resources={**pipeline.resources, "validate": mounted}), tmp_path / "p.yaml")


def test_push_base_path_replaces_the_declared_one(tmp_path, capsys):
    out = tmp_path / "p.yaml"
    image = ("--image", "r/estflow:1")  # compile wants the image named
    assert cli.main(["compile", "estflow.pipelines.examples.taxi", "-o", str(out), *image]) == 2
    assert "`push.base_path`" in capsys.readouterr().err
    assert cli.main(["compile", "estflow.pipelines.examples.taxi", "-o", str(out), *image,
                     "--push-base-path", "gs://b/models"]) == 0
    spec = next(iter(__import__("yaml").safe_load_all(out.read_text())))
    default = spec["root"]["inputDefinitions"]["parameters"]["spec"]["defaultValue"]
    assert ef.Pipeline.from_json(default).push.base_path == "gs://b/models"
    assert cli.main(["compile", "estflow.pipelines.examples.taxi", "-o", str(out), *image,
                     "--push-base-path", "models"]) == 2
    assert "--push-base-path" in capsys.readouterr().err


def test_the_kubeflow_example_pushes_to_a_bucket():
    from estflow.pipelines.examples import taxi_gpu

    assert taxi_gpu.pipeline.push.base_path.startswith("gs://")


# --- scheduled runs under kfp.local -------------------------------------------------------------

_STAND_IN = textwrap.dedent(f"""
    import json
    import os

    def main(argv):
        args = dict(zip(argv[::2], argv[1::2]))
        with open(os.environ["ESTFLOW_TEST_LOG"], "a") as log:
            log.write(NAME + "\\n")
        for output in OUTPUTS:
            os.makedirs(args["--" + output], exist_ok=True)
        if NAME == "train":
            export = os.path.join(args["--model"], {Files.EXPORT!r})
            os.makedirs(export, exist_ok=True)
            with open(os.path.join(export, "saved_model.pb"), "w") as f:
                f.write(args["--spec"])  # the model: what the spec says of it
        if NAME == "evaluate":  # blessed, against the served version as the real step says
            folder = args["--evaluation"]
            push = json.loads(args["--spec"])["push"]
            base = os.path.join(push["base_path"], push["model_name"])
            served = max((int(v) for v in os.listdir(base) if v.isdigit()), default=None) \
                if os.path.isdir(base) else None
            baseline = None
            if served is not None:
                with open(os.path.join(base, str(served), {Files.LINEAGE!r})) as f:
                    baseline = {{"version": served, "fingerprint": json.load(f)["fingerprint"]}}
            with open(os.path.join(folder, {Files.BLESSING!r}), "w") as f:
                json.dump({{"blessed": True, "reasons": [], "baseline": baseline}}, f)
            with open(os.path.join(folder, {Files.METRICS!r}), "w") as f:
                json.dump({{"head": "binary", "metrics": {{"auc": 0.9}}}}, f)
            with open(os.path.join(folder, {Files.KFP_METRICS!r}), "w") as f:
                json.dump({{"auc": 0.9}}, f)
            with open(os.path.join(folder, {Files.REPORT!r}), "w") as f:
                f.write("<html></html>")  # the KFP UI's report: an output KFP caches
        return 0
""")

_KFP_LOCAL_RUN = textwrap.dedent("""
    import json
    import sys
    import kfp.components
    import kfp.local
    yaml_path, root, arguments = sys.argv[1:4]
    kfp.local.init(runner=kfp.local.SubprocessRunner(use_venv=False), pipeline_root=root,
                   workspace_root=root + "/workspace", enable_caching=True)
    kfp.components.load_component_from_file(yaml_path)(**json.loads(arguments))
""")

_STANDS_IN = ("ingest", "transform", "train", "evaluate")


def _compile(pipeline: ef.Pipeline, folder: Path, name: str) -> Path:
    """``pipeline`` compiled with stand-ins for the steps in :data:`_STANDS_IN` (the
    fingerprint and push tasks are estflow's)."""
    package = folder / "cache_stand_ins"
    package.mkdir(exist_ok=True)
    (package / "__init__.py").write_text("")
    plan = build_plan(pipeline, source_root=kfp_components.param_placeholder("source_root"))
    steps = []
    for step in plan.steps:
        if step.name in _STANDS_IN:
            (package / f"{step.name}.py").write_text(
                f"NAME = {step.name!r}\nOUTPUTS = {step.outputs!r}\n" + _STAND_IN)
            step = dataclasses.replace(step, module=f"cache_stand_ins.{step.name}")
        steps.append(step)
    graph = kfp_compiler.build_pipeline(dataclasses.replace(plan, steps=tuple(steps)),
                                        image=kfp_compiler.DEFAULT_IMAGE, source_root="",
                                        caching=kfp_compiler.DEFAULT_CACHING)
    path = folder / f"{name}.yaml"
    compiler.Compiler().compile(graph, str(path))
    return path


def _schedule_run(yaml_path: Path, folder: Path) -> list[str]:
    """One run, as a schedule starts it (the compiled defaults): the stand-ins that ran."""
    log = folder / "steps.log"
    log.write_text("")
    child_env = {**kfp_local_fakes.env(), "ESTFLOW_TEST_LOG": str(log)}
    child_env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(folder), str(Path(__file__).resolve().parents[2]),
                    child_env.get("PYTHONPATH")) if p)
    done = subprocess.run([sys.executable, "-c", _KFP_LOCAL_RUN, str(yaml_path),
                           str(folder / "root"), "{}"], cwd=folder, env=child_env,
                          timeout=600, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return log.read_text().split()


def _versions(base: Path) -> list[int]:
    return sorted(int(p.name) for p in base.iterdir() if p.name.isdigit()) if base.exists() \
        else []


def test_scheduled_runs_reuse_every_step_on_the_same_data_and_push_only_what_is_new(tmp_path):
    data = tmp_path / "trips.csv"
    with open(DATA) as src:
        rows = list(itertools.islice(src, 41))
    data.write_text("".join(rows[:31]))
    models = tmp_path / "serving"
    pipeline = dataclasses.replace(taxi.pipeline, source=ef.CsvSource(str(data)),
                                   push=ef.PushTarget(str(models), "taxi"))
    nightly = _compile(pipeline, tmp_path, "nightly")

    assert _schedule_run(nightly, tmp_path) == list(_STANDS_IN)
    (first,) = _versions(models / "taxi")
    lineage = json.loads((models / "taxi" / str(first) / Files.LINEAGE).read_text())
    assert lineage["fingerprint"] and lineage["run"]  # the KFP run that made it

    # the next night, same data: every step reused, nothing pushed
    assert _schedule_run(nightly, tmp_path) == []
    assert _versions(models / "taxi") == [first]

    # new rows arrived: everything runs, a new version is pushed, evaluated against the first
    data.write_text("".join(rows))
    assert _schedule_run(nightly, tmp_path) == list(_STANDS_IN)
    versions = _versions(models / "taxi")
    assert len(versions) == 2 and versions[0] == first
    second = json.loads((models / "taxi" / str(versions[1]) / Files.LINEAGE).read_text())
    assert second["evaluated_against"] == {"version": first,
                                           "fingerprint": lineage["fingerprint"]}

    # the night after, the same data: every step reused again, evaluate too (the served
    # version is this model, keyed by what it was evaluated against), nothing pushed
    assert _schedule_run(nightly, tmp_path) == []
    assert _versions(models / "taxi") == versions

    # only the model changed (recompiled): ingest and transform reused
    wider = dataclasses.replace(pipeline, model=dataclasses.replace(
        pipeline.model, dnn_hidden_units=(64, 32)))
    assert _schedule_run(_compile(wider, tmp_path, "wider"), tmp_path) == ["train", "evaluate"]
    assert len(_versions(models / "taxi")) == 3
