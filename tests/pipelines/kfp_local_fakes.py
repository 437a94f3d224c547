"""Run a compiled pipeline's control flow under ``kfp.local.SubprocessRunner`` in seconds: the
pipeline is compiled as usual, except that each task imports a stand-in of its step module.

Each stand-in logs its step's name, creates its output directories, and reads what to do from
the run's ``spec`` parameter (a JSON object here, not a Pipeline): evaluate writes the blessing
``spec["blessed"]`` and the files the KFP UI's artifacts are made of (:data:`UI_METRICS`,
:data:`UI_CLASSIFICATION`, :data:`UI_REPORT`); the step named by ``spec["fail"]`` exits 1. The real steps (TensorFlow,
Beam) run in the slow end-to-end test instead.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from kfp import compiler

from estflow.dsl.contracts import Files
from estflow.pipelines.kubeflow import compiler as kfp_compiler
from estflow.pipelines.kubeflow import components as kfp_components
from estflow.pipelines.plan import build_plan

PACKAGE = "stand_in_steps"

# What the evaluate stand-in writes as kfp_metrics.json, kfp_classification.json, report.html.
UI_METRICS = {"auc": 0.75, "accuracy": 0.5, "examples": 4}
UI_CLASSIFICATION = {
    "roc": {"fpr": [0.0, 0.5, 1.0], "tpr": [0.0, 1.0, 1.0], "thresholds": [1.0, 0.5, 0.0]},
    "confusion_matrix": {"categories": ["0", "1"], "matrix": [[1, 1], [0, 2]]}}
UI_REPORT = "<!DOCTYPE html>\n<html><body><h1>stand-in report</h1></body></html>\n"

# In a subprocess: kfp.local keeps its configuration in a process-wide singleton.
KFP_LOCAL_RUN = textwrap.dedent("""
    import json
    import sys
    import kfp.components
    import kfp.local
    yaml_path, root, arguments = sys.argv[1:4]
    kfp.local.init(runner=kfp.local.SubprocessRunner(use_venv=False), pipeline_root=root,
                   workspace_root=root + "/workspace")
    kfp.components.load_component_from_file(yaml_path)(**json.loads(arguments))
""")

_STAND_IN = textwrap.dedent(f"""
    import json
    import os

    def main(argv):
        args = dict(zip(argv[::2], argv[1::2]))
        spec = json.loads(args["--spec"])
        with open(spec["log"], "a") as log:
            log.write(NAME + "\\n")
        for output in OUTPUTS:
            os.makedirs(args["--" + output], exist_ok=True)
        if NAME == "evaluate":
            folder = args["--evaluation"]
            with open(os.path.join(folder, {Files.KFP_METRICS!r}), "w") as f:
                json.dump(UI_METRICS, f)
            with open(os.path.join(folder, {Files.KFP_CLASSIFICATION!r}), "w") as f:
                json.dump(UI_CLASSIFICATION, f)
            with open(os.path.join(folder, {Files.REPORT!r}), "w") as f:
                f.write(UI_REPORT)
            with open(os.path.join(folder, {Files.BLESSING!r}), "w") as f:
                json.dump({{"blessed": spec["blessed"], "reasons": []}}, f)
        return 1 if spec.get("fail") == NAME else 0
""")


# The fingerprint task's stand-in: every step gets the run's spec (the stand-ins' JSON object,
# not a Pipeline) and a key derived from it.
_STAND_IN_FINGERPRINT = textwrap.dedent(f"""
    import hashlib
    import json
    import os

    def main(argv):
        args = dict(zip(argv[::2], argv[1::2]))
        steps = {{}}
        for step in json.loads(args["--plan"]):
            key = hashlib.sha256((args["--spec"] + step["name"]).encode()).hexdigest()
            steps[step["name"]] = {{"spec": args["--spec"], "key": key, "inputs": {{}},
                                   "outputs": {{o: key + o for o in step["outputs"]}}}}
        os.makedirs(args["--fingerprints"], exist_ok=True)
        with open(os.path.join(args["--fingerprints"], {Files.FINGERPRINTS!r}), "w") as f:
            json.dump({{"steps": steps}}, f)
        return 0
""")


def env() -> dict:
    """This environment without pytest's variables (a child pytest-aware process misbehaves)."""
    return {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}


def compile_with_stand_ins(pipeline, folder: Path, image: str = kfp_compiler.DEFAULT_IMAGE,
                           kfp_backend: str = kfp_compiler.DEFAULT_KFP_BACKEND) -> Path:
    """``pipeline`` compiled into ``folder`` for ``kfp_backend``, its steps replaced by
    stand-ins written there."""
    package = folder / PACKAGE
    package.mkdir()
    (package / "__init__.py").write_text("")
    plan = build_plan(pipeline, source_root=kfp_components.param_placeholder("source_root"))
    steps = []
    for step in plan.steps:
        (package / f"{step.name}.py").write_text(
            f"NAME = {step.name!r}\nOUTPUTS = {step.outputs!r}\n"
            f"UI_METRICS = {UI_METRICS!r}\nUI_CLASSIFICATION = {UI_CLASSIFICATION!r}\n"
            f"UI_REPORT = {UI_REPORT!r}\n" + _STAND_IN)
        steps.append(dataclasses.replace(step, module=f"{PACKAGE}.{step.name}"))
    (package / "fingerprint.py").write_text(_STAND_IN_FINGERPRINT)
    fingerprint = dataclasses.replace(plan.fingerprint, module=f"{PACKAGE}.fingerprint")
    graph = kfp_compiler.build_pipeline(dataclasses.replace(plan, steps=tuple(steps),
                                                            fingerprint=fingerprint),
                                        image=image, source_root="",
                                        caching=kfp_compiler.DEFAULT_CACHING,
                                        kfp_backend=kfp_backend)
    path = folder / "stand_ins.yaml"
    compiler.Compiler().compile(graph, str(path))
    return path


def run(yaml_path: Path, folder: Path, spec: dict, **arguments) -> tuple[int, list[str], str]:
    """Run the compiled pipeline under kfp.local with the stand-ins' ``spec`` and further
    pipeline ``arguments``: (exit status, steps in the order they ran, output)."""
    log = folder / "steps.log"
    arguments = {"spec": json.dumps({"log": str(log), **spec}), **arguments}
    child_env = env()
    child_env["PYTHONPATH"] = os.pathsep.join(p for p in (str(folder),
                                                          child_env.get("PYTHONPATH")) if p)
    result = subprocess.run([sys.executable, "-c", KFP_LOCAL_RUN, str(yaml_path),
                             str(folder / "root"), json.dumps(arguments)],
                            cwd=folder, env=child_env, timeout=300, capture_output=True,
                            text=True)
    ran = log.read_text().split() if log.exists() else []
    return result.returncode, ran, result.stdout + result.stderr
