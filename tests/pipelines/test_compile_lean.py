"""``estflow compile`` imports kfp without its API client and kfp-kubernetes without the
kubernetes client (pipelines/kubeflow/lean.py): the YAML is byte for byte what compiling with kfp
fully imported writes, and the package still gives kfp.Client to later code."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TAXI = REPO / "pipelines" / "examples" / "taxi.py"
PUSH = ["--push-base-path", "gs://estflow-examples/serving_models", "--image", "r/e:1"]

_LEAN = textwrap.dedent("""
    import json, sys
    from estflow.pipelines import cli
    code = cli.main(["compile", sys.argv[1], "-o", sys.argv[2], *sys.argv[3:]])
    loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("kubernetes", "kfp_server_api"))
    import kfp
    from kfp import components
    from kfp.client import Client
    print(json.dumps({"code": code, "loaded": loaded, "client": kfp.Client is Client,
                      "components": hasattr(components, "load_component_from_text"),
                      "dsl": hasattr(kfp.dsl, "component")}))
""")

_FULL = textwrap.dedent("""
    import sys
    import kfp  # the whole package, client included
    from estflow.pipelines.kubeflow import compiler as kfp_compiler
    from estflow.pipelines import loader
    kfp_compiler.compile_pipeline(loader.load(sys.argv[1]), sys.argv[2],
                                  push_base_path=sys.argv[3], image=sys.argv[4])
""")


def _python(code: str, *args: str, cwd: Path) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    done = subprocess.run([sys.executable, "-c", code, *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_compile_output_is_the_same_and_kfp_stays_whole(tmp_path):
    report = json.loads(_python(_LEAN, str(TAXI), str(tmp_path / "lean.yaml"), *PUSH,
                                cwd=tmp_path).strip().splitlines()[-1])
    assert report == {"code": 0, "loaded": [], "client": True, "components": True,
                      "dsl": True}
    _python(_FULL, str(TAXI), str(tmp_path / "full.yaml"), PUSH[1], PUSH[3], cwd=tmp_path)
    assert (tmp_path / "lean.yaml").read_bytes() == (tmp_path / "full.yaml").read_bytes()


def test_the_container_spec_check_names_the_setter_as_kfp_did():
    import types

    import pytest
    from kfp.dsl import pipeline_task

    from estflow.pipelines.kubeflow import lean

    lean.install()
    check = pipeline_task.PipelineTask._ensure_container_spec_exists

    def set_cpu_request(task):  # the caller's name is what kfp's message names
        check(task)

    set_cpu_request(types.SimpleNamespace(container_spec=object()))  # a container: no error
    with pytest.raises(ValueError, match="^set_cpu_request can only be used on single-step "
                       "components, not pipelines used as components, or special components "
                       "like importers.$"):
        set_cpu_request(types.SimpleNamespace(container_spec=None))


def test_yaml_documents_load_as_pyyaml_safe_load_all_does():
    import yaml

    from estflow.pipelines.kubeflow import lean

    text = "a: 1\nb: [x, 2.5, null, true]\nc: '007'\n---\nd: {e: 2026-01-02}\n"
    assert lean.load_all(text) == list(yaml.safe_load_all(text))
